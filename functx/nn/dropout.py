"""Dropout with an explicit key (functx.random): the same key gives the same mask.

``dropout``, ``dropout1d``/``2d``/``3d`` (whole channels), ``alpha_dropout`` and
``feature_alpha_dropout`` (for SELU networks) take torch.nn.functional's arguments
(``input, p, training, inplace``) plus the PRNG key as the keyword ``key``:

    >>> h = fnn.dropout(h, 0.1, training=True, key=k)        # torch's order, key by keyword

``dropout`` also keeps functx's earlier form ``dropout(key, x, rate, *, deterministic,
broadcast_dims)`` (recognised by an array in the second position), so existing code runs
unchanged.

Because the mask is a function of the key alone, a computation recomputed under
``functx.checkpoint`` (or traced twice, or run on another backend) drops exactly the same
elements; pass a fresh key per step and per layer (``functx.random.split`` / ``fold_in``).
A call that would draw a mask (``training`` true and ``0 < p < 1``) without a key raises
:class:`ArgumentError`. ``inplace`` is accepted and ignored (functx never mutates).

Example:
    >>> import functx.random as fxr, functx.nn as fnn
    >>> k = fxr.fold_in(fxr.key(0), step)
    >>> h = fnn.dropout(h, 0.1, key=k)
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

import functx.numpy as fnp
from functx import random as fxr
from functx.errors import DTypeError, ShapeError
from functx.nn._util import ArgumentError, array, check_number, norm_dim
from functx.numpy._promotion import is_tracer
from functx.random._prng import check_key

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout"]

# -alpha' = SELU's scale * alpha: the value SELU saturates to (PyTorch's constant)
_ALPHA = 1.7580993408473766


def _is_array(v: Any) -> bool:
    return is_tracer(v) or (hasattr(v, "shape") and hasattr(v, "dtype")
                            and not isinstance(v, np.generic))


def _float_input(fn: str, x: Any) -> Any:
    x = array(x)
    dt = np.dtype(x.dtype)
    if dt.kind != "f":
        raise DTypeError(f"functx.nn.{fn} needs a floating-point input, but got dtype "
                         f"{dt.name}; convert it with x.astype(np.float32) first.")
    return x


def _key(fn: str, key: Any, p: float) -> Any:
    if key is None:
        raise ArgumentError(f"functx.nn.{fn}: training with p={p} needs a PRNG key: pass "
                            "key=functx.random.key(...) (functx randomness is key-based; "
                            "split or fold_in a fresh one per call), or training=False for "
                            "evaluation.")
    return check_key(f"functx.nn.{fn}", key)


def _keep_mask(key: Any, keep_prob: float, shape: tuple, dtype: np.dtype) -> Any:
    return fxr.bernoulli(key, np.asarray(keep_prob, dtype)[()], shape)


def _masked(fn: str, key: Any, x: Any, p: float, mask_shape: tuple) -> Any:
    """``x * keep / (1 - p)`` with ``keep ~ bernoulli(key, 1 - p, mask_shape)``."""
    if p == 1.0:
        return fnp.zeros_like(x)
    keep = _keep_mask(key, 1.0 - p, mask_shape, np.dtype(x.dtype))
    return fnp.where(keep, fnp.divide(x, 1.0 - p), 0.0)


def _keyed_dropout(key: Any, x: Any, rate: Any, deterministic: bool,
                   broadcast_dims: Sequence[int]) -> Any:
    """functx's earlier form ``dropout(key, x, rate, ...)``."""
    rate = check_number("dropout", "rate", rate, lo=0.0, hi=1.0)
    if deterministic or rate == 0.0:
        return x
    key = check_key("functx.nn.dropout", key)
    x = _float_input("dropout", x)
    dims = {norm_dim("dropout", d, len(x.shape), "broadcast_dims") for d in broadcast_dims}
    mask_shape = tuple(1 if i in dims else n for i, n in enumerate(x.shape))
    return _masked("dropout", key, x, rate, mask_shape)


