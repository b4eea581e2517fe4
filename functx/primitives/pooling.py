"""Max pooling as two primitives: ``max_pool`` and its gradient ``max_pool_grad``.

Written as a composite (``functx.nn.max_pool2d``'s before session 11: the windows stacked
by a reshape/transpose or strided slices, a reduce_max, a first-argmax from comparisons, two
gathers, and two scatter-adds for the gradient) max pooling took about 30 operations, a
third of LeNet's training step. As primitives it is one pass over the input forward and one
backward, as XLA's ``reduce_window`` / ``select_and_scatter_add`` pair:

* ``max_pool(x, *, window, strides, dilation)``: ``x`` is ``[N, C, *spatial]`` (1 to 3
  spatial axes, a real floating-point dtype) and ALREADY PADDED (``functx.nn`` pads with
  ``-inf``, which also gives ``ceil_mode``); windows are "valid": ``window[d]`` elements
  ``dilation[d]`` apart, one every ``strides[d]``, so the output is ``[N, C, *out]`` with
  ``out[d] = (size[d] - dilation[d] * (window[d] - 1) - 1) // strides[d] + 1``. Each output
  is the maximum of its window; NaN counts as the maximum (it propagates).
* ``max_pool_grad(x, g, *, window, strides, dilation)``: ``dx`` of ``x``'s shape; each
  window adds its ``g`` at its FIRST maximum (row-major over the window; the first NaN
  where it holds one), recomputed from ``x`` (no index array is kept). This is PyTorch's
  rule on ties; on windows holding NaN PyTorch's kernels pick the last NaN.

Rules. The VJP of ``max_pool`` is ``max_pool_grad(x, ct)``. ``max_pool_grad`` is linear in
``g``: its JVP is ``max_pool_grad(x, tg)``, and its cotangent for ``g`` is the cotangent
read at each window's first maximum (:func:`select_and_gather`); for ``x`` it is zero (the
first maximum's position is piecewise constant in ``x``). The JVP of ``max_pool`` is the
same gather of the tangent. :func:`select_and_gather` is a composite of primitives (the
windows stacked by strided slices, :func:`first_rank`, a select and a sum over the window),
so every order of derivative exists. Batching: a batch axis joins ``N`` (a reshape), and is
split off the result again.

Implementations. On the CPU, Numba kernels (``functx/primitives/_pool_numba.py``: one loop
over the windows per plane, planes spread over the threads where the work pays for it); on
CUDA, one kernel each (``functx/primitives/cuda/pooling.py``: a thread per output, atomic
adds where windows overlap) for float32 and float64. Without Numba (``FUNCTX_NUMBA=0``), for
float16/bfloat16, and on other array modules, the generic array code
(:func:`_max_pool_impl`, :func:`_max_pool_grad_impl`: one strided slice per window element,
compared and selected elementwise; the gradient adds, per window element, the cotangents of
the windows whose first maximum it is into a strided slice of ``dx``).
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import Any, Sequence

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray, abstractify
from functx.primitives import _pool_numba
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import batch_size, to_front
from functx.primitives._util import compute_dtype, is_real_float, shape_of
from functx.primitives.cuda import pooling as _cuda
from functx.primitives.misc import stop_gradient
from functx.registry import Primitive
from functx.tracing import bind

__all__ = ["max_pool", "max_pool_grad", "select_and_gather", "window_stack", "first_rank",
           "pool_out_sizes", "max_pool_p", "max_pool_grad_p"]


# -- shape rules -------------------------------------------------------------------------------

def pool_out_sizes(sizes: Sequence[int], window: Sequence[int], strides: Sequence[int],
                   dilation: Sequence[int]) -> tuple[int, ...]:
    """The output sizes of "valid" windows.

    Args:
        sizes, window, strides, dilation: one int per spatial axis.

    Returns:
        ``(size - dilation * (window - 1) - 1) // stride + 1`` per axis (0 where the
        dilated window does not fit).

    Example:
        >>> pool_out_sizes((28, 10), (2, 3), (2, 1), (1, 2))
        (14, 6)
    """
    return tuple(max((n - d * (k - 1) - 1) // s + 1, 0)
                 for n, k, s, d in zip(sizes, window, strides, dilation))


def _check(name: str, x: AbstractArray, window: tuple, strides: tuple,
           dilation: tuple) -> tuple[int, ...]:
    """Checks ``x`` and the window parameters; returns the output's spatial sizes."""
    if not is_real_float(x.dtype):
        raise DTypeError(f"{name} needs a real floating-point operand but got {x}. Convert "
                         "it with x.astype(np.float32) first.")
    nd = x.ndim - 2
    if not 1 <= nd <= 3:
        raise ShapeError(f"{name} needs an operand [N, C, *spatial] with 1 to 3 spatial "
                         f"axes but got {x}.")
    for what, v in (("window", window), ("strides", strides), ("dilation", dilation)):
        if not isinstance(v, tuple) or len(v) != nd or any(
                not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in v):
            raise ShapeError(f"{name}: {what} must be a tuple of {nd} positive ints (one per "
                             f"spatial axis of {x}) but got {what}={v!r}.")
    out = pool_out_sizes(x.shape[2:], window, strides, dilation)
    if any(o < 1 for o in out):
        raise ShapeError(f"{name}: the windows (window={window}, dilation={dilation}) do not "
                         f"fit in the spatial sizes of {x}; pad the input first.")
    return out


