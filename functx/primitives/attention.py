"""Fused scaled dot-product attention: ``dot_product_attention`` and its gradient.

Written as composites, attention takes a dozen primitives (two matmuls, the scaling, the
soft-cap, the mask, a stable softmax) whose VJPs keep several ``(..., L, S)`` arrays from
the forward pass to the backward pass. As two primitives it takes, on CUDA, cuBLAS batched
GEMMs around ONE fused row kernel per pass (``functx.primitives.cuda.attention``), and the
backward pass keeps nothing of the scores' size: only the inputs and the output
(FlashAttention's memory, without even the per-row log-sum-exp: the backward pass
recomputes each row's maximum and sum on chip, which costs no pass over memory).

* ``dot_product_attention(q, k, v, bias, *, scale, causal, softcap)`` is
  ``softmax(s) @ v`` over the last axis with the logits
  ``s = cap(scale * q @ k^T) + bias``, ``cap(x) = softcap * tanh(x / softcap)`` (when
  ``softcap`` is not None), and, with ``causal``, ``s[..., i, j] = -inf`` for ``j > i``
  (the top-left aligned ``tril`` of the ``(L, S)`` logits; computed from the indices, no
  mask array). The softmax is safe: a row whose logits are all ``-inf`` (fully masked)
  gives zero probabilities, hence a zero output row (and zero gradients), as in PyTorch.
  Shapes: ``q (..., L, E)``, ``k (..., S, E)``, ``v (..., S, Ev)`` with the SAME leading
  (batch) dimensions ``...``, all of one float dtype; ``bias`` of that dtype and of any shape
  that broadcasts to the logits' ``(..., L, S)`` without growing it (a 0-d 0 when there is
  none; a boolean mask is passed as a bias of ``0`` and ``-inf``). Output ``(..., L, Ev)``.
* ``dot_product_attention_grad(q, k, v, bias, ct, out, *, scale, causal, softcap,
  bias_grad)`` returns ``(dq, dk, dv)``, and ``dbias`` (summed to ``bias``'s shape) too
  when ``bias_grad``: with ``p`` the probabilities, ``dv = p^T @ ct``, ``dp = ct @ v^T``,
  ``ds = p * (dp - rowsum(p * dp))`` (``dbias = ds``), ``ds *= 1 - tanh^2`` with a
  soft-cap, ``dq = scale * ds @ k``, ``dk = scale * ds^T @ q``. ``out`` is the forward
  pass's output (``dot_product_attention`` of the same operands; the VJP saves it):
  ``rowsum(p * dp) = rowsum(ct * out)``, so CUDA's flash kernels read it instead of
  computing the output again (their statistics pass then skips the ``p @ v`` products).
  The other implementations compute ``rowsum(p * dp)`` themselves and ignore it.

Rules: the VJP of ``dot_product_attention`` is ``dot_product_attention_grad`` (only
``dbias`` is skipped where the bias needs no cotangent: its sum over broadcast axes costs a
pass). Its JVP, and the VJP and JVP of ``dot_product_attention_grad``, are written in
composite functx operations (the same formulas; they build ``(..., L, S)`` arrays), so every
order of derivative exists and only second and higher orders (and forward mode) pay for the
composite. Batching: the leading dimensions are batch dimensions, so a batch axis among
them passes through; otherwise it moves to the front of ``q``, ``k``, ``v`` (and ``ct``),
unbatched ones are broadcast, and a batched bias gets unit axes to broadcast against them.

The CPU implementation is the same algorithm in NumPy. On both backends float16 and
bfloat16 operands compute in float32 and the results are rounded once, at the
end (as PyTorch's fused float16 attention accumulates in float32); float32 and float64
compute in their own dtype. The composite rules do the same (``in_float32``). Exception:
CUDA's flash kernels (float16/bfloat16 without soft-cap or bias array, see
functx/primitives/cuda/_flash.py) also round the probabilities and ``ds`` to the dtype for
their tensor-core products, as FlashAttention does (float32 accumulation throughout).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import add_tangents, batch_size, broadcast_to_shape, to_front
from functx.primitives._precision import in_float32
from functx.primitives._util import (
    fmt,
    in_compute_dtype,
    is_real_float,
    ndim_of,
    same_dtypes,
    shape_of,
)
from functx.primitives.cuda import attention as _cuda
from functx.primitives.linalg import dot_general
from functx.primitives.misc import stop_gradient
from functx.registry import Primitive
from functx.tracing import bind

__all__ = ["dot_product_attention", "dot_product_attention_grad", "safe_softmax",
           "dot_product_attention_p", "dot_product_attention_grad_p"]


# -- shape rules -------------------------------------------------------------------------------

def _check_params(name: str, scale: float, causal: bool, softcap: float | None) -> None:
    if not isinstance(scale, float) or not math.isfinite(scale):
        raise ValueError(f"{name}: scale must be a finite Python float, not {scale!r}.")
    if not isinstance(causal, bool):
        raise ValueError(f"{name}: causal must be a bool, not {causal!r}.")
    if softcap is not None and not (isinstance(softcap, float) and softcap > 0
                                    and math.isfinite(softcap)):
        raise ValueError(f"{name}: softcap must be None or a positive finite float, not "
                         f"{softcap!r}.")


def _check_operands(name: str, q: AbstractArray, k: AbstractArray, v: AbstractArray,
                    b: AbstractArray, ct: AbstractArray | None = None) -> tuple[int, ...]:
    """Checks the operands; returns the logits' shape ``batch + (L, S)``."""
    avals = (q, k, v, b) + (() if ct is None else (ct,))
    for a in avals:
        if not is_real_float(a.dtype):
            raise DTypeError(f"{name} needs real floating-point operands but got "
                             f"{fmt(avals)}. Convert them with x.astype(np.float32) first.")
    same_dtypes(name, *avals)
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ShapeError(f"{name} needs query, key and value of one rank >= 2 "
                         f"((..., L, E), (..., S, E), (..., S, Ev)) but got {fmt((q, k, v))}. "
                         "functx.nn.scaled_dot_product_attention broadcasts them first.")
    batch = tuple(q.shape[:-2])
    if tuple(k.shape[:-2]) != batch or tuple(v.shape[:-2]) != batch:
        raise ShapeError(f"{name} needs query, key and value with the same leading (batch) "
                         f"dimensions but got {fmt((q, k, v))}; broadcast them first.")
    if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
        raise ShapeError(f"{name}: key must be (..., S, E) for query (..., L, E) and value "
                         f"(..., S, Ev), but got {fmt((q, k, v))}.")
    scores = batch + (q.shape[-2], k.shape[-2])
    bs = tuple(b.shape)
    if len(bs) > len(scores) or any(d not in (1, s) for d, s in zip(bs[::-1], scores[::-1])):
        raise ShapeError(f"{name}: the bias {b} must broadcast to the logits' shape {scores} "
                         "(batch + (L, S)) without growing it.")
    if ct is not None and tuple(ct.shape) != batch + (q.shape[-2], v.shape[-1]):
        raise ShapeError(f"{name}: the cotangent {ct} must have the output's shape "
                         f"{batch + (q.shape[-2], v.shape[-1])}.")
    return scores


