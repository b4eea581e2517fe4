"""``scaled_dot_product_attention``: torch.nn.functional's signature and semantics, plus
an additive ``bias`` and logit soft-capping; and ``dot_product_attention``, jax.nn's
signature and ``[batch, length, heads, features]`` layout on top of it.

Without dropout (``dropout_p == 0``, the usual case, and evaluation) and for float16,
bfloat16, float32 and float64 operands, the attention is ONE fused primitive,
``functx.primitives.attention.dot_product_attention`` (cuBLAS GEMMs and one fused row
kernel per pass on CUDA; float16 and bfloat16 compute in float32 and are rounded once, at
the end). Its
backward pass keeps only the primitive's inputs (query, key, value as broadcast, and the
bias and mask folded into one additive bias of their broadcast shape, never expanded to
the scores' shape) and recomputes the probabilities from them, so
nothing of size ``L * S`` is kept between the forward and the backward pass, whatever
``recompute`` says (the backward pass costs one more ``query @ key^T`` product; its
``(..., L, S)`` scratch arrays exist only inside the primitive's implementation, on CUDA
in chunks of the batch of at most 64 MiB each, and with a causal mask in blocks of query
rows that skip most of the masked triangle). Every transform works through it: its
derivatives of every order, its forward mode and its batching rule are registered with it.

With dropout (``dropout_p > 0``), or other dtypes (operands whose dtypes do not promote
to one of those four, such as bfloat16 with float32), the attention is a composite of functx operations
(two matmuls around a stable softmax), and ``recompute`` chooses the memory of its
backward pass:

* ``recompute=False`` (default): the backward pass keeps the attention probabilities and
  the other ``(..., L, S)`` intermediates of the softmax (several arrays of the scores'
  size per call) from the forward pass until the gradient is computed: memory kept
  between the forward and the backward pass grows with ``L * S``.
* ``recompute=True``: the scores -> softmax -> dropout -> ``@ value`` part runs inside
  ``functx.checkpoint`` with the ``nothing_saveable`` policy, so the backward pass keeps
  only that part's inputs (query, key, value, masks, bias, dropout key) and its output,
  all of size ``L * E`` or ``S * E`` (plus the masks and bias as passed). Its backward
  pass recomputes the ``(..., L, S)`` intermediates when it reaches this call, which costs
  one more forward pass of the attention. The gradients are the same bits (dropout masks
  come from the key, so the recomputation draws the same mask), except that when one
  array is passed as several of query, key and value its cotangents are added in another
  order (equal to rounding, about 1e-13 relative). The recomputed arrays
  still exist while this call's gradient is computed, so the saving shows in models with
  several attention calls (or other work between the forward and backward pass): only one
  call's ``(..., L, S)`` arrays are alive at a time, not every call's. With dropout, the
  mask is redrawn from the key (under a transform ``functx.random`` computes its element
  counters inside the trace, so nothing of the scores' size is kept for it either).

Example:
    >>> import functx.nn as fnn
    >>> q = k = v = np.random.randn(2, 4, 8, 16)           # (batch, heads, length, dim)
    >>> fnn.scaled_dot_product_attention(q, k, v, is_causal=True).shape   # (2, 4, 8, 16)
"""
from __future__ import annotations

import contextlib
import math
from typing import Any

import ml_dtypes
import numpy as np

import functx.numpy as fnp
from functx import random as fxr
from functx.backends import default_device, device_of
from functx.checkpoint_policies import nothing_saveable
from functx.errors import DTypeError, ShapeError
from functx.nn._util import ArgumentError, array, check_number, float_array
from functx.numpy._promotion import is_tracer
from functx.numpy._shape import on_device_of
from functx.primitives.attention import dot_product_attention as _fused_attention
from functx.primitives.attention import safe_softmax
from functx.primitives.misc import stop_gradient
from functx.transforms.checkpoint import checkpoint

__all__ = ["scaled_dot_product_attention", "dot_product_attention"]

_FN = "scaled_dot_product_attention"


