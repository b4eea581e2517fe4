"""bfloat16 and float16 through every primitive, driven by the spec table (tests/specs).

For each spec whose arguments include floating-point arrays and each half-precision dtype
(``bfloat16``, ``float16``), the float64 example arguments are rounded to that dtype and:

a. the eager output has the abstract-eval dtype, and the low dtype wherever the float64
   spec returns float64 (a primitive keeps half precision rather than widening it);
b. the VJP's cotangents have the input dtypes;
c. the JVP's tangent has the output dtype;
d. the same three under ``fx.jit``, with values agreeing with the eager ones (within
   ``RTOL`` with the floor of e.: with the compiler on, jit's float32 kernels round
   differently from NumPy's loops, by an ulp or so, and a result that cancels to ~0 is
   then different rounding noise, e.g. float16 ``dot_product_attention_grad``'s 0-d bias
   cotangent, exactly 0 in exact arithmetic: 5.96e-08 eagerly, 1.79e-07 under jit);
e. values (output, cotangents, tangents) agree with the float64 computation at the same
   (rounded) point, within a tolerance suited to the dtype (``RTOL``) relative to each
   entry and, as an absolute floor, to the size of the terms it is computed from (sums
   and differences of rounded terms are accurate relative to the terms, not to a result
   that cancels); scaled where a spec is ill-conditioned (``LOOSER``), skipped where it
   is documented as meaningless (``NO_VALUE_CHECK``).

Specs whose primitive has no half-precision form are listed in ``NOT_HALF`` with the reason
(and checked to refuse it). The second part runs functx.numpy's ufuncs and reductions the
same way, and checks NaN/inf predicates, ``finfo`` and float32 accumulation of sums.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functx as fx
import functx.numpy as fnp
from functx import tree
from tests.specs import PrimSpec
from tests.test_primitive_rules import SPECS, Call, draw_rng, is_static

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
LOW_DTYPES = {"bfloat16": BF16, "float16": F16}

# Per-dtype relative tolerance against the float64 computation (bf16 keeps 8 significant
# bits, float16 11: a few roundings of either stay well inside these).
RTOL = {BF16: 2e-2, F16: 2e-3}

# Specs without a half-precision form (the primitive refuses those dtypes with a DTypeError,
# as JAX's does: test_not_half_specs_refuse_half_precision checks it), with the reason.
NOT_HALF: dict[str, str] = {
    "fft[rfft]": "XLA and pocketfft have no half-precision FFT (lax.fft needs float32 or "
                 "float64); functx.numpy.fft promotes to complex64 first, as jnp.fft does",
    "bitcast_convert_type[float64->uint64]": "a bit cast needs equal widths: float64 only",
    **{spec_id: "LAPACK (NumPy's and SciPy's linalg, cuSOLVER) has no half-precision routines; "
                "functx.numpy.linalg promotes half precision to float32 first, as jnp.linalg does"
       for spec_id in ("cholesky", "triangular_solve[left,lower]",
                       "triangular_solve[right,upper,T]", "triangular_solve[left,upper,H]",
                       "triangular_solve[right,lower,conj,unit]", "lu", "lu_solve[trans=0]",
                       "lu_solve[trans=1]", "lu_solve[trans=2]", "lu_inverse[trans=0]",
                       "lu_inverse[trans=1]", "lu_inverse[trans=2]", "qr", "eigh[lower]",
                       "eigh[upper]", "svd[uv]", "svd[s]", "eig", "eig[vectors]", "schur",
                       "expm")},
}

# Specs whose output dtype is a parameter (not the input's): check (a) skips the
# "low dtype in, low dtype out" part but everything else applies.
FIXED_OUT_DTYPE = {
    "convert_element_type[f64->f64]", "convert_element_type[f64->f32->f64]",
    "convert_element_type[f64->i32]", "convert_element_type[f64->bool]",
    # these build complex128 operands from two real arrays (complex64 has no half type)
    "fft[fft]", "fft[ifft]", "fft[irfft]", "real", "imag", "conj",
}

# Ill-conditioned specs: tolerance multipliers, with the reason.
LOOSER: dict[str, tuple[float, str]] = {
    "scan[fori_loop]": (4.0, "three chained steps y <- sin(y w) + i/2 multiply the derivative "
                             "by w cos(y w) each (terms up to |w|^3 = 8 while the floor counts "
                             "|w| once), and a rounded y near cos(y w) = 0 (bfloat16, x = w = "
                             "[0.55, -0.92, -1.84]: cos = -0.09) moves the last factor by 15%"),
}

# Specs whose values are not compared (only dtypes and eager/jit agreement), with the reason.
NO_VALUE_CHECK: dict[str, str] = {
    "random_gamma": "a half-precision sample is drawn with float32 uniforms, a float64 one "
                    "with float64 uniforms (as JAX): different samples by design",
    "random_gamma[log_space]": "as random_gamma",
}


HALF_SPECS = [s for s in SPECS if s.id not in NOT_HALF]
low_settings = settings(max_examples=max(3, settings.default.max_examples // 5))


def test_the_tables_name_real_specs() -> None:
    ids = {s.id for s in SPECS}
    stale = sorted((set(NOT_HALF) | FIXED_OUT_DTYPE | set(LOOSER) | set(NO_VALUE_CHECK)) - ids)
    assert stale == [], f"entries for specs that do not exist: {stale}"


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("spec", [s for s in SPECS if s.id in NOT_HALF],
                         ids=[s.id for s in SPECS if s.id in NOT_HALF])
@low_settings
@given(data=st.data())
def test_not_half_specs_refuse_half_precision(spec: PrimSpec, dtype: np.dtype,
                                              data: Any) -> None:
    low = Call(spec, _cast(data.draw(spec.args, label="args"), dtype))
    with pytest.raises(fx.DTypeError, match=r"f16|bf16|float16|bfloat16"):
        low.fn(*low.dyn_args)


def _is_f64(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic)) and x.dtype == np.float64


def _cast(args: tuple, dtype: np.dtype) -> tuple:
    """Float64 array leaves of the non-static arguments rounded to ``dtype`` (float16
    overflows to inf beyond 65504, as a cast does)."""
    with np.errstate(over="ignore"):
        return tuple(a if is_static(a) else tree.map(
            lambda x: np.asarray(x).astype(dtype) if _is_f64(x) else x, a) for a in args)


def _widen(args: tuple) -> tuple:
    """Half-precision leaves back to float64 (exactly)."""
    return tuple(a if is_static(a) else tree.map(
        lambda x: np.asarray(x, np.float64) if np.asarray(x).dtype in (BF16, F16) else x, a)
        for a in args)


def _dtypes(x: Any) -> list:
    return [leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
            for leaf in tree.leaves(x)]


def _max_abs(*xs: Any) -> float:
    """The largest finite magnitude among the float leaves of ``xs`` (0 if none)."""
    out = 0.0
    for leaf in tree.leaves(xs):
        a = np.asarray(leaf)
        if a.dtype.kind == "f" or a.dtype == BF16:
            a = np.abs(a.astype(np.float64))
            out = max(out, float(np.max(a[np.isfinite(a)], initial=0.0)))
    return out


def _close(got: Any, want: Any, rtol: float, what: str, scale: float = 0.0) -> None:
    """Leafwise ``|got - want| <= rtol * (|want| + max(max|want|, scale))``: relative to each
    entry, with an absolute floor relative to the array's largest entry or to ``scale`` (the
    size of the terms the result is summed from: sums and differences of rounded terms are
    accurate relative to the terms, not to the result, which may cancel to ~0)."""
    for g, w in zip(tree.leaves(got), tree.leaves(want)):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
        if w.size == 0:
            continue
        scale = max(scale, float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)))
        err = np.abs(g - w)
        tol = rtol * (np.abs(w) + scale)
        bad = ~((err <= tol) | (np.isnan(g) & np.isnan(w)) | (g == w))
        assert not bad.any(), (
            f"{what}: {int(bad.sum())} of {w.size} entries off, worst got {g[bad][:3]} "
            f"want {w[bad][:3]} (rtol {rtol})")


def _low_like(leaf: Any, rng: np.random.Generator, dtype: np.dtype) -> np.ndarray:
    """A random cotangent/tangent for ``leaf``: normal values of its dtype if it is a float
    (half-precision dtypes drawn exactly representable), else ones/zeros of its dtype."""
    leaf = np.asarray(leaf)
    if leaf.dtype.kind == "f" or leaf.dtype == BF16:
        return rng.standard_normal(leaf.shape).astype(leaf.dtype)
    return np.zeros(leaf.shape, leaf.dtype)


@pytest.mark.parametrize("dtype_name", sorted(LOW_DTYPES))
@pytest.mark.parametrize("spec", HALF_SPECS, ids=[s.id for s in HALF_SPECS])
@low_settings
@given(data=st.data())
def test_half_precision(spec: PrimSpec, dtype_name: str, data: Any) -> None:
    dtype = LOW_DTYPES[dtype_name]
    raw = data.draw(spec.args, label="args")
    if not any(_is_f64(leaf) for a in raw if not is_static(a) for leaf in tree.leaves(a)):
        return  # nothing floating-point to round (integer and bool specs)
    low = Call(spec, _cast(raw, dtype))
    wide = Call(spec, _widen(low.args))
    rng = draw_rng(data)
    rtol = RTOL[dtype] * LOOSER.get(spec.id, (1.0, ""))[0]
    check_values = spec.id not in NO_VALUE_CHECK
    where = f"{spec.id} in {dtype_name}"

    # a. eager output dtype vs abstract eval, and half precision kept
    out = low.fn(*low.dyn_args)
    want = wide.fn(*wide.dyn_args)
    shape = fx.eval_shape(low.fn, *low.dyn_args)
    assert _dtypes(shape) == _dtypes(out), f"{where}: eval_shape {shape} vs eager {_dtypes(out)}"
    if spec.id not in FIXED_OUT_DTYPE:
        expect = [dtype if d == np.float64 else d for d in _dtypes(want)]
        assert _dtypes(out) == expect, f"{where}: output dtypes {_dtypes(out)}, want {expect}"
    floats_in = [low.dyn_args[i] for i in range(len(low.dyn_args))]
    if check_values:
        _close(out, want, rtol, f"{where}: output", _max_abs(floats_in))

    # d. (forward) jit agrees with eager
    jout = fx.jit(low.fn)(*low.dyn_args)
    assert _dtypes(jout) == _dtypes(out), f"{where}: jit output dtypes {_dtypes(jout)}"
    _close(jout, out, RTOL[dtype], f"{where}: jit output vs eager", _max_abs(floats_in))

    if not spec.diff_argnums:
        return
    diff = low.diff

    if spec.reverse:  # (while: forward mode only)
        # b. VJP cotangent dtypes (and values against float64)
        u = tree.map(lambda o: _low_like(o, rng, dtype), out)
        cts = fx.vjp(low.fn, *low.dyn_args)[1](u)
        ct_floor = _max_abs(u) * max(1.0, _max_abs(floats_in))  # (the terms' size)
        assert _dtypes(cts) == _dtypes(low.dyn_args), (
            f"{where}: cotangent dtypes {_dtypes(cts)} for inputs {_dtypes(low.dyn_args)}")
        if check_values:
            u64 = tree.map(lambda x: np.asarray(x, np.float64) if x.dtype == dtype else x, u)
            cts64 = fx.vjp(wide.fn, *wide.dyn_args)[1](u64)
            _close([cts[i] for i in diff], [cts64[i] for i in diff], rtol, f"{where}: cotangents",
                   ct_floor)

        def pull(u: Any, *xs: Any) -> Any:
            return fx.vjp(low.fn, *xs)[1](u)

        jcts = fx.jit(pull)(u, *low.dyn_args)
        assert _dtypes(jcts) == _dtypes(cts), f"{where}: jit cotangent dtypes {_dtypes(jcts)}"
        _close([jcts[i] for i in diff], [cts[i] for i in diff], RTOL[dtype],
               f"{where}: jit cotangents vs eager", ct_floor)

    # c. JVP tangent dtype (and values against float64)
    ts = tuple(_low_like(a, rng, dtype) if i in diff
               else np.zeros(np.shape(a), np.asarray(a).dtype)
               for i, a in enumerate(low.dyn_args))
    _, t_out = fx.jvp(low.fn, low.dyn_args, ts)
    assert _dtypes(t_out) == _dtypes(out), f"{where}: tangent dtypes {_dtypes(t_out)}"
    t_floor = _max_abs(ts) * max(1.0, _max_abs(floats_in))
    if check_values:
        ts64 = _widen(ts)
        _, t64 = fx.jvp(wide.fn, wide.dyn_args, ts64)
        # The tangent sums one term per argument (J_i t_i), which may cancel: the floor is
        # the largest term, each computed alone in float64.
        terms = [fx.jvp(wide.fn, wide.dyn_args, tuple(
            t if k == i else np.zeros_like(t) for k, t in enumerate(ts64)))[1] for i in diff]
        _close(t_out, t64, rtol, f"{where}: tangent", max(_max_abs(terms), t_floor))
    _, jt = fx.jit(lambda p, t: fx.jvp(low.fn, p, t))(low.dyn_args, ts)
    assert _dtypes(jt) == _dtypes(t_out), f"{where}: jit tangent dtypes {_dtypes(jt)}"
    _close(jt, t_out, RTOL[dtype], f"{where}: jit tangent vs eager", t_floor)


# -- functx.numpy ---------------------------------------------------------------------------------
# The NumPy-style functions promote and convert before the primitives: bfloat16 and float16 in,
# the same out (where float64 gives float64), through the gradient, and NaN/inf recognised.

def _numpy_functions() -> list[tuple[str, int]]:
    """(name, number of array operands) of functx.numpy's ufuncs and reductions."""
    import inspect

    from functx.numpy import _ufuncs, _ufuncs_math

    out = []
    for name in sorted(set(_ufuncs.__all__) | set(_ufuncs_math.__all__)):
        params = inspect.signature(getattr(fnp, name)).parameters.values()
        n = sum(1 for p in params if p.kind == p.POSITIONAL_ONLY) or 1
        if n <= 2:
            out.append((name, n))
    return out + [(name, 1) for name in REDUCTIONS]


