"""functx.numpy's math half (ufuncs, reductions, creation, promotion) against NumPy.

Every function is compared with NumPy itself in float64 over hypothesis shapes (scalars,
size-1 and zero-size axes) and axes (None, ints, negative ints, tuples, keepdims); result
dtypes are compared with NumPy's actual result dtypes; gradients of the composites with
central finite differences; and every function is also run on tracers (``eval_shape``
must give the eager result's shape and dtype).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import functx as fx
import functx.numpy as fnp
from functx.errors import ConcretizationError
from tests.strategies import array, broadcast_pair, distinct_array, shapes

# ----------------------------------------------------------------------------------------
# helpers


def quiet() -> Any:
    """A context in which NumPy's floating-point warnings (the oracle's too) are silent."""
    ctx = warnings.catch_warnings()

    class Both:
        def __enter__(self):
            ctx.__enter__()
            warnings.simplefilter("ignore", RuntimeWarning)
            self.err = np.errstate(all="ignore")
            self.err.__enter__()

        def __exit__(self, *exc):
            self.err.__exit__(*exc)
            return ctx.__exit__(*exc)
    return Both()


def check_result(got: Any, want: Any, rtol: float = 1e-13, atol: float = 1e-14) -> None:
    """``got`` is a read-only NumPy array equal to ``want`` in value, shape and dtype."""
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert not got.flags.writeable
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def check_traced(fn: Callable, *args: Any) -> None:
    """``fn`` runs on tracers, and ``eval_shape`` agrees with the eager result."""
    with quiet():
        eager = fx.tree.leaves(fn(*args))
        avals = [atom.aval for atom in fx.make_trace(fn)(*args).outputs]
        if len(eager) == 1:
            avals.append(fx.eval_shape(fn, *args))
    for e, a in zip(eager * 2, avals):
        assert tuple(a.shape) == np.shape(e) and a.dtype == np.asarray(e).dtype, (a, e)


def fd_grad(f: Callable, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central finite differences of the scalar function ``f`` at ``x``."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros(x.size)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        g[i] = (float(f((x.ravel() + e).reshape(x.shape))) -
                float(f((x.ravel() - e).reshape(x.shape)))) / (2 * eps)
    return g.reshape(x.shape)


def check_grad(f: Callable, x: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``functx.grad(f)(x)`` against central finite differences."""
    g = fx.grad(f)(x)
    assert g.shape == np.shape(x) and g.dtype == np.float64
    np.testing.assert_allclose(g, fd_grad(f, x), rtol=rtol, atol=atol)


def weighted(fn: Callable, w: np.ndarray) -> Callable:
    """``x -> sum(fn(x) * w)``: a scalar whose gradient checks every output entry."""
    return lambda *xs: fnp.sum(fnp.multiply(fn(*xs), w))


@st.composite
def axis_args(draw, ndim: int) -> Any:
    """None, an int (maybe negative) or a tuple of distinct axes (maybe negative)."""
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none" or ndim == 0:
        return None if kind != "tuple" else ()
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(a - ndim if draw(st.booleans()) else a for a in axes)


# ----------------------------------------------------------------------------------------
# elementwise functions of one argument

INTS = tuple(range(-3, 4))
HALVES = tuple(k + 0.5 for k in range(-3, 3))


@attrs.frozen
class U:
    """A one-argument function: its domain and whether (how) to check its gradient."""

    name: str
    lo: float = -2.0
    hi: float = 2.0
    away: tuple = ()
    grad: str = "fd"  # "fd": against finite differences; "zero"; "none" (bool output)
    rtol: float = 1e-13

    def __str__(self) -> str:
        return self.name


UNARY = [
    U("negative"), U("positive"), U("absolute", away=(0.0,)), U("abs", away=(0.0,)),
    U("fabs", away=(0.0,)), U("sign", away=(0.0,), grad="zero"), U("exp"), U("exp2"),
    U("expm1"), U("log", 0.05, 4.0), U("log2", 0.05, 4.0), U("log10", 0.05, 4.0),
    U("log1p", -0.9, 3.0), U("sqrt", 0.05, 4.0), U("square"), U("reciprocal", away=(0.0,)),
    U("cbrt", away=(0.0,)), U("sin", -4, 4), U("cos", -4, 4), U("tan", -1.4, 1.4),
    U("arcsin", -0.95, 0.95), U("arccos", -0.95, 0.95), U("arctan", -4, 4), U("sinh"),
    U("cosh"), U("tanh"), U("arcsinh", -6, 6), U("arccosh", 1.05, 6.0),
    U("arctanh", -0.95, 0.95), U("deg2rad", -400, 400), U("rad2deg"), U("radians"),
    U("degrees"), U("floor", -3, 3, INTS, "zero"), U("ceil", -3, 3, INTS, "zero"),
    U("trunc", -3, 3, INTS, "zero"), U("fix", -3, 3, INTS, "zero"),
    U("rint", -3, 3, HALVES, "zero"), U("round", -3, 3, HALVES, "zero"),
    U("around", -3, 3, HALVES, "zero"), U("sinc", -3, 3), U("nan_to_num"),
    U("isfinite", grad="none"), U("isnan", grad="none"), U("isinf", grad="none"),
    U("isposinf", grad="none"), U("isneginf", grad="none"), U("signbit", grad="none"),
    U("logical_not", grad="none"),
]


