"""The float32 flash attention kernels (functx/primitives/cuda/_flash32.py) against the
float64 CPU result of functx's own attention on the same float32 inputs, on a GPU: the
output and every cotangent, causal and not, L != S, lengths that are not multiples of the
64-row tile (1, 17, 100, 300, 1000), head dims 32/64/128, several batch shapes, the 0-d bias
and its (zero) cotangent, non-contiguous operands; each error is also held to twice the old
float32 path's error on the same case (``attention.FLASH32 = False``, GEMMs around row
kernels), and the flash32 path is checked to be the one taken. Then ``jit(grad)`` of
``functx.nn.scaled_dot_product_attention(..., is_causal=True)`` in float32 against eager.
These skip without a GPU (tests/test_cuda.py's ``IS_CUDA``); the last two tests (the
sources and ``supported``) run anywhere.

Errors are relative to the reference's largest magnitude. A cotangent that is zero
mathematically (dq and dk with one visible key per query: S = 1, or L = 1 causal) has no
scale of its own; its error is taken relative to the largest of the three cotangents (the
kernels form ``dS = P (dP - rowsum(dO * O))`` as FlashAttention does, whose rounding the old
path, ``rowsum(P * dP)``, avoids exactly when P is 1).
"""
from __future__ import annotations

import numpy as np
import pytest

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp
from functx.compiler import cuda_graph
from functx.primitives import attention as A
from functx.primitives.cuda import _flash32
from functx.primitives.cuda import _flash_layout as layout
from functx.primitives.cuda import attention as cuda_attention

from tests.test_cuda import IS_CUDA, to_dev

gpu = pytest.mark.skipif(not IS_CUDA, reason="needs CuPy on a GPU")

F32 = np.dtype(np.float32)
TOL = 1e-5  # error relative to the reference's largest magnitude
RATIO = 3.0  # the flash error may be at most 3x the old float32 path's (cuBLAS) ...
FLOOR = 2e-6  # ... or this (about 16 float32 roundings: both errors are rounding noise;
# a 1000-key row measured 1.79e-6 against the old path's 0.89e-6 on an H100)

# (batch, L, S, E)
SHAPES = [((2, 3), 64, 64, 64), ((2,), 17, 100, 64), ((), 1, 300, 128),
          ((3,), 300, 1, 64), ((1, 2), 100, 17, 128), ((2,), 130, 130, 32),
          ((4,), 128, 192, 64), ((), 1000, 1000, 64), ((1,), 300, 1000, 32),
          ((2,), 1000, 17, 128), ((2, 2), 1, 1, 32)]
RNG = np.random.default_rng(20)


def host(x) -> np.ndarray:
    import cupy

    assert isinstance(x, cupy.ndarray), type(x)
    return cupy.asnumpy(x).astype(np.float64)


def max_abs(x) -> float:
    return float(np.max(np.abs(np.asarray(x, np.float64)), initial=0.0))


def rel_err(got, want, scale: float | None = None) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = scale or max_abs(want) or 1.0
    return max_abs(got - want) / scale


def grad_scales(want) -> list[float]:
    """Each cotangent's error scale: its largest magnitude, or the largest of all three
    where it is zero mathematically (see the module docstring)."""
    top = max(max_abs(w) for w in want[:3])
    return [max_abs(w) if max_abs(w) > 1e-9 * top else top for w in want[:3]]


def operands(batch, L, S, E, n=3):
    """Float32 q, k, v (and ct) and their float64 values."""
    shapes = [batch + (L, E), batch + (S, E), batch + (S, E), batch + (L, E)][:n]
    x = [RNG.standard_normal(s).astype(F32) for s in shapes]
    return x, [a.astype(np.float64) for a in x]


@pytest.fixture
def counted(monkeypatch):
    """Counts the calls of the float32 flash forward and backward."""
    calls = {"fwd": 0, "bwd": 0}
    fwd, bwd = _flash32.flash_attention, _flash32.flash_attention_grad

    def count_fwd(*a, **kw):
        calls["fwd"] += 1
        return fwd(*a, **kw)

    def count_bwd(*a, **kw):
        calls["bwd"] += 1
        return bwd(*a, **kw)

    monkeypatch.setattr(_flash32, "flash_attention", count_fwd)
    monkeypatch.setattr(_flash32, "flash_attention_grad", count_bwd)
    return calls