def _max_pool_aval(x: AbstractArray, *, window, strides, dilation) -> AbstractArray:
    out = _check("max_pool", x, window, strides, dilation)
    return AbstractArray(tuple(x.shape[:2]) + out, np.dtype(x.dtype), x.weak_type)


def _max_pool_grad_aval(x: AbstractArray, g: AbstractArray, *, window, strides,
                        dilation) -> AbstractArray:
    out = _check("max_pool_grad", x, window, strides, dilation)
    if np.dtype(g.dtype) != np.dtype(x.dtype) or tuple(g.shape) != tuple(x.shape[:2]) + out:
        raise ShapeError(f"max_pool_grad: the cotangent {g} must have the pooling's output "
                         f"shape {tuple(x.shape[:2]) + out} and the dtype of x {x}.")
    return AbstractArray(tuple(x.shape), np.dtype(x.dtype), x.weak_type)


# -- the generic implementations (any array module: CuPy, and NumPy without Numba) --------------

def _element_slices(window, strides, dilation, out) -> list[tuple]:
    """One index tuple per window element (row-major): the strided slice of the padded
    input holding that element of every window."""
    return [(slice(None), slice(None)) + tuple(
        slice(k * d, k * d + (o - 1) * s + 1, s)
        for k, d, o, s in zip(ks, dilation, out, strides))
        for ks in itertools.product(*map(range, window))]


def _first_max_scan(xp: Any, x: Any, slices: list, want_index: bool) -> tuple[Any, Any]:
    """``(best, index)``: each window's first maximum (NaN wins) and, with ``want_index``,
    the window element it is at (int32; else None)."""
    best = x[slices[0]].copy()
    index = xp.zeros(best.shape, np.int32) if want_index else None
    best_nan = xp.isnan(best)
    for k, sl in enumerate(slices[1:], 1):
        v = x[sl]
        v_nan = xp.isnan(v)
        take = (v > best) | (v_nan & ~best_nan)
        best = xp.where(take, v, best)
        best_nan |= v_nan
        if want_index:
            index = xp.where(take, np.int32(k), index)
    return best, index


def _max_pool_impl(xp, x, *, window, strides, dilation):
    out = pool_out_sizes(x.shape[2:], window, strides, dilation)
    if x.shape[0] * x.shape[1] == 0:
        return xp.empty(tuple(x.shape[:2]) + out, x.dtype)
    best, _ = _first_max_scan(xp, x, _element_slices(window, strides, dilation, out), False)
    return best


def _max_pool_grad_impl(xp, x, g, *, window, strides, dilation):
    out = pool_out_sizes(x.shape[2:], window, strides, dilation)
    dt = compute_dtype(x.dtype)  # (float16/bfloat16 sums in float32, rounded once)
    dx = xp.zeros(x.shape, dt)
    if x.size == 0 or g.size == 0:
        return dx.astype(x.dtype, copy=False)
    slices = _element_slices(window, strides, dilation, out)
    _, index = _first_max_scan(xp, x, slices, True)
    g = g.astype(dt, copy=False)
    zero = xp.zeros((), dt)
    for k, sl in enumerate(slices):
        dx[sl] += xp.where(index == k, g, zero)
    return dx.astype(x.dtype, copy=False)


