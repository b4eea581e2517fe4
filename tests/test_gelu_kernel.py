"""The one-pass float32 kernels of exact GELU and its gradient on the CPU
(functx/primitives/elementwise/_gelu32.py: ``gelu32``, ``gelu_grad32``; issue 15).

References are float64 NumPy/SciPy written from the textbook formulas, independently of the
kernels: ``gelu(x) = x/2 erfc(-x/sqrt 2)`` and ``gelu'(x) = erfc(-x/sqrt 2)/2 + x phi(x)``
(``scipy.special.erfc`` is accurate relative to its value in both tails). Tolerances are
those the module docstring of ``_gelu32`` states: gelu within 0.501 ulp of the exact value
everywhere (tails and subnormals included) and correctly rounded nearly always; the
gradient within 0.501 ulp plus 1e-13 |g| (its float64 value is a difference near the zero
of ``gelu'``).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sc

import functx as fx
import functx.compiler
import functx.numpy as fnp
from functx import nn as fnn
from functx.primitives import fused
from functx.primitives.elementwise import _gelu32

SQRT2 = math.sqrt(2.0)


def _ref_gelu(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return 0.5 * x * sc.erfc(-x / SQRT2)


def _ref_grad(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    x, g = np.asarray(x, np.float64), np.asarray(g, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return g * (0.5 * sc.erfc(-x / SQRT2) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))


def _ulp(r: np.ndarray) -> np.ndarray:
    """The float32 spacing at each (float64) reference value."""
    return np.spacing(np.abs(r).astype(np.float32)).astype(np.float64)


def _points(rng: np.random.Generator) -> np.ndarray:
    """A dense grid over [-8, 8] (every polynomial interval and its switch points), a
    normal sweep, small arguments down to subnormals, and a wide log sweep."""
    tiny = np.exp(rng.uniform(np.log(1e-44), np.log(1e-3), 1 << 14))
    wide = np.exp(rng.uniform(np.log(1e-3), np.log(3e38), 1 << 14))
    return np.concatenate([
        np.linspace(-8, 8, 1 << 20), rng.standard_normal(1 << 18) * 3,
        tiny, -tiny, wide, -wide,
        np.array([4 * SQRT2, -4 * SQRT2, SQRT2, -SQRT2, 2.5 * SQRT2, -2.5 * SQRT2]),
    ]).astype(np.float32)


def test_gelu32_against_float64_reference() -> None:
    x = _points(np.random.default_rng(0))
    got = fused.gelu(x, approximate="none")
    assert got.dtype == np.float32 and got.shape == x.shape
    want = _ref_gelu(x)
    ulps = np.abs(np.asarray(got, np.float64) - want) / _ulp(want)
    assert ulps.max() <= 0.501, f"{ulps.max()} ulp from exact GELU at x = {x[ulps.argmax()]}"
    assert np.mean(ulps <= 0.5001) > 0.99999   # correctly rounded but for a few per million


def test_gelu_grad32_against_float64_reference() -> None:
    rng = np.random.default_rng(1)
    x = _points(rng)
    g = (rng.standard_normal(x.size) * np.exp(rng.uniform(-3, 3, x.size))).astype(np.float32)
    got = fused.gelu_grad(x, g, approximate="none")
    assert got.dtype == np.float32 and got.shape == x.shape
    want = _ref_grad(x, g)
    err = np.abs(np.asarray(got, np.float64) - want)
    assert np.all(err <= 0.501 * _ulp(want) + 1e-13 * np.abs(g))
    assert np.mean(err <= 0.5001 * _ulp(want)) > 0.9999


def test_special_values() -> None:
    """NaN, infinities, signed zeros, subnormals, the largest floats, the far tails: NaN
    where functx's float64 implementation gives NaN (including gelu(-inf) = -inf * 0 and
    the gradient at +-inf); elsewhere the exact value within 0.501 ulp (the float64
    implementation, whose 1 + erf cancels, gives 0 in the negative tail)."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40,
                  3e38, -3e38, 5.6, -5.6, 5.7, -5.7, 10.0, -10.0, 40.0, -40.0, -13.0,
                  -14.0], np.float32)
    g = np.ones_like(x)
    with np.errstate(invalid="ignore", over="ignore"):
        nan = np.isnan(fused.gelu(x.astype(np.float64), approximate="none"))
        nan_d = np.isnan(fused.gelu_grad(x.astype(np.float64), g.astype(np.float64),
                                         approximate="none"))
        want, want_d = _ref_gelu(x), _ref_grad(x, g)
    got = np.asarray(fused.gelu(x, approximate="none"), np.float64)
    got_d = np.asarray(fused.gelu_grad(x, g, approximate="none"), np.float64)
    assert list(np.flatnonzero(nan)) == [0, 2] and list(np.flatnonzero(nan_d)) == [0, 1, 2]
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(np.isnan(got_d), nan_d)
    fin = np.isfinite(x)
    assert np.all(np.abs(got[fin] - want[fin]) <= 0.501 * _ulp(want[fin]))
    assert np.all(np.abs(got_d[fin] - want_d[fin]) <= 0.501 * _ulp(want_d[fin]))
    assert got[1] == np.inf and got[9] == np.float32(3e38) and got[16] < 0 and got[19] < 0
    assert np.signbit(got[4]) and not np.signbit(got[3])   # gelu(+-0) = +-0
    assert got[8] < 0 < got[7]
    assert got_d[3] == got_d[4] == 0.5 and got_d[9] == 1.0 and got_d[10] == 0.0


