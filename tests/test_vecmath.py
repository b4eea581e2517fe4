"""functx.compiler._vecmath: the float32 sin, cos, tanh, exp, expm1, log, log1p that the
CPU code generator calls instead of libm.

Accuracy against the float64 NumPy function rounded to float32 (correctly rounded but
where the exact value lies within ~1e-8 ulp of a float32 rounding boundary), over random
bit patterns (the whole float32 range), every float32 of some binades, dense sweeps of the
usual ranges and the special values; a few huge sin/cos arguments against mpmath. Then the
generated kernels: they call these functions for float32 (not for float64), and jit agrees
with eager functx on gradient chains of them, serial and parallel.
"""
from __future__ import annotations

import math
import os
import warnings
from typing import Any

import numpy as np
import pytest

import functx as fx
import functx.compiler as compiler
import functx.numpy as fnp
from functx.compiler import _vecmath, cpu

numba = pytest.importorskip("numba")

REFERENCE = {"sin": np.sin, "cos": np.cos, "tanh": np.tanh, "exp": np.exp,
             "expm1": np.expm1, "log": np.log, "log1p": np.log1p}
MAX_ULP = {name: 1 for name in REFERENCE}  # the module docstring's bounds


@pytest.fixture(autouse=True)
def compiler_on():
    old = compiler.set_jit_compiler("numba")
    yield
    compiler.set_jit_compiler(old)


_loops: dict = {}


def apply(name: str, x: np.ndarray, contract: bool = False, module: Any = _vecmath
          ) -> np.ndarray:
    """``module``'s function ``name`` (``_vecmath``'s, or ``_vecmath32``'s) on every element
    of float32 ``x`` (a Numba loop; ``contract``: with fused multiply-adds allowed, as in the
    generated kernels)."""
    loop = _loops.get((module.__name__, name, contract))
    if loop is None:
        (fn,) = module.numba_helpers(module.FUNCTIONS[name])

        def run(x: Any, out: Any) -> None:
            for i in range(x.size):
                out[i] = fn(x[i])
        loop = _loops[module.__name__, name, contract] = numba.njit(
            error_model="numpy", fastmath={"contract"} if contract else False)(run)
    x = np.ascontiguousarray(x, np.float32).ravel()
    out = np.empty_like(x)
    loop(x, out)
    return out


def reference(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return REFERENCE[name](x.astype(np.float64)).astype(np.float32)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 steps (0 between -0 and +0; both NaN: 0; one NaN: huge)."""
    def ordered(v: np.ndarray) -> np.ndarray:
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    d = np.abs(ordered(a) - ordered(b))
    na, nb = np.isnan(a), np.isnan(b)
    return np.where(na & nb, 0, np.where(na | nb, 1 << 40, d))


def sample(seed: int = 17, specials: np.ndarray | None = None) -> np.ndarray:
    """2M random bit patterns, every third float32 of three binades, dense sweeps,
    subnormals and ``specials`` (default :data:`SPECIALS`)."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 32, 1 << 21, dtype=np.uint64).astype(np.uint32)
    binades = [(np.arange(1 << 23, dtype=np.uint32)[::3] + np.uint32(e << 23))
               for e in (126, 127, 133)]  # [0.5, 1), [1, 2), [64, 128): every third float
    dense = [np.linspace(-a, a, 1 << 19, dtype=np.float32) for a in (1e-3, 1.0, 12.0, 110.0)]
    subnormal = np.arange(1, 1 << 23, 97, dtype=np.uint32)
    return np.concatenate([bits.view(np.float32), *(b.view(np.float32) for b in binades),
                           *dense, subnormal.view(np.float32), -subnormal.view(np.float32),
                           SPECIALS if specials is None else specials])


SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38,
                     1.1754944e-38, 3.4028235e38, -3.4028235e38, 1.0, -1.0, 0.5, 2.0,
                     88.72283, 88.72284, 89.0, -87.33655, -103.97207, -103.97208, -104.0,
                     9.0, -9.0, 20.0, 1e4, 1e6, 16777216.0, 1.5707964, 3.1415927, 1e30],
                    np.float32)


@pytest.fixture(scope="module")
def points() -> np.ndarray:
    return sample()