@pytest.mark.parametrize("spec", UNARY, ids=str)
@given(data=st.data())
def test_unary_matches_numpy(spec: U, data: Any) -> None:
    shape = data.draw(shapes(max_rank=3, max_side=3), label="shape")
    x = data.draw(array(shape, spec.lo, spec.hi, away_from=spec.away), label="x")
    fn = getattr(fnp, spec.name)
    check_result(fn(x), getattr(np, spec.name)(x), rtol=spec.rtol)
    check_traced(fn, x)
    if spec.grad == "none":
        return
    w = data.draw(array(shape), label="w")
    if spec.grad == "zero":
        np.testing.assert_array_equal(fx.grad(weighted(fn, w))(x), np.zeros(shape))
    else:
        check_grad(weighted(fn, w), x)


@pytest.mark.parametrize("name", ["sin", "sqrt", "exp", "arctanh", "cbrt", "rint", "fabs",
                                  "square", "reciprocal", "floor", "sign", "abs", "invert",
                                  "isnan", "logical_not", "negative", "sinc"])
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int16, np.int32,
                                   np.uint32, np.int64, np.float16, np.float32, np.float64])
def test_unary_result_dtypes_match_numpy(name: str, dtype: Any) -> None:
    """Float-only functions: bool/int8 -> float16, int16 -> float32, int32 -> float64..."""
    x = np.array([0, 1, 2, 0] if name != "reciprocal" else [1, 2, 1, 3]).astype(dtype)
    fn, ref = getattr(fnp, name), getattr(np, name)
    with quiet():
        try:
            want = ref(x)
        except TypeError:
            with pytest.raises(TypeError):
                fn(x)
            return
        got = fn(x)
    check_result(got, want, rtol=1e-3)
    check_traced(fn, x)


# ----------------------------------------------------------------------------------------
# elementwise functions of two arguments


@attrs.frozen
class B:
    """A two-argument function: domains of both arguments and gradient checks."""

    name: str
    lo1: float = -2.0
    hi1: float = 2.0
    lo2: float = -2.0
    hi2: float = 2.0
    away2: tuple = ()
    grad: str = "fd"  # "fd", "none"
    ties: bool = False  # draw small integers so that equal values occur
    rtol: float = 1e-13

    def __str__(self) -> str:
        return self.name


NONZERO = dict(away2=(0.0,))
BINARY = [
    B("add"), B("subtract"), B("multiply"), B("divide", **NONZERO),
    B("true_divide", **NONZERO), B("floor_divide", -5, 5, grad="none", **NONZERO),
    B("remainder", -5, 5, grad="none", **NONZERO), B("mod", -5, 5, grad="none", **NONZERO),
    B("fmod", -5, 5, grad="none", **NONZERO), B("power", 0.2, 3.0),
    B("float_power", 0.2, 3.0), B("arctan2", **NONZERO), B("hypot"), B("logaddexp"),
    B("logaddexp2", -40, 40, -40, 40),
    B("logaddexp", -3, 3, -3, 3, ties=True, grad="none"), B("maximum"), B("minimum"),
    B("fmax"), B("fmin"), B("maximum", ties=True, grad="none"),
    B("copysign", away2=(0.0,), grad="none"), B("heaviside", ties=True, grad="none"),
    B("equal", ties=True, grad="none"), B("not_equal", ties=True, grad="none"),
    B("less", ties=True, grad="none"), B("less_equal", ties=True, grad="none"),
    B("greater", ties=True, grad="none"), B("greater_equal", ties=True, grad="none"),
    B("logical_and", ties=True, grad="none"), B("logical_or", ties=True, grad="none"),
    B("logical_xor", ties=True, grad="none"),
]


@pytest.mark.parametrize("spec", BINARY, ids=lambda s: s.name + ("-ties" if s.ties else ""))
@given(data=st.data())
def test_binary_matches_numpy(spec: B, data: Any) -> None:
    s1, s2 = data.draw(broadcast_pair(max_side=3), label="shapes")
    x = data.draw(array(s1, spec.lo1, spec.hi1), label="x")
    y = data.draw(array(s2, spec.lo2, spec.hi2, away_from=spec.away2, margin=0.2), label="y")
    if spec.ties:
        x, y = np.round(x), np.round(y)
    fn = getattr(fnp, spec.name)
    with quiet():
        want = getattr(np, spec.name)(x, y)
    check_result(fn(x, y), want, rtol=spec.rtol)
    check_traced(fn, x, y)
    if spec.grad == "fd":
        w = data.draw(array(np.broadcast_shapes(s1, s2)), label="w")
        check_grad(weighted(lambda a: fn(a, y), w), x)
        check_grad(weighted(lambda b: fn(x, b), w), y)


INT_BINARY = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder",
              "fmod", "power", "maximum", "minimum", "bitwise_and", "bitwise_or",
              "bitwise_xor", "equal", "less", "greater_equal"]


