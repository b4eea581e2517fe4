"""Samplers built on the linear algebra of ``functx.numpy.linalg``: multivariate_normal and
orthogonal, with ``jax.random``'s algorithms (so the values are JAX's to rounding of the
decompositions) and gradients through them.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from functx import numpy as fnp
from functx.errors import ShapeError
from functx.random._distributions import normal
from functx.random._prng import Array, check_key, float_dtype, shape_tuple


def multivariate_normal(key: Array, mean: Any, cov: Any, shape: Sequence[int] | None = None,
                        dtype: Any = np.float64, method: str = "cholesky") -> Array:
    """Multivariate normal values ``mean + factor @ n`` for standard normal ``n``, where
    ``factor @ factor.T == cov`` (``method``: ``"cholesky"``, or ``"eigh"``/``"svd"`` for a
    positive semi-definite ``cov``), as ``jax.random.multivariate_normal``.

    Args:
        key: a key.
        mean: ``(..., n)``.
        cov: ``(..., n, n)``, symmetric positive (semi-)definite.
        shape: the batch shape (None: the broadcast of ``mean``'s and ``cov``'s batch
            shapes); the result has shape ``shape + (n,)``.
        dtype: a float dtype; float64 by default.
        method: ``"cholesky"`` (default), ``"eigh"`` or ``"svd"``.

    Returns:
        An array of ``shape + (n,)``, differentiable in ``mean`` and ``cov``.

    Raises:
        ShapeError: ``mean`` is not at least 1-d, ``cov`` not ``(..., n, n)``, or the batch
            shapes do not broadcast to ``shape``. ValueError: an unknown ``method``.

    Example:
        >>> functx.random.multivariate_normal(functx.random.key(0), np.zeros(2),
        ...                                   np.array([[1.0, 0.5], [0.5, 2.0]]), (5,))
    """
    key = check_key("functx.random.multivariate_normal", key)
    dt = float_dtype("multivariate_normal", dtype)
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError(f"functx.random.multivariate_normal: method must be 'svd', 'eigh' "
                         f"or 'cholesky', not {method!r}.")
    mean, cov = fnp.astype(fnp.asarray(mean), dt), fnp.astype(fnp.asarray(cov), dt)
    if mean.ndim < 1 or cov.ndim < 2 or tuple(cov.shape[-2:]) != (mean.shape[-1],) * 2:
        raise ShapeError(f"functx.random.multivariate_normal needs mean of shape (..., n) and "
                         f"cov of shape (..., n, n), but got mean {tuple(mean.shape)} and cov "
                         f"{tuple(cov.shape)}.")
    batch = tuple(np.broadcast_shapes(tuple(mean.shape[:-1]), tuple(cov.shape[:-2])))
    if shape is None:
        shape = batch
    else:
        shape = shape_tuple("multivariate_normal", shape)
        if np.broadcast_shapes(shape, batch) != shape:
            raise ShapeError(f"functx.random.multivariate_normal: the batch shapes of mean "
                             f"{tuple(mean.shape[:-1])} and cov {tuple(cov.shape[:-2])} must "
                             f"broadcast to shape {shape}.")
    if method == "svd":
        u, s, _ = fnp.linalg.svd(cov)
        factor = u * fnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = fnp.linalg.eigh(cov)
        factor = v * fnp.sqrt(w[..., None, :])
    else:
        factor = fnp.linalg.cholesky(cov)
    n = normal(key, shape + tuple(mean.shape[-1:]), dt)
    return mean + fnp.einsum("...ij,...j->...i", factor, n)


def orthogonal(key: Array, n: int, shape: Sequence[int] = (), dtype: Any = np.float64,
               m: int | None = None) -> Array:
    """Orthogonal matrices drawn uniformly (Haar measure): the ``Q`` of the QR decomposition
    of a normal matrix, its columns' signs fixed by ``R``'s diagonal (Mezzadri 2007), as
    ``jax.random.orthogonal``.

    Args:
        key: a key.
        n: the number of rows.
        shape: the batch shape.
        dtype: a float dtype; float64 by default.
        m: the number of columns (default ``n``); with ``m != n`` the result has
            orthonormal columns (``n > m``) or rows (``n < m``).

    Returns:
        An array of ``shape + (n, m)``.
    """
    key = check_key("functx.random.orthogonal", key)
    dt = float_dtype("orthogonal", dtype)
    shape = shape_tuple("orthogonal", shape)
    n = shape_tuple("orthogonal", n)[0]
    m = n if m is None else shape_tuple("orthogonal", m)[0]
    z = normal(key, shape + (max(n, m), min(n, m)), dt)
    q, r = fnp.linalg.qr(z)
    d = fnp.linalg.diagonal(r)
    x = q * fnp.expand_dims(fnp.sign(d), -2)
    return fnp.swapaxes(x, -1, -2) if n < m else x
