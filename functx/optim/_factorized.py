"""Adafactor's factored second-moment estimator (optax's ``optax/_src/factorized.py``).

For a leaf whose two largest dimensions are both at least ``min_dim_size_to_factor``, the
moving average of squared gradients is stored as its row and column means (``v_row``,
``v_col``); other leaves keep the full average (``v``). Unused slots hold a ``(1,)`` zero,
as in optax, so every leaf has the same state layout.

As in optax, the decay ``1 - (t + 1)**(-decay_rate)`` is a float32 (whatever the params'
dtype), so that results agree with optax's (to float32 rounding of that decay: optax's
float32 ``pow`` is off by an ulp at some steps).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import numpy as np

import functx.numpy as fnp
from functx import tree
from functx.optim._base import (GradientTransformation, abs_sq, check_params,
                                safe_increment, zero_count)

__all__ = ["scale_by_factored_rms", "FactoredState"]


class FactoredState(NamedTuple):
    """State of :func:`scale_by_factored_rms`: step count, row/column means of the second
    moment (factored leaves) and full second moments (other leaves)."""
    count: Any
    v_row: Any
    v_col: Any
    v: Any


def _decay_rate_pow(i: Any, exponent: float = 0.8) -> Any:
    """``1 - (i + 1)**(-exponent)`` as a float32 (optax's ``_decay_rate_pow``).

    The power is computed in float64 and rounded to float32 (then subtracted in float32
    as optax does): a float32 ``pow`` is not correctly rounded on every platform (NumPy's
    vectorised loops and XLA's differ by an ulp at some steps), this is the same everywhere.
    """
    t = fnp.astype(fnp.add(i, 1), np.float64)
    return fnp.subtract(1.0, fnp.astype(fnp.power(t, -exponent), np.float32))


def _factored_dims(shape: tuple, factored: bool,
                   min_dim_size_to_factor: int) -> Optional[tuple[int, int]]:
    """The (second-largest, largest) dimensions to factor over, or None."""
    if not factored or len(shape) < 2:
        return None
    sorted_dims = np.argsort(shape)
    if shape[sorted_dims[-2]] < min_dim_size_to_factor:
        return None
    return int(sorted_dims[-2]), int(sorted_dims[-1])


def scale_by_factored_rms(factored: bool = True, decay_rate: float = 0.8,
                          step_offset: int = 0, min_dim_size_to_factor: int = 128,
                          epsilon: float = 1e-30,
                          decay_rate_fn: Callable[[Any, Any], Any] = _decay_rate_pow
                          ) -> GradientTransformation:
    """Scales updates by the factored inverse root of the second moment (Adafactor).

    Args:
        factored: whether to factor second moments of matrices.
        decay_rate: exponent of the decay schedule ``1 - (t + 1)**(-decay_rate)``.
        step_offset: subtracted from the step count in the decay schedule.
        min_dim_size_to_factor: factor only where the second-largest dimension is at
            least this.
        epsilon: added to the squared gradients.
        decay_rate_fn: ``fn(step, decay_rate) -> decay`` (default: the schedule above).

    Returns:
        A :class:`GradientTransformation` (``update`` needs ``params``) whose state is
        :class:`FactoredState`.

    Raises:
        ArgumentError: ``update`` is called without ``params``.

    Example:
        >>> opt = chain(scale_by_factored_rms(), clip_by_block_rms(1.0), scale(-1e-2))
    """

    def init_leaf(p):
        shape, dtype = tuple(p.shape), p.dtype
        one = fnp.zeros((1,), dtype, like=p)
        dims = _factored_dims(shape, factored, min_dim_size_to_factor)
        if dims is None:
            return one, one, fnp.zeros_like(p)
        d1, d0 = dims
        row = fnp.zeros(shape[:d0] + shape[d0 + 1:], dtype, like=p)
        col = fnp.zeros(shape[:d1] + shape[d1 + 1:], dtype, like=p)
        return row, col, one

    def init_fn(params):
        leaves, treedef = tree.flatten(params)
        out = [init_leaf(p) for p in leaves]
        return FactoredState(count=zero_count(params),
                             v_row=tree.unflatten(treedef, [o[0] for o in out]),
                             v_col=tree.unflatten(treedef, [o[1] for o in out]),
                             v=tree.unflatten(treedef, [o[2] for o in out]))

    def update_leaf(grad, v_row, v_col, v, param, decay_t):
        shape, dtype = tuple(param.shape), param.dtype
        keep = fnp.subtract(1.0, decay_t)
        grad_sqr = fnp.add(abs_sq(grad), epsilon)
        one = fnp.zeros((1,), dtype, like=param)
        dims = _factored_dims(shape, factored, min_dim_size_to_factor)
        if dims is None:
            new_v = fnp.astype(fnp.add(fnp.multiply(decay_t, v), fnp.multiply(keep, grad_sqr)),
                               dtype)
            return fnp.multiply(grad, fnp.power(new_v, -0.5)), one, one, new_v
        d1, d0 = dims
        new_row = fnp.add(fnp.multiply(decay_t, v_row),
                          fnp.multiply(keep, fnp.mean(grad_sqr, axis=d0)))
        new_col = fnp.add(fnp.multiply(decay_t, v_col),
                          fnp.multiply(keep, fnp.mean(grad_sqr, axis=d1)))
        new_row, new_col = fnp.astype(new_row, dtype), fnp.astype(new_col, dtype)
        reduced_d1 = d1 - 1 if d1 > d0 else d1
        row_col_mean = fnp.mean(new_row, axis=reduced_d1, keepdims=True)
        row_factor = fnp.power(fnp.divide(new_row, row_col_mean), -0.5)
        col_factor = fnp.power(new_col, -0.5)
        update = fnp.multiply(fnp.multiply(grad, fnp.expand_dims(row_factor, d0)),
                              fnp.expand_dims(col_factor, d1))
        return update, new_row, new_col, one

    def update_fn(updates, state, params=None):
        check_params("scale_by_factored_rms", params)
        decay_t = decay_rate_fn(fnp.subtract(state.count, step_offset), decay_rate)
        leaves, treedef = tree.flatten(updates)
        columns = [tree.flatten_up_to(treedef, t)
                   for t in (state.v_row, state.v_col, state.v, params)]
        out = [update_leaf(*args, decay_t) for args in zip(leaves, *columns)]
        pick = lambda i: tree.unflatten(treedef, [o[i] for o in out])  # noqa: E731
        return pick(0), FactoredState(count=safe_increment(state.count), v_row=pick(1),
                                      v_col=pick(2), v=pick(3))

    return GradientTransformation(init_fn, update_fn)