def _max_pool_cpu(xp, x, *, window, strides, dilation, out=None):
    if not _pool_numba.usable(x):
        y = _max_pool_impl(xp, x, window=window, strides=strides, dilation=dilation)
        if out is None:
            return y
        out[...] = y
        return out
    sizes = pool_out_sizes(x.shape[2:], window, strides, dilation)
    return _pool_numba.max_pool_numba(x, sizes, window, strides, dilation, out)


def _max_pool_grad_cpu(xp, x, g, *, window, strides, dilation, out=None):
    if not _pool_numba.usable(x) or g.dtype != x.dtype:
        dx = _max_pool_grad_impl(xp, x, g, window=window, strides=strides,
                                 dilation=dilation)
        if out is None:
            return dx
        out[...] = dx
        return out
    return _pool_numba.max_pool_grad_numba(x, np.asarray(g), window, strides, dilation, out)


max_pool_p = Primitive("max_pool")
max_pool_p.def_abstract_eval(_max_pool_aval)
max_pool_p.def_impl(_max_pool_impl)  # any array module
max_pool_p.def_impl(_max_pool_cpu, backend="cpu")
# into jit's planned buffers (functx/compiler/memory.py; without it, the planner also takes
# the result for a possible view of x and reuses no buffer x shares)
max_pool_p.def_impl_out(_max_pool_cpu, backend="cpu")
# one kernel (functx/primitives/cuda/pooling.py; the generic rule for other dtypes)
max_pool_p.def_impl(functools.partial(_cuda.max_pool, fallback=_max_pool_impl),
                    backend="cuda")

max_pool_grad_p = Primitive("max_pool_grad")
max_pool_grad_p.def_abstract_eval(_max_pool_grad_aval)
max_pool_grad_p.def_impl(_max_pool_grad_impl)
max_pool_grad_p.def_impl(_max_pool_grad_cpu, backend="cpu")
max_pool_grad_p.def_impl_out(_max_pool_grad_cpu, backend="cpu")
max_pool_grad_p.def_impl(functools.partial(_cuda.max_pool_grad, fallback=_max_pool_grad_impl),
                         backend="cuda")


# -- the composite gather (for the derivative rules) ------------------------------------------

def window_stack(x: Any, window: Sequence[int], strides: Sequence[int],
                 dilation: Sequence[int]) -> Any:
    """The "valid" windows of ``x`` stacked along a new leading axis, in primitives: a
    reshape and a transpose where the windows tile the input (stride equal to the window,
    no dilation), else one strided slice per window element.

    Args:
        x: ``[N, C, *spatial]`` (an array or a tracer).
        window, strides, dilation: one positive int per spatial axis; the windows must fit.

    Returns:
        ``[K, N, C, *out]``, ``K`` the window's size, its elements row-major.

    Example:
        >>> window_stack(np.arange(4.0).reshape(1, 1, 4), (2,), (2,), (1,))[:, 0, 0]
        array([[0., 2.],
               [1., 3.]])
    """
    n, c = shape_of(x)[:2]
    sizes = tuple(shape_of(x)[2:])
    out = pool_out_sizes(sizes, window, strides, dilation)
    nd = len(window)
    kk = math.prod(window)
    if tuple(strides) == tuple(window) and all(d == 1 for d in dilation):
        used = tuple(o * k for o, k in zip(out, window))
        if used != sizes:
            x = _shape.slice(x, (0,) * (nd + 2), (n, c) + used)
        split = (n, c) + tuple(v for o, k in zip(out, window) for v in (o, k))
        perm = tuple(range(3, 3 + 2 * nd, 2)) + (0, 1) + tuple(range(2, 2 + 2 * nd, 2))
        w = _shape.transpose(_shape.reshape(x, split), perm)
        return _shape.reshape(w, (kk, n, c) + out)
    parts = []
    for sl in _element_slices(window, strides, dilation, out):
        start = (0, 0) + tuple(s.start for s in sl[2:])
        limit = (n, c) + tuple(s.stop for s in sl[2:])
        part = _shape.slice(x, start, limit, (1, 1) + tuple(strides))
        parts.append(_shape.reshape(part, (1, n, c) + out))
    return parts[0] if kk == 1 else _shape.concatenate(parts, 0)