def old_path(monkeypatch, fn):
    monkeypatch.setattr(cuda_attention, "FLASH32", False)
    try:
        return fn()
    finally:
        monkeypatch.setattr(cuda_attention, "FLASH32", True)


@gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{b}-{L}-{S}-{E}" for b, L, S, E in SHAPES])
def test_forward_matches_float64(shape, causal, counted, monkeypatch) -> None:
    batch, L, S, E = shape
    (q, k, v), (q64, k64, v64) = operands(batch, L, S, E)
    scale = 1.0 / np.sqrt(E)
    want = np.asarray(A.dot_product_attention(q64, k64, v64, scale=scale, causal=causal))
    dq, dk, dv = to_dev((q, k, v))
    got = A.dot_product_attention(dq, dk, dv, scale=scale, causal=causal)
    assert counted["fwd"] == 1
    assert got.dtype == F32 and got.shape == want.shape
    err = rel_err(host(got), want)
    old = old_path(monkeypatch, lambda: A.dot_product_attention(dq, dk, dv, scale=scale,
                                                                causal=causal))
    assert counted["fwd"] == 1  # the switch forced the old path
    old_err = rel_err(host(old), want)
    assert err <= TOL, (err, old_err)
    assert err <= max(RATIO * old_err, FLOOR), (err, old_err)


@gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{b}-{L}-{S}-{E}" for b, L, S, E in SHAPES])
def test_gradients_match_float64(shape, causal, counted, monkeypatch) -> None:
    batch, L, S, E = shape
    (q, k, v, g), (q64, k64, v64, g64) = operands(batch, L, S, E, n=4)
    scale = 1.0 / np.sqrt(E)
    want = A.dot_product_attention_grad(q64, k64, v64, None, g64, scale=scale,
                                        causal=causal)
    dev = to_dev((q, k, v, g))
    got = A.dot_product_attention_grad(*dev[:3], None, dev[3], scale=scale, causal=causal)
    assert counted["bwd"] == 1
    old = old_path(monkeypatch, lambda: A.dot_product_attention_grad(
        *dev[:3], None, dev[3], scale=scale, causal=causal))
    assert counted["bwd"] == 1
    for name, x, o, w, sc in zip(("dq", "dk", "dv"), got, old, want, grad_scales(want)):
        assert x.dtype == F32 and x.shape == np.shape(w), name
        err, old_err = rel_err(host(x), w, sc), rel_err(host(o), w, sc)
        assert err <= TOL, (name, err, old_err)
        assert err <= max(RATIO * old_err, FLOOR), (name, err, old_err)


@gpu
def test_zero_d_bias_and_strided_operands(counted) -> None:
    (q, k, v, g), (q64, k64, v64, g64) = operands((2,), 70, 90, 64, n=4)
    for bval, expect_zero in ((3.5, False), (-np.inf, True)):
        b = np.asarray(bval, dtype=F32)
        want = np.asarray(A.dot_product_attention(q64, k64, v64, np.asarray(bval),
                                                  scale=0.2, causal=True))
        got = host(A.dot_product_attention(*to_dev((q, k, v, b)), scale=0.2, causal=True))
        if expect_zero:  # every logit -inf: fully masked rows give zeros
            assert np.all(got == 0) and np.all(want == 0)
            grads = A.dot_product_attention_grad(*to_dev((q, k, v, b, g)), scale=0.2,
                                                 causal=True)
            assert all(np.all(host(x) == 0) for x in grads)
        else:
            assert rel_err(got, want) <= TOL
    # two forwards, and the one dot_product_attention_grad makes for its `out`
    assert counted["fwd"] == 3 and counted["bwd"] == 1
    # Operands that are transposed views (read through their strides by the kernels).
    qt, kt, vt = to_dev(tuple(np.ascontiguousarray(np.swapaxes(a, 0, 1)) for a in (q, k, v)))
    got = A.dot_product_attention(*(a.swapaxes(0, 1) for a in (qt, kt, vt)), scale=0.2,
                                  causal=False)
    want = np.asarray(A.dot_product_attention(q64, k64, v64, scale=0.2, causal=False))
    assert counted["fwd"] == 4 and rel_err(host(got), want) <= TOL


