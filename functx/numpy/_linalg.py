"""Products for functx.numpy: matmul, dot, vdot, inner, outer, tensordot, einsum, kron.

Every contraction becomes one ``dot_general`` primitive (its gradient is two more
dot_generals), after promoting the operands to one dtype as NumPy does. Semantics are
NumPy's: ``matmul`` promotes 1-D operands to matrices and broadcasts batch axes, ``dot``
contracts the last axis of ``a`` with the second-to-last of ``b``, ``einsum`` supports
explicit (``->``) and implicit output, ``...`` and repeated indices within an operand
(diagonals, taken with a gather).

Differences from NumPy:
    * ``einsum`` contracts the operands pairwise from left to right (``optimize`` is
      accepted and ignored); indices that appear in only one operand and not in the output
      are summed first, so no contraction ever materialises more than it needs.
    * Boolean ``matmul``/``dot`` are computed in int64 and compared with 0 (NumPy's result).
    * ``out=`` is not supported (functx values are immutable).

``matmul``, ``dot``, ``vdot``, ``inner``, ``tensordot`` and ``einsum`` take JAX's keyword
``precision=`` (``"float32"``/``"highest"``, ``"tensorfloat32"``/``"high"``...; see
functx/config.py): the precision of their float32 products on CUDA (TF32 tensor cores or
not); None uses ``fx.config``'s ``default_matmul_precision``. The CPU ignores it.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import operator
import string
from typing import Any, Callable, Sequence

import numpy as np

from functx import config
from functx.errors import ShapeError
from functx.numpy._promotion import fast_common_dtype, astype, check_no_out, result_type
from functx.numpy._shape import (
    as_array,
    broadcast_shapes,
    broadcast_to,
    join_scalars,
    moveaxis,
    norm_axes,
    on_device_of,
    ravel,
    reshape,
    transpose,
    unchanged,
)
from functx.numpy._ufuncs import multiply
from functx.primitives import elementwise as _ew
from functx.primitives import indexing as _ix
from functx.primitives import linalg as _la
from functx.primitives import reduction as _red
from functx.primitives import shape as _p
from functx.primitives.complex import conj
from functx.tracing import Tracer

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "kron"]


def _promoted(name: str, *arrays: Any, dtype: Any = None) -> list:
    """The operands as arrays of their common (NumPy-promoted) dtype, or of ``dtype``."""
    if dtype is None and all(type(a) is np.ndarray or type(a) is Tracer for a in arrays) \
            and fast_common_dtype(arrays) is not None:
        return list(arrays)  # nothing to promote (the common case)
    arrays = [as_array(a) for a in arrays]
    dt = np.dtype(dtype) if dtype is not None else result_type(*arrays)
    return [astype(a, dt) if a.dtype != dt else a for a in arrays]


def _takes_precision(fn: Callable) -> Callable:
    """``fn`` with JAX's keyword-only ``precision=`` argument: the products it makes use
    that precision (through ``fx.default_matmul_precision`` for the call)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, precision: Any = None, **kwargs: Any) -> Any:
        if precision is None:
            return fn(*args, **kwargs)
        with config.default_matmul_precision(precision):
            return fn(*args, **kwargs)

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
    params.insert(at, inspect.Parameter("precision", inspect.Parameter.KEYWORD_ONLY,
                                        default=None, annotation="Any"))
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    return wrapper


def _contract(a: Any, b: Any, contracting: tuple, batch: tuple = ((), ())) -> Any:
    """``dot_general``; booleans go through int64 and come back as ``!= 0`` (NumPy's result)."""
    if a.dtype == np.bool_:
        out = _contract(astype(a, np.int64), astype(b, np.int64), contracting, batch)
        return _ew.ne(out, 0)
    return _la.dot_general(a, b, dimension_numbers=(contracting, batch))