@pytest.mark.parametrize("name", INT_BINARY)
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_integer_binary_matches_numpy(name: str, dtype: Any) -> None:
    """Integer arithmetic is exact (floor division and remainder follow Python's signs)."""
    signed = np.dtype(dtype).kind == "i"
    x = np.array([[-7, -3, 0, 2, 5, 1]] if signed else [[7, 3, 0, 2, 5, 1]]).astype(dtype)
    y = np.array([[3], [-2], [1]] if signed else [[3], [2], [1]]).astype(dtype)
    if name == "power":
        x, y = np.abs(x), np.abs(y)
    with quiet():
        want = getattr(np, name)(x, y)
        got = getattr(fnp, name)(x, y)
    check_result(got, want)
    check_traced(getattr(fnp, name), x, y)


def test_integer_power_by_array_wraps_like_numpy() -> None:
    base = np.array([3, -2, 5, 7, 0, 1], np.int8)
    exps = np.array([5, 7, 0, 3, 4, 100], np.int8)
    with quiet():
        check_result(fnp.power(base, exps), np.power(base, exps))
    with pytest.raises(ValueError, match="negative integer powers"):
        fnp.power(base, np.array(-1, np.int8))
    with pytest.raises(ValueError, match="negative integer powers"):
        fnp.power(base, -2)
    check_traced(fnp.power, base, exps)


# ----------------------------------------------------------------------------------------
# dtype promotion (NEP 50)

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64]
WEAK = [True, 2, 2.5]


@pytest.mark.parametrize("a", DTYPES + WEAK, ids=repr)
@pytest.mark.parametrize("b", DTYPES + WEAK, ids=repr)
def test_result_type_matches_numpy(a: Any, b: Any) -> None:
    assert fnp.result_type(a, b) == np.result_type(a, b)
    arr = [np.ones(2, x) if isinstance(x, type) else x for x in (a, b)]
    assert fnp.result_type(*arr) == np.result_type(*arr)


PROMOTING = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder",
             "power", "maximum", "arctan2", "hypot", "logaddexp", "less", "equal",
             "logical_and", "bitwise_or", "copysign", "heaviside", "fmax"]


@pytest.mark.parametrize("name", PROMOTING)
@pytest.mark.parametrize("a", [np.bool_, np.int8, np.uint8, np.int32, np.float16,
                               np.float32, np.float64], ids=lambda t: t.__name__)
@pytest.mark.parametrize("b", [np.bool_, np.int16, np.uint32, np.int64, np.float32,
                               np.float64, True, 3, 2.5], ids=repr)
def test_result_dtypes_match_numpy(name: str, a: Any, b: Any) -> None:
    """Actual result dtypes (and values) of mixed-dtype operations equal NumPy's."""
    x = np.array([1, 2, 0, 1]).astype(a)
    y = np.array([1, 3, 1, 2]).astype(b) if isinstance(b, type) else b
    fn, ref = getattr(fnp, name), getattr(np, name)
    with quiet():
        try:
            want = ref(x, y)
        except TypeError:
            with pytest.raises(TypeError):
                fn(x, y)
            return
        got = fn(x, y)
        check_result(got, want, rtol=2e-3, atol=1e-3)
        # the operands swapped: Python scalars are weak on either side
        check_result(fn(y, x), ref(y, x), rtol=2e-3, atol=1e-3)
    check_traced(fn, x, y)


def test_weak_tracers_promote_like_python_scalars() -> None:
    """A tracer made from a Python scalar is weak: it takes the other operand's dtype."""
    x32, i8 = np.ones(3, np.float32), np.ones(3, np.int8)
    assert fx.eval_shape(lambda s, a: s * a, 2.0, x32).dtype == np.float32
    assert fx.eval_shape(lambda s, a: a - s, 2, i8).dtype == np.int8
    assert fx.eval_shape(lambda s, a: a + s, 2.5, i8).dtype == np.float64
    assert fx.eval_shape(lambda s, a: fnp.maximum(s, a), True, i8).dtype == np.int8
    assert fx.eval_shape(lambda s, a: fnp.where(a > 0, s, a), 2.0, x32).dtype == np.float32
    # strong values are not weak: a float64 array (or NumPy scalar) wins
    assert fx.eval_shape(lambda s, a: s * a, np.float64(2.0), x32).dtype == np.float64
    assert fx.eval_shape(lambda s, a: s * a, np.ones(()), x32).dtype == np.float64
    assert fnp.result_type(fx.ShapeDtype((), np.float64, weak_type=True), np.float16) == \
        np.float16


def test_python_int_out_of_range_raises_like_numpy() -> None:
    with pytest.raises(OverflowError):
        np.add(np.ones(2, np.uint8), 300)
    with pytest.raises(OverflowError):
        fnp.add(np.ones(2, np.uint8), 300)
    # comparisons with out-of-range Python ints are by value, as in NumPy 2
    check_result(fnp.less(np.arange(3, dtype=np.int8), 1000),
                 np.less(np.arange(3, dtype=np.int8), 1000))


