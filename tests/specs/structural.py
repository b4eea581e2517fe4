"""Specs of the structural primitives: reductions, shape operations, indexing, dot_general.

Static parameters (axes, permutations, slice bounds, pad configurations, dimension
numbers...) are drawn first and the arrays they call for second (``.flatmap``). The rule
tests pass every argument through ``vjp`` and ``make_trace``, so arguments must be arrays:
the parameters travel as a last, empty int8 array whose shape ``(0, k)`` holds their
number ``k`` in a table (shapes stay concrete under tracing). :func:`_spec` hides this:
its ``fn`` and ``ref`` take the arrays and then the parameters, a ``SimpleNamespace``.

References are written independently of the implementations: loops over index positions
for the scatters, index maps for pad, ``np.einsum`` for dot_general. Maxima and minima are
checked on arrays without ties (tie splitting is tested in test_structural_numerics.py).
"""
from __future__ import annotations

import string
from types import SimpleNamespace as P
from typing import Any, Callable

import numpy as np
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from functx.primitives import indexing as ix
from functx.primitives import linalg as la
from functx.primitives import reduction as red
from functx.primitives import shape as sh
from tests.specs import PrimSpec
from tests.strategies import array, distinct_array, int_array, shapes

_DRAWN_PARAMS: list[P] = []
_PARAM_NUMBERS: dict[str, int] = {}


def _param_handle(p: P) -> np.ndarray:
    """An empty array standing for the parameters ``p`` (see the module docstring)."""
    key = repr(p)
    k = _PARAM_NUMBERS.get(key)
    if k is None:
        k = _PARAM_NUMBERS[key] = len(_DRAWN_PARAMS)
        _DRAWN_PARAMS.append(p)
    try:
        note(f"parameters #{k}: {p}")
    except InvalidArgument:  # drawn outside a test (e.g. strategy.example())
        pass
    return np.zeros((0, k), np.int8)


def _spec(name: str, fn: Callable, ref: Callable, params: st.SearchStrategy,
          arrays: Callable[[P], st.SearchStrategy], **kwargs: Any) -> PrimSpec:
    """A spec drawing ``params``, then ``arrays(params)`` (a strategy of a tuple of arrays).

    ``fn(*arrays, params)`` binds the primitive and ``ref(*arrays, params)`` is NumPy's.
    """
    def unpack(f: Callable) -> Callable:
        return lambda *args: f(*args[:-1], _DRAWN_PARAMS[args[-1].shape[1]])

    drawn = params.flatmap(lambda p: arrays(p).map(lambda arrs: (*arrs, _param_handle(p))))
    return PrimSpec(name, unpack(fn), unpack(ref), drawn, **kwargs)


def _subset(items: Any) -> st.SearchStrategy:
    """A sorted tuple of distinct elements of ``items``."""
    items = list(items)
    return st.lists(st.sampled_from(items), unique=True, max_size=len(items)).map(
        lambda xs: tuple(sorted(xs))) if items else st.just(())


# -- reductions ------------------------------------------------------------------------------

@st.composite
def _axes_params(draw, min_rank=0, max_side=4, min_side=0, nonempty_reduced=False):
    shape = draw(shapes(min_rank=min_rank, min_side=min_side, max_side=max_side))
    allowed = [i for i, d in enumerate(shape) if d > 0 or not nonempty_reduced]
    return P(shape=shape, axes=draw(_subset(allowed)))


def _reduction_spec(name: str, fn: Callable, ref: Callable, values: Callable, label: str = "",
                    params: st.SearchStrategy | None = None, diff: tuple = (0,)) -> PrimSpec:
    return _spec(name, lambda x, p: fn(x, p.axes), lambda x, p: ref(x, axis=p.axes),
                 _axes_params() if params is None else params,
                 lambda p: st.tuples(values(p.shape)), diff_argnums=diff, label=label)


def _bools(shape):
    return int_array(shape, 0, 2).map(lambda a: a.astype(bool))