@gpu
def test_zero_d_bias_gradient_is_zero(counted) -> None:
    (q, k, v, g), (q64, k64, v64, g64) = operands((2, 2), 80, 50, 64, n=4)
    b = np.asarray(-1.5, dtype=F32)
    want = A.dot_product_attention_grad(q64, k64, v64, np.asarray(-1.5), g64, scale=0.125,
                                        causal=False, bias_grad=True)
    got = A.dot_product_attention_grad(*to_dev((q, k, v, b, g)), scale=0.125, causal=False,
                                       bias_grad=True)
    assert counted["bwd"] == 1 and len(got) == 4
    assert got[3].shape == () and got[3].dtype == F32 and host(got[3]) == 0
    assert abs(float(want[3])) < 1e-9 * float(np.abs(g64).sum())  # 0 mathematically
    for x, w in zip(got[:3], want[:3]):
        assert rel_err(host(x), w) <= TOL


@gpu
def test_declines_what_it_does_not_support(counted) -> None:
    (q, k, v), _ = operands((2,), 20, 30, 64)
    dq, dk, dv = to_dev((q, k, v))
    A.dot_product_attention(dq, dk, dv, scale=0.1, causal=True, softcap=5.0)
    A.dot_product_attention(dq, dk, dv, to_dev(np.zeros((20, 30), F32)), scale=0.1)
    A.dot_product_attention(*to_dev(tuple(a.astype(np.float64) for a in (q, k, v))),
                            scale=0.1)
    A.dot_product_attention(dq, dk, to_dev(np.ones((2, 30, 32), F32)), scale=0.1)  # Ev != E
    (q, k, v), _ = operands((2,), 20, 30, 48)
    A.dot_product_attention(*to_dev((q, k, v)), scale=0.1)
    assert counted["fwd"] == 0


def laid_out(x: np.ndarray, how: str):
    """A CuPy array equal to ``x`` (``lead + (rows, E)``, at least 3-d) in the memory
    layout ``how``: "contig"; "trans" (a ``(..., rows, H, E)`` buffer seen as
    ``(..., H, rows, E)``); "slice" (every other head of a ``(..., rows, 2H, E)`` buffer);
    "misaligned" (rows of ``E + 1`` elements from the second: the contiguous fallback)."""
    import cupy

    if how == "contig":
        return to_dev(x)
    if how == "trans":
        return to_dev(np.ascontiguousarray(x.swapaxes(-3, -2))).swapaxes(-3, -2)
    *lead, h, r, e = x.shape
    if how == "slice":
        view = cupy.zeros(tuple(lead) + (r, 2 * h, e), x.dtype).swapaxes(-3, -2)[..., ::2, :, :]
    elif how == "misaligned":
        view = cupy.zeros(x.shape[:-1] + (e + 1,), x.dtype)[..., 1:]
    else:
        raise ValueError(how)
    view[...] = to_dev(x)
    return view


# (name, layouts of q, k, v and the cotangent, batch, L, S, E)
LAYOUTS = [("trans", ("trans",) * 4, (2, 4), 100, 130, 64),
           ("slice", ("slice",) * 4, (2, 3), 64, 64, 32),
           ("mixed", ("trans", "contig", "contig", "trans"), (2, 4), 70, 200, 128),
           ("misaligned", ("misaligned",) * 4, (2, 3), 65, 65, 64),
           ("lead3", ("trans",) * 4, (2, 2, 3), 100, 17, 64)]


