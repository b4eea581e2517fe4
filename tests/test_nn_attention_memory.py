"""What the backward pass of functx.nn.scaled_dot_product_attention keeps.

Without dropout the attention is one fused primitive (functx/primitives/attention.py) that
keeps only its inputs for the backward pass, with or without ``recompute``: nothing of the
scores' shape, and a peak of memory in a stack of attention layers far below that of the
same attention written out in functx.numpy. With dropout it is a composite, and
``recompute=True`` (its memory-lean backward pass) gives the same values and gradients as
the default, keeps nothing of the scores' shape, and lowers the peak of memory.
"""
from __future__ import annotations

import tracemalloc
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp
import functx.random as fxr

# tests/ is on sys.path under pytest (no __init__.py): this is the module pytest itself
# imports, so its fake device is registered once, whichever test file runs first.
from test_backends import FakeArray, fake  # noqa: F401  (fake: a pytest fixture)

# ----------------------------------------------------------------------------------------
# Cases: the options of the attention, drawn or listed


@st.composite
def attention_case(draw: Callable) -> dict:
    """Shapes, operands and options of one attention call (float64, (B, H, L, S) scores)."""
    B, H = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    L, S = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    E, Ev = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    case: dict = {"q": rng.normal(size=(B, H, L, E)), "k": rng.normal(size=(B, H, S, E)),
                  "v": rng.normal(size=(B, H, S, Ev)), "opts": {}}
    opts = case["opts"]
    mask_kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    mask_shape = draw(st.sampled_from([(L, S), (H, L, S), (B, H, L, S), (B, 1, 1, S)]))
    if mask_kind == "bool":  # some rows may be fully masked (zero output there)
        opts["attn_mask"] = rng.random(mask_shape) < 0.7
    elif mask_kind == "float":
        opts["attn_mask"] = rng.normal(size=mask_shape)
    elif mask_kind == "causal":
        opts["is_causal"] = True
    if draw(st.booleans()):
        case["bias"] = rng.normal(size=draw(st.sampled_from([(L, S), (B, H, L, S)])))
    if draw(st.booleans()):
        opts["softcap"] = draw(st.sampled_from([0.5, 2.0, 30.0]))
    if draw(st.booleans()):
        opts["scale"] = draw(st.sampled_from([0.3, 1.7]))
    if draw(st.booleans()):
        opts["dropout_p"] = draw(st.sampled_from([0.2, 0.6, 1.0]))
        opts["dropout_key"] = fxr.key(draw(st.integers(0, 2**32 - 1)))
    case["ct"] = rng.normal(size=(B, H, L, Ev))
    return case


def attention_fn(case: dict, recompute: bool) -> Callable:
    """``(q, k, v[, bias]) -> attention output`` with the case's options."""
    opts = case["opts"]
    if "bias" in case:
        return lambda q, k, v, bias: fnn.scaled_dot_product_attention(
            q, k, v, bias=bias, recompute=recompute, **opts)
    return lambda q, k, v: fnn.scaled_dot_product_attention(q, k, v, recompute=recompute,
                                                            **opts)


def operands(case: dict) -> tuple:
    return (case["q"], case["k"], case["v"]) + ((case["bias"],) if "bias" in case else ())


def assert_same(got: Any, want: Any, what: str) -> None:
    """Equality to a few units in the last place (NaN equal to NaN), leaf by leaf.

    The recomputing path and the stored one can differ in the last bit since the attention
    composites are written with primitives (seen: one element of a gradient, 1.1e-16
    relative, with dropout). A different dropout mask or a lost term moves far more."""
    got_leaves, want_leaves = fx.tree.leaves(got), fx.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}[{i}]: {g.shape} vs {w.shape}"
        eps = np.finfo(w.dtype).eps if w.dtype.kind in "fc" else 0
        scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)) if eps else 0.0
        np.testing.assert_allclose(g, w, rtol=8 * eps, atol=8 * eps * scale,
                                   err_msg=f"{what}[{i}]")


# ----------------------------------------------------------------------------------------
# Same numbers


@given(attention_case())
def test_recompute_gives_the_same_values_and_gradients(case: dict) -> None:
    args = operands(case)
    outs, grads = [], []
    for recompute in (False, True):
        out, f_vjp = fx.vjp(attention_fn(case, recompute), *args)
        outs.append(out)
        grads.append(f_vjp(case["ct"]))
    assert_same(outs[1], outs[0], "output")
    assert_same(grads[1], grads[0], "gradients")
    assert all(np.all(np.isfinite(g)) for g in grads[1])
    # the eager call (no transform) agrees too
    assert_same(attention_fn(case, True)(*args), outs[0], "eager output")