def _away_from_zero(shape):
    """Values in ±[0.5, 1.5]: products of up to 27 of them stay well scaled."""
    return st.tuples(array(shape, 0.5, 1.5), _bools(shape)).map(lambda t: np.where(t[1], t[0], -t[0]))


_EXTREMA = [("reduce_max", red.reduce_max, np.max, np.any),
            ("reduce_min", red.reduce_min, np.min, np.all)]

REDUCTION_SPECS = [
    _reduction_spec("reduce_sum", red.reduce_sum, np.sum, array),
    _reduction_spec("reduce_sum", red.reduce_sum, lambda x, axis: np.sum(x, axis=axis),
                    lambda s: int_array(s, -5, 5), label="int", diff=()),
    _reduction_spec("reduce_prod", red.reduce_prod, np.prod, _away_from_zero,
                    params=_axes_params(max_side=3)),
    _reduction_spec("reduce_prod", red.reduce_prod, lambda x, axis: np.prod(x, axis=axis),
                    lambda s: int_array(s, -2, 3), label="int", diff=(),
                    params=_axes_params(max_side=3)),
]
for _name, _fn, _ref, _bool_ref in _EXTREMA:
    REDUCTION_SPECS += [
        _reduction_spec(_name, _fn, _ref, distinct_array,
                        params=_axes_params(nonempty_reduced=True)),
        _reduction_spec(_name, _fn, _ref, lambda s: int_array(s, -3, 3), label="int",
                        params=_axes_params(nonempty_reduced=True), diff=()),
        _reduction_spec(_name, _fn, _bool_ref, _bools, label="bool", diff=()),
    ]


@st.composite
def _axis_params(draw, min_side=0, index_dtype=np.int64):
    shape = draw(shapes(min_rank=1, min_side=min_side))
    return P(shape=shape, axis=draw(st.integers(0, len(shape) - 1)), reverse=draw(st.booleans()),
             index_dtype=index_dtype)


def _arg_spec(name: str, fn: Callable, ref: Callable, values: Callable, label: str,
              index_dtype: Any = np.int64) -> PrimSpec:
    return _spec(name, lambda x, p: fn(x, axis=p.axis, index_dtype=p.index_dtype),
                 lambda x, p: ref(x, axis=p.axis).astype(p.index_dtype),
                 _axis_params(min_side=1, index_dtype=index_dtype),
                 lambda p: st.tuples(values(p.shape)), diff_argnums=(), label=label)


def _cumsum_ref(x: np.ndarray, p: P) -> np.ndarray:
    if not p.reverse:
        return np.cumsum(x, axis=p.axis, dtype=x.dtype)
    # Reverse running sums: the total minus what comes strictly before.
    return np.sum(x, axis=p.axis, keepdims=True, dtype=x.dtype) - np.cumsum(
        x, axis=p.axis, dtype=x.dtype) + x


REDUCTION_SPECS += [
    _arg_spec("argmax", red.argmax, np.argmax, distinct_array, "float"),
    _arg_spec("argmax", red.argmax, np.argmax, lambda s: int_array(s, 0, 3), "ties_int32",
              np.int32),
    _arg_spec("argmin", red.argmin, np.argmin, distinct_array, "float"),
    _arg_spec("argmin", red.argmin, np.argmin, lambda s: int_array(s, 0, 3), "ties_int32",
              np.int32),
    _spec("cumsum", lambda x, p: red.cumsum(x, axis=p.axis, reverse=p.reverse), _cumsum_ref,
          _axis_params(), lambda p: st.tuples(array(p.shape))),
    _spec("cumsum", lambda x, p: red.cumsum(x, axis=p.axis, reverse=p.reverse), _cumsum_ref,
          _axis_params(), lambda p: st.tuples(int_array(p.shape, -5, 5)),
          diff_argnums=(), label="int"),
]


# -- shape -----------------------------------------------------------------------------------

def _one_array(p: P) -> st.SearchStrategy:
    return st.tuples(array(p.shape))


