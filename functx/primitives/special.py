"""Special functions as elementwise primitives (``functx.scipy.special`` builds on them).

Primitives, with SciPy's function for the implementation and the derivative each rule uses:

=================  ======================  ==============================================
primitive          ``scipy.special``       derivative
=================  ======================  ==============================================
``erfc(x)``        ``erfc``                ``-2/sqrt(pi) exp(-x^2)``
``erf_inv(x)``     ``erfinv``              ``sqrt(pi)/2 exp(y^2)`` (``y`` the output)
``erfcx(x)``       ``erfcx``               ``2 x y - 2/sqrt(pi)``
``lgamma(x)``      ``gammaln``             ``digamma(x)``
``gamma(x)``       ``gamma``               ``y digamma(x)``
``digamma(x)``     ``psi``                 ``zeta(2, x)`` (trigamma)
``zeta(s, q)``     ``zeta`` (Hurwitz)      ``-s zeta(s+1, q)`` for ``q``; for ``s`` the
                                           derivative of JAX's series (Johansson 2015)
``igamma(a, x)``   ``gammainc``            ``exp((a-1) log x - x - lgamma(a))`` for ``x``;
                                           ``igamma_grad_a(a, x)`` for ``a``
``igammac(a, x)``  ``gammaincc``           minus those of ``igamma``
``igamma_grad_a``  (JAX's algorithm)       ``d/dx`` only: ``d/dx P (log x - digamma(a))``
``lbeta(a, b)``    ``betaln``              ``digamma(a) - digamma(a+b)`` (and for ``b``)
``betainc(a,b,x)`` ``betainc``             ``x^(a-1) (1-x)^(b-1) / B(a, b)`` for ``x``
``ndtri(p)``       ``ndtri``               ``sqrt(2 pi) exp(y^2/2)``
``log_ndtr(x)``    ``log_ndtr``            ``sqrt(2/pi) / erfcx(-x/sqrt(2))``
``i0e(x)``         ``i0e``                 ``i1e(x) - sign(x) y``
``i1e(x)``         ``i1e``                 ``i0e(x) - y (sign(x) + 1/x)``, ``1/2`` at 0
=================  ======================  ==============================================

The derivatives with respect to ``a`` and ``b`` of ``betainc`` (as in JAX) and to ``a`` of
``igamma_grad_a`` (the second derivative of ``igamma`` in ``a``)
are not implemented: asking for one raises a :class:`GradError` naming the primitive and the
operand. Their VJP rules are selective, so those operands may be constants or data.

Dtypes: real floating-point operands of one dtype; the result has that dtype. float32 and
float64 are computed natively (SciPy's float32 loops on the CPU, CuPy's kernels on CUDA);
float16 and bfloat16 are computed in float32 and rounded once. Values outside a function's
domain give NaN (or inf) as in SciPy, without warnings.

Implementations: the generic rule calls the SciPy ufunc (it serves NumPy arrays and their
subclasses); CUDA has its own rule per primitive (``functx/primitives/cuda/special.py``,
``cupyx.scipy.special``). Batching: every primitive is elementwise
(``functx.primitives._batching.unary_batch`` / ``elementwise_batch``).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import scipy.special as _sc

from functx.errors import GradError
from functx.ir import AbstractArray
from functx.primitives._igamma import igamma_grad_a_values
from functx.primitives._batching import (
    add_tangents,
    broadcast_to_shape,
    elementwise_batch,
    unary_batch,
)
from functx.primitives._util import broadcast_shapes, same_dtypes, shape_of
from functx.primitives.cuda import special as _cuda
from functx.primitives.elementwise import (
    add,
    binary,
    check_dtype_class,
    div,
    eq,
    exp,
    log,
    log1p,
    mul,
    neg,
    pow,
    scalar,
    select,
    sign,
    sub,
    unary,
    unary_jvp,
    unbroadcast,
)
from functx.registry import Primitive, composite_jvp, composite_vjp
from functx.tracing import bind

__all__ = [
    "erfc", "erf_inv", "erfcx", "lgamma", "gamma", "digamma", "zeta", "igamma", "igammac",
    "lbeta", "betainc", "ndtri", "log_ndtr", "i0e", "i1e", "igamma_grad_a",
]

_NATIVE = (np.dtype(np.float32), np.dtype(np.float64))
_PY_SCALARS = (bool, int, float)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def scipy_rule(ufunc: Callable) -> Callable:
    """The generic impl rule of a primitive computed by the SciPy ufunc ``ufunc``: float32
    and float64 natively, float16 and bfloat16 through float32 (rounded once); a 0-d result
    stays an array of the array module ``xp``."""
    def rule(xp: Any, *args: Any) -> Any:
        dtype = next((np.dtype(a.dtype) for a in args if type(a) not in _PY_SCALARS),
                     np.dtype(np.float64))
        compute = dtype if dtype in _NATIVE else np.dtype(np.float32)
        # Python scalars become 0-d arrays: SciPy's ufuncs would pick their float64 loop.
        out = ufunc(*(np.asarray(a, compute) if type(a) in _PY_SCALARS
                      else a if a.dtype == compute else a.astype(compute) for a in args))
        if compute != dtype:  # (astype keeps an array subclass: a device's, in tests)
            out = (out if isinstance(out, np.ndarray) else np.asarray(out)).astype(dtype)
        return out if isinstance(out, np.ndarray) else xp.asarray(out, dtype)
    rule.__name__ = rule.__qualname__ = f"scipy_{ufunc.__name__}"
    return rule


def _unary(name: str, ufunc: Callable, cuda_name: str) -> Primitive:
    p = unary(name, scipy_rule(ufunc), "float")
    p.def_impl(_cuda.special_rule(cuda_name), backend="cuda")
    p.def_batch(unary_batch(p))
    return p


def _nary_aval(name: str) -> Callable:
    """The shape rule of a broadcasting primitive of real float operands of one dtype (the
    common dtype is checked, so a weak Python-scalar operand cannot hide a complex one)."""
    def rule(*avals: AbstractArray) -> AbstractArray:
        dtype = same_dtypes(name, *avals)
        check_dtype_class(name, "float", AbstractArray((), dtype, False))
        shape = broadcast_shapes(name, *(a.shape for a in avals))
        return AbstractArray(shape, dtype, all(a.weak_type for a in avals))
    return rule


def _binary(name: str, ufunc: Callable, cuda_name: str) -> Primitive:
    p = binary(name, scipy_rule(ufunc), "float")
    p.def_abstract_eval(_nary_aval(name))
    p.def_impl(_cuda.special_rule(cuda_name), backend="cuda")
    p.def_batch(elementwise_batch(p))
    return p


def _no_derivative(prim: str, operand: str) -> GradError:
    return GradError(
        f"{prim}: the derivative with respect to {operand} is not implemented (only the "
        f"last operand is differentiable). Differentiate with respect to the other operands "
        "only, or wrap this one in functx.stop_gradient.")


def fit_tangent(t: Any, out: Any) -> Any:
    """A tangent (or None) broadcast to the shape of the primal output ``out``."""
    return None if t is None else broadcast_to_shape(t, shape_of(out))


def _arrays(*operands: Any) -> tuple:
    """The operands with Python scalars (weak operands) made 0-d constants of the dtype and
    device of an array operand, so that rules may apply primitives to each one alone."""
    like = next((v for v in operands if type(v) not in _PY_SCALARS), None)
    if like is None:
        return operands
    return tuple(scalar(like, v) if type(v) in _PY_SCALARS else v for v in operands)


def _exp_neg_square(x: Any) -> Any:
    return exp(neg(mul(x, x)))


# -- error functions ---------------------------------------------------------------------------

erfc_p = _unary("erfc", _sc.erfc, "erfc")


def _erfc_d(x: Any) -> Any:
    return mul(scalar(x, -_TWO_OVER_SQRT_PI), _exp_neg_square(x))


erfc_p.def_vjp(lambda ct, ins, out: (mul(ct, _erfc_d(ins[0])),), save_inputs=(0,))
erfc_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _erfc_d(x))))


def erfc(x: Any) -> Any:
    """The complementary error function ``1 - erf(x)``, accurate where it is small."""
    return bind(erfc_p, x)


erf_inv_p = _unary("erf_inv", _sc.erfinv, "erfinv")


def _erf_inv_d(out: Any) -> Any:
    return mul(scalar(out, math.sqrt(math.pi) / 2), exp(mul(out, out)))


erf_inv_p.def_vjp(lambda ct, ins, out: (mul(ct, _erf_inv_d(out)),), save_output=True)
erf_inv_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _erf_inv_d(out))))


def erf_inv(x: Any) -> Any:
    """The inverse error function on [-1, 1] (``±inf`` at ``±1``, NaN outside)."""
    return bind(erf_inv_p, x)


erfcx_p = _unary("erfcx", _sc.erfcx, "erfcx")


def _erfcx_d(x: Any, out: Any) -> Any:
    return sub(mul(scalar(x, 2), mul(x, out)), scalar(x, _TWO_OVER_SQRT_PI))


erfcx_p.def_vjp(lambda ct, ins, out: (mul(ct, _erfcx_d(ins[0], out)),),
                save_inputs=(0,), save_output=True)
erfcx_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _erfcx_d(x, out))))


def erfcx(x: Any) -> Any:
    """The scaled complementary error function ``exp(x^2) erfc(x)`` (no overflow)."""
    return bind(erfcx_p, x)


# -- gamma and related -------------------------------------------------------------------------

lgamma_p = _unary("lgamma", _sc.gammaln, "gammaln")
lgamma_p.def_vjp(lambda ct, ins, out: (mul(ct, digamma(ins[0])),), save_inputs=(0,))
lgamma_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, digamma(x))))


def lgamma(x: Any) -> Any:
    """``log|Gamma(x)|`` (SciPy's ``gammaln``; inf at the poles 0, -1, -2, ...)."""
    return bind(lgamma_p, x)


gamma_p = _unary("gamma", _sc.gamma, "gamma")
gamma_p.def_vjp(lambda ct, ins, out: (mul(ct, mul(out, digamma(ins[0]))),),
                save_inputs=(0,), save_output=True)
gamma_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, mul(out, digamma(x)))))