def test_recompute_reproduces_the_dropout_mask_exactly() -> None:
    """Dropout changes the gradient, and the recomputation draws the same mask (the
    gradient matches the default's); another key gives another gradient."""
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(2, 2, 6, 3)), rng.normal(size=(2, 2, 6, 3)), \
        rng.normal(size=(2, 2, 6, 3))

    def grad_q(recompute: bool, seed: int | None) -> np.ndarray:
        opts = {} if seed is None else {"dropout_p": 0.5, "dropout_key": fxr.key(seed)}
        return fx.grad(lambda q: fnp.sum(fnn.scaled_dot_product_attention(
            q, k, v, is_causal=True, recompute=recompute, **opts) ** 2))(q)

    g_key1 = grad_q(True, 1)
    np.testing.assert_array_equal(g_key1, grad_q(False, 1))
    assert not np.array_equal(g_key1, grad_q(True, 2))
    assert not np.array_equal(g_key1, grad_q(True, None))


def test_recompute_composes_with_forward_mode_vmap_and_second_order() -> None:
    rng = np.random.default_rng(6)
    q, k, v = (rng.normal(size=(2, 4, 3)) for _ in range(3))
    bias = rng.normal(size=(4, 4))
    dq = rng.normal(size=q.shape)

    def f(recompute: bool) -> Callable:
        return lambda q, k, v: fnn.scaled_dot_product_attention(
            q, k, v, bias=bias, softcap=3.0, is_causal=True, recompute=recompute)

    assert_same(fx.jvp(f(True), (q, k, v), (dq, 0 * k, 0 * v)),
                fx.jvp(f(False), (q, k, v), (dq, 0 * k, 0 * v)), "jvp")
    assert_same(fx.vmap(f(True))(q, k, v), fx.vmap(f(False))(q, k, v), "vmap")

    def hvp(recompute: bool) -> Any:
        def g(q: Any) -> Any:
            return fx.grad(lambda q: fnp.sum(f(recompute)(q, k, v) ** 2))(q)
        return fx.jvp(g, (q,), (dq,))[1]

    np.testing.assert_allclose(hvp(True), hvp(False), rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("fake")
def test_recompute_on_another_device_keeps_its_constants_there() -> None:
    """On a non-CPU device (tests/test_backends.py's fake one) the checkpointed part's
    constants (the softmax's zeros and ones, the causal mask) live on that device too."""
    rng = np.random.default_rng(9)
    host = [rng.normal(size=(2, 3, 6, 4)) for _ in range(4)] + [rng.normal(size=(6, 6))]
    q, k, v, ct, bias = fx.device_put(host, "fakegpu")
    results = []
    for recompute in (False, True):
        out, f_vjp = fx.vjp(lambda q, k, v: fnn.scaled_dot_product_attention(
            q, k, v, is_causal=True, bias=bias, softcap=2.0, recompute=recompute), q, k, v)
        grads = f_vjp(ct)
        assert all(type(g) is FakeArray for g in (out, *grads))
        results.append((out, grads))
    assert_same(results[1], results[0], "on the fake device")


# ----------------------------------------------------------------------------------------
# What the backward pass keeps

B, H, L, S, E = 2, 3, 5, 7, 4
SCORES = (B, H, L, S)
_rng = np.random.default_rng(7)
_Q, _K, _V = (_rng.normal(size=(B, H, n, E)) for n in (L, S, S))
# Masks and biases of another shape than the scores', so that the arguments themselves
# (which the backward pass keeps, with or without recompute) are not of the scores' shape.
RESIDUAL_CASES = {
    "plain": {},
    "bool mask": {"attn_mask": _rng.random((L, S)) < 0.6},
    "float mask": {"attn_mask": _rng.normal(size=(H, L, S))},
    "causal": {"is_causal": True},
    "softcap and scale": {"softcap": 2.0, "scale": 0.7},
    "bias": {"bias": _rng.normal(size=(1, H, L, S))},
    "everything": {"attn_mask": _rng.random((B, 1, L, S)) < 0.6, "softcap": 5.0,
                   "bias": _rng.normal(size=(L, S))},
    "dropout": {"dropout_p": 0.3, "dropout_key": fxr.key(11), "is_causal": True},
}


def residuals(opts: dict, recompute: bool) -> list:
    def loss(q: Any, k: Any, v: Any) -> Any:
        return fnp.sum(fnn.scaled_dot_product_attention(q, k, v, recompute=recompute,
                                                        **opts) ** 2)
    return fx.saved_residuals(loss, _Q, _K, _V)


def nbytes(arrays: list) -> int:
    return sum(a.size * np.dtype(a.dtype).itemsize for a, _ in arrays)


@pytest.mark.parametrize("name", list(RESIDUAL_CASES))
def test_nothing_of_the_scores_shape_is_kept_for_the_backward_pass(name: str) -> None:
    opts = RESIDUAL_CASES[name]
    kept = residuals(opts, recompute=False)
    lean = residuals(opts, recompute=True)
    big_lean = [(a, what) for a, what in lean if tuple(a.shape) == SCORES]
    # Not even the dropout mask's PRNG counters: under a transform functx.random builds them
    # inside the trace from one small arange per axis.
    assert big_lean == [], big_lean
    if "dropout_p" not in opts:
        # The fused primitive, either way: the loss's residuals are q, k, v, the attention's
        # output (for the square) and the bias and mask folded into one bias of their
        # broadcast shape (from a constant), nothing else.
        assert [(a.shape, a.dtype, what) for a, what in kept] == \
            [(a.shape, a.dtype, what) for a, what in lean]
        assert any("output of dot_product_attention" in what for _, what in kept), kept
        extras = [opts[n] for n in ("attn_mask", "bias") if n in opts]
        folded = np.broadcast_shapes(*(np.shape(e) for e in extras)) if extras else None
        allowed = 8 * (_Q.size + _K.size + _V.size + _Q.size
                       + (int(np.prod(folded)) if folded is not None else 0))
        assert nbytes(kept) <= allowed, kept
        return
    big_kept = [(a, what) for a, what in kept if tuple(a.shape) == SCORES]
    assert len([a for a, _ in big_kept if np.dtype(a.dtype).kind == "f"]) >= 2, kept
    assert any("checkpoint(scaled_dot_product_attention)" in what for _, what in lean), lean
    assert nbytes(kept) - nbytes(lean) >= 2 * np.prod(SCORES) * 8  # two float64 scores


# ----------------------------------------------------------------------------------------
# Peak memory


def stack_loss(recompute: bool, layers: int = 4, dropout: bool = False) -> Callable:
    """A residual stack of causal self-attention layers (the case a memory-lean backward
    pass is for: only one layer's (B, H, L, S) intermediates alive at a time)."""
    def loss(x: Any) -> Any:
        for i in range(layers):
            drop = {"dropout_p": 0.2, "dropout_key": fxr.key(i)} if dropout else {}
            x = x + fnn.scaled_dot_product_attention(x, x, x, is_causal=True, softcap=5.0,
                                                     recompute=recompute, **drop)
        return fnp.sum(x * x)
    return loss


def written_out_stack_loss(layers: int = 4) -> Callable:
    """The stack of :func:`stack_loss` with the attention written out in functx.numpy."""
    def loss(x: Any) -> Any:
        L = x.shape[-2]
        causal = np.tri(L, L, dtype=bool)
        for _ in range(layers):
            s = fnp.matmul(x, fnp.swapaxes(x, -1, -2)) / np.sqrt(x.shape[-1])
            s = fnp.where(causal, 5.0 * fnp.tanh(s / 5.0), -np.inf)
            e = fnp.exp(s - fx.stop_gradient(fnp.max(s, axis=-1, keepdims=True)))
            x = x + fnp.matmul(e / fnp.sum(e, axis=-1, keepdims=True), x)
        return fnp.sum(x * x)
    return loss


def peak_bytes(f: Callable, *args: Any) -> tuple[int, Any]:
    """The peak of traced memory (above what was allocated before) while ``f`` runs."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        out = f(*args)
        return tracemalloc.get_traced_memory()[1] - before, out
    finally:
        tracemalloc.stop()


# (1, 2, 128, 128) float64 scores: 256 KiB per array
_X = np.random.default_rng(8).normal(size=(1, 2, 128, 8))
SCORES_BYTES = 2 * 128 * 128 * 8


def test_the_fused_attention_keeps_the_peak_memory_of_a_stack_low() -> None:
    grads = {"fused": fx.grad(stack_loss(False)), "fused, recompute": fx.grad(stack_loss(True)),
             "written out": fx.grad(written_out_stack_loss())}
    for g in grads.values():
        g(_X)  # memoised constants and caches are made before measuring
    peaks, results = {}, {}
    for name, g in grads.items():
        peaks[name], results[name] = peak_bytes(g, _X)
    np.testing.assert_array_equal(results["fused, recompute"], results["fused"])
    want = results["written out"]
    np.testing.assert_allclose(results["fused"], want, rtol=1e-12,
                               atol=1e-12 * np.abs(want).max())
    assert peaks["written out"] > 4 * 3 * SCORES_BYTES, peaks  # >= 3 kept per layer
    # The fused backward pass holds at most a few scores-sized arrays of one layer at a time.
    assert peaks["fused"] < 6 * SCORES_BYTES, peaks
    assert peaks["fused"] < 0.5 * peaks["written out"], peaks


def test_recompute_lowers_the_peak_memory_of_a_stack_of_attention_layers_with_dropout() -> None:
    grads = {rc: fx.grad(stack_loss(rc, dropout=True)) for rc in (False, True)}
    for g in grads.values():
        g(_X)  # memoised constants and caches are made before measuring
    peak_full, g_full = peak_bytes(grads[False], _X)
    peak_lean, g_lean = peak_bytes(grads[True], _X)
    # x is query, key and value at once: its three cotangents are summed in another order
    # when they come out of a checkpoint, so equal to rounding rather than bit for bit.
    np.testing.assert_allclose(g_lean, g_full, rtol=1e-12, atol=1e-12 * np.abs(g_full).max())
    assert peak_full > 4 * 3 * SCORES_BYTES, (peak_full, SCORES_BYTES)  # >= 3 kept per layer
    assert peak_lean < 0.7 * peak_full, (peak_lean, peak_full)