@st.composite
def _reshape_params(draw):
    shape = draw(shapes())
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:
        rest = draw(st.lists(st.integers(0, 4), max_size=3))
        new = draw(st.permutations([0] + rest))
    else:  # regroup the prime factors of the size, with some 1s thrown in
        factors, n, f = [], size, 2
        while n > 1:
            while n % f == 0:
                factors.append(f)
                n //= f
            f += 1
        factors = draw(st.permutations(factors)) + [1] * draw(st.integers(0, 2))
        cuts = sorted(draw(st.lists(st.integers(0, len(factors)), max_size=3)))
        bounds = [0] + cuts + [len(factors)]
        new = [int(np.prod(factors[a:b], dtype=np.int64)) for a, b in zip(bounds, bounds[1:])]
    return P(shape=shape, new=tuple(new))


@st.composite
def _broadcast_params(draw):
    out = draw(shapes())
    dims = draw(_subset(range(len(out))))
    operand = tuple(out[d] if draw(st.booleans()) else 1 for d in dims)
    return P(shape=operand, out=out, dims=dims)


def _broadcast_ref(x: np.ndarray, p: P) -> np.ndarray:
    expanded = [1] * len(p.out)
    for i, d in enumerate(p.dims):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), p.out)


@st.composite
def _transpose_params(draw):
    shape = draw(shapes())
    return P(shape=shape, perm=tuple(draw(st.permutations(range(len(shape))))))


@st.composite
def _squeeze_params(draw):
    shape = draw(shapes())
    dims = draw(_subset(range(len(shape))))
    return P(shape=tuple(1 if i in dims else d for i, d in enumerate(shape)), dims=dims)


@st.composite
def _expand_dims_params(draw):
    shape = draw(shapes(max_rank=3))
    k = draw(st.integers(0, 2))
    dims = tuple(sorted(draw(st.permutations(range(len(shape) + k)))[:k]))
    return P(shape=shape, dims=dims)


@st.composite
def _slice_params(draw):
    shape = draw(shapes(max_side=6))
    start, limit, strides = [], [], []
    for d in shape:
        lo = draw(st.integers(0, d))
        start.append(lo)
        limit.append(draw(st.integers(lo, d)))
        strides.append(draw(st.integers(1, 3)))
    return P(shape=shape, start=tuple(start), limit=tuple(limit),
             strides=draw(st.sampled_from([None, tuple(strides)])))


def _slice_ref(x: np.ndarray, p: P) -> np.ndarray:
    strides = p.strides or (1,) * x.ndim
    return x[tuple(slice(a, b, s) for a, b, s in zip(p.start, p.limit, strides))]


def _index_scalar(i: int) -> st.SearchStrategy:
    """A start index as a 0-d int32 or int64 array."""
    return st.sampled_from([np.asarray(i, np.int32), np.asarray(i, np.int64)])


@st.composite
def _dynamic_slice_params(draw, update=False):
    shape = draw(shapes(max_side=5))
    sizes = tuple(draw(st.integers(0, d)) for d in shape)
    starts = tuple(draw(st.integers(-2, d + 2)) for d in shape)  # clamped when out of range
    return P(shape=shape, sizes=sizes, starts=starts, update=update)


def _window(shape, sizes, starts):
    """The clamped window of a dynamic slice, as a tuple of Python slices."""
    out = []
    for d, s, i in zip(shape, sizes, starts):
        lo = min(max(int(i), 0), d - s)
        out.append(slice(lo, lo + s))
    return tuple(out)


def _dynamic_slice_arrays(p: P) -> st.SearchStrategy:
    """``(x, *starts)`` or, for an update, ``(x, update, *starts)``."""
    update = (array(p.sizes),) if p.update else ()
    return st.tuples(array(p.shape), *update, *map(_index_scalar, p.starts))


