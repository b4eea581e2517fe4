"""float16 attention: the fused primitive computes in float32 and rounds once.

``dot_product_attention`` and its gradient primitive take float16 operands, compute in
float32 (on every backend) and round the results to float16 at the end. So, bit for bit,
their float16 results are their float32 results for the same (upcast) operands, rounded;
and ``functx.nn.scaled_dot_product_attention`` takes this fused path for float16 too
(nothing of the scores' shape kept for the backward pass), agreeing with PyTorch's float16
attention to float16's precision.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp
from functx.primitives.attention import dot_product_attention, dot_product_attention_grad

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


@st.composite
def primitive_case(draw: Callable) -> dict:
    """float16 operands of the fused primitives, with their options."""
    B, L, S = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    E, Ev = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def f16(*shape: int) -> np.ndarray:
        return rng.normal(size=shape).astype(F16)

    bias_shape = draw(st.sampled_from([(), (L, S), (B, L, S), (B, 1, S)]))
    bias = f16(*bias_shape) if bias_shape else np.zeros((), F16)
    return {"q": f16(B, L, E), "k": f16(B, S, E), "v": f16(B, S, Ev), "bias": bias,
            "ct": f16(B, L, Ev),
            "opts": {"scale": draw(st.sampled_from([1 / math.sqrt(E), 0.7])),
                     "causal": draw(st.booleans()),
                     "softcap": draw(st.sampled_from([None, 2.0]))}}


def upcast(*arrays: np.ndarray) -> list[np.ndarray]:
    return [a.astype(F32) for a in arrays]


@given(primitive_case())
def test_forward_is_the_float32_result_rounded(case: dict) -> None:
    ops = [case[n] for n in ("q", "k", "v", "bias")]
    got = dot_product_attention(*ops, **case["opts"])
    want = dot_product_attention(*upcast(*ops), **case["opts"])
    assert got.dtype == F16 and want.dtype == F32
    np.testing.assert_array_equal(got, want.astype(F16))


@pytest.mark.parametrize("bias_grad", [False, True])
@given(case=primitive_case())
def test_gradients_are_the_float32_results_rounded(case: dict, bias_grad: bool) -> None:
    ops = [case[n] for n in ("q", "k", "v", "bias", "ct")]
    got = dot_product_attention_grad(*ops, bias_grad=bias_grad, **case["opts"])
    want = dot_product_attention_grad(*upcast(*ops), bias_grad=bias_grad, **case["opts"])
    assert len(got) == len(want) == 3 + bias_grad
    for g, w in zip(got, want):
        assert g.dtype == F16 and g.shape == w.shape
        np.testing.assert_array_equal(g, w.astype(F16))


def test_float32_inputs_do_not_take_the_float16_rounding() -> None:
    """The upcast is for float16 only: float32 keeps digits that float16 cannot hold."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, 5, 4)).astype(F32) for _ in range(3))
    out = dot_product_attention(q, k, v, np.zeros((), F32), scale=0.5, causal=False,
                                softcap=None)
    assert out.dtype == F32
    assert np.any(out != out.astype(F16).astype(F32))


# -- functx.nn.scaled_dot_product_attention in float16 -----------------------------------

CASES: dict[str, dict] = {
    "plain": {},
    "causal": {"is_causal": True},
    "bool mask": {"attn_mask": np.random.default_rng(1).random((6, 7)) < 0.7},
    "float mask": {"attn_mask": np.random.default_rng(2).normal(size=(6, 7)).astype(F16)},
    "scale": {"scale": 0.3},
}


def _operands(seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=shape).astype(F16)
                 for shape in ((2, 3, 6, 8), (2, 3, 7, 8), (2, 3, 7, 5), (2, 3, 6, 5)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_float16_attention_is_the_fused_primitive(name: str) -> None:
    q, k, v, _ = _operands()
    trace = fx.make_trace(lambda q, k, v: fnn.scaled_dot_product_attention(
        q, k, v, **CASES[name]))(q, k, v)
    names = [e.prim.name for e in trace.eqns]
    assert "dot_product_attention" in names and "exp" not in names, names
    assert fnn.scaled_dot_product_attention(q, k, v, **CASES[name]).dtype == F16


@pytest.mark.parametrize("name", sorted(CASES))
def test_float16_attention_matches_torch(name: str) -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is the oracle of this test")
    q, k, v, ct = _operands(4)
    opts = CASES[name]

    def fx_loss(q: Any, k: Any, v: Any) -> Any:
        out = fnn.scaled_dot_product_attention(q, k, v, **opts)
        return fnp.sum(fnp.astype(out, np.float32) * ct.astype(F32)), out

    (_, out), grads = fx.value_and_grad(fx_loss, argnums=(0, 1, 2), has_aux=True)(q, k, v)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    t_opts = {key: torch.tensor(val) if isinstance(val, np.ndarray) else val
              for key, val in opts.items()}
    t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **t_opts)
    t_grads = torch.autograd.grad(t_out, (tq, tk, tv), torch.tensor(ct))
    for got, want in [(out, t_out)] + list(zip(grads, t_grads)):
        want = want.detach().numpy()
        assert np.asarray(got).dtype == F16 and want.dtype == F16
        scale = float(np.max(np.abs(want.astype(F32)))) or 1.0
        # float16 keeps 11 bits: a few units in the last place of the largest entry
        np.testing.assert_allclose(np.asarray(got, F32), want.astype(F32), rtol=0,
                                   atol=4e-3 * scale)
