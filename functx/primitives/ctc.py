"""ctc_loss and ctc_posteriors: connectionist temporal classification (CTC).

Both primitives take the same operands and parameters:

* ``log_probs`` ``[T, N, C]`` (float): per time step, batch row and class, a log-probability;
* ``targets`` ``[N, S]`` (integer): padded label sequences; entries past a row's target
  length are ignored (out-of-range ones are clamped into ``[0, C)``);
* ``input_lengths``, ``target_lengths`` ``[N]`` (integer): ``T_n <= T`` and ``S_n <= S``;
* ``blank`` (an int in ``[0, C)``) and ``zero_infinity`` (a bool).

With the extended labels ``l' = (blank, l_1, blank, l_2, ..., blank, l_S_n, blank)`` an
alignment is a path through ``l'`` that moves 0 or 1 steps per time step, or 2 onto a label
that differs from the one before it; it starts in ``l'_0`` or ``l'_1`` and ends, at time
``T_n - 1``, in one of the last two. With ``lp[t, s] = log_probs[t, n, l'_s]``, the forward
variables ``alpha_t(s) = lp[t, s] + logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1),
alpha_{t-1}(s-2) if the skip is allowed)`` sum over path prefixes, the backward variables
``beta`` over suffixes (both include ``lp[t, s]``), and

* ``ctc_loss`` -> ``nll [N]``: ``-log Z_n`` with ``Z_n`` the sum over alignments of
  ``exp(sum_t lp[t, path_t])``. It is ``+inf`` where no alignment fits (``T_n < S_n`` plus
  the number of repeated neighbours), and 0 there with ``zero_infinity``;
* ``ctc_posteriors`` -> ``gamma [T, N, C]``: ``sum over s with l'_s = c of
  exp(alpha_t(s) + beta_t(s) - lp[t, s] + nll)``, the posterior probability that an
  alignment emits ``c`` at ``t``. It is exactly ``-d nll / d log_probs``: 0 for ``t >= T_n``,
  NaN for ``t < T_n`` in rows whose loss is infinite (0 with ``zero_infinity``), as the
  gradient of an infinite loss is in PyTorch.

The implementations run the recursions in log space, vectorised over the batch (a Python
loop over ``T`` of ``[N, 2S+1]`` array operations), for NumPy and CuPy alike. ``ctc_loss``
keeps one time step of ``alpha``; ``ctc_posteriors`` keeps both lattices (``2 T N (2S+1)``
values) for the length of one call. Half-precision ``log_probs`` (float16, bfloat16) are
computed in float32, the results rounded once, and so is the composite ``log Z``.

Rules:

* ``ctc_loss``: VJP ``-ct * gamma`` and JVP ``-sum_{t,c} gamma * t`` (one
  ``ctc_posteriors`` each; the backward pass keeps only the operands alive);
* ``ctc_posteriors``: ``gamma`` is the gradient of ``log Z``, so its Jacobian is the
  (symmetric) Hessian of ``log Z`` and its JVP and VJP are one Hessian-vector product. That
  product is forward-over-reverse differentiation of a composite ``log Z`` (a scaled forward
  recursion in probability space, written with functx operations: a trace of ``T`` steps),
  so only second and higher derivatives of the loss pay for a trace. Its scaling keeps it
  exact unless, within one time step, every class an alignment may emit is ``e^-700`` times
  less likely than the likeliest class of the row's extended labels (then it underflows).
  The composite is written with ``functx.numpy`` (indexing, ``take``, ``arange``...), which
  sits above the primitives, so it is reached through the registry's ``numpy`` hook, and
  the product through its ``grad`` hook and ``composite_jvp`` (``functx.registry.hooks``);
* batching: the vmapped axis folds into the batch axis ``N``, never a loop.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import batch_at, batch_size
from functx.primitives._precision import in_float32
from functx.primitives._util import in_compute_dtype, is_real_float, shape_of
from functx.primitives.misc import stop_gradient
from functx.registry import Primitive, composite_jvp
from functx.registry.hooks import HOOKS
from functx.tracing import bind

__all__ = ["ctc_loss", "ctc_posteriors", "ctc_loss_p", "ctc_posteriors_p"]


# -- the shape rule --------------------------------------------------------------------------

def _check_operands(name: str, log_probs: AbstractArray, targets: AbstractArray,
                    input_lengths: AbstractArray, target_lengths: AbstractArray,
                    blank: int) -> tuple[int, int, int]:
    """``(T, N, C)`` after checking ranks, dtypes, matching batch sizes and ``blank``."""
    if not is_real_float(log_probs.dtype):
        raise DTypeError(f"{name} needs floating-point log_probs but got {log_probs}. Convert "
                         "them with x.astype(np.float32) (or float64) first.")
    if log_probs.ndim != 3:
        raise ShapeError(f"{name} needs log_probs of shape [T, N, C] but got {log_probs}.")
    t, n, c = log_probs.shape
    for what, a, rank in (("targets", targets, 2), ("input_lengths", input_lengths, 1),
                          ("target_lengths", target_lengths, 1)):
        if a.dtype.kind not in "iu":
            raise DTypeError(f"{name} needs integer {what} but got {a}; convert them with "
                             ".astype(np.int64).")
        if a.ndim != rank or a.shape[0] != n:
            want = "[N, S]" if rank == 2 else "[N]"
            raise ShapeError(f"{name}: {what} must have shape {want} with N={n} (log_probs is "
                             f"{log_probs}) but got {a}.")
    if not 0 <= blank < max(c, 1):
        raise ShapeError(f"{name}: blank={blank} is not a class of log_probs {log_probs} "
                         f"(valid: 0..{c - 1}).")
    return t, n, c


def _loss_aval(log_probs, targets, input_lengths, target_lengths, *, blank, zero_infinity):
    _, n, _ = _check_operands("ctc_loss", log_probs, targets, input_lengths, target_lengths,
                              blank)
    return AbstractArray((n,), log_probs.dtype)


def _posteriors_aval(log_probs, targets, input_lengths, target_lengths, *, blank,
                     zero_infinity):
    _check_operands("ctc_posteriors", log_probs, targets, input_lengths, target_lengths, blank)
    return AbstractArray(tuple(log_probs.shape), log_probs.dtype)


# -- the implementations (log space, vectorised over the batch) -------------------------------

def _logsumexp3(xp: Any, a: Any, b: Any, c: Any) -> Any:
    """Elementwise ``log(e^a + e^b + e^c)``: -inf where all three are, no inf - inf."""
    m = xp.maximum(xp.maximum(a, b), c)
    finite = xp.isfinite(m)
    ms = xp.where(finite, m, 0)
    total = xp.exp(a - ms) + xp.exp(b - ms) + xp.exp(c - ms)
    return xp.where(finite, xp.log(xp.where(finite, total, 1)) + ms, m)


def _shift(xp: Any, a: Any, k: int, fill: Any) -> Any:
    """``a`` moved by ``k`` along its last axis (right for k > 0, left for k < 0), with
    ``fill`` entering at the open end."""
    out = xp.full(a.shape, fill, dtype=a.dtype)
    n = a.shape[-1]
    if abs(k) < n:
        if k >= 0:
            out[..., k:] = a[..., :n - k]
        else:
            out[..., :n + k] = a[..., -k:]
    return out


def _lattice(xp: Any, log_probs: Any, targets: Any, blank: int) -> tuple[Any, Any, Any]:
    """The extended labels ``ext [N, L]``, their log-probabilities ``lp_ext [T, N, L]`` and
    the allowed skips ``skip [N, L]`` (``s`` may be reached from ``s - 2``)."""
    t, n, c = log_probs.shape
    s = targets.shape[1]
    ext = xp.full((n, 2 * s + 1), blank, dtype=np.int64)
    if s:
        ext[:, 1::2] = xp.clip(targets, 0, c - 1)
    lp_ext = xp.take_along_axis(log_probs, xp.broadcast_to(ext[None], (t,) + ext.shape), axis=2)
    skip = xp.zeros(ext.shape, dtype=bool)
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]  # False for every blank (even) position
    return ext, lp_ext, skip


def _forward(xp: Any, lp_ext: Any, skip: Any, input_lengths: Any, keep: bool) -> tuple:
    """``alpha`` after each row's last time step, and every step's (frozen past ``T_n``) if
    ``keep``. ``alpha_{-1}`` is the unit vector at ``s = 0``, so that the first step of the
    recursion starts the paths in ``l'_0`` and ``l'_1``."""
    t_len, n, length = lp_ext.shape
    neg = -np.inf
    a = xp.full((n, length), neg, dtype=lp_ext.dtype)
    a[:, 0] = 0
    alphas = xp.empty(lp_ext.shape, dtype=lp_ext.dtype) if keep else None
    for t in range(t_len):
        new = lp_ext[t] + _logsumexp3(xp, a, _shift(xp, a, 1, neg),
                                      xp.where(skip, _shift(xp, a, 2, neg), neg))
        a = xp.where((input_lengths > t)[:, None], new, a)
        if keep:
            alphas[t] = a
    return a, alphas


def _ends(xp: Any, target_lengths: Any, length: int) -> Any:
    """``[N, L]``: whether ``s`` is one of a row's two final states (``2 S_n``, ``2 S_n - 1``)."""
    tl = xp.clip(target_lengths, 0, (length - 1) // 2)[:, None]
    s = xp.arange(length)[None]
    return (s == 2 * tl) | (s == 2 * tl - 1)


def _nll(xp: Any, a: Any, target_lengths: Any, zero_infinity: bool) -> Any:
    """``-logsumexp`` of the final states of ``alpha`` (inf where no alignment fits)."""
    ends = xp.where(_ends(xp, target_lengths, a.shape[1]), a, -np.inf)
    m = xp.max(ends, axis=1) if ends.shape[0] else xp.zeros((0,), a.dtype)
    finite = xp.isfinite(m)
    ms = xp.where(finite, m, 0)
    total = xp.sum(xp.exp(ends - ms[:, None]), axis=1)
    nll = -xp.where(finite, xp.log(xp.where(finite, total, 1)) + ms, m)
    if zero_infinity:
        nll = xp.where(nll == np.inf, 0, nll)
    return nll.astype(a.dtype, copy=False)


def _loss_impl(xp, log_probs, targets, input_lengths, target_lengths, *, blank, zero_infinity):
    dtype = log_probs.dtype
    (log_probs,) = in_compute_dtype(log_probs)
    _, lp_ext, skip = _lattice(xp, log_probs, targets, blank)
    a, _ = _forward(xp, lp_ext, skip, input_lengths, keep=False)
    return _nll(xp, a, target_lengths, zero_infinity).astype(dtype, copy=False)


def _backward(xp: Any, lp_ext: Any, skip: Any, input_lengths: Any, target_lengths: Any) -> Any:
    """Every time step's ``beta`` (``-inf`` for ``t >= T_n``)."""
    t_len, n, length = lp_ext.shape
    neg = -np.inf
    ends = _ends(xp, target_lengths, length)
    skip_next = _shift(xp, skip, -2, False)  # s + 2 may be reached from s
    last = (input_lengths - 1)[:, None]
    b = xp.full((n, length), neg, dtype=lp_ext.dtype)
    betas = xp.empty(lp_ext.shape, dtype=lp_ext.dtype)
    for t in reversed(range(t_len)):
        rec = lp_ext[t] + _logsumexp3(xp, b, _shift(xp, b, -1, neg),
                                      xp.where(skip_next, _shift(xp, b, -2, neg), neg))
        start = xp.where(ends, lp_ext[t], neg)
        b = xp.where(last == t, start, xp.where(last > t, rec, neg))
        betas[t] = b
    return betas


def _posteriors_impl(xp, log_probs, targets, input_lengths, target_lengths, *, blank,
                     zero_infinity):
    t_len, n, c = log_probs.shape
    out_dtype = log_probs.dtype
    (log_probs,) = in_compute_dtype(log_probs)
    dtype = log_probs.dtype
    ext, lp_ext, skip = _lattice(xp, log_probs, targets, blank)
    a, alphas = _forward(xp, lp_ext, skip, input_lengths, keep=True)
    nll = _nll(xp, a, target_lengths, False)
    betas = _backward(xp, lp_ext, skip, input_lengths, target_lengths)
    both = xp.isfinite(alphas) & xp.isfinite(betas)
    feasible = nll < np.inf
    log_q = (xp.where(both, alphas, 0) + xp.where(both, betas, 0) - xp.where(both, lp_ext, 0)
             + xp.where(feasible, nll, 0)[None, :, None])
    q = xp.where(both, xp.exp(xp.where(both, log_q, 0)), 0)  # [T, N, L]
    onehot = (ext[:, :, None] == xp.arange(c)[None, None, :]).astype(dtype)  # [N, L, C]
    gamma = xp.transpose(xp.matmul(xp.transpose(q, (1, 0, 2)), onehot), (1, 0, 2))
    fill = 0 if zero_infinity else np.nan
    bad = (~feasible)[None, :, None] & (xp.arange(t_len)[:, None, None]
                                        < input_lengths[None, :, None])
    return xp.ascontiguousarray(xp.where(bad, fill, gamma).astype(out_dtype, copy=False))


# -- the composite log Z (for the derivatives of ctc_posteriors) ------------------------------

def _shifted(fnp: Any, a: Any, k: int) -> Any:
    """``a[:, s - k]`` (0 for ``s < k``), with functx operations."""
    n, length = shape_of(a)
    if k >= length:
        return fnp.zeros((n, length), dtype=a.dtype, like=a)
    return fnp.concatenate([fnp.zeros((n, k), dtype=a.dtype, like=a), a[:, :length - k]],
                           axis=1)


def _feasible(fnp: Any, targets: Any, input_lengths: Any, target_lengths: Any) -> Any:
    """``[N]`` bools: some alignment fits (``T_n >= S_n + repeated neighbours``)."""
    s = shape_of(targets)[1]
    need = target_lengths
    if s > 1:
        j = fnp.arange(1, s, like=targets)[None]
        repeats = (targets[:, 1:] == targets[:, :-1]) & (j < target_lengths[:, None])
        need = need + fnp.sum(fnp.astype(repeats, target_lengths.dtype), axis=1)
    return input_lengths >= need


def _log_z(lp: Any, targets: Any, input_lengths: Any, target_lengths: Any,
           blank: int) -> Any:
    """``log Z [N]`` by the forward recursion in probability space, each step normalised
    (``alpha`` rescaled to sum to 1, the scale's logarithm accumulated), with functx
    operations only, so every transform differentiates it. The rows' target lengths must
    admit an alignment."""
    fnp = HOOKS.numpy  # NumPy-style indexing and creation functions (see the module doc)
    t_len, n, c = shape_of(lp)
    s = shape_of(targets)[1]
    length = 2 * s + 1
    pos = fnp.arange(length, like=lp)
    if s:
        label_of = np.clip((np.arange(length) - 1) // 2, 0, s - 1)  # static: host NumPy
        labels = fnp.take(fnp.clip(targets, 0, c - 1), label_of, axis=1)
        ext = fnp.where(pos % 2 == 1, labels, blank)
    else:
        ext = fnp.full((n, 1), blank, dtype=np.int64, like=lp)
    skip = fnp.concatenate([fnp.zeros((n, min(2, length)), dtype=bool, like=lp),
                            ext[:, 2:] != ext[:, :-2]], axis=1)
    lp_ext = fnp.take_along_axis(lp, fnp.broadcast_to(ext[None], (t_len, n, length)), axis=2)
    # Any per-step shift is exact (it is added back); stop_gradient spares max's derivative.
    m = stop_gradient(fnp.max(lp_ext, axis=2))
    y = fnp.exp(lp_ext - m[:, :, None])
    a = fnp.broadcast_to(fnp.astype(pos == 0, lp.dtype, copy=False), (n, length))
    log_z = fnp.zeros((n,), dtype=lp.dtype, like=lp)
    for t in range(t_len):
        new = y[t] * (a + _shifted(fnp, a, 1) + fnp.where(skip, _shifted(fnp, a, 2), 0))
        active = input_lengths > t
        scale = fnp.where(active, fnp.sum(new, axis=1), 1)
        a = fnp.where(active[:, None], new / scale[:, None], a)
        log_z = log_z + fnp.where(active, fnp.log(scale) + m[t], 0)
    last = 2 * target_lengths[:, None]
    ends = (pos[None] == last) | (pos[None] == last - 1)
    return log_z + fnp.log(fnp.sum(fnp.where(ends, a, 0), axis=1))


@in_float32
def _hessian_product(v: Any, log_probs: Any, targets: Any, input_lengths: Any,
                     target_lengths: Any, blank: int, zero_infinity: bool) -> Any:
    """``H v`` with ``H`` the Hessian of ``log Z`` in ``log_probs``: the JVP of
    ctc_posteriors, and (``H`` being symmetric) its VJP. Rows without an alignment get NaN
    (0 with ``zero_infinity``) where ``t < T_n``, as ctc_posteriors itself does."""
    fnp = HOOKS.numpy
    t_len = shape_of(log_probs)[0]
    feasible = _feasible(fnp, targets, input_lengths, target_lengths)
    safe_lengths = fnp.where(feasible, target_lengths, 0)  # keeps the composite finite

    def total_log_z(lp: Any) -> Any:
        return fnp.sum(_log_z(lp, targets, input_lengths, safe_lengths, blank))

    hv = composite_jvp(HOOKS.grad(total_log_z), (log_probs,), (v,))  # forward-over-reverse
    bad = (~feasible)[None, :, None] & (fnp.arange(t_len, like=log_probs)[:, None, None]
                                        < input_lengths[None, :, None])
    return fnp.where(bad, 0 if zero_infinity else np.nan, hv)


# -- the primitives --------------------------------------------------------------------------

ctc_loss_p = Primitive("ctc_loss")
ctc_loss_p.def_abstract_eval(_loss_aval)
ctc_loss_p.def_impl(_loss_impl)

ctc_posteriors_p = Primitive("ctc_posteriors")
ctc_posteriors_p.def_abstract_eval(_posteriors_aval)
ctc_posteriors_p.def_impl(_posteriors_impl)


@ctc_loss_p.def_vjp(save_inputs=(0, 1, 2, 3))
def _loss_vjp(ct, ins, out, *, blank, zero_infinity):
    """``d nll / d log_probs = -gamma``, row by row."""
    gamma = bind(ctc_posteriors_p, *ins, blank=blank, zero_infinity=zero_infinity)
    return -(ct[None, :, None] * gamma), None, None, None


@ctc_loss_p.def_jvp
def _loss_jvp(tangents, primals, out, *, blank, zero_infinity):
    if tangents[0] is None:
        return None
    gamma = bind(ctc_posteriors_p, *primals, blank=blank, zero_infinity=zero_infinity)
    return _ew.neg(_red.reduce_sum(_ew.mul(gamma, tangents[0]), (0, 2)))


@ctc_posteriors_p.def_vjp(save_inputs=(0, 1, 2, 3))
def _posteriors_vjp(ct, ins, out, *, blank, zero_infinity):
    return _hessian_product(ct, *ins, blank, zero_infinity), None, None, None


@ctc_posteriors_p.def_jvp
def _posteriors_jvp(tangents, primals, out, *, blank, zero_infinity):
    if tangents[0] is None:
        return None
    return _hessian_product(tangents[0], *primals, blank, zero_infinity)


def _folded(args: tuple, dims: tuple) -> tuple[tuple, int, int]:
    """The operands with the vmapped axis (size B) folded into the batch: ``log_probs``
    ``[T, B*N, C]``, the others ``[B*N, ...]`` (unbatched ones broadcast first)."""
    size = batch_size(args, dims)
    lp, targets, il, tl = args
    lp = batch_at(lp, dims[0], 1, size)
    t_len, b, n, c = shape_of(lp)
    targets = batch_at(targets, dims[1], 0, size)
    il, tl = batch_at(il, dims[2], 0, size), batch_at(tl, dims[3], 0, size)
    return ((_shape.reshape(lp, (t_len, b * n, c)),
             _shape.reshape(targets, (b * n, shape_of(targets)[2])),
             _shape.reshape(il, (b * n,)), _shape.reshape(tl, (b * n,))), b, n)


@ctc_loss_p.def_batch
def _loss_batch(args, dims, **params):
    folded, b, n = _folded(tuple(args), tuple(dims))
    return _shape.reshape(bind(ctc_loss_p, *folded, **params), (b, n)), 0


@ctc_posteriors_p.def_batch
def _posteriors_batch(args, dims, **params):
    folded, b, n = _folded(tuple(args), tuple(dims))
    out = bind(ctc_posteriors_p, *folded, **params)
    t_len, _, c = shape_of(out)
    return _shape.reshape(out, (t_len, b, n, c)), 1


# -- the wrappers ----------------------------------------------------------------------------

def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, *,
             blank: int = 0, zero_infinity: bool = False) -> Any:
    """The CTC negative log-likelihood of each row (see the module docstring); operands as
    the primitive takes them (functx.nn.ctc_loss is the user-facing function)."""
    return bind(ctc_loss_p, log_probs, targets, input_lengths, target_lengths,
                blank=int(blank), zero_infinity=bool(zero_infinity))


def ctc_posteriors(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, *,
                   blank: int = 0, zero_infinity: bool = False) -> Any:
    """``-d ctc_loss / d log_probs``: the posterior probability of each class at each time
    step (see the module docstring)."""
    return bind(ctc_posteriors_p, log_probs, targets, input_lengths, target_lengths,
                blank=int(blank), zero_infinity=bool(zero_infinity))