def _dus_ref(x: np.ndarray, u: np.ndarray, *starts_and_params: Any) -> np.ndarray:
    out = x.copy()
    out[_window(x.shape, u.shape, starts_and_params[:-1])] = u
    return out


@st.composite
def _concatenate_params(draw, n):
    shape = draw(shapes(min_rank=1))
    dim = draw(st.integers(0, len(shape) - 1))
    parts = [shape[:dim] + (draw(st.integers(0, 3)),) + shape[dim + 1:] for _ in range(n)]
    return P(shapes=parts, dim=dim)


def _concatenate_spec(n: int) -> PrimSpec:
    return _spec("concatenate", lambda *a: sh.concatenate(a[:-1], a[-1].dim),
                 lambda *a: np.concatenate(a[:-1], axis=a[-1].dim), _concatenate_params(n),
                 lambda p: st.tuples(*map(array, p.shapes)), diff_argnums=tuple(range(n)),
                 label=f"{n}_operands")


@st.composite
def _pad_params(draw):
    shape = draw(shapes(max_rank=3))
    config = []
    for n in shape:
        lo, hi, interior = draw(st.integers(-3, 3)), draw(st.integers(-3, 3)), draw(st.integers(0, 2))
        total = lo + hi + n + max(n - 1, 0) * interior
        config.append((lo, hi - min(total, 0), interior))  # never crop below size 0
    return P(shape=shape, config=tuple(config))


