"""functx.numpy's structural half (_shape, _indexing, _linalg) against NumPy, in float64.

* A table of cases (one per function and argument form): each draws arrays and arguments
  with hypothesis and checks the eager result against NumPy (values, shape, dtype,
  read-only), the abstract result (``eval_shape``) and the recorded trace (``make_trace``
  + ``eval_trace``), the VJP against central differences *of the NumPy reference*
  (``<u, J v> == <J^T u, v>``), and that no input was mutated.
* Indexing: random index expressions (ints, slices with steps, None, Ellipsis, integer
  arrays and lists, boolean masks), eagerly, under ``eval_shape``, with the index arrays
  traced (``make_trace``), and the VJP against ``np.add.at`` of the cotangent.
* ``at[...]`` updates against NumPy's copy-then-assign and ``np.<ufunc>.at``.
* einsum on random subscripts against ``np.einsum``; matmul batch broadcasting.
* ``grad`` of a few functions against finite differences of NumPy's versions.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, strategies as st

import functx as fx
import functx.numpy as fnp
from functx import tree
from tests import strategies as S

# ----------------------------------------------------------------------------------------
# Checking helpers


def leaves(x: Any) -> list:
    """The arrays (or abstract values) of a possibly nested list/tuple, in order."""
    if isinstance(x, (list, tuple)):
        return [leaf for e in x for leaf in leaves(e)]
    return [x]


def assert_matches(got: Any, want: Any, exact: bool = True, rtol: float = 1e-10,
                   read_only: bool = True) -> None:
    """Same structure, shapes, dtypes and values; eager results are read-only arrays.

    (``eval_trace`` returns a trace input that is also an output as it was passed in, so
    its results are checked with ``read_only=False``.)
    """
    g, w = leaves(got), leaves(want)
    assert len(g) == len(w), (got, want)
    for a, b in zip(g, w):
        b = np.asarray(b)
        assert isinstance(a, np.ndarray), type(a)
        assert not (read_only and a.flags.writeable), "eager results must be read-only"
        assert a.shape == b.shape, (a.shape, b.shape)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        if exact:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)


def inner(a: Any, b: Any) -> float:
    return math.fsum(float(np.sum(np.asarray(x, np.float64) * np.asarray(y, np.float64)))
                     for x, y in zip(leaves(a), leaves(b)))


def check_vjp(f: Callable, ref: Callable, args: tuple, diff: tuple, rng: np.random.Generator,
              eps: float = 1e-5) -> None:
    """``f``'s VJP (w.r.t. ``args[i]`` for i in diff) against central differences of ``ref``.

    The structural functions are linear (or bilinear, or affine) in their float arguments,
    so central differences are exact up to rounding.
    """
    def f_diff(*d):
        full = list(args)
        for i, v in zip(diff, d):
            full[i] = v
        return f(*full)

    primals = tuple(args[i] for i in diff)
    out, f_vjp = fx.vjp(f_diff, *primals)
    u = tree.map(lambda o: rng.standard_normal(np.shape(o)), out)
    cts = f_vjp(u)
    vs = [rng.standard_normal(np.shape(p)) for p in primals]

    def ref_at(sign):
        full = list(args)
        for i, v in zip(diff, vs):
            full[i] = np.asarray(args[i] + sign * eps * v)
        return ref(*full)
    jv = [(np.asarray(a) - np.asarray(b)) / (2 * eps)
          for a, b in zip(leaves(ref_at(1)), leaves(ref_at(-1)))]
    lhs, rhs = inner(u, jv), inner(cts, vs)
    scale = math.sqrt(inner(u, u) * inner(vs, vs)) + 1.0
    assert abs(lhs - rhs) <= 1e-7 * scale * (1 + math.sqrt(inner(cts, cts))), (lhs, rhs)
    for c, p in zip(cts, primals):
        assert np.shape(c) == np.shape(p)


def full_check(fn: Callable, args: tuple, diff: tuple = (0,), exact: bool = True,
               seed: int = 0) -> None:
    """Eager vs NumPy, eval_shape, make_trace + eval_trace, VJP, and no input mutated."""
    copies = [np.copy(a) if isinstance(a, np.ndarray) else None for a in args]
    want = fn(np, *args)
    got = fn(fnp, *args)
    assert_matches(got, want, exact)
    # abstract evaluation: shapes and dtypes only
    avals = fx.eval_shape(lambda *a: fn(fnp, *a), *args)
    for a, w in zip(leaves(avals), leaves(want)):
        assert tuple(a.shape) == np.shape(w) and a.dtype == np.asarray(w).dtype
    # the recorded trace computes the same thing
    trace = fx.make_trace(lambda *a: fn(fnp, *a))(*args)
    assert_matches(fx.eval_trace(trace, *args), leaves(want), exact, read_only=False)
    if diff and all(np.asarray(w).dtype == np.float64 for w in leaves(want)):
        check_vjp(lambda *a: fn(fnp, *a), lambda *a: fn(np, *a), args, diff,
                  np.random.default_rng(seed))
    for a, c in zip(args, copies):
        if c is not None:
            np.testing.assert_array_equal(a, c)
            assert a.flags.writeable, "an input's flags were changed"


# ----------------------------------------------------------------------------------------
# The table of structural cases: each draws (fn(module, *args), args, diff_argnums)

CASES: dict[str, Callable] = {}


def case(name: str) -> Callable:
    def register(draw_fn: Callable) -> Callable:
        CASES[name] = draw_fn
        return draw_fn
    return register


def arr(data: Any, shape: tuple, label: str = "x") -> np.ndarray:
    return data.draw(S.array(tuple(shape)), label=label)


def shape_(data: Any, min_rank: int = 0, max_rank: int = 4, min_side: int = 0,
           max_side: int = 4) -> tuple:
    return data.draw(S.shapes(min_rank, max_rank, min_side, max_side), label="shape")


def some_axis(data: Any, nd: int) -> int:
    """An axis in [-nd, nd) (nd > 0)."""
    return data.draw(st.integers(-nd, nd - 1), label="axis")


@case("reshape")
def _(data):
    s = shape_(data)
    dims = list(data.draw(st.permutations(s)))
    while len(dims) > 1 and data.draw(st.booleans()):  # merge neighbours
        i = data.draw(st.integers(0, len(dims) - 2))
        dims[i:i + 2] = [dims[i] * dims[i + 1]]
    for _ in range(data.draw(st.integers(0, 2))):
        dims.insert(data.draw(st.integers(0, len(dims))), 1)
    if dims and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(dims) - 1))
        if math.prod(dims[:i] + dims[i + 1:]) > 0:
            dims[i] = -1
    order = data.draw(st.sampled_from("CF"))
    return (lambda m, x: m.reshape(x, tuple(dims), order=order)), (arr(data, s),), (0,)


@case("ravel")
def _(data):
    order = data.draw(st.sampled_from("CF"))
    return (lambda m, x: m.ravel(x, order=order)), (arr(data, shape_(data)),), (0,)


@case("transpose")
def _(data):
    s = shape_(data)
    axes = None if data.draw(st.booleans()) else [
        a - len(s) * data.draw(st.booleans()) for a in data.draw(st.permutations(range(len(s))))]
    return (lambda m, x: m.transpose(x, axes)), (arr(data, s),), (0,)


@case("swapaxes")
def _(data):
    s = shape_(data, min_rank=1)
    i, j = some_axis(data, len(s)), some_axis(data, len(s))
    return (lambda m, x: m.swapaxes(x, i, j)), (arr(data, s),), (0,)


@case("moveaxis")
def _(data):
    s = shape_(data, min_rank=1)
    k = data.draw(st.integers(1, len(s)))
    src = data.draw(st.permutations(range(len(s))))[:k]
    dst = [d - len(s) * data.draw(st.booleans())
           for d in data.draw(st.permutations(range(len(s))))[:k]]
    if k == 1 and data.draw(st.booleans()):
        src, dst = src[0], dst[0]
    return (lambda m, x: m.moveaxis(x, src, dst)), (arr(data, s),), (0,)


@case("squeeze")
def _(data):
    s = tuple(data.draw(st.lists(st.sampled_from([0, 1, 1, 2, 3]), max_size=4)))
    ones = [i for i, d in enumerate(s) if d == 1]
    axis = None
    if ones and data.draw(st.booleans()):
        chosen = data.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True))
        axis = tuple(a - len(s) * data.draw(st.booleans()) for a in chosen)
        axis = axis[0] if len(axis) == 1 and data.draw(st.booleans()) else axis
    return (lambda m, x: m.squeeze(x, axis)), (arr(data, s),), (0,)


@case("expand_dims")
def _(data):
    s = shape_(data, max_rank=3)
    k = data.draw(st.integers(1, 3))
    n = len(s) + k
    pos = data.draw(st.permutations(range(n)))[:k]
    axis = tuple(p - n * data.draw(st.booleans()) for p in pos)
    axis = axis[0] if k == 1 and data.draw(st.booleans()) else axis
    return (lambda m, x: m.expand_dims(x, axis)), (arr(data, s),), (0,)


@case("broadcast_to")
def _(data):
    target = shape_(data)
    rank = data.draw(st.integers(0, len(target)))
    s = tuple(1 if data.draw(st.booleans()) else d for d in target[len(target) - rank:])
    return (lambda m, x: m.broadcast_to(x, target)), (arr(data, s),), (0,)


@case("broadcast_arrays")
def _(data):
    a, b = data.draw(S.broadcast_pair())
    return (lambda m, x, y: m.broadcast_arrays(x, y)), (arr(data, a), arr(data, b, "y")), (0, 1)


for _n in (1, 2, 3):
    @case(f"atleast_{_n}d")
    def _(data, _n=_n):
        x, y = arr(data, shape_(data, max_rank=3)), arr(data, shape_(data, max_rank=3), "y")
        if data.draw(st.booleans()):
            return (lambda m, x: getattr(m, f"atleast_{_n}d")(x)), (x,), (0,)
        return (lambda m, x, y: getattr(m, f"atleast_{_n}d")(x, y)), (x, y), (0, 1)


def _joinable(data, min_rank=1, k_max=3):
    """Arrays of one shape except along ``axis``; and that axis."""
    s = list(shape_(data, min_rank=min_rank, max_rank=3))
    ax = some_axis(data, len(s)) if s else 0
    k = data.draw(st.integers(1, k_max))
    arrays = []
    for i in range(k):
        t = list(s)
        if t:
            t[ax] = data.draw(st.integers(0, 3))
        arrays.append(arr(data, tuple(t), f"a{i}"))
    return arrays, ax


@case("concatenate")
def _(data):
    arrays, ax = _joinable(data)
    if data.draw(st.booleans()):
        arrays = [arr(data, shape_(data, max_rank=3), f"a{i}") for i in range(len(arrays))]
        ax = None
    return (lambda m, *a: m.concatenate(list(a), axis=ax)), tuple(arrays), tuple(range(len(arrays)))


@case("concatenate_promotes")
def _(data):
    dts = data.draw(st.lists(st.sampled_from([np.float64, np.float32, np.int32, np.int64,
                                               np.bool_, np.int8]), min_size=1, max_size=3))
    arrays = [(arr(data, (2,), f"a{i}") * 3).astype(dt) for i, dt in enumerate(dts)]
    return (lambda m, *a: m.concatenate(a)), tuple(arrays), ()


@case("stack")
def _(data):
    s = shape_(data, max_rank=3)
    k = data.draw(st.integers(1, 3))
    ax = some_axis(data, len(s) + 1)
    arrays = tuple(arr(data, s, f"a{i}") for i in range(k))
    return (lambda m, *a: m.stack(a, axis=ax)), arrays, tuple(range(k))


@case("hstack")
def _(data):
    arrays, _ = _joinable(data, k_max=2)
    if len(arrays[0].shape) > 1:  # hstack joins along axis 1
        s = list(arrays[0].shape)
        arrays = [arr(data, tuple(s[:1] + [data.draw(st.integers(0, 2))] + s[2:]), f"h{i}")
                  for i in range(len(arrays))]
    return (lambda m, *a: m.hstack(a)), tuple(arrays), tuple(range(len(arrays)))


@case("vstack")
def _(data):
    s = shape_(data, max_rank=3)
    arrays = [arr(data, s, "a")]
    if len(s) >= 2:
        arrays.append(arr(data, (data.draw(st.integers(0, 2)),) + s[1:], "b"))
    else:
        arrays.append(arr(data, s, "b"))
    return (lambda m, *a: m.vstack(a)), tuple(arrays), (0, 1)


@case("dstack")
def _(data):
    s = shape_(data, max_rank=2)
    return (lambda m, *a: m.dstack(a)), (arr(data, s, "a"), arr(data, s, "b")), (0, 1)


@case("column_stack")
def _(data):
    n = data.draw(st.integers(0, 3))
    a = arr(data, (n,), "a")
    b = arr(data, (n, data.draw(st.integers(0, 2))), "b")
    return (lambda m, *x: m.column_stack(x)), (a, b), (0, 1)


@case("split")
def _(data):
    s = list(shape_(data, min_rank=1, max_rank=3))
    ax = some_axis(data, len(s))
    if data.draw(st.booleans()):
        k = data.draw(st.integers(1, 3))
        s[ax] = k * data.draw(st.integers(0, 2))
        spec = k
    else:
        spec = data.draw(st.lists(st.integers(-5, 5), max_size=3))
    return (lambda m, x: m.split(x, spec, axis=ax)), (arr(data, tuple(s)),), (0,)


@case("array_split")
def _(data):
    s = shape_(data, min_rank=1, max_rank=3)
    ax = some_axis(data, len(s))
    spec = data.draw(st.integers(1, 5) | st.lists(st.integers(-5, 5), max_size=3))
    return (lambda m, x: m.array_split(x, spec, axis=ax)), (arr(data, s),), (0,)


@case("tile")
def _(data):
    s = shape_(data, max_rank=3)
    reps = data.draw(st.integers(0, 3) | st.lists(st.integers(0, 2), max_size=3).map(tuple))
    return (lambda m, x: m.tile(x, reps)), (arr(data, s),), (0,)


@case("repeat")
def _(data):
    s = shape_(data, max_rank=3)
    axis = None if not s or data.draw(st.booleans()) else some_axis(data, len(s))
    n = math.prod(s) if axis is None else s[axis]
    reps = data.draw(st.integers(0, 3) | st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return (lambda m, x: m.repeat(x, reps, axis=axis)), (arr(data, s),), (0,)


@case("flip")
def _(data):
    s = shape_(data)
    axis = None
    if s and data.draw(st.booleans()):
        axis = tuple(data.draw(st.lists(st.integers(0, len(s) - 1), unique=True)))
        axis = axis[0] if len(axis) == 1 else axis
    return (lambda m, x: m.flip(x, axis)), (arr(data, s),), (0,)


@case("fliplr")
def _(data):
    return (lambda m, x: m.fliplr(x)), (arr(data, shape_(data, min_rank=2)),), (0,)


@case("flipud")
def _(data):
    return (lambda m, x: m.flipud(x)), (arr(data, shape_(data, min_rank=1)),), (0,)


@case("roll")
def _(data):
    s = shape_(data)
    if not s or data.draw(st.booleans()):
        shift, axis = data.draw(st.integers(-7, 7)), None
    else:
        axis = tuple(data.draw(st.lists(st.integers(-len(s), len(s) - 1), min_size=1, max_size=3)))
        shift = tuple(data.draw(st.lists(st.integers(-7, 7), min_size=len(axis),
                                         max_size=len(axis))))
        if data.draw(st.booleans()):
            shift = shift[0]
        if len(axis) == 1 and data.draw(st.booleans()):
            axis = axis[0]
    return (lambda m, x: m.roll(x, shift, axis)), (arr(data, s),), (0,)


@case("pad")
def _(data):
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap"]))
    min_side = 0 if mode == "constant" else 1
    s = shape_(data, max_rank=3, min_side=min_side)
    nd = len(s)
    form = data.draw(st.integers(0, 3 if nd else 1))
    if form == 0:
        width = data.draw(st.integers(0, 4))
    elif form == 1:
        width = tuple(data.draw(st.lists(st.integers(0, 4), min_size=2, max_size=2)))
    else:
        width = tuple(tuple(data.draw(st.lists(st.integers(0, 4), min_size=2, max_size=2)))
                      for _ in range(nd))
    kwargs = {}
    if mode == "constant" and nd and data.draw(st.booleans()):
        value = st.floats(-3, 3)
        kwargs["constant_values"] = data.draw(value) if data.draw(st.booleans()) \
            else tuple((data.draw(value), data.draw(value)) for _ in range(nd))
    return (lambda m, x: m.pad(x, width, mode=mode, **kwargs)), (arr(data, s),), (0,)


for _name in ("tril", "triu"):
    @case(_name)
    def _(data, _name=_name):
        k = data.draw(st.integers(-3, 3))
        return (lambda m, x: getattr(m, _name)(x, k)), (arr(data, shape_(data, min_rank=1)),), (0,)


@case("diag")
def _(data):
    s = shape_(data, min_rank=1, max_rank=2)
    k = data.draw(st.integers(-4, 4))
    return (lambda m, x: m.diag(x, k)), (arr(data, s),), (0,)


@case("diagonal")
def _(data):
    s = shape_(data, min_rank=2)
    i, j = data.draw(st.permutations(range(len(s))))[:2]
    off = data.draw(st.integers(-4, 4))
    return (lambda m, x: m.diagonal(x, off, i - len(s) * data.draw(st.booleans()), j)), \
        (arr(data, s),), (0,)


@case("trace")
def _(data):
    s = shape_(data, min_rank=2)
    i, j = data.draw(st.permutations(range(len(s))))[:2]
    off = data.draw(st.integers(-3, 3))
    return (lambda m, x: m.trace(x, off, i, j)), (arr(data, s),), (0,)


@case("trace_int")
def _(data):
    x = data.draw(S.int_array((3, 3), -5, 5, np.int32))
    return (lambda m, x: m.trace(x)), (x,), ()


@case("take")
def _(data):
    s = shape_(data, min_rank=1, min_side=1)
    axis = None if data.draw(st.booleans()) else some_axis(data, len(s))
    n = math.prod(s) if axis is None else s[axis]
    mode = data.draw(st.sampled_from([None, "raise", "wrap", "clip"]))
    lo, hi = (-n, n) if mode in (None, "raise") else (-3 * n, 3 * n)
    idx = data.draw(S.int_array(shape_(data, max_rank=2), lo, hi), label="indices")
    kw = {} if mode is None else {"mode": mode}
    return (lambda m, x: m.take(x, idx, axis=axis, **kw)), (arr(data, s),), (0,)


@case("take_along_axis")
def _(data):
    s = shape_(data, min_rank=1, min_side=1)
    ax = some_axis(data, len(s))
    ishape = tuple(data.draw(st.integers(0, 3)) if i == ax % len(s) else
                   data.draw(st.sampled_from([1, d])) for i, d in enumerate(s))
    idx = data.draw(S.int_array(ishape, -s[ax], s[ax]), label="indices")
    return (lambda m, x: m.take_along_axis(x, idx, axis=ax)), (arr(data, s),), (0,)


# -- products --


@case("matmul")
def _(data):
    batch_a, batch_b = data.draw(S.broadcast_pair(min_side=1, max_side=3))
    n, k, p = (data.draw(st.integers(1, 3)) for _ in range(3))
    sa = batch_a[-2:] + (n, k) if data.draw(st.booleans()) else (k,)
    sb = batch_b[-2:] + (k, p) if data.draw(st.booleans()) else (k,)
    return (lambda m, a, b: m.matmul(a, b)), (arr(data, sa, "a"), arr(data, sb, "b")), (0, 1)


@case("dot")
def _(data):
    k = data.draw(st.integers(1, 3))
    form = data.draw(st.integers(0, 3))
    if form == 0:  # a scalar operand
        sa, sb = (), shape_(data, max_rank=2)
    elif form == 1:  # two vectors
        sa, sb = (k,), (k,)
    elif form == 2:  # N-D with a vector
        sa, sb = shape_(data, max_rank=2) + (k,), (k,)
    else:  # N-D with M-D: last axis of a with the second-to-last of b
        sa = shape_(data, max_rank=2) + (k,)
        sb = shape_(data, max_rank=1) + (k, data.draw(st.integers(0, 3)))
    if form == 0 and data.draw(st.booleans()):
        sa, sb = sb, sa
    return (lambda m, a, b: m.dot(a, b)), (arr(data, sa, "a"), arr(data, sb, "b")), (0, 1)


@case("vdot")
def _(data):
    s = shape_(data, max_rank=3)
    t = data.draw(st.permutations(s))
    return (lambda m, a, b: m.vdot(a, b)), (arr(data, s, "a"), arr(data, tuple(t), "b")), (0, 1)


@case("inner")
def _(data):
    k = data.draw(st.integers(0, 3))
    sa, sb = shape_(data, max_rank=2) + (k,), shape_(data, max_rank=2) + (k,)
    return (lambda m, a, b: m.inner(a, b)), (arr(data, sa, "a"), arr(data, sb, "b")), (0, 1)


@case("outer")
def _(data):
    return (lambda m, a, b: m.outer(a, b)), \
        (arr(data, shape_(data, max_rank=2), "a"), arr(data, shape_(data, max_rank=2), "b")), (0, 1)


@case("tensordot")
def _(data):
    n = data.draw(st.integers(0, 2))
    shared = shape_(data, min_rank=n, max_rank=n)
    sa = shape_(data, max_rank=2) + shared
    sb = shared + shape_(data, max_rank=2)
    if data.draw(st.booleans()):
        axes: Any = n
        a, b = arr(data, sa, "a"), arr(data, sb, "b")
    else:  # explicit axes on permuted operands
        pa = data.draw(st.permutations(range(len(sa))))
        pb = data.draw(st.permutations(range(len(sb))))
        a = np.transpose(arr(data, sa, "a"), pa).copy()
        b = np.transpose(arr(data, sb, "b"), pb).copy()
        axes = ([list(pa).index(len(sa) - n + i) for i in range(n)],
                [list(pb).index(i) for i in range(n)])
    return (lambda m, a, b: m.tensordot(a, b, axes)), (a, b), (0, 1)


@case("kron")
def _(data):
    return (lambda m, a, b: m.kron(a, b)), \
        (arr(data, shape_(data, max_rank=3, max_side=3), "a"),
         arr(data, shape_(data, max_rank=3, max_side=3), "b")), (0, 1)


@pytest.mark.parametrize("name", sorted(CASES))
@given(data=st.data())
def test_structural_function_matches_numpy(name: str, data: Any) -> None:
    fn, args, diff = CASES[name](data)
    exact = name not in ("matmul", "dot", "vdot", "inner", "tensordot", "trace")
    full_check(fn, args, diff, exact=exact, seed=data.draw(st.integers(0, 2**31)))


def test_every_public_function_has_a_case() -> None:
    from functx.numpy import _indexing, _linalg, _shape

    tested = {n.split("_promotes")[0].replace("_int", "") for n in CASES}
    untested_here = {"shape", "ndim", "size", "broadcast_shapes", "getitem", "at",
                     "nonzero", "argwhere", "flatnonzero", "einsum"}  # tested below
    public = set(_shape.__all__) | set(_indexing.__all__) | set(_linalg.__all__)
    assert public - tested - untested_here == set()
    for name in public:
        assert getattr(fnp, name).__doc__, f"{name} needs a docstring"


# ----------------------------------------------------------------------------------------
# Indexing


class Slot:
    """An index-array entry of an expression: static value, or replaced by a traced input."""

    def __init__(self, value: np.ndarray, as_list: bool = False) -> None:
        self.value, self.as_list = value, as_list


class Expr:
    """A random index expression; ``build`` substitutes values (static or traced) for slots."""

    def __init__(self, entries: list, as_tuple: bool) -> None:
        self.entries, self.as_tuple = entries, as_tuple
        self.slots = [e for e in entries if isinstance(e, Slot)]

    def build(self, values: list | None = None) -> Any:
        it = iter(values) if values is not None else None
        out = []
        for e in self.entries:
            if isinstance(e, Slot):
                v = next(it) if it is not None else (
                    e.value.tolist() if e.as_list else e.value)
                out.append(v)
            else:
                out.append(e)
        return tuple(out) if self.as_tuple or len(out) != 1 else out[0]

    def __repr__(self) -> str:
        return repr(self.build())


@st.composite
def index_exprs(draw: Any, shape: tuple, masks: bool = True) -> Expr:
    """A valid NumPy index expression for an array of ``shape``."""
    nd = len(shape)
    kinds = []
    left = draw(st.integers(0, nd))
    while left > 0:
        k = draw(st.sampled_from(["int", "slice", "slice", "array", "mask"] if masks
                                 else ["int", "slice", "slice", "array"]))
        if k == "mask" and any(k2 == "mask" for k2, _ in kinds):
            k = "slice"  # several masks rarely broadcast together; one is enough
        width = draw(st.integers(1, min(2, left))) if k == "mask" else 1
        kinds.append((k, width))
        left -= width
    ell = draw(st.integers(0, len(kinds))) if draw(st.booleans()) else None
    # axes of each consuming entry: those after the ellipsis are aligned to the end
    axes, a = [], 0
    for i, (k, w) in enumerate(kinds):
        if ell is not None and i == ell:
            a = nd - sum(w2 for _, w2 in kinds[i:])
        axes.append(tuple(range(a, a + w)))
        a += w
    if any(k == "mask" for k, _ in kinds):
        bshape = draw(st.sampled_from([(), (1,)]))
    else:
        bshape = draw(S.shapes(max_rank=2, min_side=1, max_side=3))
    entries: list = []
    for (k, w), ax in zip(kinds, axes):
        sizes = [shape[i] for i in ax]
        n = sizes[0]
        if k in ("int", "array") and n == 0:
            k = "slice"
        if k == "int":
            v = draw(st.integers(-n, n - 1))
            entries.append(v if draw(st.booleans()) else Slot(np.asarray(v)))
        elif k == "slice":
            bound = st.none() | st.integers(-n - 2, n + 2)
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
            entries.append(slice(draw(bound), draw(bound), step))
        elif k == "array":
            rank = draw(st.integers(0, len(bshape)))
            s = tuple(1 if draw(st.booleans()) else d for d in bshape[len(bshape) - rank:])
            v = draw(S.int_array(s, -n, n))
            entries.append(Slot(v, as_list=bool(s) and draw(st.booleans())))
        else:
            m = draw(S.int_array(tuple(sizes), 0, 2)).astype(bool)
            entries.append(m if m.size == 0 or draw(st.booleans()) else m.tolist())
    for _ in range(draw(st.integers(0, 2))):
        entries.insert(draw(st.integers(0, len(entries))), None)
    if draw(st.integers(0, 9)) == 0 and not any(k in ("array", "mask") for k, _ in kinds):
        # a True/False scalar: a new axis of length 1 or 0 (it would broadcast with arrays)
        entries.insert(draw(st.integers(0, len(entries))), draw(st.booleans()))
    if ell is not None:
        pos = [i for i, e in enumerate(entries) if e is not None and not isinstance(e, bool)]
        cut = pos[ell] if ell < len(pos) else len(entries)
        entries.insert(cut, Ellipsis)
    as_tuple = draw(st.booleans()) or len(entries) != 1
    return Expr(entries, as_tuple)


def scatter_ref(shape: tuple, idx: Any, ct: np.ndarray) -> np.ndarray:
    out = np.zeros(shape)
    np.add.at(out, idx, ct)
    return out


@given(data=st.data())
def test_getitem_matches_numpy(data: Any) -> None:
    shape = data.draw(S.shapes(max_rank=4, max_side=4), label="shape")
    x = arr(data, shape)
    x_copy = x.copy()
    expr = data.draw(index_exprs(shape), label="index")
    idx = expr.build()
    want = x[idx]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    # eager
    assert_matches(fnp.getitem(x, idx), want)
    # abstract
    aval = fx.eval_shape(lambda x: fnp.getitem(x, idx), x)
    assert aval.shape == want.shape and aval.dtype == want.dtype
    # VJP: the cotangent added into zeros at the same index
    out, f_vjp = fx.vjp(lambda x: fnp.getitem(x, idx), x)
    assert_matches(out, want)
    ct = rng.standard_normal(want.shape)
    (g,) = f_vjp(ct)
    np.testing.assert_allclose(g, scatter_ref(shape, idx, ct), rtol=1e-12, atol=1e-12)
    # the index arrays (and integer scalars given as arrays) traced
    if expr.slots and any(isinstance(e, bool) for e in expr.entries):
        with pytest.raises(IndexError, match="boolean scalar"):
            fx.make_trace(lambda x, *v: fnp.getitem(x, expr.build(list(v))))(
                x, *[s.value for s in expr.slots])
    elif expr.slots:
        vals = [s.value for s in expr.slots]

        def f(x, *v):
            return fnp.getitem(x, expr.build(list(v)))
        trace = fx.make_trace(f)(x, *vals)
        assert_matches(fx.eval_trace(trace, x, *vals)[0], want)
        aval = fx.eval_shape(f, x, *vals)
        assert aval.shape == want.shape
        out, f_vjp = fx.vjp(lambda x: fx.eval_trace(trace, x, *vals)[0], x)
        (g,) = f_vjp(ct)
        np.testing.assert_allclose(g, scatter_ref(shape, idx, ct), rtol=1e-12, atol=1e-12)
    # tracer syntax: x[idx] inside a transform
    out, _ = fx.vjp(lambda x: x[idx], x)
    assert_matches(out, want)
    np.testing.assert_array_equal(x, x_copy)


@pytest.mark.parametrize("idx", [
    (5,), (-4,), (0, 4), ([0, 3],), (slice(None), [-5]), (np.array([[1], [3]]), 0),
    (Ellipsis, 7), (0, 0, 0),
])
def test_getitem_out_of_range_raises_index_error(idx: Any) -> None:
    x = np.zeros((3, 4))
    with pytest.raises(IndexError):
        x[idx]
    with pytest.raises(IndexError):
        fnp.getitem(x, idx)
    with pytest.raises(IndexError):
        fx.eval_shape(lambda x: fnp.getitem(x, idx), x)


@pytest.mark.parametrize("idx", [(1.5,), ([0.0, 1.0],), ("a",), (Ellipsis, Ellipsis)])
def test_getitem_invalid_indices_raise_index_error(idx: Any) -> None:
    with pytest.raises(IndexError):
        fnp.getitem(np.zeros((3, 4)), idx)


def test_traced_indices_wrap_negative_and_clamp_out_of_range() -> None:
    x = np.arange(5.0)

    def run(i):
        return fx.eval_trace(fx.make_trace(lambda x, i: x[i])(x, i), x, i)[0]
    assert run(np.array(-1)) == 4.0
    assert run(np.array(7)) == 4.0       # clamped: the value is unknown while tracing
    np.testing.assert_array_equal(run(np.array([-2, 9, -9])), [3.0, 4.0, 0.0])
    y = np.arange(12.0).reshape(3, 4)
    t = fx.make_trace(lambda y, i, j: y[i, j])(y, np.array([0, 2]), np.array([-1, 5]))
    np.testing.assert_array_equal(
        fx.eval_trace(t, y, np.array([0, 2]), np.array([-1, 5]))[0], [3.0, 11.0])


def test_traced_scalar_index_uses_dynamic_slice() -> None:
    x = np.arange(12.0).reshape(3, 4)
    trace = fx.make_trace(lambda x, i: x[i, 1:])(x, np.array(1))
    names = [e.prim.name for e in trace.eqns]
    assert "dynamic_slice" in names and "gather" not in names


def test_basic_indexing_uses_no_gather() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    trace = fx.make_trace(lambda x: x[1, ::-2, None, 1:3])(x)
    assert {e.prim.name for e in trace.eqns} <= {"slice", "rev", "squeeze", "expand_dims"}


def test_one_index_array_gathers_along_its_axis() -> None:
    emb, tokens = np.zeros((50, 8)), np.array([3, 1, 3])
    trace = fx.make_trace(lambda e: e[tokens])(emb)
    (eqn,) = [e for e in trace.eqns if e.prim.name == "gather"]
    assert eqn.params["axis"] == 0 and eqn.inputs[1].aval.shape == (3,)


def test_boolean_mask_needs_concrete_value() -> None:
    x = np.arange(6.0)
    mask = x > 2
    # inside vjp the mask's value is known: fine
    out, f_vjp = fx.vjp(lambda x: x[x > 2], x)
    assert_matches(out, x[mask])
    np.testing.assert_array_equal(f_vjp(np.ones(3))[0], mask.astype(float))
    # in an abstract trace it is not
    with pytest.raises(fx.ConcretizationError, match="where"):
        fx.make_trace(lambda x: x[x > 2])(x)
    with pytest.raises(fx.ConcretizationError, match="where"):
        fx.make_trace(lambda x, m: fnp.getitem(x, m))(x, mask)


def test_tracer_list_index_and_tracer_methods() -> None:
    x = np.arange(12.0).reshape(3, 4)
    trace = fx.make_trace(lambda x, i, j: x[[i, j]])(x, np.array(2), np.array(0))
    assert_matches(fx.eval_trace(trace, x, np.array(2), np.array(0))[0], x[[2, 0]])
    out, _ = fx.vjp(lambda x: x.at[1, 2].set(-1.0), x)
    want = x.copy()
    want[1, 2] = -1.0
    assert_matches(out, want)


# -- at[...] --

_AT_REFS = {
    "set": None, "add": np.add.at, "multiply": np.multiply.at, "mul": np.multiply.at,
    "min": np.minimum.at, "max": np.maximum.at,
}


def at_ref(x: np.ndarray, idx: Any, method: str, v: np.ndarray) -> np.ndarray:
    out = x.copy()
    if method == "set":
        out[idx] = v
    else:
        _AT_REFS[method](out, idx, v)
    return out


@pytest.mark.parametrize("method", sorted(_AT_REFS))
@given(data=st.data())
def test_at_update_matches_numpy(method: str, data: Any) -> None:
    shape = data.draw(S.shapes(max_rank=3, max_side=4), label="shape")
    x = arr(data, shape)
    expr = data.draw(index_exprs(shape), label="index")
    idx = expr.build()
    tshape = x[idx].shape
    rank = data.draw(st.integers(0, len(tshape)))
    vshape = tuple(1 if data.draw(st.booleans()) else d for d in tshape[len(tshape) - rank:])
    v = arr(data, vshape, "values")
    x_copy, v_copy = x.copy(), v.copy()
    want = at_ref(x, idx, method, v)
    assert_matches(getattr(fnp.at(x)[idx], method)(v), want)
    assert_matches(fnp.at(x)[idx].get(), x[idx])
    aval = fx.eval_shape(lambda x, v: getattr(fnp.at(x)[idx], method)(v), x, v)
    assert aval.shape == want.shape and aval.dtype == want.dtype
    if method in ("set", "add", "multiply"):
        f = lambda x, v: getattr(fnp.at(x)[idx], method)(v)
        check_vjp(f, lambda x, v: at_ref(x, idx, method, v), (x, v), (0, 1),
                  np.random.default_rng(0))
    # the index arrays traced (duplicates of mul/min/max are only exact for static indices)
    pos = np.arange(x.size).reshape(shape)[idx].reshape(-1)
    if expr.slots and (method in ("set", "add") or len(np.unique(pos)) == pos.size) and \
            not any(isinstance(e, bool) for e in expr.entries):
        vals = [s.value for s in expr.slots]
        tr = fx.make_trace(lambda x, v, *i: getattr(fnp.at(x)[expr.build(list(i))], method)(v))(
            x, v, *vals)
        assert_matches(fx.eval_trace(tr, x, v, *vals)[0], want)
    np.testing.assert_array_equal(x, x_copy)
    np.testing.assert_array_equal(v, v_copy)


def test_at_casts_values_and_works_on_lists() -> None:
    x = np.arange(4, dtype=np.int32)
    assert_matches(fnp.at(x)[1:3].set(7.9), np.array([0, 7, 7, 3], np.int32))
    assert_matches(fnp.at([1.0, 2.0])[0].add(1), np.array([2.0, 2.0]))
    assert x.flags.writeable and x.tolist() == [0, 1, 2, 3]


def test_at_set_gradient_skips_overwritten_entries() -> None:
    x = np.arange(4.0)
    g = fx.grad(lambda x, v: fnp.vdot(fnp.at(x)[[1, 1, 2]].set(v), np.arange(1.0, 5.0)),
                argnums=(0, 1))(x, np.array([10.0, 20.0, 30.0]))
    np.testing.assert_array_equal(g[0], [1.0, 0.0, 0.0, 4.0])
    np.testing.assert_array_equal(g[1], [0.0, 2.0, 3.0])  # the first duplicate lost


# -- take/nonzero --


def test_take_traced_indices() -> None:
    x = np.arange(10.0).reshape(2, 5)
    i = np.array([[-1, 7], [0, 2]])
    for mode, want in [(None, np.take(x, np.clip(np.where(i < 0, i + 5, i), 0, 4), axis=1)),
                       ("wrap", np.take(x, i, axis=1, mode="wrap")),
                       ("clip", np.take(x, i, axis=1, mode="clip"))]:
        t = fx.make_trace(lambda x, i: fnp.take(x, i, axis=1, mode=mode))(x, i)
        assert_matches(fx.eval_trace(t, x, i)[0], want)


def test_take_along_axis_traced_indices_and_grad() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    i = np.argsort(x, axis=1)
    t = fx.make_trace(lambda x, i: fnp.take_along_axis(x, i, axis=1))(x, i)
    assert_matches(fx.eval_trace(t, x, i)[0], np.sort(x, axis=1))
    g = fx.grad(lambda x: fnp.vdot(fnp.take_along_axis(x, i[:, :1], 1), np.ones((3, 1))))(x)
    np.testing.assert_array_equal(g, (x == x.min(axis=1, keepdims=True)).astype(float))


@pytest.mark.parametrize("name", ["nonzero", "argwhere", "flatnonzero"])
def test_nonzero_family(name: str) -> None:
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    assert_matches(getattr(fnp, name)(x), getattr(np, name)(x))
    out, _ = fx.vjp(lambda x: (x, getattr(fnp, name)(x)), x)
    assert_matches(out[1], getattr(np, name)(x))
    with pytest.raises(fx.ConcretizationError, match="shape"):
        fx.make_trace(lambda x: getattr(fnp, name)(x))(x)


def test_shape_queries() -> None:
    x = np.zeros((2, 3, 4))
    assert fnp.shape(x) == (2, 3, 4) and fnp.ndim(x) == 3 and fnp.size(x) == 24
    assert fnp.size(x, -1) == 4 and fnp.shape([[1, 2]]) == (1, 2) and fnp.ndim(3.0) == 0
    seen = []
    fx.make_trace(lambda x: seen.append((fnp.shape(x), fnp.ndim(x), fnp.size(x, 1))) or x)(x)
    assert seen == [((2, 3, 4), 3, 3)]
    assert fnp.broadcast_shapes((2, 1), (3,), 1) == np.broadcast_shapes((2, 1), (3,), 1)


# ----------------------------------------------------------------------------------------
# einsum and matmul


@st.composite
def einsum_cases(draw: Any) -> tuple[str, list]:
    letters = "abcdE"
    sizes = {c: draw(st.integers(1, 3)) for c in letters}
    n_ops = draw(st.integers(1, 3))
    terms = [draw(st.lists(st.sampled_from(letters), max_size=4)) for _ in range(n_ops)]
    ell = draw(st.booleans())
    ell_shape = draw(S.shapes(max_rank=2, min_side=1, max_side=3)) if ell else ()
    shapes, texts = [], []
    for t in terms:
        s = tuple(sizes[c] for c in t)
        text = "".join(t)
        if ell:
            k = draw(st.integers(0, len(ell_shape)))
            sub = tuple(1 if draw(st.booleans()) else d for d in ell_shape[len(ell_shape) - k:])
            cut = draw(st.integers(0, len(t)))
            text = "".join(t[:cut]) + "..." + "".join(t[cut:])
            s = s[:cut] + sub + s[cut:]
        shapes.append(s)
        texts.append(text)
    subscripts = ",".join(texts)
    if draw(st.booleans()):
        used = sorted({c for t in terms for c in t})
        out = draw(st.permutations(used))[:draw(st.integers(0, len(used)))]
        out = list(out)
        if ell:
            out.insert(draw(st.integers(0, len(out))), "...")
        subscripts += "->" + "".join(out)
    operands = [draw(S.array(s), label=f"op{i}") for i, s in enumerate(shapes)]
    return subscripts, operands


@given(case_=einsum_cases(), seed=st.integers(0, 2**31))
def test_einsum_matches_numpy(case_: tuple, seed: int) -> None:
    subscripts, operands = case_
    n = len(operands)
    full_check(lambda m, *ops: m.einsum(subscripts, *ops), tuple(operands),
               tuple(range(n)), exact=False, seed=seed)


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ii", [(3, 3)]), ("ii->i", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]), ("ijj,jk->ik", [(2, 3, 3), (3, 2)]),
    ("...ij,...jk", [(5, 2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("i,i", [(3,), (3,)]), ("i,j->ij", [(3,), (2,)]),
    ("ij->", [(2, 3)]), ("ba,ab", [(2, 3), (3, 2)]), ("Ab,bA", [(2, 3), (3, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("ab,bc,ca->", [(2, 3), (3, 4), (4, 2)]),
    ("i...,i...->...", [(3, 1, 2), (3, 4, 1)]), ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("xi,x->i", [(3, 2), (3,)]), ("i->", [(0,)]), ("ij,kl->ijkl", [(2, 1), (1, 3)]),
    ("iji->j", [(2, 3, 2)]), ("a,a,a->", [(3,), (3,), (3,)]), ("ab,b->", [(2, 3), (3,)]),
])
def test_einsum_table(subscripts: str, shapes: list) -> None:
    rng = np.random.default_rng(1)
    ops = tuple(rng.standard_normal(s) for s in shapes)
    full_check(lambda m, *o: m.einsum(subscripts, *o), ops, tuple(range(len(ops))), exact=False)


def test_einsum_interleaved_form_and_errors() -> None:
    a, b = np.ones((2, 3)), np.arange(3.0)
    assert_matches(fnp.einsum(a, [0, 1], b, [1], [0]), np.einsum(a, [0, 1], b, [1], [0]),
                   exact=False)
    for bad in ["ij,jk->iq", "ij->ii", "ij", "i.j"]:
        with pytest.raises(ValueError):
            fnp.einsum(bad, np.ones((2, 2)) if bad != "ij" else np.ones(2))
    with pytest.raises(ValueError):
        fnp.einsum("ij,jk", np.ones((2, 3)), np.ones((4, 2)))


@given(data=st.data())
def test_matmul_batch_broadcasting(data: Any) -> None:
    ba, bb = data.draw(S.broadcast_pair(min_side=0, max_side=3))
    n, k, p = (data.draw(st.integers(0, 3)) for _ in range(3))
    a, b = arr(data, ba + (n, k), "a"), arr(data, bb + (k, p), "b")
    full_check(lambda m, a, b: m.matmul(a, b), (a, b), (0, 1), exact=False)
    t = fx.make_trace(lambda a, b: a @ b)(a, b)
    assert_matches(fx.eval_trace(t, a, b)[0], a @ b, exact=False)


def test_products_promote_dtypes() -> None:
    a32, b64 = np.ones((2, 2), np.float32), np.ones((2,), np.float64)
    ints = np.arange(4, dtype=np.int32).reshape(2, 2)
    for f in ("matmul", "dot", "inner", "outer", "tensordot", "kron", "vdot"):
        for x, y in ((a32, b64), (ints, a32), (ints, ints)):
            y2 = y if f not in ("tensordot", "vdot") else np.ones((2, 2), y.dtype)
            assert_matches(getattr(fnp, f)(x, y2), getattr(np, f)(x, y2), exact=False)
    assert_matches(fnp.matmul(np.eye(2, dtype=bool), np.ones((2, 2), bool)),
                   np.eye(2, dtype=bool) @ np.ones((2, 2), bool))


# ----------------------------------------------------------------------------------------
# grad against finite differences of NumPy's functions

GRAD_CASES = {
    "matmul": (lambda m, a, b: m.matmul(a, b), [(2, 3, 4), (4, 2)]),
    "einsum": (lambda m, a, b: m.einsum("bij,jk->bik", a, b) ** 2, [(2, 3, 4), (4, 2)]),
    "tensordot": (lambda m, a, b: m.tensordot(a, b, ([1, 0], [2, 0])), [(3, 2), (3, 4, 2)]),
    "roll": (lambda m, a: m.roll(a, (1, -2), (0, 1)) * a, [(3, 4)]),
    "pad": (lambda m, a: m.pad(a, ((1, 2), (3, 0)), mode="reflect") ** 3, [(3, 4)]),
    "tile": (lambda m, a: m.tile(a, (2, 1, 3)) ** 2, [(3, 2)]),
    "repeat": (lambda m, a: m.repeat(a, [1, 0, 3], axis=0) ** 2, [(3, 2)]),
    "getitem": (lambda m, a: (m.getitem(a, (Ellipsis, [0, 2, 2])) if m is fnp
                              else a[..., [0, 2, 2]]) ** 2, [(2, 3)]),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_grad_against_finite_differences(name: str) -> None:
    fn, shapes = GRAD_CASES[name]
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s) for s in shapes]
    w = rng.standard_normal(np.shape(fn(np, *args)))
    argnums = tuple(range(len(args)))
    grads = fx.grad(lambda *a: fnp.vdot(w, fn(fnp, *a)), argnums=argnums)(*args)
    eps = 1e-6
    for i, g in enumerate(grads):
        fd = np.zeros_like(args[i])
        for j in np.ndindex(args[i].shape):
            hi = [a.copy() for a in args]
            lo = [a.copy() for a in args]
            hi[i][j] += eps
            lo[i][j] -= eps
            fd[j] = (np.vdot(w, fn(np, *hi)) - np.vdot(w, fn(np, *lo))) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)


def test_roll_with_traced_shift() -> None:
    x = np.arange(10.0).reshape(2, 5)
    for shift in (-7, -1, 0, 3, 12):
        t = fx.make_trace(lambda x, s: fnp.roll(x, s, axis=1))(x, np.array(shift))
        assert_matches(fx.eval_trace(t, x, np.array(shift))[0], np.roll(x, shift, axis=1))
    w = np.arange(10.0).reshape(2, 5)
    out, f_vjp = fx.vjp(lambda x, s: fnp.roll(x, s, axis=1), x, np.array(2))  # s traced
    assert_matches(out, np.roll(x, 2, axis=1))
    np.testing.assert_array_equal(f_vjp(w)[0], np.roll(w, -2, axis=1))


def test_pad_traced_constant_and_unsupported_mode() -> None:
    x = np.ones((2, 2))
    g = fx.grad(lambda c: fnp.vdot(fnp.pad(x, 1, constant_values=c), np.ones((4, 4))))(2.0)
    assert float(g) == 12.0
    with pytest.raises(NotImplementedError, match="mode"):
        fnp.pad(x, 1, mode="mean")
    with pytest.raises(ValueError):
        fnp.pad(x, -1)


# ----------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("call", [
    lambda: fnp.reshape(np.zeros(6), (4, -1)),
    lambda: fnp.reshape(np.zeros(6), (-1, -1)),
    lambda: fnp.squeeze(np.zeros((2, 1)), 0),
    lambda: fnp.broadcast_to(np.zeros((2, 3)), (3, 3)),
    lambda: fnp.concatenate([np.zeros(2), np.zeros((2, 2))]),
    lambda: fnp.concatenate([np.zeros(()), np.zeros(())]),
    lambda: fnp.stack([np.zeros(2), np.zeros(3)]),
    lambda: fnp.split(np.zeros(5), 2),
    lambda: fnp.transpose(np.zeros((2, 3)), (0,)),
    lambda: fnp.moveaxis(np.zeros((2, 3)), 0, 2),
    lambda: fnp.matmul(np.zeros((2, 3)), np.zeros((2, 3))),
    lambda: fnp.tensordot(np.zeros((2, 3)), np.zeros((2, 3)), 1),
    lambda: fnp.diagonal(np.zeros((2, 3)), 0, 1, 1),
    lambda: fnp.repeat(np.zeros(3), [1, 2]),
])
def test_shape_errors_are_value_errors(call: Callable) -> None:
    with pytest.raises(ValueError):
        call()


def test_abstract_shape_arguments_raise_concretization_error() -> None:
    x = np.zeros((2, 3))
    with pytest.raises(fx.ConcretizationError):
        fx.make_trace(lambda x, n: fnp.repeat(x, n))(x, np.array(2))
    with pytest.raises(fx.ConcretizationError):
        fx.make_trace(lambda x, n: x[:n])(x, np.array(1))
    # inside vjp the value is known, so it works
    out, f_vjp = fx.vjp(lambda x, n: fnp.repeat(x, n), x, np.array(2))
    assert_matches(out, np.repeat(x, 2))
    np.testing.assert_array_equal(f_vjp(np.ones(12))[0], np.full((2, 3), 2.0))


@pytest.mark.parametrize("name,args", [
    ("reshape", ([1, 2, 3, 4], (2, 2))), ("stack", ([[1, 2], [3, 4]],)),
    ("concatenate", ([[1.0], [2]],)), ("matmul", ([[1, 2]], [[3], [4]])),
    ("expand_dims", (3.0, 0)), ("pad", ([1, 2], 1)), ("tile", (2.0, 3)),
    ("roll", ([1, 2, 3], 1)), ("diag", ([1, 2],)), ("einsum", ("i,i", [1, 2], [3, 4])),
    ("take", ([5, 6, 7], [2, 0])), ("transpose", ([[1, 2, 3]],)), ("kron", ([1, 2], [[1], [2]])),
    ("outer", ([1, 2], 3)), ("atleast_2d", (1,)), ("broadcast_to", (1.5, (2, 2))),
])
def test_python_scalars_and_lists(name: str, args: tuple) -> None:
    assert_matches(getattr(fnp, name)(*args), getattr(np, name)(*args))


def test_getitem_on_lists_and_numpy_scalars() -> None:
    assert_matches(fnp.getitem([[1, 2], [3, 4]], (1, [0, 0])), np.array([3, 3]))
    assert_matches(fnp.getitem(np.arange(6), np.int32(4)), np.asarray(4))