def _check_scores_operand(name: str, a: Any, scores_shape: tuple[int, ...],
                          fn: str = _FN) -> None:
    """``a`` (attn_mask or bias) must broadcast to the scores' shape without growing it."""
    try:
        ok = np.broadcast_shapes(tuple(a.shape), scores_shape) == scores_shape
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(f"functx.nn.{fn}: {name} of shape {tuple(a.shape)} does not "
                         f"broadcast to the attention scores' shape {scores_shape} "
                         "(query.shape[:-1] + (key.shape[-2],), batch dimensions broadcast). "
                         f"Pass a {name} of shape (..., L, S).")


def _check_shapes(q: Any, k: Any, v: Any, enable_gqa: bool) -> tuple[Any, Any]:
    """Shape checks of query/key/value; returns key and value with GQA heads repeated."""
    for name, a in (("query", q), ("key", k), ("value", v)):
        if a.ndim < 2:
            raise ShapeError(f"functx.nn.{_FN}: {name} must have at least 2 dimensions "
                             f"(..., length, features), but it has shape {tuple(a.shape)}.")
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"functx.nn.{_FN}: query and key must have the same last dimension "
                         f"(the embedding size E), but query has shape {tuple(q.shape)} and "
                         f"key {tuple(k.shape)}.")
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"functx.nn.{_FN}: key and value must have the same source length S "
                         f"(dimension -2), but key has shape {tuple(k.shape)} and value "
                         f"{tuple(v.shape)}.")
    if enable_gqa:
        if min(q.ndim, k.ndim, v.ndim) < 3:
            raise ShapeError(f"functx.nn.{_FN}: enable_gqa needs a heads dimension (-3) on "
                             f"query, key and value, but their shapes are {tuple(q.shape)}, "
                             f"{tuple(k.shape)}, {tuple(v.shape)}.")
        hq = q.shape[-3]
        for name, a in (("key", k), ("value", v)):
            if a.shape[-3] == 0 or hq % a.shape[-3]:
                raise ShapeError(f"functx.nn.{_FN}: with enable_gqa the number of query heads "
                                 f"({hq}) must be a multiple of the number of {name} heads "
                                 f"({a.shape[-3]}); query has shape {tuple(q.shape)}, {name} "
                                 f"{tuple(a.shape)}.")
        k = fnp.repeat(k, hq // k.shape[-3], axis=-3) if k.shape[-3] != hq else k
        v = fnp.repeat(v, hq // v.shape[-3], axis=-3) if v.shape[-3] != hq else v
    for name, a in (("key", k), ("value", v)):
        try:
            np.broadcast_shapes(tuple(q.shape[:-2]), tuple(a.shape[:-2]))
        except ValueError:
            raise ShapeError(f"functx.nn.{_FN}: the batch dimensions of query "
                             f"{tuple(q.shape[:-2])} and {name} {tuple(a.shape[:-2])} do not "
                             f"broadcast (query shape {tuple(q.shape)}, {name} shape "
                             f"{tuple(a.shape)}).") from None
    return k, v


_FUSED_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32),
                 np.dtype(np.float64))


def _fused(q: Any, k: Any, v: Any, mask: Any, b: Any, dtype: np.dtype, factor: float,
           causal: bool, cap: float | None) -> Any:
    """The attention as the fused primitive: operands in ``dtype`` with one batch shape,
    the bias and the mask folded into one additive bias (a boolean mask as 0 / -inf)."""
    try:
        batch = tuple(np.broadcast_shapes(*(tuple(a.shape[:-2]) for a in (q, k, v))))
    except ValueError:
        raise ShapeError(f"functx.nn.{_FN}: the batch dimensions of query "
                         f"{tuple(q.shape[:-2])}, key {tuple(k.shape[:-2])} and value "
                         f"{tuple(v.shape[:-2])} do not broadcast together.") from None

    def prep(a: Any) -> Any:
        a = fnp.astype(a, dtype) if a.dtype != dtype else a
        full = batch + tuple(a.shape[-2:])
        return fnp.broadcast_to(a, full) if tuple(a.shape) != full else a

    add = None if b is None else fnp.astype(b, dtype)
    if mask is not None:
        if np.dtype(mask.dtype).kind == "b":
            m = fnp.where(mask, np.zeros((), dtype), np.full((), -np.inf, dtype))
        else:
            m = fnp.astype(mask, dtype)
        add = m if add is None else fnp.add(add, m)
    return _fused_attention(prep(q), prep(k), prep(v), add, scale=factor, causal=causal,
                            softcap=cap)