@_takes_precision
def matmul(x1: Any, x2: Any, /, out: Any = None, *, dtype: Any = None) -> Any:
    """The matrix product ``x1 @ x2`` with NumPy's rules.

    1-D operands are promoted to a row (``x1``) or a column (``x2``) and the added axis is
    removed from the result; the axes before the last two are batch axes and broadcast.

    Raises:
        ShapeError: a 0-d operand, mismatched inner sizes or batch shapes that don't
            broadcast.
    """
    check_no_out("matmul", out)
    a, b = _promoted("matmul", x1, x2, dtype=dtype)
    if not a.shape or not b.shape:
        raise ShapeError(f"functx.numpy.matmul: operands must have at least one axis (got "
                         f"shapes {tuple(a.shape)} and {tuple(b.shape)}); use multiply for "
                         "scalars.")
    a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
    if a_vec:
        a = _p.reshape(a, (1,) + tuple(a.shape))
    if b_vec:
        b = _p.reshape(b, tuple(b.shape) + (1,))
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"functx.numpy.matmul: the last axis of x1 (shape {tuple(a.shape)}) "
                         f"has size {a.shape[-1]} but the second-to-last axis of x2 (shape "
                         f"{tuple(b.shape)}) has size {b.shape[-2]}; they must match.")
    na, nb = len(a.shape), len(b.shape)
    if nb == 2:  # a's batch axes stay in front: no broadcasting needed
        res = _contract(a, b, ((na - 1,), (0,)))
    elif na == 2:  # result is (n, batch..., m): move n back next to m
        res = moveaxis(_contract(a, b, ((1,), (nb - 2,))), 0, -2)
    else:
        batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
        a = broadcast_to(a, batch + tuple(a.shape[-2:]))
        b = broadcast_to(b, batch + tuple(b.shape[-2:]))
        nbatch = tuple(range(len(batch)))
        res = _contract(a, b, ((len(batch) + 1,), (len(batch),)), (nbatch, nbatch))
    drop = ((len(res.shape) - 2,) if a_vec else ()) + ((len(res.shape) - 1,) if b_vec else ())
    return _p.squeeze(res, drop) if drop else res


@_takes_precision
def tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """The sum of products over the given axes (NumPy's ``tensordot``).

    Args:
        axes: an int N (the last N axes of ``a`` with the first N of ``b``), or a pair of
            axis sequences (or ints) ``(a_axes, b_axes)``.

    Returns:
        An array with ``a``'s remaining axes, then ``b``'s.

    Raises:
        ShapeError: paired axes have different sizes.
    """
    a, b = _promoted("tensordot", a, b)
    na, nb = len(a.shape), len(b.shape)
    if isinstance(axes, (int, np.integer)):
        n = operator.index(axes)
        if n < 0 or n > builtins.min(na, nb):
            raise ShapeError(f"functx.numpy.tensordot: axes={n} is out of range for shapes "
                             f"{tuple(a.shape)} and {tuple(b.shape)}.")
        a_axes, b_axes = tuple(range(na - n, na)), tuple(range(n))
    else:
        a_ax, b_ax = axes
        a_axes, b_axes = norm_axes(a_ax, na, "tensordot"), norm_axes(b_ax, nb, "tensordot")
    if len(a_axes) != len(b_axes) or builtins.any(
            a.shape[i] != b.shape[j] for i, j in zip(a_axes, b_axes)):
        raise ShapeError(f"functx.numpy.tensordot: shape-mismatch for sum: axes {a_axes} of "
                         f"{tuple(a.shape)} and {b_axes} of {tuple(b.shape)} must pair up "
                         "with equal sizes.")
    return _contract(a, b, (a_axes, b_axes))


@_takes_precision
def dot(a: Any, b: Any, out: Any = None) -> Any:
    """NumPy's ``dot``: a product for scalars, else the last axis of ``a`` contracted with
    the second-to-last axis of ``b`` (its only axis if 1-D)."""
    check_no_out("dot", out)
    a, b = _promoted("dot", a, b)
    if not a.shape or not b.shape:
        return multiply(a, b)
    return tensordot(a, b, ((len(a.shape) - 1,), (builtins.max(len(b.shape) - 2, 0),)))


@_takes_precision
def vdot(a: Any, b: Any, /) -> Any:
    """The dot product of the flattened arrays (the first one conjugated if complex)."""
    a, b = _promoted("vdot", a, b)
    if a.dtype.kind == "c":
        a = conj(a)
    a, b = ravel(a), ravel(b)
    if a.shape != b.shape:
        raise ShapeError(f"functx.numpy.vdot: the arrays have {a.shape[0]} and {b.shape[0]} "
                         "elements; they need the same number.")
    return _contract(a, b, ((0,), (0,)))


@_takes_precision
def inner(a: Any, b: Any, /) -> Any:
    """The sum of products over the last axes (a product for scalars)."""
    a, b = _promoted("inner", a, b)
    if not a.shape or not b.shape:
        return multiply(a, b)
    return tensordot(a, b, ((len(a.shape) - 1,), (len(b.shape) - 1,)))


def outer(a: Any, b: Any, out: Any = None) -> Any:
    """``a.ravel()[:, None] * b.ravel()[None, :]``."""
    check_no_out("outer", out)
    a, b = join_scalars(as_array(a), as_array(b))
    a, b = ravel(a), ravel(b)
    return multiply(_p.reshape(a, (a.shape[0], 1)), _p.reshape(b, (1, b.shape[0])))