def test_asarray_astype_and_dtype_keyword() -> None:
    a = np.arange(4.0)
    out = fnp.asarray(a)
    assert not out.flags.writeable and a.flags.writeable and out is not a
    np.testing.assert_array_equal(out, a)
    check_result(fnp.asarray([1, 2.5]), np.asarray([1, 2.5]))
    check_result(fnp.asarray(a, dtype=np.int32), a.astype(np.int32))
    check_result(fnp.array(3.0, ndmin=2), np.array(3.0, ndmin=2))
    check_result(fnp.astype(a, np.float32), a.astype(np.float32))
    check_result(fnp.add(a, 1, dtype=np.float32), np.add(a, 1, dtype=np.float32))
    assert fnp.can_cast(np.int8, np.int16) and not fnp.can_cast(np.float64, np.int8)
    assert fnp.can_cast(np.ones(2, np.int8), np.float32)
    # a list of tracers is stacked, and gradients flow through it
    g = fx.grad(lambda s: fnp.sum(fnp.asarray([s, 2.0 * s, s * s])))(np.array(3.0))
    np.testing.assert_allclose(g, 1.0 + 2.0 + 6.0)


# ----------------------------------------------------------------------------------------
# reductions


@attrs.frozen
class R:
    """A reduction with keyword arguments and a NumPy reference."""

    name: str
    kwargs: dict = attrs.field(factory=dict)
    ref: Callable | None = None
    grad: bool = True
    ints: bool = False  # draw small integers (zeros occur)
    min_count: int = 1  # reduced elements needed for a finite gradient

    def __str__(self) -> str:
        return self.name + "".join(f"-{k}{v}" for k, v in self.kwargs.items())


def np_logsumexp(a: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    """The naive formula (fine for the moderate values used here)."""
    return np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims))


REDUCTIONS = [
    R("sum"), R("mean"), R("var"), R("var", {"ddof": 1}, min_count=2), R("std", min_count=2),
    R("std", {"ddof": 1}, min_count=2), R("prod"), R("max"), R("min"), R("amax"), R("amin"),
    R("ptp"), R("any", grad=False, ints=True), R("all", grad=False, ints=True),
    R("count_nonzero", grad=False, ints=True), R("logsumexp", ref=np_logsumexp),
    R("sum", ints=True, grad=False), R("prod", ints=True, grad=False),
    R("mean", ints=True, grad=False), R("var", ints=True, grad=False),
    R("max", ints=True, grad=False),
]


