"""Classification and divergence losses: nll_loss, cross_entropy, binary_cross_entropy,
binary_cross_entropy_with_logits, kl_div (torch.nn.functional's names and arguments).

Shared conventions (PyTorch's):

* ``reduction`` is "none" (per-element losses), "mean" or "sum"; kl_div also takes
  "batchmean". The deprecated ``size_average``/``reduce`` arguments are honoured, with a
  warning, and override ``reduction`` as in PyTorch.
* The class dimension is 1 for inputs with 2 or more dimensions (``(N, C, d1, ...)``) and
  0 for a 1-d input ``(C,)`` (one sample).
* Stable forms: cross_entropy is ``nll_loss(log_softmax(x))`` with the fused log_softmax
  primitive (as in PyTorch); binary_cross_entropy_with_logits uses ``log_sigmoid``, never
  ``log(sigmoid(x))``; binary_cross_entropy clamps its logarithms at -100 as PyTorch does.
* Class-index losses are the fused ``class_nll`` primitive (functx/primitives/nll.py: one
  operation forward and one backward, none of which waits for the device); functx maps an
  ``ignore_index`` inside the classes out of range, where a target contributes nothing.
* Checks that need values (class indices in range, probabilities in [0, 1]) are made
  where the values are known on the host (not inside vmap/make_trace). Class indices on a
  device (CuPy) are not checked: reading them back would wait for the device at every call
  (as PyTorch checks them on the device, functx leaves them unchecked there; an index out of
  range picks nothing).

Example:
    >>> import functx.nn as fnn
    >>> fnn.cross_entropy(np.zeros((2, 3)), np.array([0, 2]))   # log(3)
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import ConcretizationError, DTypeError, ShapeError
from functx.nn._util import (ArgumentError, array, broadcastable, check_int, check_number,
                             check_reduction, float_array, host_value, legacy_reduction,
                             reduce_loss)
from functx.nn.activations import log_sigmoid
from functx.numpy._promotion import is_tracer
from functx.primitives import elementwise as _ew
from functx.primitives import fused as _fused
from functx.primitives import nll as _nll

__all__ = ["nll_loss", "cross_entropy", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div"]


def _class_dim(fn: str, x: Any) -> int:
    if x.ndim == 0:
        raise ShapeError(f"functx.nn.{fn}: input must have a class dimension: shape (C,) or "
                         f"(N, C, d1, ...), but it is 0-d.")
    return 1 if x.ndim >= 2 else 0


def _check_weight(fn: str, weight: Any, c: int) -> Any:
    if weight is None:
        return None
    w = float_array(weight, fn, "weight")
    if tuple(w.shape) != (c,):
        raise ShapeError(f"functx.nn.{fn}: weight must have one entry per class, shape "
                         f"({c},), but it has shape {tuple(w.shape)}.")
    return w


def _check_class_target(fn: str, x: Any, target: Any, ignore_index: int) -> Any:
    """Integer class-index target of the right shape, values checked where known."""
    t = array(target)
    if np.dtype(t.dtype).kind not in "iu":
        raise DTypeError(f"functx.nn.{fn}: target must hold integer class indices (or, for "
                         f"cross_entropy, class probabilities of input's shape and a float "
                         f"dtype), but it has dtype {t.dtype} and shape {tuple(t.shape)}.")
    expected = (x.shape[0],) + tuple(x.shape[2:]) if x.ndim >= 2 else ()
    if tuple(t.shape) != expected:
        raise ShapeError(f"functx.nn.{fn}: for input of shape {tuple(x.shape)} the class-index "
                         f"target must have shape {expected} (input's shape without the "
                         f"class dimension), but it has shape {tuple(t.shape)}.")
    c = x.shape[1 if x.ndim >= 2 else 0]
    v = _host_index_values(t)
    if v is not None:
        bad = v[((v < 0) | (v >= c)) & (v != ignore_index)]
        if bad.size:
            raise ArgumentError(f"functx.nn.{fn}: target holds the class index {bad.ravel()[0]}"
                                f", out of range for {c} classes (valid: 0..{c - 1}, or "
                                f"ignore_index={ignore_index}).")
    return t


def _host_index_values(t: Any) -> np.ndarray | None:
    """``t``'s values for the range check where they are on the host (see the module
    docstring); None for abstract tracers and for values on a device."""
    v = t
    if is_tracer(t):
        try:
            v = t._concrete("a check of class indices")
        except ConcretizationError:
            return None
    return host_value(v) if isinstance(v, (np.ndarray, np.generic)) else None


def _weighted_targets(t: Any, w: Any, valid: Any, dtype: Any) -> Any:
    """Each position's class weight (1 without weights), 0 where ignored."""
    if w is None:
        return fnp.astype(valid, dtype)
    safe = fnp.where(valid, t, 0)
    return fnp.where(valid, fnp.take(w, safe), 0.0)


