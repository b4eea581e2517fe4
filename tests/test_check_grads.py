"""functx.test_util.check_grads: each mode is checked against finite differences on its own.

A wrong ``custom_vjp`` rule must be caught by ``modes=("rev",)`` (functx derives forward mode
by transposing the same ``bwd``, so comparing reverse with forward mode cannot catch it), and
a wrong ``custom_jvp`` rule must be caught in both modes. Higher orders check the derivative
functions recursively, as JAX's ``check_grads`` does.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.test_util import check_grads, check_jvp, check_vjp

X = np.array([0.3, -0.8, 1.4])
Z = np.array([0.3 + 0.5j, -0.8 + 0.1j])


def _sin_with_vjp(scale: float = 1.0, primal_shift: float = 0.0) -> Any:
    """sin with a custom_vjp whose bwd is off by ``scale`` and fwd's primal by ``shift``."""
    @fx.custom_vjp
    def f(x):
        return fnp.sin(x)

    f.defvjp(lambda x: (fnp.sin(x) + primal_shift, fnp.cos(x)),
             lambda c, g: (scale * g * c,))
    return f


def _sin_with_jvp(scale: float = 1.0) -> Any:
    @fx.custom_jvp
    def f(x):
        return fnp.sin(x)

    @f.defjvp
    def _(primals, tangents):
        return fnp.sin(primals[0]), scale * fnp.cos(primals[0]) * tangents[0]

    return f


def _no_complex_in_message(msg: str) -> bool:
    return re.search(r"\dj\b", msg) is None  # e.g. "(0.5+0j)"


@pytest.mark.parametrize("modes", [("fwd",), ("rev",), ("fwd", "rev")])
def test_correct_custom_rules_pass(modes: tuple) -> None:
    for f in (_sin_with_vjp(), _sin_with_jvp()):
        check_grads(f, (X,), order=2, modes=modes)


def test_wrong_custom_vjp_fails_in_reverse_mode_alone() -> None:
    f = _sin_with_vjp(scale=1.05)
    with pytest.raises(AssertionError, match="VJP does not match finite differences") as e:
        check_grads(f, (X,), order=1, modes=("rev",))
    assert _no_complex_in_message(str(e.value)), str(e.value)
    # Forward mode is derived from the same bwd, so it is wrong (and caught) too.
    with pytest.raises(AssertionError, match=r"JVP \(against finite differences\) does not"):
        check_grads(f, (X,), order=1, modes=("fwd",))


def test_wrong_custom_jvp_fails_in_both_modes() -> None:
    f = _sin_with_jvp(scale=0.9)
    with pytest.raises(AssertionError, match="VJP does not match finite differences"):
        check_grads(f, (X,), order=1, modes=("rev",))
    with pytest.raises(AssertionError, match=r"JVP \(against finite differences\) does not") as e:
        check_grads(f, (X,), order=1, modes=("fwd",))
    msg = str(e.value)
    assert _no_complex_in_message(msg) and "worst element (0,)" in msg, msg
    # The reported values are the real numbers themselves: got 0.9 cos(x) v, expected cos(x) v.
    got, want = (float(v) for v in re.search(r"got (\S+), expected (\S+) ", msg).groups())
    assert got == pytest.approx(0.9 * want, rel=1e-6)


def test_wrong_primal_of_custom_vjp_fwd_is_caught() -> None:
    f = _sin_with_vjp(primal_shift=0.5)
    with pytest.raises(AssertionError, match=r"VJP primal output \(against f itself\)"):
        check_grads(f, (X,), order=1, modes=("rev",))


def test_order_two_checks_the_derivative_functions() -> None:
    # sin whose first derivative is right but whose second is not: bwd multiplies by a cos
    # with a wrong custom_jvp (d cos = +sin).
    @fx.custom_jvp
    def bad_cos(x):
        return fnp.cos(x)

    @bad_cos.defjvp
    def _(primals, tangents):
        return fnp.cos(primals[0]), fnp.sin(primals[0]) * tangents[0]

    @fx.custom_vjp
    def f(x):
        return fnp.sin(x)

    f.defvjp(lambda x: (fnp.sin(x), x), lambda x, g: (g * bad_cos(x),))
    for modes in [("fwd",), ("rev",)]:
        check_grads(f, (X,), order=1, modes=modes)
    with pytest.raises(AssertionError, match="VJP of VJP does not match finite differences"):
        check_grads(f, (X,), order=2, modes=("rev",))
    with pytest.raises(AssertionError, match=r"JVP of JVP \(against finite differences\)"):
        check_grads(f, (X,), order=2, modes=("fwd",))


def test_complex_functions_use_the_real_inner_product() -> None:
    # Holomorphic, non-holomorphic and complex -> real functions all pass in both modes.
    for g in (lambda z: z * z * fnp.sin(z), lambda z: fnp.conj(z) * z + z,
              lambda z: fnp.real(z) * fnp.real(z * fnp.conj(z))):
        check_grads(g, (Z,), order=2)

    @fx.custom_vjp
    def square(z):
        return z * z

    # Right for real inputs but conjugated for complex ones: the VJP of z -> z^2 is 2 z ct.
    square.defvjp(lambda z: (z * z, z), lambda z, g: (2.0 * fnp.conj(z) * g,))
    check_grads(square, (X,), order=1, modes=("rev",))
    with pytest.raises(AssertionError, match="VJP does not match finite differences"):
        check_grads(square, (Z,), order=1, modes=("rev",))


def test_check_jvp_and_check_vjp_directly() -> None:
    check_jvp(fnp.tanh, (X,))
    check_vjp(lambda a, b: {"s": fnp.sum(a * b), "p": a - b}, (X, 2 * X))
    with pytest.raises(AssertionError, match="VJP does not match"):
        check_vjp(_sin_with_vjp(scale=-1.0), (X,))
    with pytest.raises(AssertionError, match="my rule does not match"):
        check_vjp(_sin_with_vjp(scale=-1.0), (X,), what="my rule")
