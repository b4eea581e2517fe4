"""The flash attention kernels (functx/primitives/cuda/_flash.py) against the float64 CPU
result of functx's own attention on the same (rounded) float16/bfloat16 inputs, on a GPU:
the output and every cotangent, causal and not, L != S, lengths that are not multiples of
the 64-row tile, head dims 32/64/128, several batch shapes, the 0-d bias and its (zero)
cotangent; each error is also held to a few times the old float32 path's error
(``attention.FLASH = False``), and the flash path is checked to be the one taken. Then
``jit(grad)`` of ``functx.nn.scaled_dot_product_attention(..., is_causal=True)`` in
bfloat16 against eager. Skips without a GPU (tests/test_cuda.py's ``IS_CUDA``).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp
from functx.compiler import cuda_graph
from functx.primitives import attention as A
from functx.primitives.cuda import _flash
from functx.primitives.cuda import attention as cuda_attention

from tests.test_cuda import IS_CUDA, to_dev
from tests.test_cuda_flash32 import (
    LAYOUTS,
    check_gradients_from_the_saved_output,
    check_strided_against_contiguous,
)

gpu = pytest.mark.skipif(not IS_CUDA, reason="needs CuPy on a GPU")

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
# Tolerances on the error relative to the reference's largest magnitude.
TOL = {BF16: 2e-2, F16: 5e-3}
# The flash error may exceed the old float32 path's (rounded once) by this factor, plus a
# floor of about one rounding of the dtype (P and dS are rounded on the tensor cores).
RATIO = 3.0
FLOOR = {BF16: 2.0 ** -8, F16: 2.0 ** -11}

# (batch, L, S, E)
SHAPES = [((2, 3), 64, 64, 64), ((2,), 17, 100, 64), ((), 1, 300, 128),
          ((3,), 300, 1, 64), ((1, 2), 100, 17, 128), ((2,), 130, 130, 32),
          ((4,), 128, 192, 64)]
RNG = np.random.default_rng(20)


def host(x) -> np.ndarray:
    import cupy

    assert isinstance(x, cupy.ndarray), type(x)
    return cupy.asnumpy(x).astype(np.float64)


def rel_err(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = float(np.max(np.abs(want), initial=0.0)) or 1.0
    return float(np.max(np.abs(got - want), initial=0.0)) / scale


def operands(batch, L, S, E, dt, n=3):
    """Rounded q, k, v (and ct) in ``dt`` and their float64 values."""
    shapes = [batch + (L, E), batch + (S, E), batch + (S, E), batch + (L, E)][:n]
    low = [RNG.standard_normal(s).astype(np.float32).astype(dt) for s in shapes]
    return low, [a.astype(np.float64) for a in low]


@pytest.fixture
def counted(monkeypatch):
    """Counts the calls of the flash forward and backward."""
    calls = {"fwd": 0, "bwd": 0}
    fwd = _flash.flash_attention

    def count_fwd(*a, **kw):
        calls["fwd"] += 1
        return fwd(*a, **kw)

    monkeypatch.setattr(_flash, "flash_attention", count_fwd)
    if hasattr(_flash, "flash_attention_grad"):
        bwd = _flash.flash_attention_grad

        def count_bwd(*a, **kw):
            calls["bwd"] += 1
            return bwd(*a, **kw)

        monkeypatch.setattr(_flash, "flash_attention_grad", count_bwd)
    return calls


def old_path(monkeypatch, fn):
    monkeypatch.setattr(cuda_attention, "FLASH", False)
    try:
        return fn()
    finally:
        monkeypatch.setattr(cuda_attention, "FLASH", True)


@gpu
@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{b}-{L}-{S}-{E}" for b, L, S, E in SHAPES])
def test_forward_matches_float64(shape, causal, dt, counted, monkeypatch) -> None:
    batch, L, S, E = shape
    (q, k, v), (q64, k64, v64) = operands(batch, L, S, E, dt)
    scale = 1.0 / np.sqrt(E)
    want = np.asarray(A.dot_product_attention(q64, k64, v64, scale=scale, causal=causal))
    dq, dk, dv = to_dev((q, k, v))
    got = A.dot_product_attention(dq, dk, dv, scale=scale, causal=causal)
    assert counted["fwd"] == 1
    assert got.dtype == dt and got.shape == want.shape
    err = rel_err(host(got), want)
    old = old_path(monkeypatch, lambda: A.dot_product_attention(dq, dk, dv, scale=scale,
                                                                causal=causal))
    assert counted["fwd"] == 1  # the switch forced the old path
    old_err = rel_err(host(old), want)
    assert err <= TOL[dt], (err, old_err)
    assert err <= max(RATIO * old_err, FLOOR[dt]), (err, old_err)


@gpu
@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
def test_forward_zero_d_bias(dt, counted) -> None:
    (q, k, v), (q64, k64, v64) = operands((2,), 70, 90, 64, dt)
    for bval, expect_zero in ((3.5, False), (-np.inf, True)):
        b = np.asarray(bval, dtype=dt)
        want = np.asarray(A.dot_product_attention(q64, k64, v64, np.asarray(bval),
                                                  scale=0.2, causal=True))
        got = host(A.dot_product_attention(*to_dev((q, k, v, b)), scale=0.2, causal=True))
        if expect_zero:  # every logit -inf: fully masked rows give zeros
            assert np.all(got == 0) and np.all(want == 0)
        else:
            assert rel_err(got, want) <= TOL[dt]
    assert counted["fwd"] == 2


@gpu
def test_declines_what_it_does_not_support(counted) -> None:
    (q, k, v), _ = operands((2,), 20, 30, 64, BF16)
    dq, dk, dv = to_dev((q, k, v))
    A.dot_product_attention(dq, dk, dv, scale=0.1, causal=True, softcap=5.0)
    A.dot_product_attention(dq, dk, dv, to_dev(np.zeros((20, 30), BF16)), scale=0.1)
    A.dot_product_attention(*to_dev(tuple(a.astype(np.float32) for a in (q, k, v))),
                            scale=0.1)
    (q, k, v), _ = operands((2,), 20, 30, 48, BF16)
    A.dot_product_attention(*to_dev((q, k, v)), scale=0.1)
    assert counted["fwd"] == 0


@gpu
@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{b}-{L}-{S}-{E}" for b, L, S, E in SHAPES])
def test_gradients_match_float64(shape, causal, dt, counted, monkeypatch) -> None:
    batch, L, S, E = shape
    (q, k, v, g), (q64, k64, v64, g64) = operands(batch, L, S, E, dt, n=4)
    scale = 1.0 / np.sqrt(E)
    want = A.dot_product_attention_grad(q64, k64, v64, None, g64, scale=scale,
                                        causal=causal)
    dev = to_dev((q, k, v, g))
    got = A.dot_product_attention_grad(*dev[:3], None, dev[3], scale=scale, causal=causal)
    assert counted["bwd"] == 1
    old = old_path(monkeypatch, lambda: A.dot_product_attention_grad(
        *dev[:3], None, dev[3], scale=scale, causal=causal))
    assert counted["bwd"] == 1
    for name, x, o, w in zip(("dq", "dk", "dv"), got, old, want):
        assert x.dtype == dt and x.shape == np.shape(w), name
        err, old_err = rel_err(host(x), w), rel_err(host(o), w)
        assert err <= TOL[dt], (name, err, old_err)
        assert err <= max(RATIO * old_err, FLOOR[dt]), (name, err, old_err)


@gpu
@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
def test_zero_d_bias_gradient_is_zero(dt, counted) -> None:
    (q, k, v, g), (q64, k64, v64, g64) = operands((2, 2), 80, 50, 64, dt, n=4)
    b = np.asarray(-1.5, dtype=dt)
    want = A.dot_product_attention_grad(q64, k64, v64, np.asarray(-1.5), g64, scale=0.125,
                                        causal=False, bias_grad=True)
    got = A.dot_product_attention_grad(*to_dev((q, k, v, b, g)), scale=0.125, causal=False,
                                       bias_grad=True)
    assert counted["bwd"] == 1 and len(got) == 4
    assert got[3].shape == () and got[3].dtype == dt and host(got[3]) == 0
    assert abs(float(want[3])) < 1e-9 * float(np.abs(g64).sum())  # 0 mathematically
    for x, w in zip(got[:3], want[:3]):
        assert rel_err(host(x), w) <= TOL[dt]


@gpu
@pytest.mark.usefixtures("compiler_on")
def test_jit_grad_of_causal_sdpa_in_bfloat16_matches_eager(counted) -> None:
    (q, k, v, w), (q64, k64, v64, w64) = operands((2, 4), 200, 200, 64, BF16, n=4)

    def loss(q, k, v, w):
        return fnp.sum(fnn.scaled_dot_product_attention(q, k, v, is_causal=True) * w)

    args = to_dev((q, k, v, w))
    eager = fx.grad(loss, argnums=(0, 1, 2))(*args)
    assert counted["bwd"] >= 1
    want = A.dot_product_attention_grad(q64, k64, v64, None, w64, scale=1 / 8.0, causal=True)
    step = fx.jit(fx.grad(loss, argnums=(0, 1, 2)))
    before = dict(cuda_graph.STATS)
    outs = [step(*args) for _ in range(3)]  # eager or capture, then replays
    assert cuda_graph.STATS["failed"] == before["failed"]
    for got in outs:
        for x, e, w in zip(got, eager, want):
            assert x.dtype == BF16
            assert rel_err(host(x), host(e)) <= 1e-2  # (dq's float32 atomics: any order)
            assert rel_err(host(x), w) <= TOL[BF16]


@gpu
@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", LAYOUTS, ids=[c[0] for c in LAYOUTS])
def test_strided_operands_match_contiguous(case, causal, dt, monkeypatch) -> None:
    # dq: float32 atomics (any order), then rounded: within one unit in the last place.
    check_strided_against_contiguous(_flash, dt, case, causal, monkeypatch, 2 * FLOOR[dt])


@gpu
@pytest.mark.parametrize("dt", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_from_the_saved_output_match(causal, dt) -> None:
    # rowsum(g * out) from the rounded output instead of the float32 one: a few units in
    # the last place of the dtype
    check_gradients_from_the_saved_output(_flash, dt, causal, 4 * FLOOR[dt])


@gpu
@pytest.mark.usefixtures("compiler_on")
def test_jit_grad_of_sdpa_on_transposed_views_in_bfloat16_matches_eager(counted) -> None:
    # q, k, v arrive as (B, L, H, E) -> (B, H, L, E) views, as in a transformer block.
    shapes = [(2, 150, 4, 64)] * 3 + [(2, 4, 150, 64)]
    x = [RNG.standard_normal(s).astype(np.float32).astype(BF16) for s in shapes]
    x64 = [a.astype(np.float64) for a in x]

    def loss(qt, kt, vt, w):
        q, k, v = (fnp.transpose(a, (0, 2, 1, 3)) for a in (qt, kt, vt))
        return fnp.sum(fnn.scaled_dot_product_attention(q, k, v, is_causal=True) * w)

    args = to_dev(tuple(x))
    eager = fx.grad(loss, argnums=(0, 1, 2))(*args)
    assert counted["bwd"] >= 1
    want = A.dot_product_attention_grad(*(a.transpose(0, 2, 1, 3) for a in x64[:3]), None,
                                        x64[3], scale=1 / 8.0, causal=True)
    want = [w.transpose(0, 2, 1, 3) for w in want]
    step = fx.jit(fx.grad(loss, argnums=(0, 1, 2)))
    before = dict(cuda_graph.STATS)
    outs = [step(*args) for _ in range(3)]  # eager or capture, then replays
    assert cuda_graph.STATS["failed"] == before["failed"]
    for got in outs:
        for g, e, w in zip(got, eager, want):
            assert g.dtype == BF16 and g.shape == (2, 150, 4, 64)
            assert rel_err(host(g), host(e)) <= 1e-2  # (dq's float32 atomics: any order)
            assert rel_err(host(g), w) <= TOL[BF16]


@pytest.fixture
def compiler_on():
    import functx.compiler as compiler

    old = compiler.set_jit_compiler("numba")  # (graphs are the compiler's: see conftest.py)
    yield
    compiler.set_jit_compiler(old)


# -- without a GPU ---------------------------------------------------------------------------

def test_sources_name_every_kernel_and_fit_shared_memory() -> None:
    for dt, tag in ((BF16, "bf16"), (F16, "f16")):
        src = _flash.source(dt)
        assert ("#define FX_BF16 1" in src) == (tag == "bf16")
        for e in _flash.HEAD_DIMS:
            for kind in ("fwd", "bwd"):
                assert f"functx_flash_{kind}_e{e}_{tag}(" in src
        assert f"functx_flash_cast_{tag}(" in src
        assert "@" not in src  # every placeholder substituted
        for token in ("NEG_INF", "CTYPE", "STYPE", "LOAD_STORE"):  # raw_function's: they
            assert token not in src  # would be replaced inside the source
    for e in _flash.HEAD_DIMS:  # 3 blocks per SM fit in an H100's 227 KiB (1 KiB each
        # reserved) for the forward; the backward at E = 128 fits one
        assert 3 * (_flash._fwd_shared_bytes(e) + 1024) <= 227 * 1024
        assert (3 if e <= 64 else 1) * (_flash._bwd_shared_bytes(e) + 1024) <= 227 * 1024


def test_declines_numpy_and_other_dtypes() -> None:
    q = np.zeros((2, 5, 64), BF16)
    b = np.zeros((), BF16)
    assert not _flash.supported(np, q, q, q, b, None)  # not CuPy: the fake device too

    class FakeCupy:
        __name__ = "cupy"

    xp = FakeCupy()
    assert _flash.supported(xp, q, q, q, b, None)
    assert not _flash.supported(xp, q, q, q, b, 5.0)
    assert not _flash.supported(xp, q, q, q, np.zeros((5, 5), BF16), None)
    assert not _flash.supported(xp, q.astype(np.float32), q, q, b, None)
    assert not _flash.supported(xp, q, q, np.zeros((2, 5, 32), BF16), b, None)
    q48 = np.zeros((2, 5, 48), F16)
    assert not _flash.supported(xp, q48, q48, q48, b, None)
    assert _flash.supported(xp, q.astype(F16), q.astype(F16), q.astype(F16), b, None)