@pytest.mark.parametrize("spec", REDUCTIONS, ids=str)
@given(data=st.data())
def test_reductions_match_numpy(spec: R, data: Any) -> None:
    shape = data.draw(shapes(max_rank=3, max_side=3), label="shape")
    axis = data.draw(axis_args(len(shape)), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    x = data.draw(array(shape), label="x")
    if spec.ints:
        x = np.round(x).astype(np.int32)
    fn = getattr(fnp, spec.name)
    ref = spec.ref or getattr(np, spec.name)
    call = lambda f, v: f(v, axis=axis, keepdims=keepdims, **spec.kwargs)  # noqa: E731
    with quiet():
        try:
            want = call(ref, x)
        except ValueError:  # max/min of an empty axis
            with pytest.raises(ValueError):
                call(fn, x)
            return
        got = call(fn, x)
    check_result(got, want, rtol=1e-12, atol=1e-13)
    check_traced(lambda v: call(fn, v), x)
    axes = range(len(shape)) if axis is None else [axis] if isinstance(axis, int) else axis
    count = int(np.prod([shape[a] for a in axes]))
    if spec.grad and count >= spec.min_count and x.size:
        w = data.draw(array(np.shape(want)), label="w")
        check_grad(weighted(lambda v: call(fn, v), w), x)


@pytest.mark.parametrize("name", ["sum", "prod", "cumsum", "cumprod", "mean", "var", "std",
                                  "max", "argmax", "any", "count_nonzero"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduction_dtypes_match_numpy(name: str, dtype: Any) -> None:
    """Accumulators: bool/small ints -> int64 (uint64), means of ints -> float64..."""
    x = (np.arange(6).reshape(2, 3) % 3).astype(dtype)
    with quiet():
        got, want = getattr(fnp, name)(x, axis=0), getattr(np, name)(x, axis=0)
    check_result(got, want, rtol=1e-3)
    check_traced(lambda v: getattr(fnp, name)(v, axis=0), x)


@pytest.mark.parametrize("name", ["sum", "prod", "cumsum", "mean"])
def test_reduction_dtype_keyword(name: str) -> None:
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    for dt in (np.float32, np.int16, np.float64):
        check_result(getattr(fnp, name)(x, axis=1, dtype=dt),
                     getattr(np, name)(x, axis=1, dtype=dt), rtol=1e-6)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(data=st.data())
def test_argmax_argmin_match_numpy(name: str, data: Any) -> None:
    shape = data.draw(shapes(min_rank=1, max_rank=3, min_side=1, max_side=4), label="shape")
    x = data.draw(distinct_array(shape), label="x")
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    keepdims = data.draw(st.booleans())
    fn = getattr(fnp, name)
    check_result(fn(x, axis=axis, keepdims=keepdims),
                 getattr(np, name)(x, axis=axis, keepdims=keepdims))
    check_traced(lambda v: fn(v, axis=axis, keepdims=keepdims), x)
    with pytest.raises(ValueError):
        fn(np.ones((2, 0)), axis=1)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@given(data=st.data())
def test_cumulative_match_numpy(name: str, data: Any) -> None:
    shape = data.draw(shapes(max_rank=3, max_side=4), label="shape")
    x = data.draw(array(shape, 0.5, 1.5), label="x")
    axis = None if not shape else data.draw(
        st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    fn = getattr(fnp, name)
    want = getattr(np, name)(x, axis=axis)
    check_result(fn(x, axis=axis), want, rtol=1e-12)
    check_traced(lambda v: fn(v, axis=axis), x)
    w = data.draw(array(want.shape), label="w")
    check_grad(weighted(lambda v: fn(v, axis=axis), w), x)


def test_cumprod_with_zeros_has_exact_gradient() -> None:
    x = np.array([2.0, 0.0, 3.0, 0.0, 5.0])
    check_grad(lambda v: fnp.sum(fnp.cumprod(v)), x)


def test_var_is_two_pass_stable() -> None:
    """Data far from zero: a one-pass E[x^2] - E[x]^2 would lose every digit here."""
    x = 1e9 + np.array([4.0, 7.0, 13.0, 16.0])
    np.testing.assert_allclose(fnp.var(x), 22.5, rtol=1e-12)
    np.testing.assert_allclose(fnp.std(x, ddof=1), np.std(x, ddof=1), rtol=1e-12)
    check_result(fnp.var(x, correction=1), np.var(x, correction=1))
    with pytest.raises(ValueError):
        fnp.var(x, ddof=1, correction=1)


def test_average_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(3, 4)), rng.uniform(0.5, 2, size=(3, 4))
    check_result(fnp.average(x, axis=1, weights=w), np.average(x, axis=1, weights=w))
    check_result(fnp.average(x, axis=-1, weights=w[0]), np.average(x, axis=-1, weights=w[0]))
    check_result(fnp.average(x), np.average(x))
    avg, total = fnp.average(x, axis=0, weights=w, returned=True)
    want_avg, want_total = np.average(x, axis=0, weights=w, returned=True)
    check_result(avg, want_avg)
    check_result(total, want_total)
    check_grad(lambda v: fnp.average(v, axis=0, weights=w[:, 0]).sum(), x)


def test_max_min_initial_and_empty() -> None:
    check_result(fnp.max(np.ones((0, 3)), axis=0, initial=-5.0),
                 np.max(np.ones((0, 3)), axis=0, initial=-5.0))
    check_result(fnp.min(np.arange(4.0), initial=-1.0), np.min(np.arange(4.0), initial=-1.0))
    check_result(fnp.sum(np.arange(4.0), initial=10.0), np.sum(np.arange(4.0), initial=10.0))
    with pytest.raises(ValueError, match="zero-size"):
        fnp.max(np.ones((0, 3)), axis=0)


def test_max_gradient_splits_ties_evenly() -> None:
    g = fx.grad(lambda v: fnp.max(v))(np.array([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5, 0.0])
    g = fx.grad(lambda v: fnp.maximum(v, 1.0).sum())(np.array([0.0, 1.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 1.0])


# ----------------------------------------------------------------------------------------
# logsumexp


def test_logsumexp_is_stable() -> None:
    check_result(fnp.logsumexp(np.array([1000.0, 1000.0])), 1000.0 + math.log(2.0))
    check_result(fnp.logsumexp(np.array([-1000.0, -1000.0])), -1000.0 + math.log(2.0))
    check_result(fnp.logsumexp(np.array([1e308, 1e308])), 1e308)
    check_result(fnp.logsumexp(np.array([-np.inf, 0.0])), 0.0)
    with quiet():
        check_result(fnp.logsumexp(np.array([-np.inf, -np.inf])), -np.inf)
        check_result(fnp.logsumexp(np.array([np.inf, 0.0])), np.inf)
        check_result(fnp.logsumexp(np.zeros((2, 0)), axis=1), np.full(2, -np.inf))
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    with quiet():
        check_result(fnp.logsumexp(x, axis=1, keepdims=True), [[np.log(1 + np.e)], [-np.inf]])


@given(data=st.data())
def test_logsumexp_gradient_is_softmax(data: Any) -> None:
    shape = data.draw(shapes(min_rank=1, max_rank=3, min_side=1, max_side=4), label="shape")
    x = data.draw(array(shape, -500.0, 500.0), label="x")
    g = fx.grad(lambda v: fnp.sum(fnp.logsumexp(v, axis=-1)))(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(g, e / e.sum(axis=-1, keepdims=True), rtol=1e-14, atol=1e-300)
    # -inf entries get exactly zero gradient, and the rest still sum to one
    x = np.array([-np.inf, 0.0, 1.0, -np.inf])
    g = fx.grad(fnp.logsumexp)(x)
    np.testing.assert_allclose(g, [0.0, 1 / (1 + np.e), np.e / (1 + np.e), 0.0], rtol=1e-15)


def test_logsumexp_with_b_and_sign() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(3, 4)), rng.uniform(-1, 1, size=(4,))
    s = np.sum(b * np.exp(a), axis=1)
    out, sign = fnp.logsumexp(a, axis=1, b=b, return_sign=True)
    check_result(out, np.log(np.abs(s)))
    check_result(sign, np.sign(s))
    bp = np.abs(b)
    check_result(fnp.logsumexp(a, axis=1, b=bp), np.log(np.sum(bp * np.exp(a), axis=1)))
    check_grad(lambda v: fnp.sum(fnp.logsumexp(v, axis=1, b=bp)), a)
    check_grad(lambda c: fnp.sum(fnp.logsumexp(a, axis=1, b=c)), bp)
    check_traced(lambda v, c: fnp.logsumexp(v, axis=0, b=c, return_sign=True), a, b)


# ----------------------------------------------------------------------------------------
# composites: special values and gradients at awkward points


def test_composites_at_special_values() -> None:
    with quiet():
        big = np.array([1e300, -1e300, 1e-300, 0.0, -0.0, 3e8, np.inf, -np.inf])
        check_result(fnp.arcsinh(big), np.arcsinh(big))
        near_one = 1.0 + np.array([0.0, 1e-15, 1e-10, 1e-5, 1e300])
        check_result(fnp.arccosh(near_one), np.arccosh(near_one))
        small = np.array([1e-300, -1e-20, 1e-8, 0.5, -0.999999, 1.0, -1.0])
        check_result(fnp.arctanh(small), np.arctanh(small))
        h1 = np.array([0.0, 1e-300, 1e300, np.inf, np.inf, 3.0, np.nan])
        h2 = np.array([0.0, 1e-300, 1e300, np.nan, np.inf, 4.0, 1.0])
        check_result(fnp.hypot(h1, h2), np.hypot(h1, h2))
        l1 = np.array([-np.inf, np.inf, -np.inf, 1e308, 0.0, np.nan])
        l2 = np.array([-np.inf, np.inf, 3.0, 1e308, -1e308, 0.0])
        check_result(fnp.logaddexp(l1, l2), np.logaddexp(l1, l2))
        check_result(fnp.logaddexp2(l1, l2), np.logaddexp2(l1, l2))
        check_result(fnp.sinc(np.array([0.0, 1.0, -2.0])), np.sinc(np.array([0.0, 1.0, -2.0])))
        fd = np.array([1.0, -1.0, 7.0, -7.0, 1.0, 0.0, np.inf])
        fd2 = np.array([0.1, 0.1, 0.0, 0.0, -0.0, 0.0, 2.0])
        check_result(fnp.floor_divide(fd, fd2), np.floor_divide(fd, fd2))
        zeros = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf])
        check_result(fnp.signbit(zeros), np.signbit(zeros))
        check_result(fnp.copysign(2.0, zeros), np.copysign(2.0, zeros))
        special = np.array([np.nan, np.inf, -np.inf, 1.0])
        check_result(fnp.nan_to_num(special), np.nan_to_num(special))
        check_result(fnp.nan_to_num(special, nan=1.0, posinf=2.0, neginf=-2.0),
                     np.nan_to_num(special, nan=1.0, posinf=2.0, neginf=-2.0))
        check_result(fnp.isinf(special), np.isinf(special))
        check_result(fnp.heaviside(np.array([np.nan, 0.0, -1.0]), 0.5),
                     np.heaviside(np.array([np.nan, 0.0, -1.0]), 0.5))
        check_result(fnp.cbrt(np.array([-27.0, 8.0, 0.0, 1e-300])),
                     np.cbrt(np.array([-27.0, 8.0, 0.0, 1e-300])))


def test_special_values_raise_no_floating_point_warnings() -> None:
    """As NumPy's (and scipy's) versions, the composites do not warn on infinities."""
    inf = np.array([np.inf, -np.inf, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fnp.logaddexp(inf, inf)
        fnp.hypot(inf, inf)
        fnp.isclose(inf, inf)
        fnp.logsumexp(np.array([-np.inf, -np.inf]))
        fnp.sinc(np.zeros(2))


def test_gradients_are_finite_at_awkward_points() -> None:
    """Points where a naive composite would give NaN gradients although the function is
    differentiable (or has a well-chosen subgradient)."""
    np.testing.assert_array_equal(fx.grad(lambda v: fnp.sum(fnp.arcsinh(v)))(np.zeros(2)),
                                  [1.0, 1.0])
    np.testing.assert_allclose(fx.grad(lambda v: fnp.sum(fnp.arcsinh(v)))(np.array([1e300])),
                               [1e-300], rtol=1e-12)
    np.testing.assert_array_equal(fx.grad(lambda v: fnp.sum(fnp.sinc(v)))(np.zeros(2)),
                                  [0.0, 0.0])
    g = fx.grad(lambda v: fnp.hypot(v[0], v[1]))(np.zeros(2))
    np.testing.assert_array_equal(g, [0.0, 0.0])
    g = fx.grad(lambda v: fnp.hypot(v[0], v[1]))(np.array([3.0, 3.0]))
    np.testing.assert_allclose(g, [1 / math.sqrt(2)] * 2, rtol=1e-15)
    g = fx.grad(lambda v: fnp.logaddexp(v[0], v[1]))(np.array([2.0, 2.0]))
    np.testing.assert_array_equal(g, [0.5, 0.5])
    g = fx.grad(lambda v: fnp.logaddexp(v[0], v[1]))(np.array([-np.inf, 1.0]))
    np.testing.assert_array_equal(g, [0.0, 1.0])
    g = fx.grad(lambda v: fnp.sum(fnp.power(v, 3)))(np.array([0.0, -2.0]))
    np.testing.assert_array_equal(g, [0.0, 12.0])
    g = fx.grad(lambda v: fnp.sum(v ** 0.5))(np.array([4.0]))
    np.testing.assert_allclose(g, [0.25])


def test_round_matches_numpy_including_decimals() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1.2345, -2.675, 123.456])
    for d in (0, 1, 2, -1, -2):
        check_result(fnp.round(x, d), np.round(x, d))
        check_result(fnp.around(x, decimals=d), np.around(x, decimals=d))
    ints = np.array([1250, 1350, -1250, 7], np.int64)
    for d in (0, 2, -1, -2):
        check_result(fnp.round(ints, d), np.round(ints, d))


def test_clip_matches_numpy() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 4))
    lo, hi = rng.normal(size=(4,)) - 1, rng.normal(size=(3, 1)) + 1
    check_result(fnp.clip(x, lo, hi), np.clip(x, lo, hi))
    check_result(fnp.clip(x, None, 0.5), np.clip(x, None, 0.5))
    check_result(fnp.clip(x, -0.5, None), np.clip(x, -0.5, None))
    check_result(fnp.clip(x, min=-0.2, max=0.1), np.clip(x, min=-0.2, max=0.1))
    check_result(fnp.clip(x, 1.0, -1.0), np.clip(x, 1.0, -1.0))  # lo > hi: hi wins
    ints = np.arange(-3, 4, dtype=np.int8)
    check_result(fnp.clip(ints, 0, 2), np.clip(ints, 0, 2))
    check_result(fnp.clip(ints, 0, 2.5), np.clip(ints, 0, 2.5))
    check_grad(lambda v: fnp.sum(fnp.clip(v, lo, hi) ** 2), x)
    check_traced(lambda v: fnp.clip(v, lo, None), x)


def test_where_matches_numpy_and_routes_gradients() -> None:
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(3, 4)), rng.normal(size=(4,))
    check_result(fnp.where(x > 0, x, y), np.where(x > 0, x, y))
    check_result(fnp.where(x > 0, 1, 0.5), np.where(x > 0, 1, 0.5))
    check_result(fnp.where(np.arange(4), x, 0), np.where(np.arange(4), x, 0))
    check_result(fnp.where(x > 0, np.int8(1), np.float32(2)),
                 np.where(x > 0, np.int8(1), np.float32(2)))
    g = fx.grad(lambda v: fnp.sum(fnp.where(v > 0, v * 2.0, 0.0)))(x)
    np.testing.assert_array_equal(g, np.where(x > 0, 2.0, 0.0))
    with pytest.raises(TypeError, match="nonzero"):
        fnp.where(x > 0)