def kron(a: Any, b: Any) -> Any:
    """The Kronecker product: blocks of ``b`` scaled by the entries of ``a``."""
    a, b = join_scalars(as_array(a), as_array(b))
    nd = builtins.max(len(a.shape), len(b.shape))
    sa = (1,) * (nd - len(a.shape)) + tuple(a.shape)
    sb = (1,) * (nd - len(b.shape)) + tuple(b.shape)
    a2 = _p.reshape(a, tuple(d for s in sa for d in (s, 1)))
    b2 = _p.reshape(b, tuple(d for s in sb for d in (1, s)))
    return reshape(multiply(a2, b2), tuple(x * y for x, y in zip(sa, sb)))


# ----------------------------------------------------------------------------------------
# einsum

_LETTERS = set(string.ascii_letters)


def _parse_einsum(subscripts: str, shapes: list[tuple]) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels and the output labels; ``...`` becomes private labels."""
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
        explicit = True
    else:
        lhs, out, explicit = subscripts, "", False
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"functx.numpy.einsum: the subscripts {subscripts!r} name "
                         f"{len(terms)} operands but {len(shapes)} were given.")
    n_ell = 0
    labels = []
    for term, shp in zip(terms, shapes):
        if term.count("...") > 1 or term.replace("...", "").count(".") or \
                builtins.any(c not in _LETTERS for c in term.replace("...", "")):
            raise ValueError(f"functx.numpy.einsum: invalid subscript term {term!r}; use "
                             "letters and at most one '...'.")
        named = len(term.replace("...", ""))
        if "..." in term:
            k = len(shp) - named
            if k < 0:
                raise ValueError(f"functx.numpy.einsum: term {term!r} has more labels than "
                                 f"its operand (shape {shp}) has axes.")
            n_ell = builtins.max(n_ell, k)
            head, tail = term.split("...")
            labels.append(list(head) + [_ell(n_ell_i, k) for n_ell_i in range(k)] + list(tail))
        else:
            if named != len(shp):
                raise ValueError(f"functx.numpy.einsum: term {term!r} has {named} labels but "
                                 f"its operand has shape {shp} ({len(shp)} axes).")
            labels.append(list(term))
    ell = [_ell(i, n_ell) for i in range(n_ell)]
    if explicit:
        if out.count("...") > 1 or builtins.any(c not in _LETTERS
                                                for c in out.replace("...", "")):
            raise ValueError(f"functx.numpy.einsum: invalid output subscript {out!r}.")
        if "..." in out:
            head, tail = out.split("...")
            out_labels = list(head) + ell + list(tail)
        else:
            if n_ell:
                raise ValueError("functx.numpy.einsum: the operands have '...' axes but the "
                                 "output subscript has no '...'; add '...' to the output.")
            out_labels = list(out)
        seen = [c for c in out_labels]
        if len(set(seen)) != len(seen):
            raise ValueError(f"functx.numpy.einsum: output subscript {out!r} repeats a label.")
        every = {c for ls in labels for c in ls}
        missing = [c for c in out_labels if c not in every]
        if missing:
            raise ValueError(f"functx.numpy.einsum: output labels {missing} do not appear in "
                             "any input.")
    else:
        counts: dict[str, int] = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out_labels = ell + sorted(c for c, n in counts.items() if n == 1 and c in _LETTERS)
    return labels, out_labels


def _ell(i: int, k: int) -> str:
    """The private label of the i-th of k ellipsis axes, aligned from the right."""
    return chr(0x2460 + 64 - k + i)


def _take_diagonals(x: Any, labels: list[str]) -> tuple[Any, list[str]]:
    """Collapse repeated labels of one operand to their diagonal (a gather per label)."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        axes = [i for i, l in enumerate(labels) if l == c]
        n = x.shape[axes[0]]
        if builtins.any(x.shape[i] != n for i in axes):
            raise ShapeError(f"functx.numpy.einsum: label {c!r} repeats in one operand over "
                             f"axes of sizes {[x.shape[i] for i in axes]}; they must match.")
        x = moveaxis(x, axes, tuple(range(-len(axes), 0)))
        rest = tuple(x.shape[:-len(axes)])
        x = _p.reshape(x, rest + (n ** len(axes),))
        step = builtins.sum(n ** j for j in range(len(axes)))
        x = _ix.gather(x, on_device_of(x, np.arange(n, dtype=np.int64) * step), axis=len(rest))
        labels = [l for l in labels if l != c] + [c]
    return x, labels