REDUCTIONS = ("sum", "mean", "prod", "cumsum", "cumprod", "var", "std", "max", "min", "ptp",
              "average", "nansum", "nanmean", "logsumexp")
NUMPY_FUNCTIONS = [(n, k) for n, k in _numpy_functions() if hasattr(fnp, n)]
# Functions whose float64 result is not float64 by definition, or whose value is the dtype's.
NUMPY_FIXED_DTYPE = {"float_power": "computes in float64 at least, as NumPy's"}
NUMPY_NO_VALUE = {"spacing": "the distance to the next value of the dtype",
                  "nextafter": "the next value of the dtype"}
# Ill-conditioned in half precision (as in JAX, which computes them the same way): tolerance
# multipliers for the gradient, with the reason.
NUMPY_LOOSER = {"sinc": (10.0, "sinc'(x) = (y cos y - sin y) / (x y) with y = pi x cancels "
                               "for small x: every operation rounds in the input's dtype")}


@pytest.mark.parametrize("dtype_name", sorted(LOW_DTYPES))
@pytest.mark.parametrize("name, nargs", NUMPY_FUNCTIONS, ids=[n for n, _ in NUMPY_FUNCTIONS])
def test_numpy_half_precision(name: str, nargs: int, dtype_name: str) -> None:
    dtype = LOW_DTYPES[dtype_name]
    f = getattr(fnp, name)
    lo = 1.1 if name == "arccosh" else 0.1
    wide = tuple(np.linspace(lo, lo + 0.8, 6).reshape(2, 3) * (1 - 0.2 * i)
                 for i in range(nargs))
    try:
        want = f(*wide)
    except (TypeError, ValueError, fx.DTypeError):
        pytest.skip("no float64 version (integer or boolean only)")
    low = tuple(a.astype(dtype) for a in wide)
    exact = tuple(a.astype(np.float64) for a in low)
    want = f(*exact)
    got = f(*low)
    where = f"functx.numpy.{name} in {dtype_name}"
    if name not in NUMPY_FIXED_DTYPE:
        expect = [dtype if d == np.float64 else d for d in _dtypes(want)]
        assert _dtypes(got) == expect, f"{where}: dtypes {_dtypes(got)}, want {expect}"
    if name not in NUMPY_NO_VALUE:
        _close(got, want, RTOL[dtype], f"{where}: value", _max_abs(exact))
    if not any(d == np.float64 for d in _dtypes(want)) or name in NUMPY_FIXED_DTYPE:
        return

    def loss(*xs: Any) -> Any:
        return sum(fnp.sum(fnp.astype(o, np.float32)) for o in tree.leaves(f(*xs))
                   if o.dtype == dtype)

    argnums = tuple(range(nargs))
    grads = fx.grad(loss, argnums=argnums)(*low)
    assert _dtypes(grads) == [dtype] * nargs, f"{where}: gradient dtypes {_dtypes(grads)}"
    jgrads = fx.jit(fx.grad(loss, argnums=argnums))(*low)
    assert _dtypes(jgrads) == [dtype] * nargs, f"{where}: jit gradient dtypes"
    _close(jgrads, grads, RTOL[dtype], f"{where}: jit gradient vs eager", _max_abs(grads))
    if name not in NUMPY_NO_VALUE:
        grads64 = fx.grad(lambda *xs: fnp.sum(f(*xs)) if not isinstance(f(*xs), tuple)
                          else sum(fnp.sum(o) for o in f(*xs)), argnums=argnums)(*exact)
        rtol = RTOL[dtype] * NUMPY_LOOSER.get(name, (1.0, ""))[0]
        _close(grads, grads64, rtol, f"{where}: gradient", _max_abs(grads64))


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bfloat16", "float16"])
def test_numpy_predicates_see_nan_and_inf_in_half_precision(dtype: np.dtype) -> None:
    x = np.array([1.0, np.nan, np.inf, -np.inf, -0.0, 3.0]).astype(dtype)
    np.testing.assert_array_equal(fnp.isnan(x), [0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(fnp.isfinite(x), [1, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(fnp.isinf(x), [0, 0, 1, 1, 0, 0])
    np.testing.assert_array_equal(fnp.isposinf(x), [0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(fnp.isneginf(x), [0, 0, 0, 1, 0, 0])
    info = fnp.finfo(dtype)
    cleaned = fnp.nan_to_num(x)
    assert cleaned.dtype == dtype
    np.testing.assert_array_equal(cleaned.astype(np.float64),
                                  [1, 0, float(info.max), float(info.min), 0, 3])
    zeros = np.zeros(6, dtype)
    np.testing.assert_array_equal(fnp.fmax(x, zeros).astype(np.float64), [1, 0, np.inf, 0, 0, 3])
    np.testing.assert_array_equal(fnp.fmin(x, zeros).astype(np.float64),
                                  [0, 0, 0, -np.inf, 0, 0])


def test_finfo_knows_bfloat16() -> None:
    info = fnp.finfo(BF16)
    assert float(info.eps) == 2.0 ** -7 and info.bits == 16
    assert float(fnp.finfo(np.ones(2, BF16)).max) == float(ml_dtypes.finfo(BF16).max)
    assert fnp.finfo(np.float32).eps == np.finfo(np.float32).eps


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bfloat16", "float16"])
def test_sums_of_half_precision_accumulate_in_float32(dtype: np.dtype) -> None:
    # bfloat16 summed in bfloat16 stalls at 32 (0.1 is below half an ulp of 32); float16's
    # cumulative sum at 256.
    x = np.full(20000, 0.1, dtype)
    exact = float(np.sum(x.astype(np.float64)))
    for what, got in [("sum", fnp.sum(x)), ("cumsum", fnp.cumsum(x)[-1]),
                      ("mean * n", fnp.multiply(fnp.mean(x), np.asarray(20000.0, dtype))),
                      ("scatter_add", fnp.at(np.zeros(1, dtype))[np.zeros(20000, int)].add(x)[0]),
                      ("grad of broadcast", fx.grad(lambda s: fnp.sum(
                          fnp.broadcast_to(s, (20000,)) * x))(np.asarray(1.0, dtype)))]:
        assert got.dtype == dtype, what
        assert abs(float(got) - exact) <= 2 * RTOL[dtype] * exact, f"{what}: {got} vs {exact}"


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("name", ["tanh", "arcsinh", "arctanh", "logaddexp", "sinc"])
def test_gradients_keep_half_precision_eagerly_and_under_jit(name: str, dtype: np.dtype) -> None:
    # bfloat16 grad(tanh) was float32 eagerly and a DTypeError under jit (a weak 1.0 in the
    # rule met bfloat16); arcsinh and arctanh returned float32.
    f = getattr(fnp, name)
    x = np.array([-0.5, 0.25, 0.75], dtype)

    def loss(v: Any) -> Any:
        y = f(v, v) if name == "logaddexp" else f(v)
        return fnp.sum(fnp.astype(y, np.float32))

    y = f(x, x) if name == "logaddexp" else f(x)
    assert y.dtype == dtype
    for g in (fx.grad(loss)(x), fx.jit(fx.grad(loss))(x)):
        assert g.dtype == dtype
        want = fx.grad(loss)(x.astype(np.float64))
        np.testing.assert_allclose(g.astype(np.float64), want, rtol=3 * RTOL[dtype], atol=0)