def _reduce_weighted(loss: Any, wt: Any, reduction: str) -> Any:
    if reduction == "none":
        return loss
    total = fnp.sum(loss)
    return total if reduction == "sum" else fnp.divide(total, fnp.sum(wt))


def _class_nll(x: Any, t: Any, w: Any, ii: int, cd: int, reduction: str) -> Any:
    """``-weight[t] * x[t]`` along the class dimension ``cd`` at each position (0 where
    ``t == ignore_index``), reduced: the fused ``class_nll`` primitive."""
    if 0 <= ii < x.shape[cd]:  # an ignored class that exists: point it out of range
        t = fnp.where(fnp.not_equal(t, ii), t, -1)
    if w is None:
        w = _ew.scalar(x, 1)
    elif np.dtype(w.dtype) != np.dtype(x.dtype):  # promote both, as NumPy would
        dt = np.result_type(x.dtype, w.dtype)
        x, w = fnp.astype(x, dt), fnp.astype(w, dt)
    return _nll.class_nll(x, t, w, axis=cd, reduction=reduction)


def nll_loss(input: Any, target: Any, weight: Any = None, size_average: bool | None = None,
             ignore_index: int = -100, reduce: bool | None = None,
             reduction: str = "mean") -> Any:
    """The negative log-likelihood loss ``-weight[t] * input[n, t]`` for log-probabilities.

    Args:
        input: log-probabilities, shape ``(N, C, d1, ...)`` or ``(C,)``.
        target: integer class indices, shape ``(N, d1, ...)`` (or ``()`` for a 1-d
            input), in ``[0, C)`` or equal to ``ignore_index``.
        weight: None or per-class weights of shape ``(C,)``.
        size_average: deprecated (see ``reduction``).
        ignore_index: a target value that contributes nothing (loss and weight 0).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" (the weighted mean: divided by the sum of the targets'
            weights, NaN if every target is ignored) or "sum".

    Returns:
        A scalar, or the per-position losses for ``reduction="none"``.

    Raises:
        ShapeError: mismatched input/target/weight shapes.
        DTypeError: a non-integer target.
        ArgumentError: a class index out of range, or a bad ``reduction``.

    Example:
        >>> fnn.nll_loss(np.log(np.array([[0.5, 0.5]])), np.array([1]))   # log(2)
    """
    reduction = legacy_reduction("nll_loss", size_average, reduce, reduction)
    check_reduction("nll_loss", reduction)
    ii = check_int("nll_loss", "ignore_index", ignore_index)
    x = float_array(input, "nll_loss")
    cd = _class_dim("nll_loss", x)
    w = _check_weight("nll_loss", weight, x.shape[cd])
    t = _check_class_target("nll_loss", x, target, ii)
    return _class_nll(x, t, w, ii, cd, reduction)


