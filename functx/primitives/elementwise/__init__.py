"""Elementwise primitives: arithmetic, transcendental functions, comparisons, select.

Binary primitives broadcast their operands as NumPy does but need equal dtypes
(functx.numpy promotes); their VJPs sum the cotangent back to each operand's shape.

Dtypes: each primitive states what it accepts ("real floating-point", "floating-point or
complex", "bool or integer"...) and its abstract-eval rule raises a DTypeError otherwise.
Complex numbers (docs/complex.md): arithmetic and the transcendental functions that are
holomorphic accept complex inputs; their VJPs are ``ct * f'(x)`` without conjugation, which
is JAX's convention (the cotangent of ``z = x + iy`` is ``dL/dx - i dL/dy``). ``abs`` takes
complex input to its real modulus (VJP ``ct * conj(z) / |z|``, a real JVP). The other
functions that are not holomorphic (``sign``, ``max``, ``atan2``, ``erf``, ``logistic``,
rounding...) are real-only, and their shape rules say so.

Numerics: implementations avoid spurious floating-point warnings for inputs inside the
function's domain, and VJP rules are written for accuracy (``tanh``, ``sqrt``, ``rsqrt``,
``expm1``, ``logistic`` read their output; ``erf``'s derivative evaluates ``exp(-x*x)``
without the rounding error of ``x*x``).

Forward mode: every differentiable primitive has a JVP rule written like its VJP rule (the
same partial derivatives, the same saved-output forms for accuracy) and returning None where
every tangent is None or the output is integer-valued; a tangent of a broadcast operand is
broadcast to the output's shape. Primitives with the zero VJP (comparisons, rounding,
``sign``...) have no JVP rule: forward mode gives them a zero tangent. Every primitive has a
batching rule: the family is elementwise, so the primitive applies to batched operands as it
is (``functx.primitives._batching.unary_batch`` / ``elementwise_batch``).

Layout: the primitives are defined by family in ``_comparison`` (rounding, comparisons,
logical operations, ``select``, ``clamp``, ``convert_element_type``), ``_arithmetic``
(``neg`` through ``min``) and ``_transcendental`` (``pow``, exponentials, logarithms, roots,
trigonometric and hyperbolic functions, ``logistic``, ``erf``), on the shared definitions of
``_common``. This package re-exports all of them: use ``functx.primitives.elementwise``.
"""
from __future__ import annotations

from functx.primitives.elementwise._common import (  # noqa: F401
    DTYPE_CLASSES,
    binary,
    check_dtype_class,
    make_binary_aval,
    make_unary_aval,
    scalar,
    unary,
    unary_jvp,
    unbroadcast,
)
from functx.primitives.elementwise._comparison import (  # noqa: F401
    ROUNDING_METHODS,
    and_,
    and_p,
    ceil,
    ceil_p,
    clamp,
    clamp_p,
    convert_element_type,
    convert_element_type_p,
    eq,
    eq_p,
    floor,
    floor_p,
    ge,
    ge_p,
    gt,
    gt_p,
    is_finite,
    is_finite_p,
    le,
    le_p,
    lt,
    lt_p,
    ne,
    ne_p,
    not_,
    not_p,
    or_,
    or_p,
    round,
    round_p,
    select,
    select_p,
    xor,
    xor_p,
)
from functx.primitives.elementwise._arithmetic import (  # noqa: F401
    abs,
    abs_p,
    add,
    add_p,
    div,
    div_p,
    integer_pow,
    integer_pow_p,
    max,
    max_p,
    min,
    min_p,
    mul,
    mul_p,
    neg,
    neg_p,
    rem,
    rem_p,
    sign,
    sign_p,
    sub,
    sub_p,
)
from functx.primitives.elementwise._transcendental import (  # noqa: F401
    acos,
    acos_p,
    asin,
    asin_p,
    atan,
    atan2,
    atan2_p,
    atan_p,
    cos,
    cos_p,
    cosh,
    cosh_p,
    erf,
    erf_p,
    exp,
    exp_p,
    expm1,
    expm1_p,
    log,
    log1p,
    log1p_p,
    log_p,
    logistic,
    logistic_p,
    pow,
    pow_p,
    rsqrt,
    rsqrt_p,
    sin,
    sin_p,
    sinh,
    sinh_p,
    sqrt,
    sqrt_p,
    tan,
    tan_p,
    tanh,
    tanh_p,
    erf_impl,  # functx.primitives.fused evaluates erf with it
)