def check_strided_against_contiguous(mod, dt, case, causal, monkeypatch, dq_tol) -> None:
    """``mod``'s kernels on operands laid out as ``case`` says against the same kernels on
    contiguous copies: out, dk, dv bitwise, dq (float32 atomics) within ``dq_tol``; the
    outputs of the logical shapes, in their inputs' memory order; copies only where the
    layout is misaligned. (Shared with tests/test_cuda_flash.py.)"""
    import cupy

    name, hows, batch, L, S, E = case
    shapes = [batch + (L, E), batch + (S, E), batch + (S, E), batch + (L, E)]
    x = [RNG.standard_normal(s).astype(np.float32).astype(dt) for s in shapes]
    dev = [laid_out(a, h) for a, h in zip(x, hows)]
    for a, want in zip(dev, x):
        assert a.shape == want.shape and np.array_equal(cupy.asnumpy(a), want)
    b, sc = cupy.zeros((), dt), 1 / np.sqrt(E)
    copies = []
    real = cupy.ascontiguousarray

    def counting(a, *args, **kw):
        copies.append(a.shape)
        return real(a, *args, **kw)

    monkeypatch.setattr(cupy, "ascontiguousarray", counting)
    try:
        got = [mod.flash_attention(cupy, *dev[:3], b, scale=sc, causal=causal)]
        got += list(mod.flash_attention_grad(cupy, *dev[:3], b, dev[3], scale=sc,
                                             causal=causal, bias_grad=False))
    finally:
        monkeypatch.setattr(cupy, "ascontiguousarray", real)
    assert bool(copies) == (name == "misaligned"), copies
    ref = [to_dev(a) for a in x]
    want = [mod.flash_attention(cupy, *ref[:3], b, scale=sc, causal=causal)]
    want += list(mod.flash_attention_grad(cupy, *ref[:3], b, ref[3], scale=sc,
                                          causal=causal, bias_grad=False))
    for i, (g, w, like) in enumerate(zip(got, want, [dev[0], dev[0], dev[1], dev[2]])):
        assert g.shape == like.shape and g.dtype == np.dtype(dt)
        if i == 1:  # dq
            assert rel_err(host(g), host(w)) <= dq_tol
        else:
            assert np.array_equal(cupy.asnumpy(g), cupy.asnumpy(w))
        if name != "misaligned":  # the same memory order as the matching input
            order = np.argsort([-abs(t) for t in like.strides[:-1]], kind="stable")
            got_order = np.argsort([-abs(t) for t in g.strides[:-1]], kind="stable")
            assert order.tolist() == got_order.tolist(), (g.strides, like.strides)
        if name in ("trans", "lead3") or (name == "mixed" and i < 2):  # back: free
            assert g.swapaxes(-3, -2).flags.c_contiguous


@gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", LAYOUTS, ids=[c[0] for c in LAYOUTS])
def test_strided_operands_match_contiguous(case, causal, monkeypatch) -> None:
    check_strided_against_contiguous(_flash32, F32, case, causal, monkeypatch, 1e-6)


def check_gradients_from_the_saved_output(mod, dt, causal, tol) -> None:
    """``mod.flash_attention_grad`` given the forward output (``out=``: its statistics pass
    reads it and skips the ``P V`` products) against the same function computing the output
    again: dk and dv bitwise for float32 (the output read is the one computed), all within
    ``tol`` of the largest entry otherwise (a half output is rounded). (Shared with
    tests/test_cuda_flash.py.)"""
    import cupy

    for batch, L, S, E in [((2, 3), 100, 130, 64), ((3,), 64, 64, 32), ((2,), 70, 200, 128)]:
        shapes = [batch + (L, E), batch + (S, E), batch + (S, E), batch + (L, E)]
        q, k, v, g = (to_dev(RNG.standard_normal(sh).astype(np.float32).astype(dt))
                      for sh in shapes)
        b, sc = cupy.zeros((), dt), 1 / np.sqrt(E)
        out = mod.flash_attention(cupy, q, k, v, b, scale=sc, causal=causal)
        got = mod.flash_attention_grad(cupy, q, k, v, b, g, scale=sc, causal=causal,
                                       bias_grad=False, out=out)
        want = mod.flash_attention_grad(cupy, q, k, v, b, g, scale=sc, causal=causal,
                                        bias_grad=False)
        for i, (x, w) in enumerate(zip(got, want)):
            assert x.shape == w.shape and x.dtype == w.dtype
            if i > 0 and np.dtype(dt) == F32:
                assert np.array_equal(cupy.asnumpy(x), cupy.asnumpy(w)), (batch, i)
            else:
                assert rel_err(host(x), host(w)) <= tol, (batch, i)


@gpu
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_from_the_saved_output_match(causal) -> None:
    check_gradients_from_the_saved_output(_flash32, F32, causal, 1e-6)