@_takes_precision
def einsum(*operands: Any, out: Any = None, optimize: Any = False, dtype: Any = None,
           casting: str = "safe") -> Any:
    """Einstein summation, as ``numpy.einsum`` (string or interleaved operand/sublist form).

    Args:
        *operands: ``subscripts, *arrays`` (e.g. ``"bij,bjk->bik"``; implicit output =
            labels appearing once, in alphabetical order, after the ``...`` axes), or
            NumPy's interleaved ``a, [0, 1], b, [1, 2], [0, 2]`` form.
        optimize: accepted and ignored (contraction is pairwise, left to right).
        dtype: the dtype to compute in (default: the operands' promoted dtype).

    Raises:
        ValueError: malformed subscripts; ShapeError: sizes of one label disagree.
    """
    check_no_out("einsum", out)
    subscripts, arrays = _einsum_args(operands)
    arrays = _promoted("einsum", *arrays, dtype=dtype)
    labels, out_labels = _parse_einsum(subscripts, [tuple(a.shape) for a in arrays])
    # Sizes per label (size-1 axes broadcast against others, as in NumPy).
    sizes: dict[str, int] = {}
    for a, ls in zip(arrays, labels):
        for c, d in zip(ls, a.shape):
            if sizes.get(c, 1) != 1 and d not in (1, sizes[c]):
                raise ShapeError(f"functx.numpy.einsum: label {c if c in _LETTERS else '...'!r}"
                                 f" has sizes {sizes[c]} and {d} in different operands; "
                                 "they must match (or be 1, to broadcast).")
            sizes[c] = d if sizes.get(c, 1) == 1 else sizes[c]
    terms = []
    for a, ls in zip(arrays, labels):
        a, ls = _take_diagonals(a, list(ls))
        drop = tuple(i for i, c in enumerate(ls) if a.shape[i] == 1 and sizes[c] != 1)
        if drop:  # broadcast axes: drop them, the label's size comes from elsewhere
            a = _p.squeeze(a, drop)
            ls = [c for i, c in enumerate(ls) if i not in drop]
        terms.append((a, ls))
    # Sum labels that only one operand has and the output does not need.
    for i, (a, ls) in enumerate(terms):
        others = set(out_labels).union(*[set(l) for j, (_, l) in enumerate(terms) if j != i])
        axes = tuple(k for k, c in enumerate(ls) if c not in others)
        if axes:
            terms[i] = (_red.reduce_sum(a, axes), [c for k, c in enumerate(ls) if k not in axes])
    acc, acc_ls = terms[0]
    for j in range(1, len(terms)):
        b, b_ls = terms[j]
        later = set(out_labels).union(*[set(l) for _, l in terms[j + 1:]])
        shared = [c for c in acc_ls if c in b_ls]
        batch = [c for c in shared if c in later]
        contract = [c for c in shared if c not in later]
        acc = _contract(acc, b, (tuple(acc_ls.index(c) for c in contract),
                                 tuple(b_ls.index(c) for c in contract)),
                        (tuple(acc_ls.index(c) for c in batch),
                         tuple(b_ls.index(c) for c in batch)))
        acc_ls = batch + [c for c in acc_ls if c not in shared] + \
            [c for c in b_ls if c not in shared]
    extra = tuple(k for k, c in enumerate(acc_ls) if c not in out_labels)
    if extra:
        acc = _red.reduce_sum(acc, extra)
        acc_ls = [c for c in acc_ls if c in out_labels]
    missing = [c for c in out_labels if c not in acc_ls]
    if missing:  # labels whose every axis had size 1 and was broadcast away
        acc = _p.expand_dims(acc, tuple(range(len(acc_ls), len(acc_ls) + len(missing))))
        acc_ls = acc_ls + missing
    perm = tuple(acc_ls.index(c) for c in out_labels)
    res = transpose(acc, perm)
    target = tuple(sizes[c] for c in out_labels)
    return broadcast_to(res, target) if tuple(res.shape) != target else unchanged(res)


def _einsum_args(operands: tuple) -> tuple[str, list]:
    """``(subscripts, arrays)`` from either of einsum's calling conventions."""
    if not operands:
        raise TypeError("functx.numpy.einsum needs subscripts and operands.")
    if isinstance(operands[0], str):
        return operands[0], list(operands[1:])
    ops = list(operands)
    out_sub = ops.pop() if len(ops) % 2 == 1 else None
    arrays, subs = ops[0::2], ops[1::2]

    def letters(sub: Sequence[Any]) -> str:
        return "".join("..." if s is Ellipsis else string.ascii_letters[operator.index(s)]
                       for s in sub)
    text = ",".join(letters(s) for s in subs)
    if out_sub is not None:
        text += "->" + letters(out_sub)
    return text, arrays