@pytest.mark.parametrize("contract", [False, True], ids=["mul-add", "fma"])
@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_within_the_documented_ulps_of_the_rounded_float64_function(
        name: str, contract: bool, points: np.ndarray) -> None:
    got, want = apply(name, points, contract), reference(name, points)
    d = ulp_distance(got, want)
    worst = int(np.argmax(d))
    assert d[worst] <= MAX_ULP[name], (name, points[worst], got[worst], want[worst])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    # the sign of zero and of infinity as NumPy's
    z = (want == 0) | np.isinf(want)
    assert np.array_equal(np.signbit(got[z]), np.signbit(want[z]))


@pytest.mark.parametrize("name,cases", [
    ("sin", [(0.0, 0.0), (-0.0, -0.0), (np.inf, np.nan), (-np.inf, np.nan), (1e-45, 1e-45)]),
    ("cos", [(0.0, 1.0), (-0.0, 1.0), (np.inf, np.nan), (-np.inf, np.nan)]),
    ("tanh", [(np.inf, 1.0), (-np.inf, -1.0), (-0.0, -0.0), (10.0, 1.0), (-3e38, -1.0),
              (1e-45, 1e-45)]),
    ("exp", [(-np.inf, 0.0), (np.inf, np.inf), (88.72284, np.inf), (-104.0, 0.0),
             (0.0, 1.0), (-0.0, 1.0)]),
    ("expm1", [(-np.inf, -1.0), (np.inf, np.inf), (-0.0, -0.0), (-20.0, -1.0),
               (1e-45, 1e-45)]),
    ("log", [(0.0, -np.inf), (-0.0, -np.inf), (-1.0, np.nan), (-np.inf, np.nan),
             (np.inf, np.inf), (1.0, 0.0), (1e-45, -103.27893)]),
    ("log1p", [(-1.0, -np.inf), (-2.0, np.nan), (np.inf, np.inf), (-0.0, -0.0),
               (1e-45, 1e-45), (0.0, 0.0)]),
])
def test_special_values(name: str, cases: list) -> None:
    x = np.array([c[0] for c in cases], np.float32)
    want = np.array([c[1] for c in cases], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no floating-point warnings either
        got = apply(name, x)
    assert np.array_equal(got, want, equal_nan=True), (x, got)
    assert np.array_equal(apply(name, x, contract=True), want, equal_nan=True)
    num = ~np.isnan(want)  # (a NaN's sign is not specified)
    assert np.array_equal(np.signbit(got[num]), np.signbit(want[num]))


def test_exp_overflows_and_underflows_where_float32_does() -> None:
    # every float32 around the thresholds: inf from the first x whose exp rounds above
    # FLT_MAX, 0 from the first whose exp rounds to 0, subnormals in between
    for lo in (88.72, -103.98):
        x = np.nextafter(np.float32(lo), np.float32(np.inf)) + np.arange(4000, dtype=np.float32) \
            * np.float32(2.0 ** -16)
        got, want = apply("exp", x), reference("exp", x)
        assert np.array_equal(np.isinf(got), np.isinf(want))
        assert np.array_equal(got == 0, want == 0)
        assert ulp_distance(got, want).max() <= 1


def test_huge_sin_cos_arguments_against_mpmath() -> None:
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(1, 2, 40) * 2.0 ** rng.integers(20, 128, 40),
                        [16367173 * 2.0 ** 72, 3.4028235e38, 6.6e4, 1.6e7]]).astype(np.float32)
    for name, fn in (("sin", mpmath.sin), ("cos", mpmath.cos)):
        want = np.array([float(fn(mpmath.mpf(float(v)))) for v in x]).astype(np.float32)
        assert ulp_distance(apply(name, x), want).max() <= 1, name


def test_plain_python_versions_agree_with_the_compiled_ones() -> None:
    x = np.concatenate([np.linspace(-30, 30, 101, dtype=np.float32), SPECIALS[2:]])
    for name, helper in _vecmath.FUNCTIONS.items():
        fn = getattr(_vecmath, helper)
        with np.errstate(all="ignore"):
            plain = np.array([fn(np.float32(v)) for v in x], np.float32)
        assert np.array_equal(plain, apply(name, x), equal_nan=True), name


