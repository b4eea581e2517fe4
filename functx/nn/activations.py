"""Activation functions, softmax and log_softmax (torch.nn.functional's names and arguments).

Every function is a composite of functx operations, so grad, vjp, jvp and vmap work
through it; gelu, softmax and log_softmax are fused primitives (functx/primitives/fused.py:
one kernel each on CUDA, with every rule). Conventions shared by all of them:

* Integer and bool inputs are computed in float64 (NumPy's promotion; PyTorch would use its
  default float32) except where the result keeps the input dtype in PyTorch too (relu,
  relu6, leaky_relu, hardtanh).
* ``inplace`` is accepted so that PyTorch code ports unchanged, but functx never mutates:
  the result is always a new array (use the returned value).
* Gradients at kinks are PyTorch's: relu has gradient 0 at 0, leaky_relu ``negative_slope``,
  elu/celu the left-hand limit, hardtanh/relu6/hardsigmoid 0 on their boundaries.
* Stable forms: sigmoid never overflows, softplus switches to the identity above
  ``threshold`` (as PyTorch does) and never overflows below it, log_sigmoid is
  ``-logaddexp(0, -x)``, softmax subtracts the (gradient-free) maximum and log_softmax is
  ``x - logsumexp(x)``.

The last group has jax.nn's names and arguments (``squareplus``, ``sparse_plus``,
``log1mexp``, ``logmeanexp``), so JAX code ports too.

Example:
    >>> import functx.nn as fnn
    >>> fnn.gelu(np.array([-1.0, 0.0, 1.0]), approximate="tanh")
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import ShapeError
from functx.nn._util import ArgumentError, array, check_number, check_option, float_array, norm_dim
from functx.primitives import fused as _fused
from functx.primitives.elementwise import logistic as _logistic

__all__ = [
    "relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "softplus",
    "softsign", "sigmoid", "hardtanh", "hardswish", "hardsigmoid", "log_sigmoid",
    "logsigmoid", "softmax", "log_softmax", "glu", "softmin", "tanh", "threshold", "prelu",
    "squareplus", "sparse_plus", "log1mexp", "logmeanexp",
]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _nonpositive(x: Any) -> Any:
    """``x`` where ``x <= 0``, else 0: a safe argument for exp in the negative branch
    (gradient 1 at 0, so left-hand derivatives at the kink are PyTorch's)."""
    return fnp.where(fnp.greater(x, 0), 0.0, x)


def relu(input: Any, inplace: bool = False) -> Any:
    """``max(input, 0)`` elementwise; the gradient at 0 is 0 (as in PyTorch).

    Args:
        input: an array (any real dtype; the result keeps it).
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        An array shaped like ``input``.

    Example:
        >>> fnn.relu(np.array([-1.0, 2.0]))   # [0., 2.]
    """
    return _fused.relu(array(input))


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Any:
    """``input`` clipped to ``[min_val, max_val]``; the gradient is 0 outside the open interval.

    Args:
        input: an array.
        min_val: the lower bound.
        max_val: the upper bound (``min_val <= max_val``).
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        An array shaped like ``input``.

    Raises:
        ArgumentError: ``min_val > max_val``.

    Example:
        >>> fnn.hardtanh(np.array([-3.0, 0.5, 3.0]))   # [-1., 0.5, 1.]
    """
    lo = check_number("hardtanh", "min_val", min_val)
    hi = check_number("hardtanh", "max_val", max_val)
    if lo > hi:
        raise ArgumentError(f"functx.nn.hardtanh: min_val ({min_val}) must not be greater "
                            f"than max_val ({max_val}).")
    x = array(input)
    return fnp.where(fnp.less_equal(x, lo), fnp.full_like(x, min_val),
                     fnp.where(fnp.greater_equal(x, hi), fnp.full_like(x, max_val), x))


def relu6(input: Any, inplace: bool = False) -> Any:
    """``min(max(input, 0), 6)``: ``hardtanh(input, 0, 6)``.

    Args:
        input: an array.
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        An array shaped like ``input``.

    Example:
        >>> fnn.relu6(np.array([-1.0, 3.0, 9.0]))   # [0., 3., 6.]
    """
    return hardtanh(input, 0.0, 6.0)


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    """``input`` where positive, ``negative_slope * input`` elsewhere.

    Args:
        input: an array.
        negative_slope: the slope for ``input <= 0`` (also the gradient at 0).
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        An array shaped like ``input``.

    Example:
        >>> fnn.leaky_relu(np.array([-2.0, 2.0]), 0.1)   # [-0.2, 2.]
    """
    check_number("leaky_relu", "negative_slope", negative_slope)
    x = array(input)
    return fnp.where(fnp.greater(x, 0), x, fnp.multiply(x, negative_slope))


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """``input`` where positive, ``alpha * (exp(input) - 1)`` elsewhere.

    Args:
        input: an array (integers are computed in float64).
        alpha: the scale of the negative branch.
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        A float array shaped like ``input``.

    Example:
        >>> fnn.elu(np.array([-1.0, 1.0]))   # [-0.632..., 1.]
    """
    check_number("elu", "alpha", alpha)
    x = float_array(input, "elu")
    return fnp.where(fnp.greater(x, 0), x, fnp.multiply(alpha, fnp.expm1(_nonpositive(x))))


def selu(input: Any, inplace: bool = False) -> Any:
    """``scale * elu(input, alpha)`` with the self-normalising constants
    ``alpha = 1.6732632423543772``, ``scale = 1.0507009873554805``.

    Args:
        input: an array.
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        A float array shaped like ``input``.

    Example:
        >>> fnn.selu(np.array([1.0]))   # [1.0507...]
    """
    return fnp.multiply(_SELU_SCALE, elu(input, _SELU_ALPHA))


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    Args:
        input: an array.
        alpha: the scale (non-zero).
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        A float array shaped like ``input``.

    Raises:
        ArgumentError: ``alpha == 0``.

    Example:
        >>> fnn.celu(np.array([-1.0, 1.0]), alpha=2.0)
    """
    a = check_number("celu", "alpha", alpha)
    if a == 0:
        raise ArgumentError("functx.nn.celu: alpha must be non-zero (the negative branch "
                            "divides by it), but got 0.")
    x = float_array(input, "celu")
    neg = fnp.multiply(alpha, fnp.expm1(fnp.divide(_nonpositive(x), alpha)))
    return fnp.where(fnp.greater(x, 0), x, neg)


def gelu(input: Any, approximate: str = "none") -> Any:
    """The Gaussian error linear unit ``x * Phi(x)``.

    Args:
        input: an array.
        approximate: "none" for ``0.5 * x * (1 + erf(x / sqrt(2)))``; "tanh" for
            ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.

    Returns:
        A float array shaped like ``input``.

    Raises:
        ArgumentError: ``approximate`` is neither "none" nor "tanh".

    Example:
        >>> fnn.gelu(np.array([1.0]))   # [0.8413...]
    """
    check_option("gelu", "approximate", approximate, ("none", "tanh"))
    return _fused.gelu(float_array(input, "gelu"), approximate=approximate)


def sigmoid(input: Any) -> Any:
    """The logistic function ``1 / (1 + exp(-input))``, without overflow for any input.

    Args:
        input: an array.

    Returns:
        A float array shaped like ``input``, in ``[0, 1]``.

    Example:
        >>> fnn.sigmoid(np.array([0.0]))   # [0.5]
    """
    return _logistic(float_array(input, "sigmoid"))


def silu(input: Any, inplace: bool = False) -> Any:
    """The sigmoid linear unit (swish) ``input * sigmoid(input)``.

    Args:
        input: an array.
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        A float array shaped like ``input``.

    Example:
        >>> fnn.silu(np.array([1.0]))   # [0.7310...]
    """
    x = float_array(input, "silu")
    return fnp.multiply(x, _logistic(x))


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """``log(1 + exp(beta * input)) / beta``, and ``input`` itself where
    ``beta * input > threshold`` (as in PyTorch; the exponential is never evaluated there,
    so nothing overflows).

    Args:
        input: an array.
        beta: the sharpness (non-zero).
        threshold: above it (in ``beta * input``) the function is linear.

    Returns:
        A float array shaped like ``input``.

    Raises:
        ArgumentError: ``beta == 0``.

    Example:
        >>> fnn.softplus(np.array([0.0, 100.0]))   # [0.693..., 100.]
    """
    b = check_number("softplus", "beta", beta)
    t = check_number("softplus", "threshold", threshold)
    if b == 0:
        raise ArgumentError("functx.nn.softplus: beta must be non-zero (the result is "
                            "divided by it), but got 0.")
    x = float_array(input, "softplus")
    bx = fnp.multiply(x, beta)
    soft = fnp.divide(fnp.log1p(fnp.exp(fnp.minimum(bx, t))), beta)
    return fnp.where(fnp.greater(bx, t), x, soft)


def _softplus_stable(x: Any) -> Any:
    """``log(1 + exp(x))`` for any ``x`` (no threshold), as ``logaddexp(0, x)``."""
    return fnp.logaddexp(fnp.zeros_like(x), x)


def mish(input: Any, inplace: bool = False) -> Any:
    """``input * tanh(softplus(input))`` (softplus computed stably).

    Args:
        input: an array.
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        A float array shaped like ``input``.

    Example:
        >>> fnn.mish(np.array([1.0]))   # [0.8650...]
    """
    x = float_array(input, "mish")
    return fnp.multiply(x, fnp.tanh(_softplus_stable(x)))


def softsign(input: Any) -> Any:
    """``input / (1 + |input|)``.

    Args:
        input: an array.

    Returns:
        A float array shaped like ``input``.

    Example:
        >>> fnn.softsign(np.array([1.0]))   # [0.5]
    """
    x = float_array(input, "softsign")
    return fnp.divide(x, fnp.add(1.0, fnp.abs(x)))


def hardswish(input: Any, inplace: bool = False) -> Any:
    """``0`` for ``x < -3``, ``x`` for ``x > 3``, ``x * (x + 3) / 6`` in between
    (PyTorch's gradient at the boundaries: that of the middle piece).

    Args:
        input: an array.
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        A float array shaped like ``input``.

    Example:
        >>> fnn.hardswish(np.array([-4.0, 1.0, 4.0]))   # [0., 0.666..., 4.]
    """
    x = float_array(input, "hardswish")
    middle = fnp.divide(fnp.multiply(x, fnp.add(x, 3.0)), 6.0)
    return fnp.where(fnp.less(x, -3.0), fnp.zeros_like(x),
                     fnp.where(fnp.less_equal(x, 3.0), middle, x))


def hardsigmoid(input: Any, inplace: bool = False) -> Any:
    """``0`` for ``x <= -3``, ``1`` for ``x >= 3``, ``x / 6 + 1/2`` in between.

    Args:
        input: an array.
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        A float array shaped like ``input``.

    Example:
        >>> fnn.hardsigmoid(np.array([0.0]))   # [0.5]
    """
    x = float_array(input, "hardsigmoid")
    return fnp.where(fnp.less_equal(x, -3.0), fnp.zeros_like(x),
                     fnp.where(fnp.greater_equal(x, 3.0), fnp.ones_like(x),
                               fnp.add(fnp.divide(x, 6.0), 0.5)))


def log_sigmoid(input: Any) -> Any:
    """``log(sigmoid(input))`` computed as ``-logaddexp(0, -input)``: no overflow and no
    ``log(0)`` for any input. (PyTorch calls it ``logsigmoid``; both names are provided.)

    Args:
        input: an array.

    Returns:
        A float array shaped like ``input``, ``<= 0``.

    Example:
        >>> fnn.log_sigmoid(np.array([-1000.0, 0.0]))   # [-1000., -0.693...]
    """
    x = float_array(input, "log_sigmoid")
    return fnp.negative(_softplus_stable(fnp.negative(x)))


logsigmoid = log_sigmoid


def _softmax_dim(fn: str, dim: Any, ndim: int) -> int:
    """PyTorch's softmax axis: ``dim``, or the deprecated implicit choice when None."""
    if dim is None:
        dim = 0 if ndim in (0, 1, 3) else 1
        warnings.warn(f"functx.nn.{fn}: implicit dimension choice is deprecated (as in "
                      f"PyTorch); pass dim explicitly (dim={dim} was chosen).", stacklevel=3)
    return norm_dim(fn, dim, ndim)


def _softmax_input(fn: str, input: Any, dtype: Any) -> Any:
    x = float_array(input, fn)
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt.kind != "f":
            raise ArgumentError(f"functx.nn.{fn}: dtype must be a floating-point dtype, not "
                                f"{dt}.")
        x = fnp.astype(x, dt)
    return x


def softmax(input: Any, dim: int | None = None, _stacklevel: int = 3,
            dtype: Any = None) -> Any:
    """``exp(x) / sum(exp(x), dim)``, with the maximum along ``dim`` subtracted first.

    The fused primitive ``functx.primitives.fused.softmax``: a row whose maximum is not
    finite is shifted by 0 instead, so a row of all ``-inf`` gives NaN (as in PyTorch) and
    nothing overflows. Its VJP is ``y * (g - sum(g * y, dim))``.

    Args:
        input: an array.
        dim: the axis to normalise over. None chooses PyTorch's deprecated implicit axis
            (0 for 0-, 1- and 3-d inputs, else 1) with a warning.
        _stacklevel: accepted for PyTorch compatibility (unused).
        dtype: if given, ``input`` is cast to this float dtype first.

    Returns:
        A float array shaped like ``input``, summing to 1 along ``dim``.

    Raises:
        ArgumentError: ``dim`` out of range, or a non-float ``dtype``.

    Example:
        >>> fnn.softmax(np.array([[1.0, 2.0, 3.0]]), dim=-1)
    """
    x = _softmax_input("softmax", input, dtype)
    d = _softmax_dim("softmax", dim, x.ndim)
    if x.ndim == 0:
        return fnp.exp(fnp.subtract(x, x))  # one element: 1 (NaN for NaN/inf, as in PyTorch)
    return _fused.softmax(x, axis=d)


def log_softmax(input: Any, dim: int | None = None, _stacklevel: int = 3,
                dtype: Any = None) -> Any:
    """``x - logsumexp(x, dim)``: the logarithm of softmax, without ``log(0)`` for any entry.

    Args:
        input: an array.
        dim: the axis to normalise over (None: PyTorch's deprecated implicit choice, as in
            :func:`softmax`).
        _stacklevel: accepted for PyTorch compatibility (unused).
        dtype: if given, ``input`` is cast to this float dtype first.

    Returns:
        A float array shaped like ``input``.

    Raises:
        ArgumentError: ``dim`` out of range, or a non-float ``dtype``.

    Example:
        >>> fnn.log_softmax(np.array([1000.0, 0.0]), dim=0)   # [0., -1000.]
    """
    x = _softmax_input("log_softmax", input, dtype)
    d = _softmax_dim("log_softmax", dim, x.ndim)
    if x.ndim == 0:
        return fnp.subtract(x, x)
    return _fused.log_softmax(x, axis=d)


def glu(input: Any, dim: int = -1) -> Any:
    """The gated linear unit ``a * sigmoid(b)``, where ``a, b`` are the halves of ``input``
    along ``dim``.

    Args:
        input: an array whose size along ``dim`` is even.
        dim: the axis to split.

    Returns:
        A float array shaped like ``input`` with ``dim`` halved.

    Raises:
        ArgumentError: ``dim`` out of range, or an odd size along it; a 0-d input.

    Example:
        >>> fnn.glu(np.array([1.0, 0.0]))   # [0.5]
    """
    x = float_array(input, "glu")
    if x.ndim == 0:
        raise ArgumentError("functx.nn.glu: does not support 0-d (scalar) inputs; pass an "
                            "array with an even size along dim.")
    d = norm_dim("glu", dim, x.ndim)
    n = x.shape[d]
    if n % 2:
        raise ArgumentError(f"functx.nn.glu: the size along dim={dim} must be even to halve "
                            f"it, but input has shape {tuple(x.shape)}.")
    a, b = fnp.split(x, 2, axis=d)
    return fnp.multiply(a, _logistic(b))


def softmin(input: Any, dim: int | None = None, _stacklevel: int = 3,
            dtype: Any = None) -> Any:
    """``softmax(-input, dim)``: weights that favour the smallest entries.

    Args:
        input: an array.
        dim: the axis to normalise over (None: PyTorch's deprecated implicit choice, as in
            :func:`softmax`).
        _stacklevel: accepted for PyTorch compatibility (unused).
        dtype: if given, ``input`` is cast to this float dtype first.

    Returns:
        A float array shaped like ``input``, summing to 1 along ``dim``.

    Raises:
        ArgumentError: ``dim`` out of range, or a non-float ``dtype``.

    Example:
        >>> fnn.softmin(np.array([0.0, 1.0]), dim=0)   # [0.731..., 0.268...]
    """
    x = fnp.negative(_softmax_input("softmin", input, dtype))
    d = _softmax_dim("softmin", dim, x.ndim)
    if x.ndim == 0:
        return fnp.exp(fnp.subtract(x, x))
    return _fused.softmax(x, axis=d)


def tanh(input: Any) -> Any:
    """The hyperbolic tangent, elementwise.

    Args:
        input: an array (integers are computed in float64).

    Returns:
        A float array shaped like ``input``, in ``[-1, 1]``.

    Example:
        >>> fnn.tanh(np.array([0.0, 100.0]))   # [0., 1.]
    """
    return fnp.tanh(float_array(input, "tanh"))


def threshold(input: Any, threshold: float, value: float, inplace: bool = False) -> Any:
    """``input`` where ``input > threshold``, else ``value`` (the gradient is 1 where the
    input is kept and 0 elsewhere, at ``threshold`` itself too).

    Args:
        input: an array (any real dtype; the result keeps it, as in PyTorch).
        threshold: the number to compare against.
        value: what replaces the entries ``<= threshold``.
        inplace: accepted for PyTorch compatibility; functx never mutates.

    Returns:
        An array shaped like ``input``.

    Example:
        >>> fnn.threshold(np.array([-1.0, 0.5, 2.0]), 1.0, 0.0)   # [0., 0., 2.]
    """
    t = check_number("threshold", "threshold", threshold)
    check_number("threshold", "value", value)
    x = array(input)
    return fnp.where(fnp.greater(x, t), x, fnp.full_like(x, value))


def prelu(input: Any, weight: Any) -> Any:
    """``input`` where positive, ``weight * input`` elsewhere, with a learnable slope per
    channel (dimension 1) or one shared slope.

    Args:
        input: an array; its channels are dimension 1 (an input of fewer than 2 dimensions
            has one channel).
        weight: the slopes: one element (any shape), or shape ``(C,)`` with ``C =
            input.shape[1]``. Its gradient is the sum of the negative inputs' cotangents
            times those inputs, per channel.

    Returns:
        A float array shaped like ``input``.

    Raises:
        ShapeError: ``weight`` has neither one element nor one per channel.

    Example:
        >>> fnn.prelu(np.array([[-2.0, 3.0]]), np.array([0.25]))   # [[-0.5, 3.]]
    """
    x = float_array(input, "prelu")
    w = float_array(weight, "prelu", "weight")
    channels = x.shape[1] if x.ndim >= 2 else 1
    size = int(np.prod(w.shape))
    if size == 1:
        w = fnp.reshape(w, ())
    elif w.ndim == 1 and size == channels:
        w = fnp.reshape(w, (channels,) + (1,) * (x.ndim - 2))
    else:
        raise ShapeError(f"functx.nn.prelu: weight must have 1 element or one per channel "
                         f"(input.shape[1] = {channels} for input of shape "
                         f"{tuple(x.shape)}), but it has shape {tuple(w.shape)}.")
    return fnp.where(fnp.greater(x, 0), x, fnp.multiply(w, x))


def squareplus(x: Any, b: Any = 4) -> Any:
    """``(x + sqrt(x**2 + b)) / 2``, a smooth ReLU (``jax.nn.squareplus``).

    Args:
        x: an array.
        b: the smoothness, a non-negative number or an array broadcasting with ``x``.

    Returns:
        A float array of the broadcast shape.

    Example:
        >>> fnn.squareplus(np.array([0.0]))   # [1.]
    """
    v = float_array(x, "squareplus", "x")
    return fnp.divide(fnp.add(v, fnp.sqrt(fnp.add(fnp.multiply(v, v), b))), 2.0)


def sparse_plus(x: Any) -> Any:
    """0 for ``x <= -1``, ``(x + 1)**2 / 4`` in between, ``x`` for ``x >= 1``
    (``jax.nn.sparse_plus``, smooth and convex).

    Args:
        x: an array.

    Returns:
        A float array shaped like ``x``.

    Example:
        >>> fnn.sparse_plus(np.array([-2.0, 0.0, 2.0]))   # [0., 0.25, 2.]
    """
    v = float_array(x, "sparse_plus", "x")
    middle = fnp.divide(fnp.square(fnp.add(v, 1.0)), 4.0)
    return fnp.where(fnp.less_equal(v, -1.0), fnp.zeros_like(v),
                     fnp.where(fnp.greater_equal(v, 1.0), v, middle))


_LOG2 = math.log(2.0)


def log1mexp(x: Any) -> Any:
    """``log(1 - exp(-x))`` for ``x >= 0``, accurate everywhere (``jax.nn.log1mexp``):
    ``log(-expm1(-x))`` below ``log 2`` and ``log1p(-exp(-x))`` above it. NaN for ``x < 0``;
    ``-inf`` at 0.

    Args:
        x: an array of non-negative values.

    Returns:
        A float array shaped like ``x``, ``<= 0``.

    Example:
        >>> fnn.log1mexp(np.array([1e-20, 50.0]))   # [-46.05..., -1.9e-22]
    """
    v = float_array(x, "log1mexp", "x")
    small = fnp.less(v, _LOG2)
    # each branch sees arguments on its own side only, so neither makes inf or NaN there
    lo = fnp.log(fnp.negative(fnp.expm1(fnp.negative(fnp.where(small, v, _LOG2)))))
    hi = fnp.log1p(fnp.negative(fnp.exp(fnp.negative(fnp.where(small, _LOG2, v)))))
    return fnp.where(small, lo, hi)


def logmeanexp(x: Any, axis: Any = None, where: Any = None, keepdims: bool = False) -> Any:
    """``log(mean(exp(x)))`` over ``axis``, as ``logsumexp(x) - log(n)``
    (``jax.nn.logmeanexp``); stable for any ``x``.

    Args:
        x: an array.
        axis: None (all axes), an int or a tuple of ints.
        where: None or a bool array broadcasting to ``x``: only those entries count (``n``
            is their number).
        keepdims: keep the reduced axes with size 1.

    Returns:
        A float array: ``x``'s shape without ``axis``.

    Example:
        >>> fnn.logmeanexp(np.log(np.array([1.0, 3.0])))   # log(2)
    """
    v = float_array(x, "logmeanexp", "x")
    if where is None:
        lse = fnp.logsumexp(v, axis=axis, keepdims=keepdims)
        n = v.size if axis is None else int(np.prod([v.shape[a] for a in (
            axis if isinstance(axis, (tuple, list)) else (axis,))]))
        return fnp.subtract(lse, math.log(n) if n else -math.inf)
    m = fnp.broadcast_to(array(where), tuple(v.shape))
    lse = fnp.logsumexp(fnp.where(m, v, -np.inf), axis=axis, keepdims=keepdims)
    n = fnp.sum(fnp.astype(m, v.dtype), axis=axis, keepdims=keepdims)
    return fnp.subtract(lse, fnp.log(n))