def test_numba_off_fallback_agrees(monkeypatch) -> None:
    """With FUNCTX_NUMBA=0 the NumPy version of the same formulas runs: the compiled loops
    contract multiply-adds into FMAs, so the float64 values may differ in their last bits
    and the float32 results by at most 1 ulp (nearly always equal)."""
    rng = np.random.default_rng(2)
    for n in (9, _gelu32.PARALLEL_MIN_SIZE):
        x = (rng.standard_normal(n) * 3).astype(np.float32)
        x[:9] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -5.66, -3.95, 7.0]
        g = rng.standard_normal(n).astype(np.float32)
        compiled = fused.gelu(x, approximate="none"), fused.gelu_grad(x, g, approximate="none")
        assert _gelu32.compiled(False, "gelu") is not None
        with monkeypatch.context() as m:
            m.setenv("FUNCTX_NUMBA", "0")
            assert _gelu32.compiled(False, "gelu") is None
            plain = fused.gelu(x, approximate="none"), fused.gelu_grad(x, g, approximate="none")
        for c, p in zip(compiled, plain):
            c, p = np.asarray(c), np.asarray(p)
            assert c.dtype == p.dtype == np.float32
            np.testing.assert_array_equal(np.isnan(c), np.isnan(p))
            ok = ~np.isnan(c)
            steps = np.abs(c[ok].view(np.int32).astype(np.int64)
                           - p[ok].view(np.int32).astype(np.int64))
            assert steps.max() <= 1 and np.mean(steps == 0) > 0.999


def test_parallel_and_serial_loops_give_the_same_bits() -> None:
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(1 << 16) * 3).astype(np.float32)
    g = rng.standard_normal(x.size).astype(np.float32)
    for name, args in (("gelu", (x,)), ("gelu_grad", (x, g))):
        a, b = np.empty_like(x), np.empty_like(x)
        _gelu32.compiled(False, name)(*args, a)
        _gelu32.compiled(True, name)(*args, b)
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), name


def test_shapes_layouts_and_small_dtypes() -> None:
    """Any shape (0-d, non-contiguous views); float16 and bfloat16 through the float32
    kernel, rounded once more, within an ulp of their dtype."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 8)) * 3).astype(np.float32)
    view = x[:, ::2].T
    np.testing.assert_array_equal(fused.gelu(view, approximate="none"),
                                  np.asarray(fused.gelu(view.copy(), approximate="none")))
    np.testing.assert_array_equal(fused.gelu_grad(view, view, approximate="none"),
                                  fused.gelu_grad(view.copy(), view.copy(), approximate="none"))
    zero_d = fused.gelu(np.float32(1.5), approximate="none")
    assert np.shape(zero_d) == () and np.asarray(zero_d).dtype == np.float32
    np.testing.assert_allclose(float(zero_d), _ref_gelu(1.5), rtol=1.2e-7)
    x16 = x.astype(np.float16)
    got = np.asarray(fused.gelu(x16, approximate="none"))
    assert got.dtype == np.float16
    want = _ref_gelu(x16)
    assert np.all(np.abs(got - want) <= np.spacing(np.abs(want).astype(np.float16)) + 1e-7)


def test_eager_and_jit_agree() -> None:
    """jit's compiled kernels evaluate gelu from its scalar rule (their own erf): the same
    values within float32 rounding. Also the gradient of sum(gelu(x) * g) through grad."""
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((64, 48)) * 3).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)

    def loss(v):
        return fnp.sum(fnn.gelu(v, approximate="none") * g)

    old = functx.compiler.set_jit_compiler("numba")
    try:
        jit_out = np.asarray(fx.jit(lambda v: fnn.gelu(v, approximate="none"))(x))
        jit_grad = np.asarray(fx.jit(fx.grad(loss))(x))
    finally:
        functx.compiler.set_jit_compiler(old)
    eager_out = np.asarray(fnn.gelu(x, approximate="none"))
    eager_grad = np.asarray(fx.grad(loss)(x))
    np.testing.assert_allclose(jit_out, eager_out, rtol=5e-7, atol=1e-7)
    np.testing.assert_allclose(jit_grad, eager_grad, rtol=5e-7, atol=1e-7)
    np.testing.assert_allclose(eager_grad, _ref_grad(x, g), rtol=2e-7, atol=1e-7)


@pytest.mark.parametrize("name", ["gelu", "gelu_grad"])
def test_derivative_of_the_float32_kernel_matches_finite_differences(name: str) -> None:
    """gelu_grad32 is the derivative of gelu32: central differences of the float64
    reference at float32 points agree (a check that the kernel computes gelu', not just
    something close to the reference's formula); and gelu_grad's own VJP in float32."""
    x = np.linspace(-5, 5, 101).astype(np.float32)
    h = 1e-4
    fd = (_ref_gelu(x.astype(np.float64) + h) - _ref_gelu(x.astype(np.float64) - h)) / (2 * h)
    if name == "gelu":
        got = np.asarray(fused.gelu_grad(x, np.ones_like(x), approximate="none"))
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)
    else:
        d2 = np.asarray(fx.grad(lambda v: fnp.sum(fused.gelu_grad(v, np.ones_like(x),
                                                                  approximate="none")))(x))
        g1 = lambda v: _ref_grad(v, np.ones_like(v))  # noqa: E731
        fd2 = (g1(x.astype(np.float64) + h) - g1(x.astype(np.float64) - h)) / (2 * h)
        np.testing.assert_allclose(d2, fd2, rtol=1e-5, atol=1e-6)