def _attention_aval(q, k, v, b, *, scale, causal, softcap):
    _check_params("dot_product_attention", scale, causal, softcap)
    _check_operands("dot_product_attention", q, k, v, b)
    return AbstractArray(tuple(q.shape[:-1]) + (v.shape[-1],), np.dtype(q.dtype))


def _attention_grad_aval(q, k, v, b, ct, out, *, scale, causal, softcap, bias_grad):
    _check_params("dot_product_attention_grad", scale, causal, softcap)
    _check_operands("dot_product_attention_grad", q, k, v, b, ct)
    if tuple(out.shape) != tuple(ct.shape) or np.dtype(out.dtype) != np.dtype(ct.dtype):
        raise ShapeError(f"dot_product_attention_grad: the forward output {out} must have "
                         f"the cotangent's shape and dtype {ct}.")
    dt = np.dtype(q.dtype)
    outs = tuple(AbstractArray(tuple(a.shape), dt) for a in (q, k, v))
    return outs + ((AbstractArray(tuple(b.shape), dt),) if bias_grad else ())


# -- implementations (NumPy, and CuPy where functx.primitives.cuda has no kernel) -------------

# The arrays of the logits' shape are made once and then updated in place (each is fresh),
# so that a call holds at most three of them at a time.

def _logits(xp: Any, q: Any, k: Any, b: Any, scale: float, causal: bool,
            softcap: float | None, keep_tanh: bool) -> tuple[Any, Any]:
    """The masked logits, and (with a soft-cap and ``keep_tanh``) ``tanh(scale * q k^T /
    softcap)``, else None."""
    dt = np.dtype(q.dtype)
    s = xp.matmul(q, xp.swapaxes(k, -1, -2))
    s *= dt.type(scale)
    t = None
    if softcap is not None:
        s /= dt.type(softcap)
        xp.tanh(s, out=s)
        if keep_tanh:
            t = s.copy()
        s *= dt.type(softcap)
    s += b
    if causal:
        L, S = s.shape[-2:]
        xp.copyto(s, dt.type(-np.inf), where=~xp.tri(L, S, dtype=bool))
    return s, t