def first_rank(w: Any) -> Any:
    """The rank of each window's first maximum, NaN counting as the maximum.

    Built from a max, comparisons and a second max over ``K`` (the first hit has the largest
    rank ``K - k``): NumPy's argmax over a short leading axis copies ``w`` and loops over
    the windows one by one.

    Args:
        w: the window stack ``[K, ...]`` (:func:`window_stack`), a float array or tracer.

    Returns:
        ``K - argmax(w, axis=0)`` (NaN first), int8 (int32 for ``K >= 128``).

    Example:
        >>> first_rank(np.array([[1.0, 3.0], [2.0, 3.0]]))   # argmax 1 and 0
        array([1, 2], dtype=int8)
    """
    kk, rest = shape_of(w)[0], tuple(shape_of(w)[1:])
    top = _shape.reshape(_red.reduce_max(w, (0,)), (1,) + rest)
    hit = _ew.or_(_ew.eq(w, top), _ew.ne(w, w))
    dt = np.dtype(np.int8 if kk < 128 else np.int32)
    rank = _shape.on_device_of(w, np.arange(kk, 0, -1, dtype=dt).reshape((kk,)
                                                                        + (1,) * len(rest)))
    return _red.reduce_max(_ew.mul(_ew.convert_element_type(hit, new_dtype=dt), rank), (0,))


def select_and_gather(x: Any, t: Any, *, window: Sequence[int], strides: Sequence[int],
                      dilation: Sequence[int]) -> Any:
    """``t`` read at each window's first maximum in ``x``.

    The JVP of ``max_pool`` (``t`` the tangent of ``x``) and the cotangent of
    ``max_pool_grad``'s ``g`` (``t`` the cotangent of ``dx``). Linear in ``t``, with no
    derivative through ``x``; written in primitives (see the module docstring), so it
    differentiates and batches like them.

    Args:
        x: the (padded) pooling input ``[N, C, *spatial]``.
        t: an array of ``x``'s shape and dtype.
        window, strides, dilation: as for :func:`max_pool`.

    Returns:
        ``[N, C, *out]``.

    Example:
        >>> x = np.array([[[1.0, 3.0, 2.0, 0.0]]])
        >>> select_and_gather(x, 10 * x, window=(2,), strides=(2,), dilation=(1,))
        array([[[30., 20.]]])
    """
    w = window_stack(stop_gradient(x), window, strides, dilation)
    kk, rest = shape_of(w)[0], tuple(shape_of(w)[1:])
    rank = first_rank(w)
    ranks = _shape.on_device_of(w, np.arange(kk, 0, -1, dtype=np.dtype(rank.dtype)).reshape(
        (kk,) + (1,) * len(rest)))
    hit = _ew.eq(_shape.broadcast_in_dim(rank, (kk,) + rest, tuple(range(1, 1 + len(rest)))),
                 ranks)
    tw = window_stack(t, window, strides, dilation)
    return _red.reduce_sum(_ew.select(hit, tw, _ew.scalar(tw, 0)), (0,))


# -- derivative rules --------------------------------------------------------------------------

@max_pool_p.def_vjp(save_inputs=(0,))
def _max_pool_vjp(ct, ins, out, *, window, strides, dilation):
    return (bind(max_pool_grad_p, ins[0], ct, window=window, strides=strides,
                 dilation=dilation),)


@max_pool_p.def_jvp
def _max_pool_jvp(tangents, primals, out, *, window, strides, dilation):
    t = tangents[0]
    if t is None:
        return None
    return select_and_gather(primals[0], t, window=window, strides=strides, dilation=dilation)


@max_pool_grad_p.def_vjp(save_inputs=(0,))
def _max_pool_grad_vjp(ct, ins, out, *, window, strides, dilation):
    # No cotangent for x: the position of the first maximum is piecewise constant in x.
    return None, select_and_gather(ins[0], ct, window=window, strides=strides,
                                   dilation=dilation)


@max_pool_grad_p.def_jvp
def _max_pool_grad_jvp(tangents, primals, out, *, window, strides, dilation):
    tg = tangents[1]  # (linear in g; x's tangent moves no maximum)
    if tg is None:
        return None
    return bind(max_pool_grad_p, primals[0], tg, window=window, strides=strides,
                dilation=dilation)


