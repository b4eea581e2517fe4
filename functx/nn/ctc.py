"""ctc_loss: the connectionist temporal classification loss (torch.nn.functional.ctc_loss).

The loss of one sequence is ``-log`` of the total probability of every alignment of its
target with its input: paths over ``T_n`` time steps that spell the target once repeated
classes are merged and blanks dropped. It is computed in log space by the dedicated
primitive ``ctc_loss`` (functx/primitives/ctc.py): a forward (alpha) recursion vectorised
over the batch, whose gradient is the forward-backward (alpha-beta) posteriors. ``grad``,
``vjp``, ``jvp`` and ``vmap`` work through it, to any order.

Differences from PyTorch:

* The gradient with respect to ``log_probs`` is the true derivative of the loss. PyTorch's
  CPU and CUDA kernels return ``exp(log_probs) - posteriors`` instead (for ``t <
  input_length``), the gradient with respect to the logits *assuming* ``log_probs`` came
  from ``log_softmax`` over the classes. Both give the same gradient with respect to the
  logits of ``log_softmax(logits)`` (the usual case); they differ by ``exp(log_probs)``
  with respect to ``log_probs`` themselves.
* Targets, inside their lengths, must be class indices in ``[0, C)`` other than ``blank``
  (PyTorch documents this but does not check it); they must have an integer dtype, and the
  lengths an integer dtype (or be sequences of ints).

Example:
    >>> import numpy as np, functx as fx, functx.nn as fnn
    >>> logits = np.zeros((5, 2, 4))                      # T=5, N=2, C=4
    >>> targets = np.array([[1, 2], [3, 0]])              # the second row's target is [3]
    >>> loss = lambda z: fnn.ctc_loss(fnn.log_softmax(z, 2), targets, [5, 4], [2, 1])
    >>> g = fx.grad(loss)(logits)                         # shape (5, 2, 4)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import functx.numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.nn._util import ArgumentError, array, check_int, check_reduction, host_value
from functx.numpy._shape import on_device_of
from functx.primitives import ctc as _ctc
from functx.primitives.indexing import gather

__all__ = ["ctc_loss"]

_FN = "ctc_loss"


def _int_operand(name: str, x: Any) -> Any:
    a = array(x)
    if np.dtype(a.dtype).kind not in "iu":
        raise DTypeError(f"functx.nn.{_FN}: {name} must hold integers, but it has dtype "
                         f"{a.dtype} (shape {tuple(a.shape)}). Convert it with "
                         ".astype(np.int64).")
    return a


def _lengths(name: str, x: Any, n: int, unbatched: bool, like: Any) -> Any:
    """A length operand as a 1-d ``[N]`` integer array. Python ints and sequences of them,
    NumPy scalars and 0-d NumPy arrays are made on the device of ``like`` (log_probs), as
    scalars join the device of the other operands everywhere in functx."""
    if not hasattr(x, "dtype") or isinstance(x, np.generic) or (
            isinstance(x, np.ndarray) and x.ndim == 0):
        x = on_device_of(like, np.asarray(x))
    a = _int_operand(name, x)
    if unbatched and a.ndim == 0:
        return fnp.reshape(a, (1,))
    if a.ndim != 1 or a.shape[0] != n:
        what = "a scalar or shape (1,)" if unbatched else f"shape ({n},), one per batch row,"
        raise ShapeError(f"functx.nn.{_FN}: {name} must have {what} but it has shape "
                         f"{tuple(a.shape)} (log_probs has N={n} batch rows).")
    return a


def _check_length_values(name: str, v: np.ndarray, hi: int, what: str) -> None:
    bad = np.flatnonzero((v < 0) | (v > hi))
    if bad.size:
        i = int(bad[0])
        raise ArgumentError(f"functx.nn.{_FN}: {name}[{i}] = {int(v[i])} is out of range: it "
                            f"must be in [0, {hi}] ({what}).")


def _check_labels(v: np.ndarray, valid: np.ndarray, c: int, blank: int, padded: bool) -> None:
    """Labels inside the target lengths (``valid``) are classes in [0, C) other than blank."""
    bad = np.argwhere(valid & ((v < 0) | (v >= c) | (v == blank)))
    if bad.size:
        pos = tuple(int(i) for i in bad[0])
        label = int(v[pos])
        where = f"targets[{', '.join(map(str, pos))}]"
        why = (f"the blank label (blank={blank})" if label == blank
               else f"out of range for C={c} classes (valid: 0..{c - 1})")
        raise ArgumentError(f"functx.nn.{_FN}: {where} = {label} is {why}. Targets hold the "
                            "labels to recognise: class indices other than blank"
                            + (" (entries past a row's target length are ignored)." if padded
                               else "."))


def _padded(targets: Any, target_lengths: Any, known: np.ndarray | None, n: int) -> Any:
    """Concatenated targets as ``[N, S]`` padded rows (``S`` the longest target where the
    lengths are known, else the concatenation's length, which gives the same losses)."""
    total = targets.shape[0]
    width = (int(known.max()) if known.size else 0) if known is not None else total
    if width == 0 or total == 0:
        return fnp.zeros((n, 0), dtype=targets.dtype, like=targets)
    starts = fnp.cumsum(target_lengths) - target_lengths
    idx = starts[:, None] + fnp.arange(width, like=targets)[None, :]
    return gather(targets, fnp.astype(idx, np.int64), axis=0)  # clamps past the end


def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Any:
    """The CTC loss, as ``torch.nn.functional.ctc_loss``.

    Args:
        log_probs: ``[T, N, C]`` (or ``[T, C]`` for one unbatched sequence) floating-point
            log-probabilities of each class at each time step, usually ``log_softmax`` over
            the classes (any real values are accepted; see the module docstring for the
            gradient).
        targets: integer labels, either padded ``[N, S]`` (``S`` at least the longest
            target; entries past a row's target length are ignored) or all targets
            concatenated, 1-d of length ``sum(target_lengths)``. Unbatched: ``[S]``
            (exactly ``target_length`` labels) or ``[1, S]`` padded.
        input_lengths: ``[N]`` ints in ``[0, T]`` (array or sequence; a scalar when
            unbatched): the time steps of each sequence.
        target_lengths: ``[N]`` ints in ``[0, S]``: the labels of each target.
        blank: the blank class, in ``[0, C)``.
        reduction: ``'none'`` (one loss per sequence, ``[N]``, or 0-d unbatched), ``'sum'``,
            or ``'mean'``: each loss divided by its target length (at least 1), then the
            mean over the batch (PyTorch's definition).
        zero_infinity: give 0 (and a zero gradient) instead of ``inf`` (and a NaN
            gradient) for sequences that no alignment fits: ``input_length`` shorter than
            ``target_length`` plus the number of repeated neighbouring labels.

    Returns:
        The loss, dtype of ``log_probs``.

    Raises:
        ShapeError: wrong ranks, mismatched batch sizes, empty ``log_probs``, padded targets
            narrower than a target length, concatenated targets not ``sum(target_lengths)``
            long.
        DTypeError: non-float ``log_probs``, non-integer targets or lengths.
        ArgumentError: unknown ``reduction``, ``blank`` out of ``[0, C)``, lengths out of
            range, or target labels that are ``blank`` or out of ``[0, C)``. Checks on
            values are made where the values are known (not inside ``vmap``/``make_trace``).

    Example:
        >>> lp = fnn.log_softmax(np.zeros((4, 3)), 1)                # T=4, C=3, unbatched
        >>> fnn.ctc_loss(lp, np.array([1, 2]), 4, 2, reduction="none")  # -log(P(path set))
    """
    check_reduction(_FN, reduction)
    blank = check_int(_FN, "blank", blank)
    if not isinstance(zero_infinity, (bool, np.bool_)):
        raise ArgumentError(f"functx.nn.{_FN}: zero_infinity must be a bool, not "
                            f"{type(zero_infinity).__name__} {zero_infinity!r}.")
    lp = array(log_probs)
    if np.dtype(lp.dtype).kind != "f":
        raise DTypeError(f"functx.nn.{_FN}: log_probs must be floating point, but it has "
                         f"dtype {lp.dtype} (shape {tuple(lp.shape)}). Pass log-probabilities,"
                         " e.g. functx.nn.log_softmax(logits, -1).")
    if lp.ndim not in (2, 3):
        raise ShapeError(f"functx.nn.{_FN}: log_probs must have shape [T, N, C] (or [T, C] "
                         f"for one unbatched sequence), but it has shape {tuple(lp.shape)}.")
    shape = tuple(lp.shape)
    unbatched = lp.ndim == 2
    if unbatched:
        lp = fnp.expand_dims(lp, 1)
    t_len, n, c = lp.shape
    if t_len == 0 or n == 0 or c == 0:
        raise ShapeError(f"functx.nn.{_FN}: log_probs must not be empty, but it has shape "
                         f"{shape}.")
    if not 0 <= blank < c:
        raise ArgumentError(f"functx.nn.{_FN}: blank={blank} is out of range for C={c} "
                            f"classes (log_probs shape {shape}); it must be "
                            f"in [0, {c - 1}].")
    il = _lengths("input_lengths", input_lengths, n, unbatched, lp)
    tl = _lengths("target_lengths", target_lengths, n, unbatched, lp)
    tg = _int_operand("targets", targets)
    if tg.ndim not in (1, 2) or (tg.ndim == 2 and tg.shape[0] != n):
        want = "[1, S] padded or [S]" if unbatched else f"[N={n}, S] padded or 1-d concatenated"
        raise ShapeError(f"functx.nn.{_FN}: targets must be {want}, but it has shape "
                         f"{tuple(tg.shape)} (log_probs has shape {shape}).")

    il_v, tl_v = host_value(il), host_value(tl)
    if il_v is not None:
        _check_length_values("input_lengths", il_v, t_len, f"T={t_len} time steps")
    if tl_v is not None:
        if tg.ndim == 2:
            _check_length_values("target_lengths", tl_v, tg.shape[1],
                                 f"padded targets have S={tg.shape[1]} labels a row")
        else:
            _check_length_values("target_lengths", tl_v, tg.shape[0],
                                 f"concatenated targets hold {tg.shape[0]} labels")
            if int(tl_v.sum()) != tg.shape[0]:
                raise ShapeError(f"functx.nn.{_FN}: concatenated (1-d) targets must hold "
                                 f"sum(target_lengths) = {int(tl_v.sum())} labels, but they "
                                 f"hold {tg.shape[0]}.")
    tg_v = host_value(tg)
    if tg_v is not None and tl_v is not None:
        if tg.ndim == 2:
            valid = np.arange(tg.shape[1])[None, :] < tl_v[:, None]
        else:
            valid = np.ones(tg.shape, dtype=bool)
        _check_labels(tg_v, valid, c, blank, padded=tg.ndim == 2)
    if tg.ndim == 1:
        tg = _padded(tg, tl, tl_v, n)

    nll = _ctc.ctc_loss(lp, fnp.astype(tg, np.int64, copy=False),
                        fnp.astype(il, np.int64, copy=False),
                        fnp.astype(tl, np.int64, copy=False), blank=blank,
                        zero_infinity=bool(zero_infinity))
    if reduction == "none":
        return nll[0] if unbatched else nll
    if reduction == "sum":
        return fnp.sum(nll)
    return fnp.mean(nll / fnp.astype(fnp.maximum(tl, 1), nll.dtype))