def dropout(input: Any, p: Any = 0.5, training: Any = True, inplace: bool = False, *,
            key: Any = None, deterministic: bool = False,
            broadcast_dims: Sequence[int] = ()) -> Any:
    """Zero each element of ``input`` with probability ``p`` (while training); scale the
    rest by ``1 / (1 - p)`` so that the expected value is unchanged.

    The mask is ``functx.random.bernoulli(key, 1 - p, mask_shape)`` drawn in the input's
    dtype, so it depends on the key and shapes only (as Flax's ``nn.Dropout``). The
    gradient with respect to ``input`` is ``mask / (1 - p)``.

    Two call forms:

    * PyTorch's: ``dropout(input, p=0.5, training=True, inplace=False, *, key=...)``;
    * functx's earlier one, kept for existing code: ``dropout(key, x, rate, *,
      deterministic=False, broadcast_dims=())``, recognised by an array in the second
      position (where PyTorch's form has the number ``p``).

    Args:
        input: a floating-point array (in the earlier form: the key).
        p: the drop probability, a number in ``[0, 1]`` (static, not traced). 0 returns
            ``input`` unchanged; 1 returns zeros.
        training: apply dropout (False returns ``input`` unchanged, as in evaluation).
        inplace: accepted for PyTorch compatibility; functx never mutates.
        key: a functx.random key; needed when ``training`` and ``0 < p``.
        deterministic: return ``input`` unchanged (the same as ``training=False``).
        broadcast_dims: axes along which the mask is shared: ``(1,)`` on a ``(batch, time,
            features)`` array drops the same features at every time step.

    Returns:
        An array like ``input``.

    Raises:
        ArgumentError: ``p`` is not a number in ``[0, 1]``, an axis is out of range, or no
            key is given where a mask is drawn.
        DTypeError: ``input`` is not floating-point; ``key`` is not a key.
        ShapeError: ``key`` is not a single key.

    Example:
        >>> fnn.dropout(np.ones(8), 0.5, key=functx.random.key(0))   # zeros and twos
        >>> fnn.dropout(functx.random.key(0), np.ones(8), 0.5)        # the earlier form
    """
    if _is_array(p) and (p.ndim > 0 or not _is_array(input)
                         or np.dtype(input.dtype).kind != "f"):  # dropout(key, x, rate)
        if key is not None:
            raise ArgumentError("functx.nn.dropout: got a key both as the first argument "
                                "(dropout(key, x, rate)) and as key=...; pass it once: "
                                "dropout(x, p, key=key).")
        return _keyed_dropout(input, p, training, deterministic, broadcast_dims)
    pv = check_number("dropout", "p", p, lo=0.0, hi=1.0)
    if not training or deterministic or pv == 0.0:
        return input if _is_array(input) else array(input)
    x = _float_input("dropout", input)
    k = _key("dropout", key, pv)
    dims = {norm_dim("dropout", d, len(x.shape), "broadcast_dims") for d in broadcast_dims}
    mask_shape = tuple(1 if i in dims else n for i, n in enumerate(x.shape))
    return _masked("dropout", k, x, pv, mask_shape)


def _feature_shape(fn: str, x: Any) -> tuple:
    """The mask shape of channel-wise dropout: ``(N, C, 1, ..., 1)``."""
    if x.ndim < 2:
        raise ShapeError(f"functx.nn.{fn}: feature dropout needs at least 2 dimensions "
                         f"(N, C, ...), but input has shape {tuple(x.shape)}.")
    return tuple(x.shape[:2]) + (1,) * (x.ndim - 2)


def _feature_dropout(fn: str, input: Any, p: Any, training: Any, key: Any,
                     batched: bool) -> Any:
    pv = check_number(fn, "p", p, lo=0.0, hi=1.0)
    if not training or pv == 0.0:
        return input if _is_array(input) else array(input)
    x = _float_input(fn, input)
    k = _key(fn, key, pv)
    if batched:
        return _masked(fn, k, x, pv, _feature_shape(fn, x))
    shape = _feature_shape(fn, fnp.expand_dims(x, 0))[1:]
    return _masked(fn, k, x, pv, shape)