@pytest.fixture
def compiler_on():
    import functx.compiler as compiler

    old = compiler.set_jit_compiler("numba")  # (graphs are the compiler's: see conftest.py)
    yield
    compiler.set_jit_compiler(old)


@gpu
@pytest.mark.usefixtures("compiler_on")
def test_jit_grad_of_causal_sdpa_in_float32_matches_eager(counted) -> None:
    (q, k, v, w), (q64, k64, v64, w64) = operands((2, 4), 200, 200, 64, n=4)

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
            assert x.dtype == F32
            assert rel_err(host(x), host(e)) <= 1e-6  # (dq's float32 atomics: any order)
            assert rel_err(host(x), w) <= TOL


@gpu
@pytest.mark.usefixtures("compiler_on")
def test_jit_grad_of_sdpa_on_transposed_views_matches_eager(counted) -> None:
    # q, k, v arrive as (B, L, H, E) -> (B, H, L, E) views, as in a transformer block.
    shapes = [(2, 150, 4, 64)] * 3 + [(2, 4, 150, 64)]
    x = [RNG.standard_normal(s).astype(F32) for s in shapes]
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
            assert g.dtype == F32 and g.shape == (2, 150, 4, 64)
            assert rel_err(host(g), host(e)) <= 1e-6  # (dq's float32 atomics: any order)
            assert rel_err(host(g), w) <= TOL
    for e, w in zip(eager, want):
        assert rel_err(host(e), w) <= TOL