def _pad_ref(x: np.ndarray, value: np.ndarray, p: P) -> np.ndarray:
    # Map every output position to the input position it shows (or -1 for padding).
    sources = []
    for n, (lo, hi, interior) in zip(x.shape, p.config):
        size = lo + hi + n + max(n - 1, 0) * interior
        offset = np.arange(size) - lo
        src = np.where((offset >= 0) & (offset % (interior + 1) == 0), offset // (interior + 1), -1)
        sources.append(np.where(src < n, src, -1))
    grids = np.meshgrid(*sources, indexing="ij") if sources else []
    valid = np.logical_and.reduce([g >= 0 for g in grids]) if grids else np.bool_(True)
    taken = x[tuple(np.maximum(g, 0) for g in grids)] if x.size else np.zeros(valid.shape)
    return np.where(valid, taken, value)


@st.composite
def _rev_params(draw):
    shape = draw(shapes())
    return P(shape=shape, dims=draw(_subset(range(len(shape)))))


SHAPE_SPECS = [
    _spec("reshape", lambda x, p: sh.reshape(x, p.new), lambda x, p: x.reshape(p.new),
          _reshape_params(), _one_array),
    _spec("broadcast_in_dim", lambda x, p: sh.broadcast_in_dim(x, p.out, p.dims),
          _broadcast_ref, _broadcast_params(), _one_array),
    _spec("transpose", lambda x, p: sh.transpose(x, p.perm),
          lambda x, p: np.transpose(x, p.perm), _transpose_params(), _one_array),
    _spec("squeeze", lambda x, p: sh.squeeze(x, p.dims),
          lambda x, p: np.squeeze(x, axis=p.dims), _squeeze_params(), _one_array),
    _spec("expand_dims", lambda x, p: sh.expand_dims(x, p.dims),
          lambda x, p: np.expand_dims(x, p.dims), _expand_dims_params(), _one_array),
    _spec("slice", lambda x, p: sh.slice(x, p.start, p.limit, p.strides), _slice_ref,
          _slice_params(), _one_array),
    _spec("dynamic_slice", lambda x, *a: sh.dynamic_slice(x, a[:-1], a[-1].sizes),
          lambda x, *a: x[_window(x.shape, a[-1].sizes, a[:-1])],
          _dynamic_slice_params(), _dynamic_slice_arrays),
    _spec("dynamic_update_slice", lambda x, u, *a: sh.dynamic_update_slice(x, u, a[:-1]),
          _dus_ref, _dynamic_slice_params(update=True), _dynamic_slice_arrays,
          diff_argnums=(0, 1)),
    *[_concatenate_spec(n) for n in (1, 2, 3)],
    _spec("pad", lambda x, v, p: sh.pad(x, v, p.config), _pad_ref, _pad_params(),
          lambda p: st.tuples(array(p.shape), array(())), diff_argnums=(0, 1)),
    _spec("rev", lambda x, p: sh.rev(x, p.dims), lambda x, p: np.flip(x, p.dims),
          _rev_params(), _one_array),
]


# -- indexing --------------------------------------------------------------------------------

@st.composite
def _gather_params(draw):
    shape = draw(shapes(min_rank=1, max_rank=3))
    axis = draw(st.integers(0, len(shape) - 1))
    shape = shape[:axis] + (max(shape[axis], 1),) + shape[axis + 1:]
    idx_shape = draw(shapes(max_rank=2, max_side=5))
    out = shape[:axis] + idx_shape + shape[axis + 1:]
    return P(shape=shape, axis=axis, idx_shape=idx_shape, out=out)


def _gather_arrays(p: P, updates: bool = False) -> st.SearchStrategy:
    n = p.shape[p.axis]  # out-of-range indices on both sides exercise the clamping
    parts = [array(p.shape), int_array(p.idx_shape, -2, n + 2)]
    return st.tuples(*parts, array(p.out)) if updates else st.tuples(*parts)


def _positions(idx: np.ndarray, axis: int, n: int):
    """(output position, target position) pairs of gather/scatter along ``axis``."""
    for j in np.ndindex(*idx.shape):
        target = min(max(int(idx[j]), 0), n - 1)
        yield (slice(None),) * axis + j, (slice(None),) * axis + (target,)


def _gather_ref(x, idx, p):
    return np.take(x, np.clip(idx, 0, x.shape[p.axis] - 1), axis=p.axis)


def _scatter_ref(x, idx, upd, p, add):
    out = x.copy()
    for src, dst in _positions(idx, p.axis, x.shape[p.axis]):
        out[dst] = out[dst] + upd[src] if add else upd[src]
    return out


@st.composite
def _along_params(draw):
    shape = draw(shapes(min_rank=1, max_rank=3))
    axis = draw(st.integers(0, len(shape) - 1))
    return P(shape=shape, axis=axis, rest=shape[:axis] + shape[axis + 1:], n=shape[axis])


def _along_indices(p: P) -> st.SearchStrategy:
    return int_array(p.rest, -2, p.n + 2)  # out-of-range indices on both sides pick nothing


def _take_along_ref(x, idx, p):
    out = np.zeros(p.rest, x.dtype)
    for j in np.ndindex(*p.rest):
        if 0 <= idx[j] < p.n:
            out[j] = x[j[:p.axis] + (int(idx[j]),) + j[p.axis:]]
    return out


def _put_along_ref(idx, upd, p):
    out = np.zeros(p.shape, upd.dtype)
    for j in np.ndindex(*p.rest):
        if 0 <= idx[j] < p.n:
            out[j[:p.axis] + (int(idx[j]),) + j[p.axis:]] = upd[j]
    return out


INDEXING_SPECS = [
    _spec("take_along", lambda x, i, p: ix.take_along(x, i, axis=p.axis), _take_along_ref,
          _along_params(), lambda p: st.tuples(array(p.shape), _along_indices(p))),
    _spec("put_along", lambda i, u, p: ix.put_along(i, u, axis=p.axis, size=p.n),
          _put_along_ref, _along_params(),
          lambda p: st.tuples(_along_indices(p), array(p.rest)), diff_argnums=(1,)),
    _spec("gather", lambda x, i, p: ix.gather(x, i, axis=p.axis), _gather_ref,
          _gather_params(), _gather_arrays),
    _spec("scatter_add", lambda x, i, u, p: ix.scatter_add(x, i, u, axis=p.axis),
          lambda x, i, u, p: _scatter_ref(x, i, u, p, add=True), _gather_params(),
          lambda p: _gather_arrays(p, updates=True), diff_argnums=(0, 2)),
    _spec("scatter", lambda x, i, u, p: ix.scatter(x, i, u, axis=p.axis),
          lambda x, i, u, p: _scatter_ref(x, i, u, p, add=False), _gather_params(),
          lambda p: _gather_arrays(p, updates=True), diff_argnums=(0, 2)),
]


# -- dot_general -----------------------------------------------------------------------------

@st.composite
def _dot_params(draw, kind):
    """Shapes and dimension numbers of one kind of contraction (or a random one)."""
    if kind == "general":
        nb, nc = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        nx, ny = draw(st.integers(0, 4 - nb - nc)), draw(st.integers(0, 4 - nb - nc))
    else:
        nb, nc, nx, ny = {"matmul": (0, 1, 1, 1), "batched_matmul": (1, 1, 1, 1),
                          "vector_dot": (0, 1, 0, 0), "outer": (0, 0, 1, 1),
                          "tensordot": (0, 2, 1, 1)}[kind]
    size = st.integers(0, 3)
    # Each axis has a role and a size; the operands hold their axes in a drawn order.
    batch, contract = draw(st.tuples(*[size] * nb)), draw(st.tuples(*[size] * nc))
    xfree, yfree = draw(st.tuples(*[size] * nx)), draw(st.tuples(*[size] * ny))
    x_roles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("x", i) for i in range(nx)]
    y_roles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("y", i) for i in range(ny)]
    fixed = kind in ("matmul", "batched_matmul") and not draw(st.booleans())
    if not fixed:
        x_roles, y_roles = draw(st.permutations(x_roles)), draw(st.permutations(y_roles))
    elif kind == "matmul":  # the plain matrix product layout, (m, k) @ (k, n)
        x_roles, y_roles = [("x", 0), ("c", 0)], [("c", 0), ("y", 0)]
    else:
        x_roles, y_roles = [("b", 0), ("x", 0), ("c", 0)], [("b", 0), ("c", 0), ("y", 0)]
    sizes = {"b": batch, "c": contract, "x": xfree, "y": yfree}
    where = lambda roles, r, i: roles.index((r, i))
    dims = ((tuple(where(x_roles, "c", i) for i in range(nc)),
             tuple(where(y_roles, "c", i) for i in range(nc))),
            (tuple(where(x_roles, "b", i) for i in range(nb)),
             tuple(where(y_roles, "b", i) for i in range(nb))))
    names = dict(zip(dict.fromkeys(x_roles + y_roles), string.ascii_letters))
    sub = lambda roles: "".join(names[r] for r in roles)
    # Output: batch axes in lhs_batch order, then each operand's free axes in its own order.
    out = "".join(names[("b", i)] for i in range(nb)) + sub(
        [r for r in x_roles if r[0] == "x"]) + sub([r for r in y_roles if r[0] == "y"])
    return P(x=tuple(sizes[r][i] for r, i in x_roles), y=tuple(sizes[r][i] for r, i in y_roles),
             dims=dims, einsum=f"{sub(x_roles)},{sub(y_roles)}->{out}")


def _dot_spec(kind: str, values: Callable = array, diff: tuple = (0, 1), label: str = "") -> PrimSpec:
    return _spec("dot_general", lambda x, y, p: la.dot_general(x, y, dimension_numbers=p.dims),
                 lambda x, y, p: np.einsum(p.einsum, x, y), _dot_params(kind),
                 lambda p: st.tuples(values(p.x), values(p.y)), diff_argnums=diff,
                 label=label or kind)


LINALG_SPECS = [
    *[_dot_spec(kind) for kind in ("matmul", "batched_matmul", "vector_dot", "outer",
                                    "tensordot", "general")],
    _dot_spec("general", lambda s: int_array(s, -3, 4), diff=(), label="int"),
]

SPECS: list[PrimSpec] = REDUCTION_SPECS + SHAPE_SPECS + INDEXING_SPECS + LINALG_SPECS