def dropout1d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              key: Any = None) -> Any:
    """Zero whole channels with probability ``p``: each ``input[n, c, :]`` is dropped (or
    scaled by ``1 / (1 - p)``) as one.

    Args:
        input: ``(N, C, L)`` or unbatched ``(C, L)``, floating-point.
        p: the drop probability, in ``[0, 1]``.
        training: apply dropout (False returns ``input`` unchanged).
        inplace: accepted for PyTorch compatibility; functx never mutates.
        key: a functx.random key; needed when ``training`` and ``0 < p``.

    Returns:
        An array like ``input``.

    Raises:
        ShapeError: ``input`` is not 2-d or 3-d.
        ArgumentError: a bad ``p``, or no key where a mask is drawn.
        DTypeError: a non-float input or a bad key.

    Example:
        >>> fnn.dropout1d(np.ones((2, 4, 5)), 0.5, key=functx.random.key(0))
    """
    x = array(input)
    if x.ndim not in (2, 3):
        raise ShapeError(f"functx.nn.dropout1d: expected a 2-d (C, L) or 3-d (N, C, L) "
                         f"input, but it has shape {tuple(x.shape)}.")
    return _feature_dropout("dropout1d", x, p, training, key, x.ndim == 3)


def dropout2d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              key: Any = None) -> Any:
    """Zero whole channels ``input[n, c, :, :]`` with probability ``p`` (see
    :func:`dropout1d`).

    As in PyTorch, a 3-d input is read as ``(N, C, L)`` (channel-wise 1-d dropout), with a
    warning; other ranks than 3 and 4 warn too (deprecated in PyTorch).

    Args:
        input: ``(N, C, H, W)``, floating-point.
        p: the drop probability, in ``[0, 1]``.
        training: apply dropout (False returns ``input`` unchanged).
        inplace: accepted for PyTorch compatibility; functx never mutates.
        key: a functx.random key; needed when ``training`` and ``0 < p``.

    Returns:
        An array like ``input``.

    Raises:
        ShapeError: fewer than 2 dimensions.
        ArgumentError: a bad ``p``, or no key where a mask is drawn.
        DTypeError: a non-float input or a bad key.

    Example:
        >>> fnn.dropout2d(np.ones((2, 4, 3, 3)), 0.5, key=functx.random.key(0))
    """
    x = array(input)
    if x.ndim not in (3, 4):
        warnings.warn(f"functx.nn.dropout2d: received a {x.ndim}-d input, which is "
                      "deprecated (as in PyTorch); use dropout instead. dropout2d is "
                      "channel-wise dropout of 3-d or 4-d inputs.", stacklevel=2)
    if x.ndim == 3:
        warnings.warn("functx.nn.dropout2d: a 3-d input is read as (N, C, L) and gets "
                      "channel-wise 1-d dropout (as in PyTorch); use dropout1d for that.",
                      stacklevel=2)
    return _feature_dropout("dropout2d", x, p, training, key, True)