def _softmax_rows(xp: Any, s: Any) -> Any:
    """``s`` (a fresh array) replaced by its softmax over the last axis; rows without a
    finite logit give zeros."""
    if s.shape[-1] == 0:
        return s
    dt = s.dtype
    m = xp.max(s, axis=-1, keepdims=True)
    s -= xp.where(xp.isfinite(m), m, dt.type(0))
    xp.exp(s, out=s)
    d = xp.sum(s, axis=-1, keepdims=True)
    s /= xp.where(d == 0, dt.type(1), d)
    return s


def _sum_to(xp: Any, a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` summed over the axes along which an array of ``shape`` broadcasts to it."""
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and a.shape[lead + i] != 1)
    return xp.reshape(xp.sum(a, axis=axes) if axes else a.copy(), shape)


def _attention_impl(xp, q, k, v, b, *, scale, causal, softcap):
    dt = np.dtype(q.dtype)
    q, k, v, b = in_compute_dtype(q, k, v, b)
    with np.errstate(invalid="ignore", over="ignore"):
        s, _ = _logits(xp, q, k, b, scale, causal, softcap, False)
        return xp.matmul(_softmax_rows(xp, s), v).astype(dt, copy=False)


def _attention_grad_impl(xp, q, k, v, b, ct, out, *, scale, causal, softcap, bias_grad):
    # (``out`` unused: rowsum(p * dp) is computed from the probabilities here)
    dt = np.dtype(q.dtype)
    q, k, v, b, ct = in_compute_dtype(q, k, v, b, ct)
    with np.errstate(invalid="ignore", over="ignore"):
        s, t = _logits(xp, q, k, b, scale, causal, softcap, True)
        p = _softmax_rows(xp, s)
        dv = xp.matmul(xp.swapaxes(p, -1, -2), ct)
        ds = xp.matmul(ct, xp.swapaxes(v, -1, -2))  # dp, then ds in place
        ds -= xp.einsum("...ls,...ls->...l", p, ds)[..., None]
        ds *= p
        db = _sum_to(xp, ds, tuple(b.shape)) if bias_grad else None
        if t is not None:
            t *= t
            ds *= xp.subtract(1, t, out=t)
        dq = xp.matmul(ds, k)
        dq *= q.dtype.type(scale)
        dk = xp.matmul(xp.swapaxes(ds, -1, -2), q)
        dk *= q.dtype.type(scale)
    outs = (dq, dk, dv) + ((db,) if bias_grad else ())
    return tuple(o.astype(dt, copy=False) for o in outs)


dot_product_attention_p = Primitive("dot_product_attention")
dot_product_attention_p.def_abstract_eval(_attention_aval)
dot_product_attention_p.def_impl(_attention_impl)
dot_product_attention_p.def_impl(
    functools.partial(_cuda.dot_product_attention, fallback=_attention_impl), backend="cuda")

dot_product_attention_grad_p = Primitive("dot_product_attention_grad", multiple_results=True)
dot_product_attention_grad_p.def_abstract_eval(_attention_grad_aval)
dot_product_attention_grad_p.def_impl(_attention_grad_impl)
dot_product_attention_grad_p.def_impl(
    functools.partial(_cuda.dot_product_attention_grad, fallback=_attention_grad_impl),
    backend="cuda")


# -- the same formulas in composite functx operations (for the derivative rules) --------------
# Written with primitives (operands of one dtype; q, k, v, ct and the logits share their
# leading dimensions, so every product is a dot_general with those as batch axes).

def _mT(x: Any) -> Any:
    """``x`` with its last two axes swapped."""
    perm = list(range(ndim_of(x)))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return _shape.transpose(x, perm)


def _matmul(a: Any, b: Any) -> Any:
    """``a @ b`` for ``a (..., m, k)`` and ``b (..., k, n)`` with the same leading axes."""
    n = ndim_of(a)
    batch = tuple(range(n - 2))
    return dot_general(a, b, dimension_numbers=(((n - 1,), (n - 2,)), (batch, batch)))


def _rowsum(x: Any) -> Any:
    """The sum over the last axis, kept as an axis of size 1."""
    last = ndim_of(x) - 1
    return _shape.reshape(_red.reduce_sum(x, (last,)), shape_of(x)[:-1] + (1,))


def safe_softmax(s: Any) -> Any:
    """Softmax over the last axis in functx operations; rows with no finite value give
    zeros (not NaN), as in PyTorch's attention (a fully masked query attends to nothing)."""
    last = ndim_of(s) - 1
    # reduce_max over an empty axis is -inf, so an empty row needs no initial value
    m = stop_gradient(_shape.reshape(_red.reduce_max(s, (last,)), shape_of(s)[:-1] + (1,)))
    m = _ew.select(_ew.is_finite(m), m, _ew.scalar(m, 0))
    e = _ew.exp(_ew.sub(s, m))
    denom = _rowsum(e)
    return _ew.div(e, _ew.select(_ew.eq(denom, _ew.scalar(denom, 0)), _ew.scalar(denom, 1),
                                 denom))


def _composite_probs(q: Any, k: Any, b: Any, scale: float, causal: bool,
                     softcap: float | None) -> tuple[Any, Any]:
    """``(p, dsdx)``: the probabilities and the derivative of the logits with respect to
    ``q @ k^T`` (``scale``, times ``1 - tanh^2`` with a soft-cap), in functx operations."""
    s = _ew.mul(_matmul(q, _mT(k)), scale)
    dsdx: Any = scale
    if softcap is not None:
        t = _ew.tanh(_ew.div(s, softcap))
        s = _ew.mul(t, softcap)
        dsdx = _ew.mul(_ew.sub(1.0, _ew.mul(t, t)), scale)
    s = _ew.add(s, b)
    if causal:
        L, S = shape_of(s)[-2:]
        xp = _shape.array_module(q)
        mask = np.tri(L, S, dtype=bool)
        s = _ew.select(mask if xp is np else xp.asarray(mask), s, _ew.scalar(s, -np.inf))
    return safe_softmax(s), dsdx


@in_float32
def _grad_composite(q: Any, k: Any, v: Any, b: Any, ct: Any, out: Any, *, scale: float,
                    causal: bool, softcap: float | None, bias_grad: bool) -> tuple:
    """``dot_product_attention_grad``'s outputs in functx operations (``out``, a function of
    the other operands, is not read: its cotangent and tangent terms are zero)."""
    p, dsdx = _composite_probs(q, k, b, scale, causal, softcap)
    dv = _matmul(_mT(p), ct)
    dp = _matmul(ct, _mT(v))
    ds = _ew.mul(p, _ew.sub(dp, _rowsum(_ew.mul(p, dp))))
    db = _ew.unbroadcast(ds, b) if bias_grad else None
    dx = _ew.mul(ds, dsdx)
    dq = _matmul(dx, k)
    dk = _matmul(_mT(dx), q)
    return (dq, dk, dv) + ((db,) if bias_grad else ())


# -- derivative rules ------------------------------------------------------------------------

@dot_product_attention_p.def_vjp(save_inputs=(0, 1, 2, 3), save_output=True, selective=True)
def _attention_vjp(ct, ins, out, *, scale, causal, softcap, needs):
    q, k, v, b = ins
    grads = bind(dot_product_attention_grad_p, q, k, v, b, ct, out, scale=scale,
                 causal=causal, softcap=softcap, bias_grad=bool(needs[3]))
    return tuple(g if need else None for g, need in zip(list(grads) + [None], needs))


@dot_product_attention_p.def_jvp
def _attention_jvp(tangents, primals, out, *, scale, causal, softcap):
    return _attention_jvp_formula(*primals, *tangents, scale=scale, causal=causal,
                                  softcap=softcap)


@in_float32
def _attention_jvp_formula(q, k, v, b, tq, tk, tv, tb, *, scale, causal, softcap):
    p, dsdx = _composite_probs(q, k, b, scale, causal, softcap)
    kt = _mT(k)
    tx = None if tq is None else _matmul(tq, kt)
    if tk is not None:
        tx = add_tangents(tx, _matmul(q, _mT(tk)))
    ts = None if tx is None else _ew.mul(tx, dsdx)
    if tb is not None:
        ts = broadcast_to_shape(tb, shape_of(p)) if ts is None else _ew.add(ts, tb)
    t_out = None
    if ts is not None:
        tp = _ew.mul(p, _ew.sub(ts, _rowsum(_ew.mul(p, ts))))
        t_out = _matmul(tp, v)
    if tv is not None:
        t_out = add_tangents(t_out, _matmul(p, tv))
    return t_out


# dot_product_attention_grad's VJP and JVP differentiate the composite.
dot_product_attention_grad_p.def_composite_rules(_grad_composite)


# -- batching ----------------------------------------------------------------------------------

def _batched_operands(args, dims, bias_grad: bool) -> tuple[list, Any, int, Any]:
    """``([q, k, v(, ct, out)], bias, out_dim, bias_batch)`` for one call of the primitive on
    the whole batch. Where q, k, v (and ct, out) are batched at one leading axis ``d`` and
    the bias is unbatched, does not reach axis ``d`` and needs no cotangent, they pass as
    they are.
    Otherwise the batch moves to the front (unbatched operands broadcast) and the bias
    becomes ``(size, 1.., *bias)``; ``bias_batch`` is then ``(size, bias shape)`` (for
    folding ``dbias`` back), else None."""
    size = batch_size(args, dims)
    arrays = [args[0], args[1], args[2], *args[4:]]
    adims = [dims[0], dims[1], dims[2], *dims[4:]]
    b, db = args[3], dims[3]
    rank = ndim_of(args[0]) - (dims[0] is not None)  # of one example's query
    d0 = adims[0]
    if (db is None and not bias_grad and d0 is not None and all(d == d0 for d in adims)
            and d0 <= rank - 2 and ndim_of(b) <= rank - d0):
        return arrays, b, d0, None
    arrays = [to_front(x, d, size) for x, d in zip(arrays, adims)]
    if db is None and not bias_grad:  # it broadcasts against the examples' axes only
        return arrays, b, 0, None
    b = to_front(b, db, size)
    rest = tuple(shape_of(b)[1:])
    b = _shape.reshape(b, (size,) + (1,) * (rank - len(rest)) + rest)
    return arrays, b, 0, (size, rest)


@dot_product_attention_p.def_batch
def _attention_batch(args, dims, *, scale, causal, softcap):
    (q, k, v), b, d, _ = _batched_operands(args, dims, False)
    return bind(dot_product_attention_p, q, k, v, b, scale=scale, causal=causal,
                softcap=softcap), d


@dot_product_attention_grad_p.def_batch
def _attention_grad_batch(args, dims, *, scale, causal, softcap, bias_grad):
    (q, k, v, ct, out), b, d, bias_batch = _batched_operands(args, dims, bias_grad)
    outs = list(bind(dot_product_attention_grad_p, q, k, v, b, ct, out, scale=scale,
                     causal=causal, softcap=softcap, bias_grad=bias_grad))
    if not bias_grad:
        return outs, [d, d, d]
    size, rest = bias_batch
    outs[3] = _shape.reshape(outs[3], (size,) + rest)
    return outs, [d, d, d, 0]


# -- the functions -----------------------------------------------------------------------------

def _params(q: Any, scale: float | None, causal: bool, softcap: float | None) -> dict:
    scale = 1.0 / math.sqrt(shape_of(q)[-1]) if scale is None else float(scale)
    return {"scale": scale, "causal": bool(causal),
            "softcap": None if softcap is None else float(softcap)}


def dot_product_attention(q: Any, k: Any, v: Any, bias: Any = None, *,
                          scale: float | None = None, causal: bool = False,
                          softcap: float | None = None) -> Any:
    """``softmax(cap(scale * q @ k^T) + bias, causal mask) @ v`` (see the module docstring);
    ``scale`` None means ``1 / sqrt(E)``, ``bias`` None means none. ``q``, ``k``, ``v`` need
    the same leading dimensions. ``functx.nn.scaled_dot_product_attention`` is the
    user-facing function (it broadcasts, promotes and turns masks into a bias).

    Raises:
        ShapeError, DTypeError: operands of the wrong shapes or dtypes (the message names them).

    Example:
        >>> q = np.zeros((1, 2, 3)); v = np.arange(6.0).reshape(1, 2, 3)
        >>> dot_product_attention(q, q, v, causal=True)[0, 1]   # mean of v's two rows
        array([1.5, 2.5, 3.5])
    """
    b = _ew.scalar(q, 0) if bias is None else bias
    return bind(dot_product_attention_p, q, k, v, b, **_params(q, scale, causal, softcap))


def dot_product_attention_grad(q: Any, k: Any, v: Any, bias: Any, ct: Any, *,
                               scale: float | None = None, causal: bool = False,
                               softcap: float | None = None, bias_grad: bool = False,
                               out: Any = None) -> tuple:
    """``(dq, dk, dv)`` (and ``dbias`` if ``bias_grad``): the cotangents of
    :func:`dot_product_attention`'s inputs for the output cotangent ``ct``.

    ``out`` is :func:`dot_product_attention`'s output for these operands and options where
    the caller has it (computed here otherwise); CUDA's flash kernels read it (see the
    module docstring), so it must be that output, not another array of its shape."""
    b = _ew.scalar(q, 0) if bias is None else bias
    params = _params(q, scale, causal, softcap)
    if out is None:
        out = bind(dot_product_attention_p, q, k, v, b, **params)
    return tuple(bind(dot_product_attention_grad_p, q, k, v, b, ct, out, **params,
                      bias_grad=bool(bias_grad)))