def _dropout(probs: Any, p: float, key: Any) -> Any:
    """``probs * keep / (1 - p)`` with ``keep = bernoulli(key, 1 - p, probs.shape)``
    (all zeros for ``p == 1``, as in PyTorch)."""
    if p >= 1.0:
        return fnp.multiply(probs, 0.0)
    keep = fxr.bernoulli(key, 1.0 - p, tuple(probs.shape))
    return fnp.where(keep, fnp.divide(probs, 1.0 - p), 0.0)


def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, *, enable_gqa: bool = False,
                                 bias: Any = None, softcap: float | None = None,
                                 dropout_key: Any = None, recompute: bool = False) -> Any:
    """``softmax(mask(bias + cap(scale * query @ key^T))) @ value``.

    The scores are computed in this order (after PyTorch and FlashAttention):

    1. ``s = (query * scale) @ key^T``, shape ``(..., L, S)``;
    2. soft-capping, if ``softcap`` is given: ``s = softcap * tanh(s / softcap)``;
    3. ``s = s + bias``, if ``bias`` is given (e.g. ALiBi or relative-position terms);
    4. ``attn_mask``: a boolean mask keeps the scores where True and sets the others to
       ``-inf``; a float mask is added; ``is_causal`` keeps ``j <= i`` (top-left aligned
       ``tril`` of an ``(L, S)`` matrix, as in PyTorch);
    5. a numerically stable softmax over ``S``; a query row whose scores are all ``-inf``
       (fully masked) gets all-zero probabilities and a zero output, as in PyTorch;
    6. dropout of the probabilities, if ``dropout_p > 0``: each is kept with probability
       ``1 - dropout_p`` and divided by it, the mask being
       ``functx.random.bernoulli(dropout_key, 1 - dropout_p, probabilities.shape)`` (the
       same key gives the same mask, so recomputation reproduces it);
    7. ``probabilities @ value``.

    Memory (see the module docstring): without dropout, for float16, bfloat16, float32 and
    float64 operands, the attention is one fused primitive whose backward pass keeps no ``(..., L, S)``
    array, whatever ``recompute`` says. With dropout (or other dtypes) it is a composite:
    with ``recompute=False`` the backward pass keeps the ``(..., L, S)`` probabilities and
    softmax intermediates; with ``recompute=True`` it keeps no ``(..., L, S)`` array
    computed here (only the inputs and the output; with dropout also the PRNG's uint32
    counters, see the module docstring) and recomputes steps 1-7 when it differentiates
    this call (``functx.checkpoint``, policy ``nothing_saveable``), giving the same
    gradients for one more forward pass of work.

    Args:
        query: shape ``(..., L, E)``.
        key: shape ``(..., S, E)``.
        value: shape ``(..., S, Ev)``. The batch dimensions ``...`` of the three broadcast.
        attn_mask: None, a bool array or a float array broadcasting to ``(..., L, S)``.
        dropout_p: the dropout probability of the attention weights, in ``[0, 1]``.
        is_causal: apply a causal mask (not together with ``attn_mask``).
        scale: the score scale; None means ``1 / sqrt(E)``.
        enable_gqa: grouped-query attention: key/value heads (dimension -3) are repeated
            to the number of query heads, which must be a multiple of them.
        bias: None or a float array broadcasting to ``(..., L, S)``, added to the scores.
        softcap: None or a positive float, the cap of the logits.
        dropout_key: a functx.random key for dropout; required when ``dropout_p > 0``.
        recompute: for the composite path (dropout, or dtypes other than float16,
            bfloat16, float32 and float64): keep nothing of size ``L * S`` for the backward pass and recompute it
            there (memory-lean backward); default False (keep the probabilities). The
            fused path (every other call) is memory-lean either way and ignores it.

    Returns:
        Shape ``(..., L, Ev)``.

    Raises:
        ShapeError: inconsistent query/key/value shapes (the message names them), or an
            ``attn_mask``/``bias`` that does not broadcast to the scores.
        DTypeError: an integer ``attn_mask``, or a non-float ``bias``.
        ArgumentError: ``is_causal`` with ``attn_mask``, ``dropout_p`` outside ``[0, 1]`` or
            positive without ``dropout_key``, a non-positive ``softcap``.

    Example:
        >>> out = fnn.scaled_dot_product_attention(q, k, v, attn_mask=mask, softcap=50.0)
        >>> g = fx.grad(lambda q: fnn.scaled_dot_product_attention(
        ...     q, k, v, is_causal=True, recompute=True).sum())(q)   # probabilities recomputed
    """
    q = float_array(query, _FN, "query")
    k = float_array(key, _FN, "key")
    v = float_array(value, _FN, "value")
    k, v = _check_shapes(q, k, v, bool(enable_gqa))
    p_drop = check_number(_FN, "dropout_p", dropout_p, lo=0.0, hi=1.0)
    cap = None if softcap is None else check_number(_FN, "softcap", softcap, lo=0.0,
                                                    lo_open=True)
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else check_number(_FN, "scale", scale)
    scores_shape = tuple(np.broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]))) + \
        (q.shape[-2], k.shape[-2])
    if is_causal and attn_mask is not None:
        raise ArgumentError(f"functx.nn.{_FN}: pass either attn_mask or is_causal=True, not "
                            "both (fold the causal mask into attn_mask instead).")
    mask = None
    if attn_mask is not None:
        mask = array(attn_mask)
        kind = np.dtype(mask.dtype).kind
        if kind not in "bf":
            raise DTypeError(f"functx.nn.{_FN}: attn_mask must be a bool array (True = "
                             f"attend) or a float array (added to the scores), but it has "
                             f"dtype {mask.dtype}.")
        _check_scores_operand("attn_mask", mask, scores_shape)
    b = None
    if bias is not None:
        b = array(bias)
        if np.dtype(b.dtype).kind != "f" and np.dtype(b.dtype) != ml_dtypes.bfloat16:
            raise DTypeError(f"functx.nn.{_FN}: bias must be a float array (added to the "
                             f"scores), but it has dtype {b.dtype}.")
        _check_scores_operand("bias", b, scores_shape)
    if p_drop > 0 and dropout_key is None:
        raise ArgumentError(f"functx.nn.{_FN}: dropout_p={dropout_p} needs a PRNG key: "
                            "pass dropout_key=... (functx randomness is key-based), or "
                            "dropout_p=0.0 for evaluation.")

    float_mask = mask is not None and (np.dtype(mask.dtype).kind == "f"
                                       or np.dtype(mask.dtype) == ml_dtypes.bfloat16)
    try:
        dtype = np.result_type(*(a.dtype for a in (q, k, v, b, mask if float_mask else None)
                                 if a is not None))
    except TypeError:  # e.g. bfloat16 with float32: the composite promotes as functx.numpy
        dtype = None
    if p_drop == 0 and dtype is not None and dtype in _FUSED_DTYPES:
        return _fused(q, k, v, mask, b, dtype, factor, bool(is_causal), cap)

    if is_causal:
        L, S = scores_shape[-2:]
        mask = on_device_of(q, np.tril(np.ones((L, S), dtype=bool)))
    extras = {name: a for name, a in (("mask", mask), ("bias", b),
                                      ("key", dropout_key if p_drop > 0 else None))
              if a is not None}

    def attend(q: Any, k: Any, v: Any, extras: dict) -> Any:
        s = fnp.matmul(fnp.multiply(q, factor), fnp.swapaxes(k, -1, -2))
        if cap is not None:
            s = fnp.multiply(cap, fnp.tanh(fnp.divide(s, cap)))
        if "bias" in extras:
            s = fnp.add(s, extras["bias"])
        if "mask" in extras:
            m = extras["mask"]
            s = fnp.where(m, s, -np.inf) if np.dtype(m.dtype).kind == "b" else fnp.add(s, m)
        probs = safe_softmax(s)
        if p_drop > 0:
            probs = _dropout(probs, p_drop, extras["key"])
        return fnp.matmul(probs, v)

    # Outside any transform nothing is differentiated, so there is nothing to recompute.
    if recompute and any(is_tracer(a) for a in (q, k, v, *extras.values())):
        # checkpoint traces ``attend`` abstractly: constants made inside it (zeros_like...)
        # go to the default device, which must be the operands' one (e.g. CUDA).
        dev = device_of(q)
        with default_device(dev) if dev is not None else contextlib.nullcontext():
            return checkpoint(attend, policy=nothing_saveable, _name=_FN)(q, k, v, extras)
    return attend(q, k, v, extras)