def test_reduction_constants_are_two_over_pi() -> None:
    (d0, d1, d2, d3) = _vecmath._reduction_constants()[0]
    assert d0 + d1 == pytest.approx(2 / math.pi, rel=1e-16)
    bits = _vecmath._two_over_pi_bits(64)
    assert bits == int.from_bytes(bytes.fromhex("A2F9836E4E441529"), "big")  # fdlibm ipio2


# -- the generated kernels -------------------------------------------------------------------

def ew_chain(n: int):
    ops = (fnp.sin, lambda v: v * 0.9, fnp.tanh, lambda v: v + 0.1, fnp.exp, lambda v: v * 0.5,
           fnp.cos, fnp.log1p, fnp.expm1, lambda v: fnp.log(v * v + 1.0))

    def f(x):
        for i in range(n):
            x = ops[i % len(ops)](x)
        return fnp.sum(x)
    return f


@pytest.fixture
def fuse_everything(monkeypatch):
    """No function left to NumPy, whatever the machine's thread count."""
    monkeypatch.setattr(cpu, "NUMPY_SPEEDUP", {})


def test_float32_kernels_call_vecmath_and_float64_kernels_libm(fuse_everything) -> None:
    f = lambda x: fnp.exp(fnp.sin(x) * 0.5) + fnp.tanh(x) + fnp.log1p(fnp.cos(x) ** 2)  # noqa
    text32 = fx.jit(f).lower(np.ones(8, np.float32)).as_text()
    for name in ("sin32(", "exp32(", "tanh32(", "cos32(", "log1p32(", "numba_helpers("):
        assert name in text32, text32
    assert "np.sin(" not in text32 and f"vecmath {cpu.float32_math().VERSION}" in text32
    text64 = fx.jit(f).lower(np.ones(8)).as_text()
    assert "np.sin(" in text64 and "sin32(" not in text64


# a serial kernel; parallel (outlined: two interleaved streams) of even and odd sizes
@pytest.mark.parametrize("shape", [(300,), (640, 512), (511, 515)])
def test_jit_grad_of_float32_chains_agrees_with_eager(fuse_everything, shape: tuple) -> None:
    x = (np.random.default_rng(0).standard_normal(shape) * 2).astype(np.float32)
    f = ew_chain(12)
    low = fx.jit(fx.grad(f)).lower(x)
    assert any("sin32(" in k.source for k in low.kernels)
    if x.size >= cpu.PARALLEL_MIN:
        body = [k for k in low.kernels if "def kernel_body(" in k.source]
        assert body and all(k.parallel for k in body)
        if x.size % 2:  # the two halves share an element: never in place
            assert all(not k.inplace for k in body)
    got, want = fx.jit(fx.grad(f))(x), fx.grad(f)(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    value = fx.jit(f)(x)
    np.testing.assert_allclose(value, f(x), rtol=1e-5)


def test_parallel_kernel_with_several_outputs(fuse_everything) -> None:
    x = np.random.default_rng(1).standard_normal((600, 500)).astype(np.float32)

    def f(x):
        a = fnp.exp(x * 0.5)
        b = fnp.sin(a)
        return a, b * 2.0, fnp.tanh(b) + x
    got, want = fx.jit(f)(x), f(x)
    # a = exp(..) up to 10: 1 ulp of it (1e-6) moves sin(a) by as much
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-7, atol=4e-6)


def test_vecmath_kernels_are_cached_on_disk(fuse_everything) -> None:
    x = np.linspace(-2, 2, 11, dtype=np.float32)
    low = fx.jit(lambda x: fnp.tanh(fnp.exp(x) * 0.25)).lower(x).compile()
    (k,) = low.kernels
    assert "tanh32(" in k.source
    cached = os.listdir(os.path.join(cpu.cache_dir(), "__pycache__"))
    assert any(name.startswith(k.key) and name.endswith(".nbi") for name in cached)


def test_numpy_faster_reads_the_table() -> None:
    f32 = np.dtype(np.float32)
    slow = cpu.numpy_faster(f32)
    n = cpu.threads()
    assert slow == {f for f, r in cpu.NUMPY_SPEEDUP[f32].items() if r > n}
