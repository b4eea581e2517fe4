"""Loops written with the control-flow primitives: ``fori_loop`` (a ``scan`` when its
bounds are static, else a ``while_loop``), ``map`` (a ``scan`` with no carry) and
``associative_scan`` (a parallel prefix scan written with slicing and concatenation:
no loop primitive, so every transform works through it)."""
from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from functx import tree
from functx.ir import abstractify
from functx.tracing import Tracer
from functx.transforms._args import check_callable
from functx.transforms.vmap import vmap
from functx.lax._common import ControlFlowError, as_leaf
from functx.lax._scan import scan
from functx.lax._while import while_loop

import functx.numpy as fnp

__all__ = ["fori_loop", "map", "associative_scan"]


def _static_int(x: Any) -> int | None:
    """``x`` as a Python int if its value is known now (not a tracer), else None."""
    if type(x) is Tracer or isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, np.ndarray) and x.shape == () and x.dtype.kind in "iu":
        return int(x)
    return None


def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``: ``jax.lax.fori_loop``.

    With bounds known when it is called (Python ints, NumPy integers) it is a
    :func:`scan` of ``upper - lower`` steps: reverse-differentiable, and its trace does
    not grow with the trip count. With traced bounds it is a :func:`while_loop`
    (forward-differentiable only).

    Args:
        lower, upper: integer scalars.
        body_fun: ``body_fun(i, val) -> val`` (same structure, shapes and dtypes).
        init_val: the initial value (a pytree of arrays).

    Returns:
        The final value.

    Raises:
        ControlFlowError: the bounds are not integer scalars, or ``body_fun`` changes the
            value's type.

    Example:
        >>> y = functx.lax.fori_loop(0, 100, lambda i, y: rk4_step(f, y, t0 + i * h, h), y0)
    """
    check_callable(body_fun, "fori_loop")
    where = f"fori_loop({getattr(body_fun, '__name__', 'f')})"
    for name, b in (("lower", lower), ("upper", upper)):
        a = abstractify(b) if hasattr(b, "dtype") or isinstance(b, int) else None
        if a is None or a.shape != () or np.dtype(a.dtype).kind not in "iu" \
                or isinstance(b, bool):
            raise ControlFlowError(f"{where}: {name} must be an integer scalar, not "
                                   f"{a if a is not None else type(b).__name__} ({b!r:.40}).")
    lo, hi = _static_int(lower), _static_int(upper)
    dtype = np.result_type(getattr(lower, "dtype", np.int64), getattr(upper, "dtype",
                                                                       np.int64))
    if lo is not None and hi is not None:
        def step(carry: Any, _: Any) -> tuple:
            i, val = carry
            return (i + np.asarray(1, dtype), body_fun(i, val)), None

        step.__name__ = getattr(body_fun, "__name__", "f")
        (_, val), _ = scan(step, (np.asarray(lo, dtype), init_val), None,
                           length=builtins.max(hi - lo, 0))
        return val

    def cond_fun(c: Any) -> Any:
        return c[0] < c[1]

    def body(c: Any) -> tuple:
        return c[0] + np.asarray(1, dtype), c[1], body_fun(c[0], c[2])

    body.__name__ = getattr(body_fun, "__name__", "f")
    lo_v = fnp.astype(lower, dtype) if type(lower) is Tracer else np.asarray(lower, dtype)
    hi_v = fnp.astype(upper, dtype) if type(upper) is Tracer else np.asarray(upper, dtype)
    return while_loop(cond_fun, body, (lo_v, hi_v, init_val))[2]


def map(f: Callable, xs: Any, batch_size: int | None = None) -> Any:
    """``f`` applied to each slice of ``xs`` along its leading axis, stacked:
    ``jax.lax.map`` (a :func:`scan` with no carry).

    Args:
        f: a function of one slice (a pytree of arrays).
        xs: a pytree of arrays with a common leading axis.
        batch_size: if given, ``f`` is applied to ``batch_size`` slices at a time with
            ``vmap`` (fewer, larger steps; the remainder runs as one batch).

    Returns:
        The stacked outputs.

    Example:
        >>> ys = functx.lax.map(lambda x: fnp.linalg.norm(x), xs)
    """
    check_callable(f, "map")
    if batch_size is None:
        return scan(lambda _, x: ((), f(x)), (), xs)[1]
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ControlFlowError(f"map: batch_size={batch_size!r} must be a positive int.")
    leaves = tree.leaves(xs)
    if not leaves:
        raise ControlFlowError("map: xs has no arrays to map over.")
    n = abstractify(leaves[0]).shape[0]
    m, r = divmod(n, int(batch_size))
    fv = vmap(f)
    outs = []
    if m:
        main = tree.map(lambda x: fnp.reshape(x[:m * batch_size], (m, batch_size)
                                              + tuple(x.shape[1:])), xs)
        ys = scan(lambda _, x: ((), fv(x)), (), main)[1]
        outs.append(tree.map(lambda y: fnp.reshape(y, (m * batch_size,) + tuple(y.shape[2:])),
                             ys))
    if r:
        outs.append(fv(tree.map(lambda x: x[m * batch_size:], xs)))
    if len(outs) == 1:
        return outs[0]
    return tree.map(lambda a, b: fnp.concatenate([a, b], axis=0), *outs)


def _slice(x: Any, start: int | None, stop: int | None, step: int, axis: int) -> Any:
    return x[(slice(None),) * axis + (slice(start, stop, step),)]


def _interleave(a: Any, b: Any, axis: int) -> Any:
    """Elements of ``a`` and ``b`` alternating along ``axis`` (``a`` first; ``a`` has as
    many elements as ``b`` or one more)."""
    nb = b.shape[axis]
    pairs = fnp.stack([_slice(a, 0, nb, 1, axis), b], axis=axis + 1)
    shape = list(a.shape)
    shape[axis] = 2 * nb
    out = fnp.reshape(pairs, tuple(shape))
    if a.shape[axis] > nb:
        out = fnp.concatenate([out, _slice(a, nb, None, 1, axis)], axis=axis)
    return out


def associative_scan(fn: Callable, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """All prefix combinations ``fn(...fn(fn(e0, e1), e2)..., ek)`` of ``elems`` along
    ``axis``, in O(log n) parallel steps: ``jax.lax.associative_scan``.

    ``fn`` must be associative and work elementwise on slices (it is applied to whole
    slices of ``elems`` at once). Written with slicing and concatenation, so every
    transform applies.

    Args:
        fn: ``fn(a, b)``: an associative function of two pytrees shaped like ``elems``.
        elems: a pytree of arrays with a common length along ``axis``.
        reverse: scan from the end.
        axis: the axis to scan along.

    Returns:
        A pytree like ``elems`` with the prefix combinations.

    Raises:
        ControlFlowError: the leaves differ in length along ``axis``.

    Example:
        >>> functx.lax.associative_scan(fnp.add, fnp.arange(5.0))   # cumulative sums
    """
    check_callable(fn, "associative_scan")
    leaves, treedef = tree.flatten(elems)
    leaves = [as_leaf(x, "associative_scan", "elems") for x in leaves]
    if not leaves:
        return elems
    ndim = abstractify(leaves[0]).ndim
    axis = axis % builtins.max(ndim, 1)
    lengths = {abstractify(x).shape[axis] for x in leaves}
    if len(lengths) != 1:
        raise ControlFlowError(f"associative_scan: every leaf of elems must have the same "
                               f"length along axis {axis}, but they have {sorted(lengths)}.")
    if reverse:
        leaves = [fnp.flip(x, axis) for x in leaves]

    def combine(a: list, b: list) -> list:
        out = fn(tree.unflatten(treedef, a), tree.unflatten(treedef, b))
        return tree.leaves(out)

    def run(es: list) -> list:
        n = es[0].shape[axis]
        if n < 2:
            return es
        reduced = combine([_slice(e, 0, -1, 2, axis) for e in es],
                          [_slice(e, 1, None, 2, axis) for e in es])
        odd = run(reduced)
        if n % 2 == 0:
            even = combine([_slice(e, 0, -1, 1, axis) for e in odd],
                           [_slice(e, 2, None, 2, axis) for e in es])
        else:
            even = combine(odd, [_slice(e, 2, None, 2, axis) for e in es])
        even = [fnp.concatenate([_slice(e, 0, 1, 1, axis), r], axis=axis)
                for e, r in zip(es, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    out = run(leaves)
    if reverse:
        out = [fnp.flip(x, axis) for x in out]
    return tree.unflatten(treedef, out)