def cross_entropy(input: Any, target: Any, weight: Any = None,
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Any:
    """The cross-entropy between ``softmax(input)`` (over the class dimension) and
    ``target``, from unnormalised logits.

    With class indices the loss at each position is ``weight[t] * (logsumexp(x) - x[t])``,
    computed as ``nll_loss(log_softmax(x))`` (the fused, stable log_softmax). With label
    smoothing ``eps`` it becomes ``(1 - eps) * nll + eps / C * smooth``, ``smooth =
    -sum_c weight[c] * log_softmax(x)_c``, both reduced alike (PyTorch's definition). With class probabilities (a float target of
    input's shape) it is ``-sum_c weight[c] * p_c * log_softmax(x)_c``, the target
    smoothed to ``(1 - eps) * p + eps / C`` first; "mean" then averages over positions
    (not weights), as in PyTorch.

    Args:
        input: logits, shape ``(N, C, d1, ...)`` or ``(C,)``.
        target: integer class indices of shape ``(N, d1, ...)`` (``()`` for a 1-d input),
            or float class probabilities of input's shape.
        weight: None or per-class weights of shape ``(C,)``.
        size_average: deprecated (see ``reduction``).
        ignore_index: a class-index target value that contributes nothing (indices only).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum" (see :func:`nll_loss` for the weighted mean).
        label_smoothing: in ``[0, 1]``.

    Returns:
        A scalar, or the per-position losses for ``reduction="none"``.

    Raises:
        ShapeError: mismatched shapes.
        DTypeError: a target that is neither integer indices nor float probabilities.
        ArgumentError: a class index out of range, a bad ``reduction`` or
            ``label_smoothing``.

    Example:
        >>> fnn.cross_entropy(logits, labels, label_smoothing=0.1)
    """
    reduction = legacy_reduction("cross_entropy", size_average, reduce, reduction)
    check_reduction("cross_entropy", reduction)
    ii = check_int("cross_entropy", "ignore_index", ignore_index)
    eps = check_number("cross_entropy", "label_smoothing", label_smoothing, lo=0.0, hi=1.0)
    x = float_array(input, "cross_entropy")
    cd = _class_dim("cross_entropy", x)
    c = x.shape[cd]
    w = _check_weight("cross_entropy", weight, c)
    t = array(target)
    w_b = None if w is None else fnp.reshape(w, (c,) + (1,) * (x.ndim - 1 - cd))
    if np.dtype(t.dtype).kind == "f":
        if tuple(t.shape) != tuple(x.shape):
            raise ShapeError(f"functx.nn.cross_entropy: a float target holds class "
                             f"probabilities and must have input's shape {tuple(x.shape)}, "
                             f"but it has shape {tuple(t.shape)} (for class indices, pass "
                             "an integer target).")
        logp = _fused.log_softmax(x, axis=cd)
        if eps > 0:
            t = fnp.add(fnp.multiply(t, 1.0 - eps), eps / c)
        terms = fnp.multiply(logp, t)
        if w_b is not None:
            terms = fnp.multiply(terms, w_b)
        loss = fnp.negative(fnp.sum(terms, axis=cd))
        return reduce_loss("cross_entropy", loss, reduction)
    t = _check_class_target("cross_entropy", x, t, ii)
    logp = _fused.log_softmax(x, axis=cd)
    result = _class_nll(logp, t, w, ii, cd, reduction)
    if eps == 0:
        return result
    valid = fnp.not_equal(t, ii)
    wt = _weighted_targets(t, w, valid, x.dtype)
    smooth = fnp.negative(fnp.sum(logp if w_b is None else fnp.multiply(logp, w_b), axis=cd))
    smooth = _reduce_weighted(fnp.where(valid, smooth, 0.0), wt, reduction)
    return fnp.add(fnp.multiply(1.0 - eps, result), fnp.multiply(eps / c, smooth))


def _check_same_shape(fn: str, x: Any, t: Any) -> None:
    if tuple(t.shape) != tuple(x.shape):
        raise ShapeError(f"functx.nn.{fn}: target shape {tuple(t.shape)} must be the same as "
                         f"input shape {tuple(x.shape)}.")


def _check_broadcasts_to(fn: str, name: str, a: Any, shape: tuple[int, ...]) -> Any:
    if a is None:
        return None
    a = float_array(a, fn, name)
    if not broadcastable(a.shape, shape) or np.broadcast_shapes(tuple(a.shape), shape) != shape:
        raise ShapeError(f"functx.nn.{fn}: {name} of shape {tuple(a.shape)} does not "
                         f"broadcast to the input shape {shape}.")
    return a


def _check_unit_interval(fn: str, name: str, a: Any) -> None:
    v = host_value(a)
    outside = None if v is None else v[~((v >= 0) & (v <= 1))]
    if outside is not None and outside.size:
        raise ArgumentError(f"functx.nn.{fn}: all elements of {name} should be between 0 and "
                            f"1 (probabilities), but it holds {outside.ravel()[0]}. For "
                            "logits use binary_cross_entropy_with_logits.")


def binary_cross_entropy(input: Any, target: Any, weight: Any = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Any:
    """``-weight * (t * log(x) + (1 - t) * log(1 - x))`` for probabilities ``x``, with each
    logarithm clamped below at -100 (PyTorch's convention: finite at ``x`` = 0 or 1).

    Prefer :func:`binary_cross_entropy_with_logits` on logits: it is stable everywhere.
    The gradient is that of this (clamped) formula; it agrees with PyTorch's
    ``(x - t) / max(x * (1 - x), 1e-12)`` except at ``x`` exactly 0 or 1.

    Args:
        input: probabilities in ``[0, 1]``.
        target: same shape as ``input``, values in ``[0, 1]``.
        weight: None or an array broadcasting to ``input``'s shape.
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: ``target`` or ``weight`` shapes.
        ArgumentError: values outside ``[0, 1]`` (where known), or a bad ``reduction``.

    Example:
        >>> fnn.binary_cross_entropy(np.array([0.5]), np.array([1.0]))   # log(2)
    """
    reduction = legacy_reduction("binary_cross_entropy", size_average, reduce, reduction)
    check_reduction("binary_cross_entropy", reduction)
    x = float_array(input, "binary_cross_entropy")
    t = float_array(target, "binary_cross_entropy", "target")
    _check_same_shape("binary_cross_entropy", x, t)
    w = _check_broadcasts_to("binary_cross_entropy", "weight", weight, tuple(x.shape))
    _check_unit_interval("binary_cross_entropy", "input", x)
    _check_unit_interval("binary_cross_entropy", "target", t)
    floor = math.exp(-100.0)  # log(max(x, e^-100)) = max(log(x), -100)
    log_x = fnp.log(fnp.maximum(x, floor))
    log_1mx = fnp.log(fnp.maximum(fnp.subtract(1.0, x), floor))
    loss = fnp.negative(fnp.add(fnp.multiply(t, log_x),
                                fnp.multiply(fnp.subtract(1.0, t), log_1mx)))
    if w is not None:
        loss = fnp.multiply(loss, w)
    return reduce_loss("binary_cross_entropy", loss, reduction)


def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None,
                                     size_average: bool | None = None,
                                     reduce: bool | None = None, reduction: str = "mean",
                                     pos_weight: Any = None) -> Any:
    """Binary cross-entropy on logits: ``(1 - t) * x - (1 + (pos_weight - 1) * t) *
    log_sigmoid(x)``, times ``weight``; stable for any ``x`` (no ``log(sigmoid(x))``).

    Args:
        input: logits.
        target: same shape as ``input``, values usually in ``[0, 1]``.
        weight: None or an array broadcasting to ``input``'s shape.
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".
        pos_weight: None or the weight of positive examples, broadcasting to ``input``'s
            shape (typically one entry per class, along the last dimension).

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: ``target``, ``weight`` or ``pos_weight`` shapes.
        ArgumentError: a bad ``reduction``.

    Example:
        >>> fnn.binary_cross_entropy_with_logits(np.array([100.0]), np.array([0.0]))  # 100.
    """
    fn = "binary_cross_entropy_with_logits"
    reduction = legacy_reduction(fn, size_average, reduce, reduction)
    check_reduction(fn, reduction)
    x = float_array(input, fn)
    t = float_array(target, fn, "target")
    _check_same_shape(fn, x, t)
    w = _check_broadcasts_to(fn, "weight", weight, tuple(x.shape))
    pw = _check_broadcasts_to(fn, "pos_weight", pos_weight, tuple(x.shape))
    ls = log_sigmoid(x)
    if pw is not None:
        ls = fnp.multiply(ls, fnp.add(fnp.multiply(fnp.subtract(pw, 1.0), t), 1.0))
    loss = fnp.subtract(fnp.multiply(fnp.subtract(1.0, t), x), ls)
    if w is not None:
        loss = fnp.multiply(loss, w)
    return reduce_loss(fn, loss, reduction)


def kl_div(input: Any, target: Any, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Any:
    """The Kullback-Leibler divergence loss ``target * (log(target) - input)`` for
    log-probabilities ``input`` (PyTorch's argument order: the prediction first).

    Args:
        input: log-probabilities.
        target: probabilities (``0 * log(0)`` counts as 0), or log-probabilities with
            ``log_target=True`` (then the loss is ``exp(target) * (target - input)``);
            broadcasts with ``input``.
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "batchmean" (the sum divided by ``input.shape[0]``: the
            mathematical KL divergence per sample), "sum" or "mean" (divides by the
            number of elements too; PyTorch warns about it, and so does functx).
        log_target: whether ``target`` is given in log space.

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: shapes that do not broadcast.
        ArgumentError: a bad ``reduction``.

    Example:
        >>> fnn.kl_div(np.log(q), p, reduction="batchmean")
    """
    legacy = size_average is not None or reduce is not None
    reduction = legacy_reduction("kl_div", size_average, reduce, reduction)
    check_reduction("kl_div", reduction, ("none", "batchmean", "sum", "mean"))
    if reduction == "mean" and not legacy:
        warnings.warn("functx.nn.kl_div: reduction='mean' divides the total loss by both the "
                      "batch size and the support size; 'batchmean' divides only by the batch "
                      "size and matches the mathematical definition (as PyTorch warns).",
                      stacklevel=2)
    x = float_array(input, "kl_div")
    t = float_array(target, "kl_div", "target")
    if not broadcastable(x.shape, t.shape):
        raise ShapeError(f"functx.nn.kl_div: input shape {tuple(x.shape)} and target shape "
                         f"{tuple(t.shape)} do not broadcast.")
    if log_target:
        loss = fnp.multiply(fnp.exp(t), fnp.subtract(t, x))
    else:
        zero = fnp.equal(t, 0)
        xlogx = fnp.where(zero, 0.0, fnp.multiply(t, fnp.log(fnp.where(zero, 1.0, t))))
        loss = fnp.subtract(xlogx, fnp.multiply(t, x))
    if reduction == "batchmean":
        total = fnp.sum(loss)
        return fnp.divide(total, x.shape[0]) if x.ndim else total
    return reduce_loss("kl_div", loss, reduction)