# -- jax.nn.dot_product_attention ------------------------------------------------------------

_JAX_FN = "dot_product_attention"


def _to_4d(name: str, a: Any) -> Any:
    if a.ndim > 4:
        raise ShapeError(f"functx.nn.{_JAX_FN}: {name} must have at most 4 dimensions "
                         f"(broadcasting to (B, N, T, S)), but it has shape {tuple(a.shape)}.")
    return fnp.reshape(a, (1,) * (4 - a.ndim) + tuple(a.shape))


def _seq_lengths(name: str, a: Any, b: int) -> Any:
    a = array(a)
    if np.dtype(a.dtype).kind not in "iu" or tuple(a.shape) != (b,):
        raise ShapeError(f"functx.nn.{_JAX_FN}: {name} must be an integer array of shape "
                         f"({b},) (one length per batch element), but it has shape "
                         f"{tuple(a.shape)} and dtype {a.dtype}.")
    return a


def _jax_mask(q: Any, mask: Any, is_causal: bool, window: tuple | None, q_len: Any,
              kv_len: Any, T: int, S: int) -> Any:
    """The combined boolean mask (True = attend) of ``mask``, ``is_causal``, the local
    window and the sequence lengths, broadcasting to ``(B, N, T, S)``; None if none."""
    parts = [] if mask is None else [mask]
    t = np.arange(T)[:, None]
    s = np.arange(S)[None, :]
    static = np.ones((T, S), bool)
    if is_causal:
        static &= s <= t
    if window is not None:
        static &= (t <= s + window[0]) & (t >= s - window[1])
    if is_causal or window is not None:
        parts.append(on_device_of(q, static))
    if q_len is not None:
        parts.append(fnp.less(on_device_of(q, np.arange(T)).reshape(1, 1, T, 1),
                              fnp.reshape(q_len, (-1, 1, 1, 1))))
    if kv_len is not None:
        parts.append(fnp.less(on_device_of(q, np.arange(S)).reshape(1, 1, 1, S),
                              fnp.reshape(kv_len, (-1, 1, 1, 1))))
    if not parts:
        return None
    m = parts[0]
    for p in parts[1:]:
        m = fnp.logical_and(m, p)
    return m