def gamma(x: Any) -> Any:
    """The gamma function (signed; inf or NaN at the poles, as in SciPy)."""
    return bind(gamma_p, x)


digamma_p = _unary("digamma", _sc.psi, "digamma")


def _trigamma(x: Any) -> Any:
    return zeta(scalar(x, 2), x)


digamma_p.def_vjp(lambda ct, ins, out: (mul(ct, _trigamma(ins[0])),), save_inputs=(0,))
digamma_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _trigamma(x))))


def digamma(x: Any) -> Any:
    """The digamma function ``d/dx log Gamma(x)`` (SciPy's ``psi``)."""
    return bind(digamma_p, x)


zeta_p = _binary("zeta", _sc.zeta, "zeta")


def _zeta_dq(s: Any, q: Any) -> Any:
    s, q = _arrays(s, q)
    return neg(mul(s, zeta(add(s, scalar(s, 1)), q)))


def _bernoulli_ratios(m: int) -> tuple[float, ...]:
    """``(2k)! / B_2k`` for ``k = 1..m`` (12, -720, 30240, ...), B the Bernoulli numbers."""
    b = [Fraction(1)]
    for n in range(1, 2 * m + 1):  # B_n = -1/(n+1) sum_{j<n} C(n+1, j) B_j
        b.append(-sum(math.comb(n + 1, j) * b[j] for j in range(n)) / (n + 1))
    return tuple(float(math.factorial(2 * k) / b[2 * k]) for k in range(1, m + 1))