def dropout3d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              key: Any = None) -> Any:
    """Zero whole channels ``input[n, c, :, :, :]`` with probability ``p`` (see
    :func:`dropout1d`).

    Args:
        input: ``(N, C, D, H, W)`` or unbatched ``(C, D, H, W)``, floating-point (other
            ranks warn, as in PyTorch, and are read as unbatched).
        p: the drop probability, in ``[0, 1]``.
        training: apply dropout (False returns ``input`` unchanged).
        inplace: accepted for PyTorch compatibility; functx never mutates.
        key: a functx.random key; needed when ``training`` and ``0 < p``.

    Returns:
        An array like ``input``.

    Raises:
        ShapeError: fewer than 1 dimension.
        ArgumentError: a bad ``p``, or no key where a mask is drawn.
        DTypeError: a non-float input or a bad key.

    Example:
        >>> fnn.dropout3d(np.ones((2, 4, 3, 3, 3)), 0.5, key=functx.random.key(0))
    """
    x = array(input)
    if x.ndim not in (4, 5):
        warnings.warn(f"functx.nn.dropout3d: received a {x.ndim}-d input, which is "
                      "deprecated (as in PyTorch); use dropout instead. dropout3d is "
                      "channel-wise dropout of 4-d or 5-d inputs.", stacklevel=2)
    return _feature_dropout("dropout3d", x, p, training, key, x.ndim == 5)


def _alpha(fn: str, input: Any, p: Any, training: Any, key: Any, feature: bool) -> Any:
    pv = check_number(fn, "p", p, lo=0.0, hi=1.0)
    if not training or pv == 0.0:
        return input if _is_array(input) else array(input)
    x = _float_input(fn, input)
    k = _key(fn, key, pv)
    if pv == 1.0:
        return fnp.zeros_like(x)
    shape = _feature_shape(fn, x) if feature else tuple(x.shape)
    keep = fnp.astype(_keep_mask(k, 1.0 - pv, shape, np.dtype(x.dtype)), x.dtype)
    a = 1.0 / np.sqrt((_ALPHA * _ALPHA * pv + 1.0) * (1.0 - pv))
    shift = fnp.add(fnp.multiply(fnp.subtract(keep, 1.0), _ALPHA * a), _ALPHA * a * pv)
    return fnp.add(fnp.multiply(x, fnp.multiply(keep, a)), shift)


def alpha_dropout(input: Any, p: float = 0.5, training: bool = False, inplace: bool = False,
                  *, key: Any = None) -> Any:
    """Dropout that keeps a SELU network's mean and variance: dropped elements become SELU's
    saturation value ``-1.7580993408473766``, then everything is scaled and shifted
    affinely (``a * (x * keep + alpha' * (1 - keep)) + b``, PyTorch's constants), so a
    standard-normal input stays standard-normal in distribution.

    Note PyTorch's default ``training=False`` here (unlike :func:`dropout`).

    Args:
        input: a floating-point array.
        p: the drop probability, in ``[0, 1]`` (1 gives zeros, as in PyTorch).
        training: apply dropout (False returns ``input`` unchanged).
        inplace: accepted for PyTorch compatibility; functx never mutates.
        key: a functx.random key; needed when ``training`` and ``0 < p``.

    Returns:
        An array like ``input``.

    Raises:
        ArgumentError: a bad ``p``, or no key where a mask is drawn.
        DTypeError: a non-float input or a bad key.

    Example:
        >>> fnn.alpha_dropout(x, 0.1, training=True, key=functx.random.key(0))
    """
    return _alpha("alpha_dropout", input, p, training, key, False)


def feature_alpha_dropout(input: Any, p: float = 0.5, training: bool = False,
                          inplace: bool = False, *, key: Any = None) -> Any:
    """:func:`alpha_dropout` of whole channels: one draw per ``input[n, c, ...]``.

    Args:
        input: ``(N, C, ...)``, floating-point.
        p: the drop probability, in ``[0, 1]``.
        training: apply dropout (False, the default, returns ``input`` unchanged).
        inplace: accepted for PyTorch compatibility; functx never mutates.
        key: a functx.random key; needed when ``training`` and ``0 < p``.

    Returns:
        An array like ``input``.

    Raises:
        ShapeError: fewer than 2 dimensions.
        ArgumentError: a bad ``p``, or no key where a mask is drawn.
        DTypeError: a non-float input or a bad key.

    Example:
        >>> fnn.feature_alpha_dropout(x, 0.2, training=True, key=functx.random.key(0))
    """
    return _alpha("feature_alpha_dropout", input, p, training, key, True)