def dot_product_attention(query: Any, key: Any, value: Any, bias: Any = None, mask: Any = None,
                          *, scale: float | None = None, is_causal: bool = False,
                          query_seq_lengths: Any = None, key_value_seq_lengths: Any = None,
                          local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None,
                          return_residual: bool = False) -> Any:
    """``jax.nn.dot_product_attention``: ``softmax(scale * q @ k^T + bias, masked) @ v`` per
    head, in JAX's ``[batch, length, heads, features]`` layout.

    The heads are moved to PyTorch's layout and the work is done by
    :func:`scaled_dot_product_attention` (the fused primitive where it applies), with
    grouped-query attention when ``key`` has fewer heads ``K`` than ``query`` (``N``, a
    multiple of ``K``; query head ``n`` uses key head ``n // (N // K)``). JAX's masking
    semantics are kept: the masks (``mask``, ``is_causal``, ``local_window_size`` and the
    sequence lengths) are combined, a query row with no key left attends uniformly to all
    of them (JAX fills masked logits with a large finite negative number: the output is the
    mean of ``value``, and no gradient reaches query or key from that row), and query rows
    past ``query_seq_lengths`` are zero. Unlike JAX, float64 operands are computed in
    float64 throughout (JAX computes the softmax in float32).

    Args:
        query: ``(B, T, N, H)`` or unbatched ``(T, N, H)``.
        key: ``(B, S, K, H)`` (``(S, K, H)``).
        value: ``(B, S, K, Hv)`` (``(S, K, Hv)``).
        bias: None or a float array of at most 4 dimensions broadcasting to
            ``(B, N, T, S)`` (``(N, T, S)`` unbatched), added to the scaled logits.
        mask: None or a bool array like ``bias``: True where a query may attend a key.
        scale: the logit scale; None means ``1 / sqrt(H)``.
        is_causal: keep only keys ``s <= t`` (top-left aligned, as in JAX).
        query_seq_lengths: None or int ``(B,)``: query rows ``t >= length`` give zeros.
        key_value_seq_lengths: None or int ``(B,)``: keys ``s >= length`` are masked.
        local_window_size: None, an int ``w`` or a pair ``(left, right)``: query ``t``
            attends keys ``t - left <= s <= t + right``.
        implementation: None, "xla" or "cudnn" (all compute the same here).
        return_residual: also return the logsumexp of each row's masked logits, shape
            ``(B, T, N)`` (``(T, N)``), without gradient (as in JAX).

    Returns:
        Shape ``(B, T, N, Hv)`` (``(T, N, Hv)`` unbatched); with ``return_residual`` a
        pair ``(output, logsumexp)``.

    Raises:
        ShapeError: inconsistent ranks, batch sizes, head counts or feature sizes; a bias,
            mask or sequence lengths of the wrong shape.
        DTypeError: a non-bool mask or a non-float bias.
        ArgumentError: a bad ``implementation`` or ``local_window_size``.

    Example:
        >>> q = k = v = np.random.randn(2, 8, 4, 16)             # (batch, length, heads, dim)
        >>> fnn.dot_product_attention(q, k, v, is_causal=True).shape   # (2, 8, 4, 16)
    """
    if implementation not in (None, "xla", "cudnn"):
        raise ArgumentError(f"functx.nn.{_JAX_FN}: implementation must be None, 'xla' or "
                            f"'cudnn', not {implementation!r}.")
    q = float_array(query, _JAX_FN, "query")
    k = float_array(key, _JAX_FN, "key")
    v = float_array(value, _JAX_FN, "value")
    if q.ndim not in (3, 4) or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ShapeError(f"functx.nn.{_JAX_FN}: query, key and value must all be 4-d (B, T, "
                         f"N, H) or all 3-d (T, N, H), but they have shapes {tuple(q.shape)}, "
                         f"{tuple(k.shape)} and {tuple(v.shape)}.")
    unbatched = q.ndim == 3
    if unbatched:
        q, k, v = (fnp.expand_dims(a, 0) for a in (q, k, v))
    B, T, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    if k.shape[0] != B or v.shape[0] != B or k.shape[3] != H or tuple(v.shape[1:3]) != (S, K):
        raise ShapeError(f"functx.nn.{_JAX_FN}: expected query (B, T, N, H), key (B, S, K, H) "
                         f"and value (B, S, K, Hv), but got shapes {tuple(q.shape)}, "
                         f"{tuple(k.shape)} and {tuple(v.shape)}.")
    if K == 0 or N % K:
        raise ShapeError(f"functx.nn.{_JAX_FN}: the number of query heads ({N}) must be a "
                         f"multiple of the number of key/value heads ({K}).")
    scores = (B, N, T, S)
    m = None
    if mask is not None:
        m = array(mask)
        if np.dtype(m.dtype).kind != "b":
            raise DTypeError(f"functx.nn.{_JAX_FN}: mask must be a bool array (True = "
                             f"attend), but it has dtype {m.dtype}; pass an additive mask "
                             "as bias.")
        m = _to_4d("mask", m)
        _check_scores_operand("mask", m, scores, _JAX_FN)
    b = None
    if bias is not None:
        b = array(bias)
        if np.dtype(b.dtype).kind != "f" and np.dtype(b.dtype) != ml_dtypes.bfloat16:
            raise DTypeError(f"functx.nn.{_JAX_FN}: bias must be a float array, but it has "
                             f"dtype {b.dtype}.")
        b = _to_4d("bias", b)
        _check_scores_operand("bias", b, scores, _JAX_FN)
    window = None
    if local_window_size is not None:
        w = local_window_size
        window = (w, w) if isinstance(w, (int, np.integer)) else tuple(w)
        if len(window) != 2 or any(isinstance(x, (bool, np.bool_)) or not isinstance(
                x, (int, np.integer)) for x in window):
            raise ArgumentError(f"functx.nn.{_JAX_FN}: local_window_size must be an int or a "
                                f"pair of ints (left, right), not {local_window_size!r}.")
    q_len = None if query_seq_lengths is None else _seq_lengths("query_seq_lengths",
                                                                query_seq_lengths, B)
    kv_len = None if key_value_seq_lengths is None else _seq_lengths(
        "key_value_seq_lengths", key_value_seq_lengths, B)
    only_causal = is_causal and m is None and window is None and q_len is None and \
        kv_len is None
    full = None if only_causal else _jax_mask(q, m, is_causal, window, q_len, kv_len, T, S)
    factor = 1.0 / math.sqrt(H) if scale is None else check_number(_JAX_FN, "scale", scale)
    qt, kt, vt = (fnp.moveaxis(a, 2, 1) for a in (q, k, v))   # (B, heads, length, dim)
    out = scaled_dot_product_attention(qt, kt, vt, full, 0.0, bool(only_causal), factor,
                                       enable_gqa=N != K, bias=b)
    if full is not None:  # rows with nothing to attend: JAX's uniform average of the values
        empty = fnp.logical_not(fnp.any(full, axis=-1, keepdims=True))
        mean_v = fnp.mean(vt, axis=-2, keepdims=True)
        if N != K:
            mean_v = fnp.repeat(mean_v, N // K, axis=1)
        out = fnp.where(empty, mean_v, out)
    out = fnp.moveaxis(out, 1, 2)   # (B, T, N, Hv)
    if q_len is not None:
        rows = fnp.less(on_device_of(q, np.arange(T)).reshape(1, T, 1, 1),
                        fnp.reshape(q_len, (-1, 1, 1, 1)))
        out = fnp.where(rows, out, 0.0)
    if not return_residual:
        return fnp.squeeze(out, 0) if unbatched else out
    kr = fnp.repeat(kt, N // K, axis=1) if N != K else kt
    s = fnp.matmul(fnp.multiply(qt, factor), fnp.swapaxes(kr, -1, -2))
    if b is not None:
        s = fnp.add(s, b)
    if is_causal and full is None:
        full = _jax_mask(q, None, True, None, None, None, T, S)
    if full is not None:
        big = 0.7 * min(float(np.finfo(s.dtype).max), float(np.finfo(np.float32).max))
        s = fnp.where(full, s, -big)
    lse = stop_gradient(fnp.moveaxis(fnp.logsumexp(s, axis=-1), 1, 2))   # (B, T, N)
    if unbatched:
        return fnp.squeeze(out, 0), fnp.squeeze(lse, 0)
    return out, lse