# ----------------------------------------------------------------------------------------
# operators on tracers (the Tracer class calls these functions)


def test_tracer_operators_follow_numpy() -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(0.5, 2.0, size=(3,))

    def ops(v):
        return [v + 1, 2 - v, v * v, v / 2, 1 / v, v // 0.3, v % 0.3, v ** 2, 2.0 ** v,
                v ** 0.5, -v, abs(-v), v > 1, v <= 1, v == v, v != 1,
                (v > 1) & (v < 1.5), (v > 1) | (v < 0.7), (v > 1) ^ (v < 1.5), ~(v > 1),
                v.round(1), v.clip(0.7, 1.5), v.sum(), v.mean(), v.var(), v.std(),
                v.max(), v.argmax(), v.cumsum(), v.prod(), v.any(), v.all()]

    eager = ops(x)
    _, traced = fx.value_and_grad(lambda v: (ops(v)[0].sum(), ops(v)), has_aux=True)(x)[0]
    for e, t in zip(eager, traced):
        check_result(t, np.asarray(e))
    check_traced(lambda v: tuple(ops(v)), x)  # and on abstract tracers
    # numpy's own functions dispatch to functx.numpy on tracers
    g = fx.grad(lambda v: np.sum(np.sin(v)))(x)
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-15)


# ----------------------------------------------------------------------------------------
# creation


