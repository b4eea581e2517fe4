"""Sorting and order statistics: ``sort`` (several operands, lexicographic keys, stable),
``top_k``, the cumulative ``cummax``/``cummin``/``logcumsumexp`` and ``searchsorted``.

Order. Every sort here is stable and puts NaN last (as NumPy does; ``-0.0`` and ``0.0`` are
equal, so they keep their order). ``top_k`` orders by value descending with NaN counting as
the largest value and ties in index order, as ``jax.lax.top_k``.

Derivatives. ``sort`` also returns the permutation it applied (its last output), so the
cotangent of each sorted operand goes back through that permutation (a scatter-add of the
cotangent to where each element came from) and tangents are gathered with it: tied keys
follow the stable order, as in JAX. ``top_k``'s values do the same through its indices.
``cummax``/``cummin`` differentiate JAX's associative scan of pairwise extrema (each
tied pair splits its cotangent in half), so ties get exactly ``jax.lax.cummax``'s gradients.

Implementations. The generic rules run on NumPy and CuPy (CuPy's sorts are stable radix
sorts). On the CPU the permutation of a 32-bit (or narrower) key comes from one SIMD sort of
packed ``(order bits, index)`` words, and of a wider key from NumPy's unstable SIMD argsort
where it has no ties (checked; a stable sort otherwise); ``top_k`` partitions first.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import indexing as _idx
from functx.primitives import shape as _shape
from functx.primitives._batching import batch_at, batch_size, moveaxis
from functx.primitives._util import fmt, is_float, is_real_float, ndim_of, shape_of
from functx.registry import Primitive
from functx.tracing import bind

_I64 = np.dtype(np.int64)


# -- gathering along an axis with a full index array -----------------------------------------
# ``take_along_axis(x, idx, axis)`` is NumPy's: ``idx`` has ``x``'s shape except along
# ``axis``. It is written as one flat ``gather`` (row offsets added to the indices), so its
# VJP is one ``scatter_add``; ``add_along_axis`` is that transpose.

def _rows(x: Any, axis: int) -> Any:
    """``x`` with ``axis`` last, as a 2-d ``(rows, n)`` array."""
    x = moveaxis(x, axis, -1)
    shape = shape_of(x)
    return _shape.reshape(x, (math.prod(shape[:-1]), shape[-1]))


def _unrows(r: Any, shape: Sequence[int], axis: int) -> Any:
    """Undo :func:`_rows` for a result of ``shape`` (with ``axis`` where it was)."""
    shape = tuple(shape)
    moved = shape[:axis] + shape[axis + 1:] + (shape[axis],)
    return moveaxis(_shape.reshape(r, moved), -1, axis)


def _flat_indices(idx_rows: Any, n: int) -> Any:
    """Indices ``(rows, k)`` into rows of length ``n``, as int64 indices into the flattened
    ``(rows * n,)`` array."""
    rows, k = shape_of(idx_rows)
    idx = _ew.convert_element_type(idx_rows, new_dtype=_I64) \
        if np.dtype(idx_rows.dtype) != _I64 else idx_rows
    if rows == 1:
        return _shape.reshape(idx, (k,))
    xp = _shape.array_module(idx_rows)
    offsets = xp.arange(rows, dtype=np.int64) * n  # a constant: depends on no value
    return _shape.reshape(_ew.add(idx, _shape.broadcast_in_dim(offsets, (rows, k), (0,))),
                          (rows * k,))


def take_along_axis(x: Any, idx: Any, axis: int) -> Any:
    """``np.take_along_axis(x, idx, axis)`` for in-range ``idx`` (differentiable in ``x``)."""
    axis = axis % ndim_of(x)
    xs, ishape = shape_of(x), shape_of(idx)
    xr = _rows(x, axis)
    flat = _flat_indices(_rows(idx, axis), xs[axis])
    out = _idx.gather(_shape.reshape(xr, (math.prod(xs),)), flat, axis=0)
    k = ishape[axis]
    return _unrows(_shape.reshape(out, (math.prod(ishape) // max(k, 1) if k else
                                        math.prod(ishape[:axis] + ishape[axis + 1:]), k)),
                   ishape, axis)


def add_along_axis(idx: Any, updates: Any, axis: int, n: int) -> Any:
    """The transpose of :func:`take_along_axis`: zeros with ``n`` entries along ``axis`` and
    each of ``updates`` added at its index (duplicates accumulate)."""
    axis = axis % ndim_of(updates)
    ushape = shape_of(updates)
    shape = ushape[:axis] + (n,) + ushape[axis + 1:]
    flat = _flat_indices(_rows(idx, axis), n)
    size = math.prod(shape)
    zeros = _shape.constant(updates, 0, (size,), updates.dtype)
    out = _idx.scatter_add(zeros, flat, _shape.reshape(_rows(updates, axis), (
        math.prod(ushape),)), axis=0)
    return _unrows(_shape.reshape(out, (size // n if n else 0, n)), shape, axis)


# -- the stable permutation (implementations) --------------------------------------------------

def _argsort_last_generic(xp: Any, key: Any) -> Any:
    """A stable argsort along the last axis (CuPy's is a radix sort, stable; it accepts
    ``kind="stable"`` and no other kind)."""
    if xp is np:
        return _argsort_last_cpu(key)
    return xp.argsort(key, axis=-1, kind="stable").astype(np.int64, copy=False)


_PACKABLE = {np.dtype(t) for t in (np.float16, np.float32, np.int8, np.int16, np.int32,
                                   np.uint8, np.uint16, np.uint32, np.bool_)}


def _order_bits32(key: np.ndarray) -> np.ndarray:
    """uint32 codes of ``key`` whose unsigned order is NumPy's sort order (NaN last, every
    NaN equal, ``-0.0`` equal to ``0.0``)."""
    dt = key.dtype
    if dt.kind == "f":
        f = key.astype(np.float32) + np.float32(0)  # (a copy) -0.0 + 0.0 is +0.0
        b = f.view(np.uint32)
        # negative: flip every bit; positive: flip the sign bit
        mask = (f.view(np.int32) >> 31).view(np.uint32)
        mask |= np.uint32(0x80000000)
        b ^= mask
        nan = np.isnan(key)
        if nan.any():
            b[nan] = np.uint32(0xFFFFFFFF)
        return b
    if dt.kind == "i":
        return key.astype(np.int32).view(np.uint32) ^ np.uint32(0x80000000)
    return key.astype(np.uint32)


def _fix_ties(key: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """``perm`` (from an unstable sort of the rows of ``key``) made stable: each run of
    equal sorted values gets its indices in ascending order (only tied entries move)."""
    v = np.take_along_axis(key, perm, -1)
    tied = v[..., 1:] == v[..., :-1]
    if key.dtype.kind in "fc":
        nan = np.isnan(v)
        tied |= nan[..., 1:] & nan[..., :-1]
    if not tied.any():
        return perm
    n = key.shape[-1]
    perm = np.array(perm, dtype=np.int64).reshape(-1, n)
    tied = tied.reshape(-1, n - 1)
    in_run = np.zeros(perm.shape, bool)
    in_run[:, :-1] |= tied
    in_run[:, 1:] |= tied
    starts = in_run.copy()
    starts[:, 1:] &= ~tied  # the first entry of each run
    where = np.flatnonzero(in_run)
    run = np.cumsum(starts.reshape(-1))[where]
    flat = perm.reshape(-1)
    sub = flat[where]
    flat[where] = sub[np.lexsort((sub, run))]
    return flat.reshape(key.shape)


def _argsort_last_cpu(key: np.ndarray) -> np.ndarray:
    key = np.ascontiguousarray(key)  # (the bit views below need contiguous rows)
    n = key.shape[-1]
    if n <= 1:
        return np.zeros(key.shape, np.int64)
    if key.dtype in _PACKABLE and n < 2**32:
        # one SIMD sort of 64-bit words (order bits high, index low): stable by construction
        packed = _order_bits32(key).astype(np.uint64)
        packed <<= np.uint64(32)
        packed |= np.arange(n, dtype=np.uint64)
        packed.sort(axis=-1)
        return packed.view(np.uint32).reshape(key.shape + (2,))[
            ..., 0 if np.little_endian else 1].astype(np.int64)
    if key.dtype.kind in "fciu":
        return _fix_ties(key, np.argsort(key, axis=-1).astype(np.int64, copy=False))
    return np.argsort(key, axis=-1, kind="stable").astype(np.int64, copy=False)


def _sort_key(key: Any) -> Any:
    """A key NumPy and CuPy can sort (bfloat16 and its kin as float32: the same order)."""
    return key.astype(np.float32) if key.dtype.kind == "V" else key


def _lex_perm(xp: Any, keys: Sequence[Any], argsort_last: Any) -> Any:
    """The stable permutation sorting rows by ``keys`` (the first is the primary key)."""
    perm = argsort_last(xp, _sort_key(keys[-1]))
    for key in reversed(keys[:-1]):
        sub = argsort_last(xp, xp.take_along_axis(_sort_key(key), perm, -1))
        perm = xp.take_along_axis(perm, sub, -1)
    return perm


# -- sort ------------------------------------------------------------------------------------

sort_p = Primitive("sort", multiple_results=True)
sort_p.none_cts = True  # unsorted outputs (the permutation, keys without cotangent): no zeros


@sort_p.def_abstract_eval
def _sort_aval(*operands: AbstractArray, dimension: int, is_stable: bool,
               num_keys: int) -> tuple:
    if not operands:
        raise ShapeError("sort needs at least one operand.")
    shape = operands[0].shape
    if any(o.shape != shape for o in operands):
        raise ShapeError(f"sort needs operands of one shape but got {fmt(operands)}; "
                         "broadcast them to a common shape first.")
    if not 0 <= dimension < len(shape):
        raise ShapeError(f"sort: dimension {dimension} is out of range for operands of shape "
                         f"{shape}; use an axis in [0, {len(shape)}) (a 0-d array has "
                         "nothing to sort: reshape it to (1,)).")
    if not 1 <= num_keys <= len(operands):
        raise ShapeError(f"sort: num_keys must be between 1 and the number of operands "
                         f"({len(operands)}) but got {num_keys}.")
    return tuple(operands) + (AbstractArray(shape, _I64),)


def _make_sort_impl(argsort_last: Any) -> Any:
    def impl(xp, *operands, dimension, is_stable, num_keys):
        last = operands[0].ndim - 1
        ops = [xp.moveaxis(o, dimension, -1) for o in operands]
        perm = _lex_perm(xp, ops[:num_keys], argsort_last)
        outs = [xp.take_along_axis(o, perm, -1) for o in ops] + [perm]
        if dimension != last:
            outs = [xp.ascontiguousarray(xp.moveaxis(o, -1, dimension)) for o in outs]
        return tuple(outs)
    return impl


sort_p.def_impl(_make_sort_impl(_argsort_last_generic))


@sort_p.def_vjp(save_output=True)
def _sort_vjp(cts, ins, out, *, dimension, is_stable, num_keys):
    perm, n = out[-1], shape_of(out[-1])[dimension]
    return tuple(None if ct is None or not is_float(x) else
                 add_along_axis(perm, ct, dimension, n) for ct, x in zip(cts, ins))


@sort_p.def_jvp
def _sort_jvp(tangents, primals, out, *, dimension, is_stable, num_keys):
    perm = out[-1]
    return [None if t is None else take_along_axis(t, perm, dimension)
            for t in tangents] + [None]


@sort_p.def_batch
def _sort_batch(args, dims, *, dimension, is_stable, num_keys):
    first = dims[0]
    if all(d == first for d in dims):  # the batch axis stays where it is
        outs = bind(sort_p, *args, dimension=dimension + (dimension >= first),
                    is_stable=is_stable, num_keys=num_keys)
        return list(outs), [first] * len(outs)
    size = batch_size(args, dims)
    outs = bind(sort_p, *[batch_at(x, d, 0, size) for x, d in zip(args, dims)],
                dimension=dimension + 1, is_stable=is_stable, num_keys=num_keys)
    return list(outs), [0] * len(outs)


def sort(operands: Sequence[Any], *, dimension: int = -1, num_keys: int = 1,
         is_stable: bool = True) -> tuple:
    """Sort ``operands`` (arrays of one shape) along ``dimension`` by their first
    ``num_keys`` operands (lexicographically; NaN last; stable).

    Returns:
        The sorted operands, and last the int64 permutation applied (``argsort``).

    Example:
        >>> sort([np.array([3.0, 1.0, 2.0]), np.array([0, 1, 2])])
        (array([1., 2., 3.]), array([1, 2, 0]), array([1, 2, 0]))
    """
    operands = tuple(operands)
    ndim = ndim_of(operands[0]) if operands else 0
    d = int(dimension)
    if ndim and -ndim <= d < ndim:
        d %= ndim
    return tuple(bind(sort_p, *operands, dimension=d, is_stable=bool(is_stable),
                      num_keys=int(num_keys)))


# -- top_k -----------------------------------------------------------------------------------

top_k_p = Primitive("top_k", multiple_results=True)
top_k_p.none_cts = True


@top_k_p.def_abstract_eval
def _top_k_aval(x: AbstractArray, *, k: int) -> tuple:
    if x.ndim == 0:
        raise ShapeError(f"top_k needs an operand with at least one axis but got {x}.")
    if not 0 <= k <= x.shape[-1]:
        raise ShapeError(f"top_k: k must be between 0 and the length of the last axis "
                         f"({x.shape[-1]}) of {x} but got {k}.")
    if x.dtype.kind not in "biuf" and not is_real_float(x.dtype):
        raise DTypeError(f"top_k needs real (integer or floating) values but got {x}.")
    shape = x.shape[:-1] + (k,)
    return AbstractArray(shape, x.dtype, x.weak_type), AbstractArray(shape, _I64)


def _descending_perm(xp: Any, key: Any, argsort_last: Any) -> Any:
    """The stable descending order along the last axis (NaN first, ties by index)."""
    n = key.shape[-1]
    p = argsort_last(xp, xp.ascontiguousarray(xp.flip(key, -1)))
    return (n - 1) - xp.flip(p, -1)


def _top_k_generic(xp, x, *, k):
    perm = _descending_perm(xp, _sort_key(x), _argsort_last_generic)[..., :k]
    return xp.take_along_axis(x, perm, -1), xp.ascontiguousarray(perm)


def _top_k_cpu(xp, x, *, k):
    n = x.shape[-1]
    key = _sort_key(x).astype(np.float32) if x.dtype == np.float16 else _sort_key(x)
    if k == 0 or 4 * k > n:
        return _top_k_generic(xp, x, k=k)
    # The k largest by partition (NaN counts as the largest), then exact ties: the result is
    # the stable one unless values equal to the k-th largest straddle the cut.
    cand = np.argpartition(key, n - k, axis=-1)[..., n - k:]
    cv = np.take_along_axis(key, cand, -1)
    nan = np.isnan(cv) if key.dtype.kind == "f" else None
    m = nan.sum(-1) if nan is not None else 0
    if nan is not None and np.any(m == k):  # the cut falls among NaNs
        return _top_k_generic(xp, x, k=k)
    t = (np.fmin.reduce(cv, axis=-1) if nan is not None else cv.min(-1))[..., None]
    if not np.all(np.count_nonzero(key >= t, axis=-1) + m == k):
        return _top_k_generic(xp, x, k=k)
    if nan is not None:
        order = np.lexsort((cand, -cv, ~nan), axis=-1)
    else:
        order = np.lexsort((cand, ~cv), axis=-1)
    idx = np.take_along_axis(cand, order, -1).astype(np.int64, copy=False)
    return np.take_along_axis(x, idx, -1), idx


top_k_p.def_impl(_top_k_generic)
top_k_p.def_impl(_top_k_cpu, backend="cpu")
top_k_p.def_vjp(lambda cts, ins, out, *, k: (
    None if cts[0] is None or not is_float(ins[0]) else
    add_along_axis(out[1], cts[0], -1, ins[0].shape[-1]),), save_output=True)
top_k_p.def_jvp(lambda tangents, primals, out, *, k: [
    None if tangents[0] is None else take_along_axis(tangents[0], out[1], -1), None])


@top_k_p.def_batch
def _top_k_batch(args, dims, *, k):
    x, d = args[0], dims[0]
    if d == ndim_of(x) - 1:
        x, d = moveaxis(x, d, 0), 0
    return list(bind(top_k_p, x, k=k)), [d, d]


def top_k(x: Any, k: int) -> tuple:
    """The ``k`` largest entries along the last axis, in descending order, and their int64
    indices (NaN counts as the largest; ties in index order), as ``jax.lax.top_k``.

    Example:
        >>> top_k(np.array([1.0, 3.0, 2.0]), 2)
        (array([3., 2.]), array([1, 2]))
    """
    return tuple(bind(top_k_p, x, k=int(k)))


# -- cumulative maximum and minimum -----------------------------------------------------------

def _scan_doubling(xp: Any, op: Any, x: Any, axis: int) -> Any:
    """An inclusive scan of ``op`` along ``axis`` in log2(n) steps (any array module)."""
    n = x.shape[axis]
    k = 1
    while k < n:
        head = xp.take(x, xp.arange(k), axis=axis)
        tail = op(xp.take(x, xp.arange(k, n), axis=axis), xp.take(x, xp.arange(n - k),
                                                                  axis=axis))
        x = xp.concatenate([head, tail], axis=axis)
        k *= 2
    return x


def _reversed_scan(xp: Any, scan: Any, x: Any, axis: int, reverse: bool) -> Any:
    if not reverse:
        return scan(x)
    return xp.ascontiguousarray(xp.flip(scan(xp.ascontiguousarray(xp.flip(x, axis))), axis))


def _cum_aval(name: str, kinds: str):
    def rule(x: AbstractArray, *, axis: int, reverse: bool) -> AbstractArray:
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"{name}: axis {axis} is out of range for {x}; use an axis in "
                             f"[0, {x.ndim}) (functx.numpy normalises negative axes).")
        if x.dtype.kind not in kinds and not (kinds != "biu" and is_real_float(x.dtype)):
            what = "floating-point" if kinds == "f" else "real (bool, integer or floating-point)"
            raise DTypeError(f"{name} needs {what} values but got {x}; convert it with "
                             "x.astype(...) first.")
        return x
    return rule


def _slice_axis(x: Any, axis: int, start: int, stop: int | None = None, step: int = 1) -> Any:
    shape = shape_of(x)
    lo = [0] * len(shape)
    hi = list(shape)
    st = [1] * len(shape)
    n = shape[axis]
    lo[axis] = min(start if start >= 0 else n + start, n)
    hi[axis] = n if stop is None else max(min(stop if stop >= 0 else n + stop, n), lo[axis])
    st[axis] = step
    return _shape.slice(x, lo, hi, st)


def _interleave(a: Any, b: Any, axis: int) -> Any:
    """``a0 b0 a1 b1 ...`` along ``axis`` (``a`` as long as ``b`` or one longer)."""
    na, nb = shape_of(a)[axis], shape_of(b)[axis]
    cfg_a = [(0, 0, 0)] * ndim_of(a)
    cfg_b = list(cfg_a)
    cfg_a[axis] = (0, 1 if na == nb else 0, 1)
    cfg_b[axis] = (1, 0 if na == nb else 1, 1)
    return _ew.add(_shape.pad(a, 0, cfg_a), _shape.pad(b, 0, cfg_b))


def associative_scan(op: Any, x: Any, axis: int) -> Any:
    """The inclusive scan of the associative binary ``op`` along ``axis``, by JAX's
    algorithm (``jax.lax.associative_scan``: pairs, recursion on the odd positions, then
    the even ones), written with functx operations. Its derivative is therefore the one
    JAX gives the cumulative reductions it defines this way (``cummax``'s ties)."""
    n = shape_of(x)[axis]
    if n < 2:
        return x
    odd = associative_scan(op, op(_slice_axis(x, axis, 0, -1, 2), _slice_axis(x, axis, 1, None, 2)),
                           axis)
    if n % 2 == 0:
        even = op(_slice_axis(odd, axis, 0, -1), _slice_axis(x, axis, 2, None, 2))
    else:
        even = op(odd, _slice_axis(x, axis, 2, None, 2))
    even = _shape.concatenate([_slice_axis(x, axis, 0, 1), even], axis)
    return _interleave(even, odd, axis)


def _cumulative_extremum(name: str, is_max: bool) -> Primitive:
    p = Primitive(name)
    p.def_abstract_eval(_cum_aval(name, "biuf"))
    ufunc = "maximum" if is_max else "minimum"

    def generic(xp, x, *, axis, reverse):
        op = getattr(xp, ufunc)
        return _reversed_scan(xp, lambda v: _scan_doubling(xp, op, v, axis), x, axis, reverse)

    def cpu(xp, x, *, axis, reverse):
        op = getattr(np, ufunc)
        return _reversed_scan(np, lambda v: op.accumulate(v, axis=axis), x, axis, reverse)

    p.def_impl(generic)
    p.def_impl(cpu, backend="cpu")

    combine = _ew.max if is_max else _ew.min

    def composite(x, *, axis, reverse):
        if not reverse:
            return associative_scan(combine, x, axis)
        return _shape.rev(associative_scan(combine, _shape.rev(x, (axis,)), axis), (axis,))

    # The derivatives are those of JAX's scan of pairwise extrema, whose ties split in half.
    p.def_composite_rules(composite, zero_if=lambda x, *, axis, reverse: not is_float(x) or
                          shape_of(x)[axis] == 0)
    p.def_batch(lambda args, dims, *, axis, reverse: (
        bind(p, args[0], axis=axis + (axis >= dims[0]), reverse=reverse), dims[0]))
    return p


cummax_p = _cumulative_extremum("cummax", is_max=True)
cummin_p = _cumulative_extremum("cummin", is_max=False)


def cummax(x: Any, *, axis: int, reverse: bool = False) -> Any:
    """The running maximum of ``x`` along ``axis`` (from the end when ``reverse``); NaN
    propagates. The derivatives are those of JAX's associative scan of pairwise maxima (each
    tie of a pair splits its cotangent in half), so tied maxima get JAX's gradients."""
    return bind(cummax_p, x, axis=int(axis), reverse=bool(reverse))


def cummin(x: Any, *, axis: int, reverse: bool = False) -> Any:
    """The running minimum of ``x`` along ``axis``; see :func:`cummax`."""
    return bind(cummin_p, x, axis=int(axis), reverse=bool(reverse))


# -- logcumsumexp ----------------------------------------------------------------------------

def _lcse_generic(xp, x, *, axis, reverse):
    dt = x.dtype
    v = x.astype(np.float32) if dt.kind == "V" or dt.itemsize == 2 else x
    out = _reversed_scan(xp, lambda u: _scan_doubling(xp, xp.logaddexp, u, axis), v, axis,
                         reverse)
    return out.astype(dt, copy=False)


def _lcse_cpu(xp, x, *, axis, reverse):
    dt = x.dtype
    v = x.astype(np.float32) if dt.kind == "V" or dt.itemsize == 2 else x
    with np.errstate(invalid="ignore"):  # NaN (or inf - inf) in, NaN out, quietly as JAX
        out = _reversed_scan(np, lambda u: np.logaddexp.accumulate(u, axis=axis), v, axis,
                             reverse)
    return out.astype(dt, copy=False)


def _log_parts(v: Any) -> tuple:
    """``log(max(v, 0))`` and ``log(max(-v, 0))``, with a part that is zero given a huge
    negative log (``-sqrt(finfo.max)``: its exponential is 0 in every later step, and unlike
    ``-inf`` it never meets another infinity, so second derivatives stay finite)."""
    dt = np.dtype(v.dtype)
    zero = _shape.constant(v, 0, (), dt)
    one = _shape.constant(v, 1, (), dt)
    low = _shape.constant(v, -math.sqrt(float(ml_dtypes.finfo(dt).max)), (), dt)
    pos, neg = _ew.gt(v, zero), _ew.lt(v, zero)
    return (_ew.select(pos, _ew.log(_ew.select(pos, v, one)), low),
            _ew.select(neg, _ew.log(_ew.select(neg, _ew.neg(v), one)), low))


logcumsumexp_p = Primitive("logcumsumexp")
logcumsumexp_p.def_abstract_eval(_cum_aval("logcumsumexp", "f"))
logcumsumexp_p.def_impl(_lcse_generic)
logcumsumexp_p.def_impl(_lcse_cpu, backend="cpu")


@logcumsumexp_p.def_vjp(save_inputs=(0,), save_output=True)
def _lcse_vjp(ct, ins, out, *, axis, reverse):
    # d out_j / d x_i = exp(x_i - out_j) for i up to j: the cotangent is a reverse
    # log-cum-sum-exp of log(ct) - out, its positive and negative parts apart (stable).
    x = ins[0]
    parts = [logcumsumexp(_ew.sub(p, out), axis=axis, reverse=not reverse)
             for p in _log_parts(ct)]
    return (_ew.sub(_ew.exp(_ew.add(x, parts[0])), _ew.exp(_ew.add(x, parts[1]))),)


@logcumsumexp_p.def_jvp
def _lcse_jvp(tangents, primals, out, *, axis, reverse):
    t, x = tangents[0], primals[0]
    if t is None:
        return None
    parts = [logcumsumexp(_ew.add(x, p), axis=axis, reverse=reverse) for p in _log_parts(t)]
    return _ew.sub(_ew.exp(_ew.sub(parts[0], out)), _ew.exp(_ew.sub(parts[1], out)))


logcumsumexp_p.def_batch(lambda args, dims, *, axis, reverse: (
    bind(logcumsumexp_p, args[0], axis=axis + (axis >= dims[0]), reverse=reverse), dims[0]))


def logcumsumexp(x: Any, *, axis: int, reverse: bool = False) -> Any:
    """``log(cumsum(exp(x)))`` along ``axis`` without overflow (``jax.lax.cumlogsumexp``).

    Example:
        >>> logcumsumexp(np.array([0.0, 0.0]), axis=0)
        array([0.        , 0.69314718])
    """
    return bind(logcumsumexp_p, x, axis=int(axis), reverse=bool(reverse))


# -- searchsorted ----------------------------------------------------------------------------

searchsorted_p = Primitive("searchsorted")


@searchsorted_p.def_abstract_eval
def _searchsorted_aval(a: AbstractArray, v: AbstractArray, *, side: str) -> AbstractArray:
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right' but got {side!r}.")
    if a.ndim == 0 or v.ndim < a.ndim - 1 or v.shape[:a.ndim - 1] != a.shape[:-1]:
        raise ShapeError(f"searchsorted needs a sorted array of shape (*batch, n) and values "
                         f"of shape (*batch, ...) but got {fmt([a, v])}.")
    if a.dtype != v.dtype:
        raise DTypeError(f"searchsorted needs a sorted array and values of one dtype but got "
                         f"{fmt([a, v])}; functx.numpy.searchsorted promotes them for you.")
    return AbstractArray(v.shape, _I64)


@searchsorted_p.def_impl
def _searchsorted_impl(xp, a, v, *, side):
    batch = a.shape[:-1]
    rows = math.prod(batch)
    ar = xp.reshape(_sort_key(a), (rows, a.shape[-1]))
    vr = xp.reshape(_sort_key(v), (rows, -1) if rows else (0, 0))
    out = xp.empty(vr.shape, np.int64)
    for i in range(rows):  # one row per batch entry (one call for an unbatched search)
        out[i] = xp.searchsorted(ar[i], vr[i], side=side)
    return xp.reshape(out, v.shape)


searchsorted_p.def_zero_vjp()
searchsorted_p.def_jvp(lambda tangents, primals, out, *, side: None)  # integer output


@searchsorted_p.def_batch
def _searchsorted_batch(args, dims, *, side):
    size = batch_size(args, dims)
    return bind(searchsorted_p, *[batch_at(x, d, 0, size) for x, d in zip(args, dims)],
                side=side), 0


def searchsorted(a: Any, v: Any, *, side: str = "left") -> Any:
    """Where the values ``v`` go in the sorted last axis of ``a`` (leading axes of ``a`` are a
    batch that ``v`` shares), as int64 indices of ``v``'s shape.

    Example:
        >>> searchsorted(np.array([1.0, 2.0, 3.0]), np.array([2.0, 9.0]))
        array([1, 3])
    """
    return bind(searchsorted_p, a, v, side=str(side))
