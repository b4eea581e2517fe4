"""Specs of the bit-level primitives (functx/primitives/bits.py).

The references compute shifts on Python integers (unbounded, so nothing is undefined):
an out-of-range shift amount gives 0 (left, logical right) or the sign fill (arithmetic
right), as XLA defines it. Operands are drawn over the whole range of their dtype, with
shift amounts in and out of range (negative ones too for signed dtypes). The reference of
``bitcast_convert_type`` is NumPy's ``view``; that of ``threefry2x32`` is the block function
written out on whole arrays (its known answers are checked in tests/test_random.py). None
of these primitives is differentiable: every spec has ``diff_argnums=()``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from hypothesis import strategies as st

from functx.primitives import bits
from tests.specs import PrimSpec
from tests.strategies import broadcast_pair, shapes

INT_DTYPES = (np.int8, np.uint16, np.uint32, np.int32, np.uint64, np.int64)


def _full_range(shape: tuple, dtype: type) -> st.SearchStrategy:
    """Integers spread over all of ``dtype``'s range (from random bytes)."""
    def make(seed: int) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        raw = np.random.default_rng(seed).integers(0, 256, size=n, dtype=np.uint8)
        return raw.view(dtype).reshape(shape).copy()
    return st.integers(0, 2**32 - 1).map(make)


def _amounts(shape: tuple, dtype: type) -> st.SearchStrategy:
    """Shift amounts: mostly in [0, bits), some at or past the width, negative if signed."""
    bits_ = np.dtype(dtype).itemsize * 8
    lo = -3 if np.dtype(dtype).kind == "i" else 0
    return st.integers(0, 2**32 - 1).map(lambda seed: np.random.default_rng(seed).integers(
        lo, bits_ + 4, size=shape).astype(dtype))


def shift_args(dtype: type) -> st.SearchStrategy:
    """A broadcasting pair (x, y) of ``dtype``: full-range values and shift amounts."""
    return broadcast_pair().flatmap(lambda s: st.tuples(_full_range(s[0], dtype),
                                                        _amounts(s[1], dtype)))


def _on_python_ints(fn: Callable[[int, int, int, bool], int]) -> Callable:
    """A reference that applies ``fn(x, y, bits, signed)`` to each broadcast pair of elements
    as Python integers and converts the (wrapped) result back to the operands' dtype."""
    def ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        dt = x.dtype
        n = dt.itemsize * 8
        xs, ys = np.broadcast_arrays(x, y)
        out = [fn(int(a), int(b), n, dt.kind == "i") % (1 << n) for a, b in
               zip(xs.ravel().tolist(), ys.ravel().tolist())]
        return np.array(out, dtype=np.uint64).astype(np.dtype(f"u{dt.itemsize}")).view(
            dt).reshape(xs.shape)
    return ref


def _unsigned_amount(y: int, n: int) -> int:
    return y % (1 << n)  # a negative amount reads as its unsigned bits: out of range


def _ref_left(x: int, y: int, n: int, signed: bool) -> int:
    y = _unsigned_amount(y, n)
    return x << y if y < n else 0


def _ref_right_logical(x: int, y: int, n: int, signed: bool) -> int:
    y = _unsigned_amount(y, n)
    return (x % (1 << n)) >> y if y < n else 0


def _ref_right_arithmetic(x: int, y: int, n: int, signed: bool) -> int:
    y = _unsigned_amount(y, n)
    u = x % (1 << n)
    as_signed = u - (1 << n) if u >= 1 << (n - 1) else u
    return as_signed >> min(y, n - 1)  # Python's >> on negative ints is arithmetic


def _shift_specs() -> list[PrimSpec]:
    out = []
    for name, fn, ref in (
            ("shift_left", bits.shift_left, _ref_left),
            ("shift_right_logical", bits.shift_right_logical, _ref_right_logical),
            ("shift_right_arithmetic", bits.shift_right_arithmetic, _ref_right_arithmetic)):
        for dt in INT_DTYPES:
            out.append(PrimSpec(name, fn, _on_python_ints(ref), shift_args(dt),
                                diff_argnums=(), smooth=False, label=np.dtype(dt).name))
    return out


def _bitcast_specs() -> list[PrimSpec]:
    pairs = ((np.float32, np.uint32), (np.uint32, np.float32), (np.float64, np.uint64),
             (np.int64, np.float64), (np.float16, np.int16), (np.uint8, np.int8))
    out = []
    for src, dst in pairs:
        def fn(x, dst=dst):
            return bits.bitcast_convert_type(x, new_dtype=dst)

        def ref(x, dst=dst):
            return np.asarray(x).view(dst)
        # Float sources are finite (the vmap harness scales float examples, which would warn
        # on NaN and inf); their bit patterns are tested in tests/test_random.py.
        args = shapes().flatmap(lambda s, src=src: _full_range(s, src).map(
            lambda a: (np.where(np.isfinite(a), a, 1.5).astype(a.dtype) if a.dtype.kind == "f"
                       else a,)))
        out.append(PrimSpec("bitcast_convert_type", fn, ref, args, diff_argnums=(),
                            smooth=False,
                            label=f"{np.dtype(src).name}->{np.dtype(dst).name}"))
    return out


def _threefry_reference(k1: np.ndarray, k2: np.ndarray, x0: np.ndarray,
                        x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 (20 rounds) written out on whole arrays in uint64 arithmetic reduced
    modulo 2**32 (the spec of Salmon et al., independent of the chunked in-place impl)."""
    m = np.uint64(0xFFFFFFFF)
    k1, k2, x0, x1 = (a.astype(np.uint64) for a in np.broadcast_arrays(k1, k2, x0, x1))
    ks = [k1, k2, k1 ^ k2 ^ np.uint64(0x1BD11BDA)]
    rotations = [(13, 15, 26, 6), (17, 29, 16, 24)]
    x0, x1 = (x0 + ks[0]) & m, (x1 + ks[1]) & m
    for i in range(5):
        for r in rotations[i % 2]:
            x0 = (x0 + x1) & m
            x1 = (((x1 << np.uint64(r)) | (x1 >> np.uint64(32 - r))) & m) ^ x0
        x0 = (x0 + ks[(i + 1) % 3]) & m
        x1 = (x1 + ks[(i + 2) % 3] + np.uint64(i + 1)) & m
    return x0.astype(np.uint32), x1.astype(np.uint32)


@st.composite
def threefry_args(draw) -> tuple:
    """Key words (scalars, or arrays broadcasting with the counters) and counter words."""
    s0, s1 = draw(broadcast_pair())
    kshape, xshape = draw(st.sampled_from([(), s0])), s1
    k1, k2 = draw(_full_range(kshape, np.uint32)), draw(_full_range(kshape, np.uint32))
    x0 = draw(_full_range(xshape, np.uint32))
    x1 = draw(_full_range(xshape if draw(st.booleans()) else (), np.uint32))
    return k1, k2, x0, x1


def _threefry_specs() -> list[PrimSpec]:
    return [PrimSpec("threefry2x32", lambda *a, i=i: bits.threefry2x32(*a)[i],
                     lambda *a, i=i: _threefry_reference(*a)[i], threefry_args(),
                     diff_argnums=(), smooth=False, label=f"word{i}") for i in (0, 1)]


SPECS: list[PrimSpec] = [*_shift_specs(), *_bitcast_specs(), *_threefry_specs()]