def test_creation_matches_numpy() -> None:
    cases = [
        (fnp.zeros((2, 3)), np.zeros((2, 3))), (fnp.zeros(3, np.int8), np.zeros(3, np.int8)),
        (fnp.ones((2,)), np.ones((2,))), (fnp.empty((2, 2)), np.zeros((2, 2))),
        (fnp.full((2, 3), 2.5), np.full((2, 3), 2.5)), (fnp.full(3, 7), np.full(3, 7)),
        (fnp.full((2, 3), [1, 2, 3]), np.full((2, 3), [1, 2, 3])),
        (fnp.zeros_like(np.ones((2, 1), np.int32)), np.zeros((2, 1), np.int32)),
        (fnp.ones_like([1.0, 2.0]), np.ones(2)), (fnp.full_like(np.ones(3), 4), np.full(3, 4.0)),
        (fnp.empty_like(np.ones(2, np.float32)), np.zeros(2, np.float32)),
        (fnp.eye(3), np.eye(3)), (fnp.eye(2, 4, k=1, dtype=np.int32), np.eye(2, 4, 1, np.int32)),
        (fnp.identity(3), np.identity(3)), (fnp.tri(3, 4, -1), np.tri(3, 4, -1)),
        (fnp.arange(5), np.arange(5)), (fnp.arange(1, 2, 0.25), np.arange(1, 2, 0.25)),
        (fnp.arange(5, step=2), np.arange(5, step=2)),
        (fnp.arange(3, dtype=np.float32), np.arange(3, dtype=np.float32)),
    ]
    for got, want in cases:
        check_result(got, want)
    assert fnp.pi == np.pi and math.isnan(fnp.nan) and fnp.inf == np.inf


