"""Dropout with an explicit key (functx.random): the same key gives the same mask.

Because the mask is a function of the key alone, a computation recomputed under
``functx.checkpoint`` (or traced twice, or run on another backend) drops exactly the same
elements; pass a fresh key per step and per layer (``functx.random.split`` / ``fold_in``).

Example:
    >>> import functx.random as fxr, functx.nn as fnn
    >>> k = fxr.fold_in(fxr.key(0), step)
    >>> h = fnn.dropout(k, h, 0.1)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import functx.numpy as fnp
from functx import random as fxr
from functx.errors import DTypeError
from functx.nn._util import array, check_number, norm_dim
from functx.random._prng import check_key

__all__ = ["dropout"]


def dropout(key: Any, x: Any, rate: float, *, deterministic: bool = False,
            broadcast_dims: Sequence[int] = ()) -> Any:
    """Zero each element of ``x`` with probability ``rate``; scale the rest by
    ``1 / (1 - rate)`` so that the expected value is unchanged.

    The mask is ``functx.random.bernoulli(key, 1 - rate, mask_shape)`` drawn in ``x``'s
    dtype, so it depends on the key and shapes only (as Flax's ``nn.Dropout``). The
    gradient with respect to ``x`` is ``mask / (1 - rate)``.

    Args:
        key: a functx.random key (may be None when ``deterministic`` or ``rate == 0``).
        x: a floating-point array.
        rate: the drop probability, a number in ``[0, 1]`` (static, not traced). 0 returns
            ``x`` unchanged; 1 returns zeros.
        deterministic: return ``x`` unchanged (evaluation mode).
        broadcast_dims: axes along which the mask is shared: ``(1,)`` on a ``(batch, time,
            features)`` array drops the same features at every time step.

    Returns:
        An array like ``x``.

    Raises:
        ArgumentError: ``rate`` is not a number in ``[0, 1]``, or an axis is out of range.
        DTypeError: ``x`` is not floating-point; ``key`` is not a key.
        ShapeError: ``key`` is not a single key.

    Example:
        >>> fnn.dropout(functx.random.key(0), np.ones(8), 0.5)   # zeros and twos
    """
    rate = check_number("dropout", "rate", rate, lo=0.0, hi=1.0)
    if deterministic or rate == 0.0:
        return x
    key = check_key("functx.nn.dropout", key)
    x = array(x)
    dt = np.dtype(x.dtype)
    if dt.kind != "f":
        raise DTypeError(f"functx.nn.dropout needs a floating-point input, but got dtype "
                         f"{dt.name}; convert it with x.astype(np.float32) first.")
    dims = {norm_dim("dropout", d, len(x.shape), "broadcast_dims") for d in broadcast_dims}
    mask_shape = tuple(1 if i in dims else n for i, n in enumerate(x.shape))
    if rate == 1.0:
        return fnp.zeros_like(x)
    keep_prob = 1.0 - rate
    keep = fxr.bernoulli(key, np.asarray(keep_prob, dt)[()], mask_shape)
    return fnp.where(keep, fnp.divide(x, keep_prob), 0.0)