_ZETA_TERMS = {np.dtype(np.float32): 8, np.dtype(np.float64): 16}
_ZETA_COEFS = _bernoulli_ratios(16)


def _zeta_series(s: Any, q: Any) -> Any:
    """The Euler-Maclaurin form of the Hurwitz zeta function, JAX's (Johansson 2015, formula
    (5)): ``sum_{k<N} (q+k)^-s + (q+N)^(1-s)/(s-1) + (q+N)^-s (1/2 + sum_j T_j / c_j)``,
    ``T_j = prod_{m<=2j} (s+m)/(q+N)``, in functx operations: its derivative in ``s`` is
    ``zeta``'s (N = M = 16 terms in float64, 8 in float32)."""
    s, q = _arrays(s, q)
    n = _ZETA_TERMS.get(np.dtype(q.dtype), 8)
    one = scalar(q, 1)
    total = None
    for k in range(n):
        term = pow(add(q, scalar(q, k)), neg(s))
        total = term if total is None else add(total, term)
    qn = add(q, scalar(q, n))
    total = add(total, div(pow(qn, sub(one, s)), sub(s, one)))
    prod, tail = one, scalar(q, 0.5)
    for m in range(2 * n):
        prod = mul(prod, div(add(s, scalar(s, m)), qn))
        if m % 2 == 0:
            tail = add(tail, div(prod, scalar(q, _ZETA_COEFS[m // 2])))
    return add(total, mul(pow(qn, neg(s)), tail))


@zeta_p.def_vjp(save_inputs=(0, 1), selective=True)
def _zeta_vjp(ct, ins, out, *, needs):
    s, q = ins
    ds = dq = None
    if needs[0]:
        ds = composite_vjp(_zeta_series, (s, q), ct, argnums=(0,))[0]
    if needs[1]:
        dq = unbroadcast(mul(ct, _zeta_dq(s, q)), q)
    return ds, dq


@zeta_p.def_jvp
def _zeta_jvp(tangents, primals, out):
    ts, tq = tangents
    t = add_tangents(None if ts is None else composite_jvp(_zeta_series, primals, (ts, None)),
                     None if tq is None else mul(tq, _zeta_dq(*primals)))
    return None if t is None else fit_tangent(t, out)


def zeta(s: Any, q: Any) -> Any:
    """The Hurwitz zeta function ``sum_n (n + q)^-s``. Differentiable in ``q``
    (``-s zeta(s+1, q)``) and, as in JAX, in ``s`` through the derivative of its
    Euler-Maclaurin series (:func:`_zeta_series`)."""
    return bind(zeta_p, s, q)


# -- incomplete gamma and beta -----------------------------------------------------------------

def _igamma_dx(a: Any, x: Any) -> Any:
    """``x^(a-1) exp(-x) / Gamma(a)``, the density of Gamma(a, 1), in logarithms."""
    a, x = _arrays(a, x)
    one = scalar(x, 1)
    return exp(sub(sub(mul(sub(a, one), log(x)), x), lgamma(a)))


def _incomplete_gamma(name: str, ufunc: Callable, cuda_name: str, sgn: float) -> Primitive:
    p = _binary(name, ufunc, cuda_name)

    def vjp(ct, ins, out, *, needs):
        a, x = ins
        da = dx = None
        if needs[0]:
            da = unbroadcast(mul(ct, mul(scalar(ct, sgn), igamma_grad_a(a, x))), a)
        if needs[1]:
            dx = unbroadcast(mul(ct, mul(scalar(ct, sgn), _igamma_dx(a, x))), x)
        return da, dx

    def jvp(tangents, primals, out):
        (ta, tx), (a, x) = tangents, primals
        t = add_tangents(None if ta is None else mul(ta, igamma_grad_a(a, x)),
                         None if tx is None else mul(tx, _igamma_dx(a, x)))
        return None if t is None else fit_tangent(mul(t, scalar(out, sgn)), out)

    p.def_vjp(vjp, save_inputs=(0, 1), selective=True)
    p.def_jvp(jvp)
    return p


igamma_p = _incomplete_gamma("igamma", _sc.gammainc, "gammainc", 1.0)
igammac_p = _incomplete_gamma("igammac", _sc.gammaincc, "gammaincc", -1.0)


def igamma(a: Any, x: Any) -> Any:
    """The regularised lower incomplete gamma function ``P(a, x)`` (SciPy's ``gammainc``),
    differentiable in both operands (in ``a`` through :func:`igamma_grad_a`)."""
    return bind(igamma_p, a, x)


def igammac(a: Any, x: Any) -> Any:
    """The regularised upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, accurate
    where it is small (SciPy's ``gammaincc``); differentiable in both operands."""
    return bind(igammac_p, a, x)


def _igamma_grad_a_cpu(xp: Any, a: Any, x: Any) -> Any:
    return igamma_grad_a_values(xp, a, x, lgamma=_sc.gammaln, digamma=_sc.psi)


igamma_grad_a_p = Primitive("igamma_grad_a")
igamma_grad_a_p.def_abstract_eval(_nary_aval("igamma_grad_a"))
igamma_grad_a_p.def_impl(_igamma_grad_a_cpu)
igamma_grad_a_p.def_impl(functools.partial(_cuda.igamma_grad_a, fallback=igamma_grad_a_values),
                         backend="cuda")


def _igamma_grad_a_dx(a: Any, x: Any) -> Any:
    # d/dx dP/da = d/da dP/dx = dP/dx (log x - digamma(a))
    a, x = _arrays(a, x)
    return mul(_igamma_dx(a, x), sub(log(x), digamma(a)))


@igamma_grad_a_p.def_vjp(save_inputs=(0, 1), selective=True)
def _igamma_grad_a_vjp(ct, ins, out, *, needs):
    if needs[0]:
        raise _no_derivative("igamma_grad_a (the second derivative of igamma in a)",
                             "a (the first operand)")
    return None, unbroadcast(mul(ct, _igamma_grad_a_dx(*ins)), ins[1])


@igamma_grad_a_p.def_jvp
def _igamma_grad_a_jvp(tangents, primals, out):
    if tangents[0] is not None:
        raise _no_derivative("igamma_grad_a (the second derivative of igamma in a)",
                             "a (the first operand)")
    tx = tangents[1]
    return None if tx is None else fit_tangent(mul(tx, _igamma_grad_a_dx(*primals)), out)


igamma_grad_a_p.def_batch(elementwise_batch(igamma_grad_a_p))


def igamma_grad_a(a: Any, x: Any) -> Any:
    """``d/da P(a, x)``, JAX's ``igamma_grad_a`` (series and continued fraction
    differentiated term by term; functx/primitives/_igamma.py). Differentiable in ``x``;
    its derivative in ``a`` (the second derivative of ``igamma``) raises GradError."""
    return bind(igamma_grad_a_p, a, x)


lbeta_p = _binary("lbeta", _sc.betaln, "betaln")


@lbeta_p.def_vjp(save_inputs=(0, 1))
def _lbeta_vjp(ct, ins, out):
    a, b = _arrays(*ins)
    dab = digamma(add(a, b))
    return (unbroadcast(mul(ct, sub(digamma(a), dab)), a),
            unbroadcast(mul(ct, sub(digamma(b), dab)), b))


@lbeta_p.def_jvp
def _lbeta_jvp(tangents, primals, out):
    (ta, tb), (a, b) = tangents, _arrays(*primals)
    if ta is None and tb is None:
        return None
    dab = digamma(add(a, b))
    t = add_tangents(None if ta is None else mul(ta, sub(digamma(a), dab)),
                     None if tb is None else mul(tb, sub(digamma(b), dab)))
    return fit_tangent(t, out)


def lbeta(a: Any, b: Any) -> Any:
    """``log|B(a, b)|`` (SciPy's ``betaln``; accurate for large arguments)."""
    return bind(lbeta_p, a, b)


betainc_p = Primitive("betainc")
betainc_p.def_abstract_eval(_nary_aval("betainc"))
betainc_p.def_impl(scipy_rule(_sc.betainc))
betainc_p.def_impl(_cuda.special_rule("betainc"), backend="cuda")


def _betainc_dx(a: Any, b: Any, x: Any) -> Any:
    a, b, x = _arrays(a, b, x)
    one = scalar(x, 1)
    return exp(sub(add(mul(sub(a, one), log(x)), mul(sub(b, one), log1p(neg(x)))),
                   lbeta(a, b)))


@betainc_p.def_vjp(save_inputs=(0, 1, 2), selective=True)
def _betainc_vjp(ct, ins, out, *, needs):
    if needs[0] or needs[1]:
        raise _no_derivative("betainc", "a and b (the first two operands)")
    return None, None, unbroadcast(mul(ct, _betainc_dx(*ins)), ins[2])


@betainc_p.def_jvp
def _betainc_jvp(tangents, primals, out):
    if tangents[0] is not None or tangents[1] is not None:
        raise _no_derivative("betainc", "a and b (the first two operands)")
    tx = tangents[2]
    return None if tx is None else fit_tangent(mul(tx, _betainc_dx(*primals)), out)


betainc_p.def_batch(elementwise_batch(betainc_p))


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularised incomplete beta function ``I_x(a, b)`` (three operands of one dtype,
    broadcast together). Differentiable in ``x`` only, as in JAX."""
    return bind(betainc_p, a, b, x)


# -- the normal distribution -------------------------------------------------------------------

ndtri_p = _unary("ndtri", _sc.ndtri, "ndtri")


def _ndtri_d(out: Any) -> Any:
    return mul(scalar(out, math.sqrt(2 * math.pi)), exp(mul(scalar(out, 0.5), mul(out, out))))


ndtri_p.def_vjp(lambda ct, ins, out: (mul(ct, _ndtri_d(out)),), save_output=True)
ndtri_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _ndtri_d(out))))


def ndtri(p: Any) -> Any:
    """The standard normal quantile function, the inverse of ``ndtr`` on [0, 1]."""
    return bind(ndtri_p, p)


log_ndtr_p = _unary("log_ndtr", _sc.log_ndtr, "log_ndtr")


def _log_ndtr_d(x: Any, out: Any) -> Any:
    # pdf(x) / cdf(x) = sqrt(2/pi) / erfcx(-x/sqrt(2)) (as cdf(x) = erfc(-x/sqrt 2) / 2):
    # no cancellation, no underflow for x << 0, and 0 where erfcx overflows (x >> 0).
    return div(scalar(x, math.sqrt(2 / math.pi)), erfcx(mul(x, scalar(x, -math.sqrt(0.5)))))


log_ndtr_p.def_vjp(lambda ct, ins, out: (mul(ct, _log_ndtr_d(ins[0], out)),),
                   save_inputs=(0,))
log_ndtr_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _log_ndtr_d(x, out))))


def log_ndtr(x: Any) -> Any:
    """``log`` of the standard normal CDF, accurate far into both tails."""
    return bind(log_ndtr_p, x)


# -- modified Bessel functions (exponentially scaled) ------------------------------------------

i0e_p = _unary("i0e", _sc.i0e, "i0e")


def _i0e_d(x: Any, out: Any) -> Any:
    return sub(i1e(x), mul(sign(x), out))


i0e_p.def_vjp(lambda ct, ins, out: (mul(ct, _i0e_d(ins[0], out)),),
              save_inputs=(0,), save_output=True)
i0e_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _i0e_d(x, out))))


def i0e(x: Any) -> Any:
    """``exp(-|x|) I0(x)``, the exponentially scaled modified Bessel function of order 0."""
    return bind(i0e_p, x)


i1e_p = _unary("i1e", _sc.i1e, "i1e")


def _i1e_d(x: Any, out: Any) -> Any:
    # i0e(x) - i1e(x) (sign(x) + 1/x), whose limit at 0 is 1/2 (JAX's form).
    zero = eq(x, scalar(x, 0))
    safe = select(zero, scalar(x, 1), x)
    d = sub(i0e(safe), mul(i1e(safe), add(sign(safe), div(scalar(x, 1), safe))))
    return select(zero, scalar(x, 0.5), d)


i1e_p.def_vjp(lambda ct, ins, out: (mul(ct, _i1e_d(ins[0], out)),),
              save_inputs=(0,), save_output=True)
i1e_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _i1e_d(x, out))))


def i1e(x: Any) -> Any:
    """``exp(-|x|) I1(x)``, the exponentially scaled modified Bessel function of order 1."""
    return bind(i1e_p, x)

