"""Pytrees of arrays as one flat vector, as ``jax.flatten_util``: :func:`ravel_pytree`.

Hands a model's parameters to code that wants a single vector (``scipy.optimize.minimize``,
an HMC sampler, a Hessian of all parameters) and back. It lives here, not in
:mod:`functx.tree`, because it concatenates arrays with :mod:`functx.numpy`, and
``functx.tree`` is the lowest layer, below the arrays. Both directions are made of functx
operations, so ``grad``, ``vjp``, ``jvp``, ``vmap`` and ``jit`` go through them.

Dtypes: the vector has the promoted dtype of the leaves (:func:`functx.numpy.result_type`:
NumPy 2 rules with Python scalars weak, so ``int32`` with ``float32`` gives ``float64``
where JAX, with its own promotion table, gives ``float32``). When the leaves have several
dtypes, unravel casts each piece back to its leaf's dtype and insists on a vector of the
promoted dtype; when they share one, unravel keeps the vector's dtype (as in JAX). An empty
tree gives an empty ``float64`` vector (JAX: ``float32``, its default float).

Example:
    >>> import numpy as np, functx.numpy as fnp
    >>> from functx.flatten_util import ravel_pytree
    >>> flat, unravel = ravel_pytree({'w': np.ones((2, 2)), 'b': np.zeros(2)})
    >>> flat
    array([0., 0., 1., 1., 1., 1.])
    >>> unravel(flat * 2)['w']
    array([[2., 2.],
           [2., 2.]])
"""
from __future__ import annotations

import math
from typing import Any, Callable

import attrs
import numpy as np

from functx import numpy as fnp
from functx import tree
from functx.errors import DTypeError, ShapeError

__all__ = ["ravel_pytree"]


@attrs.frozen
class _Unravel:
    """The inverse of one :func:`ravel_pytree` call: a hashable callable (usable as a static
    argument of ``jit``) from a flat vector to the pytree."""

    treedef: tree.PyTreeDef
    shapes: tuple
    from_dtypes: tuple | None  # None: every leaf had the vector's dtype; no casts
    to_dtype: np.dtype

    def __call__(self, flat: Any) -> tree.PyTree:
        total = sum(math.prod(s) for s in self.shapes)
        shape = tuple(fnp.shape(flat))
        if shape != (total,):
            raise ShapeError(f"unravel (from ravel_pytree) expects a vector of shape ({total},) "
                             f"for the structure {self.treedef!r}, got shape {shape}.")
        if self.from_dtypes is not None:
            dtype = fnp.result_type(flat)
            if dtype != self.to_dtype:
                raise DTypeError(f"unravel (from ravel_pytree) got a vector of dtype {dtype}, "
                                 f"but the leaves were raveled to {self.to_dtype}; pass a "
                                 f"{self.to_dtype} vector (e.g. vector.astype("
                                 f"np.{self.to_dtype.name})).")
        pieces, start = [], 0
        for i, s in enumerate(self.shapes):
            size = math.prod(s)
            piece = fnp.reshape(flat[start:start + size], s)
            if self.from_dtypes is not None:
                piece = fnp.astype(piece, self.from_dtypes[i])
            pieces.append(piece)
            start += size
        return self.treedef.unflatten(pieces)


def ravel_pytree(pytree: tree.PyTree) -> tuple[Any, Callable[[Any], tree.PyTree]]:
    """Flattens a pytree of arrays and scalars into one 1-d vector, and gives the inverse.

    Args:
      pytree: a pytree whose leaves are arrays (NumPy, CuPy or traced) or Python scalars.
    Returns:
      ``(flat, unravel)``: ``flat`` is the leaves raveled and concatenated in
      :func:`functx.tree.flatten` order, in their promoted dtype (see the module
      docstring); ``unravel(vector)`` rebuilds the pytree (same structure, shapes and
      leaf dtypes) from a vector of ``flat``'s shape. ``unravel`` is hashable.
    Raises:
      DTypeError: a leaf is not numeric (a string, an object array...); or, from
        ``unravel``, a vector of another dtype than ``flat``'s when the leaves had
        several dtypes.
      ShapeError: from ``unravel``, a vector of another shape than ``flat``'s.

    Example:
      >>> import scipy.optimize
      >>> x0, unravel = ravel_pytree(params)
      >>> loss_flat = lambda v: float(loss(unravel(v)))
      >>> grad_flat = lambda v: np.asarray(fx.grad(lambda v: loss(unravel(v)))(v))
      >>> res = scipy.optimize.minimize(loss_flat, x0, jac=grad_flat, method="L-BFGS-B")
      >>> params = unravel(res.x)
    """
    leaves, treedef = tree.flatten(pytree)
    if not leaves:
        return fnp.zeros((0,)), _Unravel(treedef, (), None, np.dtype(np.float64))
    from_dtypes = tuple(fnp.result_type(x) for x in leaves)
    to_dtype = fnp.result_type(*leaves)
    shapes = tuple(tuple(fnp.shape(x)) for x in leaves)
    if all(d == to_dtype for d in from_dtypes):
        parts = [fnp.ravel(x) for x in leaves]
        unravel = _Unravel(treedef, shapes, None, to_dtype)
    else:
        parts = [fnp.ravel(fnp.astype(x, to_dtype)) for x in leaves]
        unravel = _Unravel(treedef, shapes, from_dtypes, to_dtype)
    flat = parts[0] if len(parts) == 1 else fnp.concatenate(parts)
    return flat, unravel