# -- batching ----------------------------------------------------------------------------------

def _merged(x: Any) -> Any:
    """``[B, N, C, ...]`` as ``[B * N, C, ...]``."""
    s = shape_of(x)
    return _shape.reshape(x, (s[0] * s[1],) + tuple(s[2:]))


def _split(y: Any, b: int) -> Any:
    s = shape_of(y)
    return _shape.reshape(y, (b, s[0] // b) + tuple(s[1:]))


@max_pool_p.def_batch
def _max_pool_batch(args, dims, *, window, strides, dilation):
    x = to_front(args[0], dims[0])
    b = shape_of(x)[0]
    y = bind(max_pool_p, _merged(x), window=window, strides=strides, dilation=dilation)
    return _split(y, b), 0


@max_pool_grad_p.def_batch
def _max_pool_grad_batch(args, dims, *, window, strides, dilation):
    b = batch_size(args, dims)
    x, g = (to_front(a, d, b) for a, d in zip(args, dims))
    dx = bind(max_pool_grad_p, _merged(x), _merged(g), window=window, strides=strides,
              dilation=dilation)
    return _split(dx, b), 0


# -- the functions -----------------------------------------------------------------------------

@functools.lru_cache(maxsize=512)
def _checked(x: AbstractArray, g: AbstractArray | None, params: tuple) -> None:
    """The shape rule, before an eager call runs the kernels (which trust it)."""
    if g is None:
        _max_pool_aval(x, **dict(params))
    else:
        _max_pool_grad_aval(x, g, **dict(params))


def _params(x: Any, g: Any, window: Any, strides: Any, dilation: Any) -> dict:
    nd = len(shape_of(x)) - 2
    window = tuple(int(k) for k in window)
    strides = window if strides is None else tuple(int(s) for s in strides)
    dilation = (1,) * nd if dilation is None else tuple(int(d) for d in dilation)
    params = {"window": window, "strides": strides, "dilation": dilation}
    _checked(abstractify(x), None if g is None else abstractify(g), tuple(params.items()))
    return params


def max_pool(x: Any, window: Sequence[int], strides: Sequence[int] | None = None,
             dilation: Sequence[int] | None = None) -> Any:
    """Max pooling of the already padded ``x`` over "valid" windows.

    Args:
        x: ``[N, C, *spatial]`` with 1 to 3 spatial axes, a real floating-point array
            (padded by the caller: ``functx.nn.max_pool2d`` pads with ``-inf``).
        window: the window's size per spatial axis.
        strides: the step between windows per axis (default: ``window``).
        dilation: the spacing of the window's elements per axis (default 1).

    Returns:
        ``[N, C, *out]``, ``out = (size - dilation * (window - 1) - 1) // stride + 1``: the
        maximum of each window (NaN where the window holds one). The gradient goes to each
        window's first maximum.

    Raises:
        ShapeError: a rank other than 3 to 5, parameters of the wrong length or not
            positive, or windows that do not fit.
        DTypeError: an operand that is not a real float.

    Example:
        >>> max_pool(np.array([[[1.0, 3.0, 2.0, 0.0]]]), (2,))
        array([[[3., 2.]]])
    """
    return bind(max_pool_p, x, **_params(x, None, window, strides, dilation))


def max_pool_grad(x: Any, g: Any, window: Sequence[int], strides: Sequence[int] | None = None,
                  dilation: Sequence[int] | None = None) -> Any:
    """The cotangent of :func:`max_pool`'s ``x`` for the output cotangent ``g``.

    Args:
        x: the (padded) input of the pooling.
        g: ``[N, C, *out]`` of ``x``'s dtype.
        window, strides, dilation: as for :func:`max_pool`.

    Returns:
        ``dx`` of ``x``'s shape: each window's ``g`` added at the window's first maximum
        (row-major; the first NaN where the window holds one).

    Raises:
        ShapeError, DTypeError: as :func:`max_pool`, or ``g`` not of the output's shape and
            ``x``'s dtype.

    Example:
        >>> max_pool_grad(np.array([[[1.0, 3.0, 2.0, 0.0]]]), np.ones((1, 1, 2)), (2,))
        array([[[0., 1., 1., 0.]]])
    """
    return bind(max_pool_grad_p, x, g, **_params(x, g, window, strides, dilation))
