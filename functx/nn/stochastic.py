"""Activations with random outputs: rrelu and gumbel_softmax (torch.nn.functional's
arguments, plus the PRNG key as the keyword ``key``).

As with dropout (functx.nn.dropout), the randomness is a function of the key alone: the
same key gives the same output, recomputation under ``functx.checkpoint`` reproduces it,
and the gradient with a fixed key is that of a deterministic function of the input.

Example:
    >>> import functx.random as fxr, functx.nn as fnn
    >>> y = fnn.gumbel_softmax(logits, tau=0.5, hard=True, key=fxr.key(0))
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx import random as fxr
from functx.nn._util import ArgumentError, check_number, float_array, norm_dim
from functx.nn.activations import leaky_relu
from functx.numpy._shape import on_device_of
from functx.primitives import fused as _fused
from functx.primitives.misc import stop_gradient
from functx.random._prng import check_key

__all__ = ["rrelu", "gumbel_softmax"]


def _key(fn: str, key: Any, what: str) -> Any:
    if key is None:
        raise ArgumentError(f"functx.nn.{fn}: {what} needs a PRNG key: pass "
                            "key=functx.random.key(...) (functx randomness is key-based; "
                            "split or fold_in a fresh one per call).")
    return check_key(f"functx.nn.{fn}", key)


def rrelu(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False, *, key: Any = None) -> Any:
    """The randomised leaky ReLU: ``input`` where positive, ``a * input`` elsewhere.

    While training, each element's slope ``a`` is drawn from ``U(lower, upper)`` as
    ``functx.random.uniform(key, input.shape, input.dtype, lower, upper)`` (elements
    ``<= 0`` use it; the gradient there is ``a``, at 0 too, as in PyTorch). In evaluation
    (``training=False``, PyTorch's default) the slope is ``(lower + upper) / 2``:
    ``leaky_relu(input, (lower + upper) / 2)``.

    Args:
        input: an array (integers are computed in float64).
        lower: the lowest slope.
        upper: the highest slope (``>= lower``).
        training: draw random slopes (needs ``key``).
        inplace: accepted for PyTorch compatibility; functx never mutates.
        key: a functx.random key, needed when ``training``.

    Returns:
        A float array shaped like ``input``.

    Raises:
        ArgumentError: ``lower > upper``, or ``training`` without a key.
        DTypeError: a bad key.

    Example:
        >>> fnn.rrelu(np.array([-1.0, 2.0]))   # [-0.229..., 2.]
        >>> fnn.rrelu(x, training=True, key=functx.random.key(0))
    """
    lo = check_number("rrelu", "lower", lower)
    hi = check_number("rrelu", "upper", upper)
    if lo > hi:
        raise ArgumentError(f"functx.nn.rrelu: lower ({lower}) must not be greater than "
                            f"upper ({upper}).")
    x = float_array(input, "rrelu")
    if not training:
        return leaky_relu(x, (lo + hi) / 2)
    k = _key("rrelu", key, "training=True")
    slope = fxr.uniform(k, tuple(x.shape), np.dtype(x.dtype), lo, hi)
    return fnp.where(fnp.greater(x, 0), x, fnp.multiply(x, slope))


def gumbel_softmax(logits: Any, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1, *, key: Any = None) -> Any:
    """A sample from the Gumbel-softmax (concrete) distribution over ``dim``:
    ``softmax((logits + g) / tau, dim)`` with ``g = functx.random.gumbel(key, logits.shape)``.

    With ``hard=True`` the result is the one-hot vector of the sample's largest entry in the
    forward pass and has the gradient of the soft sample (the straight-through estimator:
    ``y_hard - stop_gradient(y_soft) + y_soft``, as in PyTorch).

    Args:
        logits: unnormalised log-probabilities, float.
        tau: the temperature (> 0): small values give nearly one-hot samples.
        hard: return one-hot samples with straight-through gradients.
        eps: deprecated and unused (as in PyTorch, which warns when it is changed).
        dim: the axis of the categories.
        key: a functx.random key (required).

    Returns:
        A float array shaped like ``logits``, summing to 1 along ``dim``.

    Raises:
        ArgumentError: ``tau <= 0``, ``dim`` out of range, or no key.
        DTypeError: a bad key.

    Example:
        >>> fnn.gumbel_softmax(np.zeros((2, 5)), hard=True, key=functx.random.key(0))
    """
    t = check_number("gumbel_softmax", "tau", tau, lo=0.0, lo_open=True)
    if eps != 1e-10:
        warnings.warn("functx.nn.gumbel_softmax: eps is deprecated and has no effect (as in "
                      "PyTorch).", stacklevel=2)
    x = float_array(logits, "gumbel_softmax", "logits")
    k = _key("gumbel_softmax", key, "sampling")
    scalar = x.ndim == 0
    if scalar:
        x = fnp.reshape(x, (1,))
    d = norm_dim("gumbel_softmax", dim, x.ndim)
    g = fxr.gumbel(k, tuple(x.shape), np.dtype(x.dtype))
    y = _fused.softmax(fnp.divide(fnp.add(x, g), t), axis=d)
    if hard:
        top = fnp.argmax(y, axis=d, keepdims=True)
        shape = [1] * x.ndim
        shape[d] = x.shape[d]
        classes = on_device_of(x, np.arange(x.shape[d]).reshape(shape))
        one_hot = fnp.astype(fnp.equal(top, classes), x.dtype)
        y = fnp.add(fnp.subtract(one_hot, stop_gradient(y)), y)
    return fnp.reshape(y, ()) if scalar else y