# -- without a GPU ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape, strides, want", [
    ((2, 3, 10, 64), (1920, 640, 64, 1), (1, 640, 0, 64)),  # contiguous: one level
    ((2, 4, 10, 64), (2560, 64, 256, 1), (4, 2560, 64, 256)),  # (B, L, H, E) transposed
    ((2, 4, 10, 64), (5120, 128, 512, 1), (4, 5120, 128, 512)),  # every other head of 8
    ((2, 3, 4, 10, 64), (7680, 2560, 64, 256, 1), (4, 2560, 64, 256)),  # (2, 3) merged
    ((1, 4, 1, 10, 64), (99, 640, 7, 64, 1), (1, 640, 0, 64)),  # size-1 dims: any stride
    ((3, 1, 64), (64, 12345, 1), (1, 64, 0, 0)),  # one row: any row stride
    ((10, 64), (64, 1), (1, 0, 0, 64)),  # no batch dims
    ((2, 4, 10, 64), (0, 0, 64, 1), (1, 0, 0, 64)),  # broadcast batch dims
    ((2, 4, 10, 64), (-2560, 64, 256, 1), (4, -2560, 64, 256)),  # negative strides
    ((2, 3, 4, 10, 8), (1000, 8, 100, 800, 1), None),  # three levels
    ((2, 10, 64), (640, 64, 2), None),  # last axis not contiguous
])
def test_batch_layout(shape, strides, want) -> None:
    assert layout.batch_layout(shape, strides) == want
    if want is None:
        return
    # The described offsets are the strided ones of every (batch entry, row, column).
    nb, s1, s2, rs = want
    idx = np.indices(shape).reshape(len(shape), -1)
    n = np.ravel_multi_index(tuple(idx[:-2]), shape[:-2]) if len(shape) > 2 else 0 * idx[0]
    flat = (n // nb) * s1 + (n % nb) * s2 + idx[-2] * rs + idx[-1]
    direct = sum(i * (st if d > 1 else 0) for i, st, d in zip(idx, strides, shape))
    assert np.array_equal(flat, direct)


def test_with_nb_and_host_operands_on_numpy() -> None:
    assert layout.with_nb((1, 512, 0, 8), 4) == (2048, 512, 8)
    assert layout.with_nb((4, 100, 10, 8), 4) == (100, 10, 8)
    assert layout.with_nb((4, 100, 10, 8), 3) is None
    base = np.arange(2 * 10 * 4 * 64, dtype=F32).reshape(2, 10, 4, 64)
    qt = base.swapaxes(1, 2)  # (2, 4, 10, 64) view
    k = np.ascontiguousarray(qt) + 1
    odd = np.zeros((2, 4, 10, 65), F32)[..., 1:]  # misaligned rows: copied
    odd[...] = 2
    ops, nb = layout.operands(np, {"q": qt, "k": k, "v": odd})
    assert nb == 4 and ops["q"][0] is qt and ops["k"][0] is k and ops["v"][0] is not odd
    assert ops["v"][0].flags.c_contiguous and np.array_equal(ops["v"][0], odd)
    for a, (arr, (s1, s2, rs)) in zip((qt, k, odd), ops.values()):
        # The kernels' addressing, emulated: batch entry n1 * nb + n2, row r.
        emu = np.lib.stride_tricks.as_strided(arr, (2, nb, 10, 64),
                                              (4 * s1, 4 * s2, 4 * rs, 4))
        assert np.array_equal(emu, a.reshape(2, nb, 10, 64))
    out, (s1, s2, rs) = layout.output_like(np, qt, F32, nb)
    assert out.shape == qt.shape and out.swapaxes(1, 2).flags.c_contiguous
    assert (s1, s2, rs) == (2560, 64, 256)
    dk, st = layout.output_like(np, k, F32, nb, zero=True)
    assert dk.flags.c_contiguous and not dk.any() and st == (2560, 640, 64)
    # Two levels of another size than the first operand's: copied.
    q3 = np.zeros((2, 10, 2, 2, 64), F32).transpose(0, 2, 3, 1, 4)  # levels 2 x 4
    k3 = np.zeros((2, 2, 10, 2, 64), F32).transpose(0, 1, 3, 2, 4)  # levels 4 x 2
    assert layout.batch_layout(q3.shape, [t // 4 for t in q3.strides])[0] == 4
    assert layout.batch_layout(k3.shape, [t // 4 for t in k3.strides])[0] == 2
    ops, nb = layout.operands(np, {"q": q3, "k": k3})
    assert nb == 4 and ops["q"][0] is q3 and ops["k"][0] is not k3
    assert ops["k"][0].flags.c_contiguous and ops["k"][1] == (4 * 640, 640, 64)


# -- without a GPU ---------------------------------------------------------------------------

def test_source_names_every_kernel_and_fits_shared_memory() -> None:
    src = _flash32.source()
    for e in _flash32.HEAD_DIMS:
        for kind in ("fwd", "bwd"):
            assert f"functx_flash32_{kind}_e{e}(" in src
    assert "@" not in src  # every placeholder substituted
    for token in ("NEG_INF", "CTYPE", "STYPE", "LOAD_STORE"):  # raw_function's: they
        assert token not in src  # would be replaced inside the source
    for e in _flash32.HEAD_DIMS:  # 2 blocks per SM fit in an H100's 227 KiB (1 KiB each
        # reserved) for E <= 64, 1 at E = 128 (as the launch bounds assume)
        blocks = 2 if e <= 64 else 1
        assert f"__launch_bounds__(256, {blocks}) functx_flash32_fwd_e{e}(" in src
        assert f"__launch_bounds__(256, {blocks}) functx_flash32_bwd_e{e}(" in src
        for nbytes in (_flash32.fwd_shared_bytes(e), _flash32.bwd_shared_bytes(e)):
            assert blocks * (nbytes + 1024) <= 227 * 1024


def test_supported_takes_float32_only() -> None:
    q = np.zeros((2, 5, 64), F32)
    b = np.zeros((), F32)
    assert not _flash32.supported(np, q, q, q, b, None)  # not CuPy: the fake device too

    class FakeCupy:
        __name__ = "cupy"

    xp = FakeCupy()
    assert _flash32.supported(xp, q, q, q, b, None)
    assert not _flash32.supported(xp, q, q, q, b, 5.0)
    assert not _flash32.supported(xp, q, q, q, np.zeros((5, 5), F32), None)
    for dt in (np.float64, np.float16):
        assert not _flash32.supported(xp, q.astype(dt), q.astype(dt), q.astype(dt),
                                      b.astype(dt), None)
    assert not _flash32.supported(xp, q, q, np.zeros((2, 5, 32), F32), b, None)
    q48 = np.zeros((2, 5, 48), F32)
    assert not _flash32.supported(xp, q48, q48, q48, b, None)
    q32 = np.zeros((3, 1, 7, 32), F32)
    assert _flash32.supported(xp, q32, q32, q32, b, None)
    assert not _flash32.supported(xp, q32[:, :, :0], q32, q32, b, None)  # no queries