def test_creation_with_traced_values() -> None:
    s = np.array(1.5)
    g = fx.grad(lambda v: fnp.sum(fnp.full((2, 3), v) ** 2))(s)
    np.testing.assert_allclose(g, 6 * 2 * 1.5)
    g = fx.grad(lambda v: fnp.sum(fnp.full_like(np.ones(4), v)))(s)
    np.testing.assert_allclose(g, 4.0)
    # shapes are static, so *_like of a tracer is a constant
    check_traced(lambda v: fnp.zeros_like(v) + fnp.ones_like(v, dtype=np.float32), np.ones(3))
    check_traced(lambda v: fnp.full((2, 2), v, dtype=np.float32), s)
    with pytest.raises(ConcretizationError):
        fx.make_trace(lambda n: fnp.arange(n))(np.array(3))
    np.testing.assert_array_equal(fx.grad(lambda n: fnp.sum(fnp.arange(n) * n))(np.array(3.0)),
                                  3.0)


@pytest.mark.parametrize("kwargs", [
    {}, {"num": 7}, {"num": 1}, {"num": 0}, {"num": 2}, {"num": 5, "endpoint": False},
    {"num": 1, "endpoint": False}, {"num": 6, "dtype": np.int64},
    {"num": 4, "dtype": np.float32}, {"num": 5, "retstep": True},
    {"num": 1, "retstep": True}])
def test_linspace_scalar_matches_numpy(kwargs: dict) -> None:
    for start, stop in [(0, 1), (-2.5, 7), (3, -1), (1, 1)]:
        got, want = fnp.linspace(start, stop, **kwargs), np.linspace(start, stop, **kwargs)
        if kwargs.get("retstep"):
            check_result(got[0], want[0])
            np.testing.assert_allclose(np.asarray(got[1]), want[1], equal_nan=True)
        else:
            check_result(got, want)


@given(data=st.data())
def test_linspace_arrays_axis_and_gradient(data: Any) -> None:
    shape = data.draw(shapes(max_rank=2, min_side=1, max_side=3), label="shape")
    start = data.draw(array(shape), label="start")
    stop = data.draw(array(shape, 3.0, 5.0), label="stop")
    num = data.draw(st.integers(2, 6), label="num")
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)), label="axis")
    endpoint = data.draw(st.booleans(), label="endpoint")
    fn = lambda a, b: fnp.linspace(a, b, num, endpoint=endpoint, axis=axis)  # noqa: E731
    want = np.linspace(start, stop, num, endpoint=endpoint, axis=axis)
    check_result(fn(start, stop), want)
    check_traced(fn, start, stop)
    w = data.draw(array(want.shape), label="w")
    check_grad(weighted(lambda a: fn(a, stop), w), start)
    check_grad(weighted(lambda b: fn(start, b), w), stop)


# ----------------------------------------------------------------------------------------
# comparisons of whole arrays, errors


def test_isclose_allclose_array_equal() -> None:
    a = np.array([1.0, np.inf, -np.inf, np.nan, 1e-9, 1.0])
    b = np.array([1.0 + 1e-9, np.inf, np.inf, np.nan, 0.0, 1.1])
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.2}, {"atol": 0.0}):
        with quiet():
            check_result(fnp.isclose(a, b, **kw), np.isclose(a, b, **kw))
    check_result(fnp.isclose(np.arange(3), np.arange(3) + 1e-9), np.ones(3, bool))
    assert fnp.allclose(a[:2], b[:2]) is True and fnp.allclose(a, b) is False
    assert fnp.array_equal(a[:2], a[:2]) is True and fnp.array_equal(a, a) is False
    assert fnp.array_equal(a, a, equal_nan=True) is True
    assert fnp.array_equal(a, a[:2]) is False
    with pytest.raises(ConcretizationError):
        fx.make_trace(lambda v: fnp.allclose(v, v))(a)
    # inside grad the values are known, so allclose works there
    fx.grad(lambda v: fnp.sum(v) if fnp.allclose(v, v) else fnp.sum(2 * v))(a[:1])


@pytest.mark.parametrize("call", [
    lambda: fnp.add(np.ones(2), 1.0, out=np.ones(2)),
    lambda: fnp.sin(np.ones(2), np.ones(2)),
    lambda: fnp.sum(np.ones(2), out=np.ones(())),
    lambda: fnp.clip(np.ones(2), 0, 1, np.ones(2)),
    lambda: fnp.cumsum(np.ones(2), out=np.ones(2)),
])
def test_out_is_rejected_with_a_clear_message(call: Callable) -> None:
    with pytest.raises(TypeError, match="immutable"):
        call()


def test_numpy_type_errors_are_kept() -> None:
    t = np.array([True, False])
    with pytest.raises(TypeError, match="boolean"):
        fnp.subtract(t, t)
    with pytest.raises(TypeError, match="boolean"):
        fnp.negative(t)
    with pytest.raises(TypeError):
        fnp.bitwise_and(np.ones(2), np.ones(2))
    with pytest.raises(TypeError):
        fnp.invert(np.ones(2))
    with pytest.raises(TypeError, match="where="):
        fnp.sum(np.ones(2), where=np.array([True, False]))
