"""Bit-level primitives on integers: shifts, bit casts and the Threefry-2x32 block function
(the building blocks of ``functx.random``'s counter-based generator).

Every result is defined for every input, so every backend gives the same bits:

* ``shift_left(x, y)``: ``x << y``; 0 where ``y`` is at least the bit width of ``x``'s dtype.
* ``shift_right_logical(x, y)``: ``x >> y`` filling with zeros (also for signed ``x``, whose
  bits are shifted as if unsigned); 0 where ``y`` is at least the bit width.
* ``shift_right_arithmetic(x, y)``: ``x >> y`` filling with copies of the sign bit (also for
  unsigned ``x``, whose top bit is then the "sign"); where ``y`` is at least the bit width
  every bit is the sign bit (0 or -1).
* ``bitcast_convert_type(x, new_dtype)``: the bits of each element read as another dtype of
  the same width (NumPy's ``view``): ``f32 -> u32`` gives the IEEE-754 bit pattern.
* ``threefry2x32(k1, k2, x0, x1)``: the Threefry-2x32 block function with 20 rounds (Salmon
  et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), on uint32 words with
  wrapping arithmetic; two results. It is a primitive, not a composite of the ones above,
  for speed and memory: its implementation works in place on cache-sized chunks (on NumPy
  about ten times faster than 130 separate full-size operations, and with two outputs and
  one buffer of memory).

Shift amounts follow XLA rather than C: ``y`` has ``x``'s dtype (both broadcast) and a
negative signed ``y`` counts as its unsigned reinterpretation, i.e. as an out-of-range shift.
None of these primitives is differentiable: their VJPs are zero, and so are their JVPs.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from functx.errors import DTypeError
from functx.ir import AbstractArray
from functx.primitives._batching import elementwise_batch, to_front, unary_batch
from functx.primitives._numba import njit_variant, numba_or_none
from functx.primitives._util import broadcast_shapes, fmt, same_dtypes
from functx.registry import Primitive
from functx.tracing import bind


def _require_integer(name: str, *avals: AbstractArray) -> None:
    """Check the operands are (non-bool) integers.

    Raises:
        DTypeError: naming the primitive and the operands.
    """
    for a in avals:
        if np.dtype(a.dtype).kind not in "iu":
            raise DTypeError(
                f"{name} needs integer operands (signed or unsigned, not bool) but got "
                f"{fmt(avals)}. Convert with x.astype(np.uint32) (or another integer dtype) "
                "first; to get at the bits of a float, use bitcast_convert_type.")


def _unsigned(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def _signed(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"i{dtype.itemsize}")


# -- shifts ------------------------------------------------------------------------------------

def _shift_aval(name: str) -> Callable:
    def rule(x: AbstractArray, y: AbstractArray) -> AbstractArray:
        _require_integer(name, x, y)
        dtype = same_dtypes(name, x, y)
        shape = broadcast_shapes(name, x.shape, y.shape)
        return AbstractArray(shape, dtype, x.weak_type and y.weak_type)
    return rule


def _operands(xp: Any, x: Any, y: Any) -> tuple[Any, Any, np.dtype]:
    """``x`` and ``y`` as arrays of one dtype: a Python scalar takes the other's dtype."""
    if isinstance(x, (bool, int)) and not isinstance(y, (bool, int)):
        y = xp.asarray(y)
        x = xp.asarray(x, dtype=y.dtype)
    else:
        x = xp.asarray(x)
        y = xp.asarray(y, dtype=x.dtype) if isinstance(y, (bool, int)) else xp.asarray(y)
    if x.dtype.kind not in "iu" or x.dtype != y.dtype:
        raise TypeError("shifts need integer operands of one dtype")  # explained by the rule
    return x, y, x.dtype


def _make_shift_impl(kind: str) -> Callable:
    """The generic implementation of a shift (``kind``: left, logical or arithmetic).

    The bits are shifted through views of one signedness (``>>`` on an unsigned view is
    logical, on a signed view arithmetic), so no element is copied to convert it. The array
    module only ever sees amounts below the width; out-of-range amounts are handled here.
    """
    def impl(xp, x, y):
        x, y, dt = _operands(xp, x, y)
        n = dt.itemsize * 8
        vt = _signed(dt) if kind == "arithmetic" else _unsigned(dt)
        xv = x.view(vt)
        yu = y.view(_unsigned(dt))
        op = xp.left_shift if kind == "left" else xp.right_shift
        if xp is np and yu.ndim == 0:  # a host scalar amount: decide once, not per element
            s = int(yu)
            if s >= n and kind != "arithmetic":
                return np.zeros(np.broadcast_shapes(x.shape, y.shape), dt)
            return op(xv, vt.type(min(s, n - 1))).view(dt)
        amount = xp.minimum(yu, _unsigned(dt).type(n - 1)).astype(vt, copy=False)
        shifted = op(xv, amount)
        if kind != "arithmetic":  # an arithmetic shift by n - 1 already gives all sign bits
            shifted = xp.where(yu < n, shifted, vt.type(0)).astype(vt, copy=False)
        return shifted.view(dt)
    return impl


def _shift(name: str, kind: str, doc: str) -> tuple[Primitive, Callable]:
    """A broadcasting shift primitive with every rule, and its wrapper."""
    p = Primitive(name)
    p.def_abstract_eval(_shift_aval(name))
    p.def_impl(_make_shift_impl(kind))
    p.def_zero_vjp()
    p.def_batch(elementwise_batch(p))

    def wrapper(x: Any, y: Any) -> Any:
        return bind(p, x, y)
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = doc
    return p, wrapper


shift_left_p, shift_left = _shift(
    "shift_left", "left",
    """``x << y`` elementwise for integers of one dtype (broadcasting); 0 where ``y`` is not
    below the bit width. Example: ``shift_left(np.uint32(1), np.uint32(31))`` is 2**31.""")
shift_right_logical_p, shift_right_logical = _shift(
    "shift_right_logical", "logical",
    """``x >> y`` filling with zeros (signed ``x`` shifted as its unsigned bits); 0 where
    ``y`` is not below the bit width. Example: ``shift_right_logical(np.int8(-1),
    np.int8(4))`` is 15.""")
shift_right_arithmetic_p, shift_right_arithmetic = _shift(
    "shift_right_arithmetic", "arithmetic",
    """``x >> y`` filling with the sign bit (unsigned ``x`` shifted as its signed bits);
    all sign bits where ``y`` is not below the bit width. Example:
    ``shift_right_arithmetic(np.int8(-128), np.int8(9))`` is -1.""")


# -- bitcast_convert_type -----------------------------------------------------------------------

bitcast_convert_type_p = Primitive("bitcast_convert_type")


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_aval(x: AbstractArray, *, new_dtype: np.dtype) -> AbstractArray:
    old = np.dtype(x.dtype)
    if old.kind not in "iuf" or new_dtype.kind not in "iuf":
        raise DTypeError(
            f"bitcast_convert_type reinterprets integers and real floats only, but was asked "
            f"to turn {x} into {new_dtype.name}. Convert bools and complex numbers with "
            "convert_element_type (x.astype(...)) instead.")
    if old.itemsize != new_dtype.itemsize:
        raise DTypeError(
            f"bitcast_convert_type needs dtypes of one width, but {x} has {old.itemsize * 8}-"
            f"bit elements and {new_dtype.name} {new_dtype.itemsize * 8}-bit ones. Bitcast "
            f"to a dtype of the same width (e.g. {old.name} <-> {_unsigned(old).name}).")
    return AbstractArray(x.shape, new_dtype, False)


def _bitcast_impl(xp, x, *, new_dtype):
    x = xp.asarray(x)
    if x.dtype.itemsize != new_dtype.itemsize:
        raise TypeError("bitcast_convert_type needs one width")  # explained by the rule
    return x.view(new_dtype)


bitcast_convert_type_p.def_impl(_bitcast_impl)
bitcast_convert_type_p.def_zero_vjp()
bitcast_convert_type_p.def_batch(unary_batch(bitcast_convert_type_p))


def bitcast_convert_type(x: Any, *, new_dtype: Any) -> Any:
    """The bits of each element of ``x`` read as ``new_dtype`` (NumPy's ``x.view(new_dtype)``).

    Both dtypes must be integers or real floats of the same width. No gradient flows.

    Example:
        >>> bitcast_convert_type(np.float32(1.0), new_dtype=np.uint32)   # 0x3F800000
        array(1065353216, dtype=uint32)

    Raises:
        DTypeError: a bool or complex dtype, or dtypes of different widths.
    """
    return bind(bitcast_convert_type_p, x, new_dtype=np.dtype(new_dtype))


# -- threefry2x32 --------------------------------------------------------------------------------

THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
THREEFRY_PARITY = 0x1BD11BDA  # the key schedule's parity constant for 32-bit words
_CHUNK = 1 << 16  # elements per in-place pass on the host (the working set stays in cache)
NUMBA_MIN_SIZE = 1 << 14  # below this the NumPy passes run (no compile, no thread start-up)

threefry2x32_p = Primitive("threefry2x32", multiple_results=True)


@threefry2x32_p.def_abstract_eval
def _threefry_aval(k1: AbstractArray, k2: AbstractArray, x0: AbstractArray,
                   x1: AbstractArray) -> tuple[AbstractArray, AbstractArray]:
    avals = (k1, k2, x0, x1)
    if any(np.dtype(a.dtype) != np.uint32 for a in avals):
        raise DTypeError(f"threefry2x32 needs uint32 key and counter words but got "
                         f"{fmt(avals)}. Convert them with x.astype(np.uint32).")
    shape = broadcast_shapes("threefry2x32", *(a.shape for a in avals))
    out = AbstractArray(shape, np.dtype(np.uint32), False)
    return out, out


_ROTATIONS = np.array(THREEFRY_ROTATIONS, np.uint32)
_compiled: dict = {}  # "block", "threefry", "split" -> the Numba function


def _block_compiled() -> Any:
    """The block function on one (key, counter) pair as a Numba function that the kernels
    below inline (``(a, b)`` after the 20 rounds and the key injections)."""
    block = _compiled.get("block")
    if block is None:
        numba = numba_or_none()
        u32 = np.uint32

        @numba.njit(inline="always", cache=True)
        def block(ka, kb, x0, x1):  # pragma: no cover (compiled)
            ks = (ka, kb, u32(ka ^ kb ^ u32(0x1BD11BDA)))
            a = u32(x0 + ka)
            b = u32(x1 + kb)
            for r in range(5):
                for j in range(4):
                    s = _ROTATIONS[r % 2, j]
                    a = u32(a + b)
                    b = u32(u32(u32(b << s) | u32(b >> u32(u32(32) - s))) ^ a)
                a = u32(a + ks[(r + 1) % 3])
                b = u32(u32(b + ks[(r + 2) % 3]) + u32(r + 1))
            return a, b
        _compiled["block"] = block
    return block


def _threefry_compiled() -> Any:
    """The Numba kernel of the block function (one pass, compiled once, cached on disk).
    Operands are full-size or single-element (``step`` 1 or 0). One thread: LLVM
    vectorises the rounds to about 4 ns per element, as fast as the memory it writes, so
    threads would add only their start-up (and lose badly on a busy machine)."""
    kernel = _compiled.get("threefry")
    if kernel is None:
        block = _block_compiled()
        numba = numba_or_none()

        @numba.njit(cache=True)
        def kernel(k1, k2, x0, x1, steps, y0, y1):  # pragma: no cover (compiled)
            s1, s2, s3, s4 = steps[0], steps[1], steps[2], steps[3]
            for i in range(y0.size):
                y0[i], y1[i] = block(k1[i * s1], k2[i * s2], x0[i * s3], x1[i * s4])
        _compiled["threefry"] = kernel
    return kernel


def _split_compiled() -> Any:
    """The Numba kernel of ``split(key_i, num)`` for many keys: the block function of key
    ``(k1[i], k2[i])`` on the counters ``(0, c)``, ``c`` in ``counters``, into row
    ``y0[r, i]``, ``y1[r, i]`` (contiguous in ``i``, so LLVM vectorises the rounds across
    keys, about 3 ns per block). One core: spreading the keys over the cores was 5x slower
    on the shared 2-core machine, as for ``_threefry_compiled``."""
    kernel = _compiled.get("split")
    if kernel is None:
        block = _block_compiled()
        numba = numba_or_none()
        u32 = np.uint32

        @numba.njit(cache=True)
        def kernel(k1, k2, counters, y0, y1):  # pragma: no cover (compiled)
            for row in range(counters.size):
                c = u32(counters[row])
                for i in range(k1.size):
                    y0[row, i], y1[row, i] = block(k1[i], k2[i], u32(0), c)
        _compiled["split"] = kernel
    return kernel


def threefry_split(xp: Any, k1: Any, k2: Any, num: int,
                   which: tuple[int, ...] | None = None) -> tuple[Any, Any]:
    """``split(key_i, num)`` for many keys ``(k1[i], k2[i])`` (1-d uint32 arrays): the words
    ``(y0[c, i], y1[c, i])`` of the ``c``-th key ``jax.random.split`` gives for key ``i`` (the
    block function on the counters ``(0, c)``), each of shape ``(num, m)``; with ``which``,
    only those keys (rows in that order). Large NumPy inputs take one compiled loop."""
    m = k1.shape[0]
    which = tuple(range(num)) if which is None else tuple(which)
    if xp is np and m * len(which) >= NUMBA_MIN_SIZE and numba_or_none() is not None:
        y0, y1 = np.empty((len(which), m), np.uint32), np.empty((len(which), m), np.uint32)
        _split_compiled()(
            np.ascontiguousarray(k1), np.ascontiguousarray(k2), np.array(which, np.int64),
            y0, y1)
        return y0, y1
    counters = xp.asarray(np.array(which, np.uint32)[:, None])
    return threefry2x32_impl(xp, k1[None, :], k2[None, :], xp.zeros((1, 1), np.uint32),
                             counters)


def threefry2x32_impl(xp, k1, k2, x0, x1):
    u32 = np.dtype(np.uint32)
    ops = [xp.asarray(a) for a in (k1, k2, x0, x1)]
    if any(a.dtype != u32 for a in ops):
        raise TypeError("threefry2x32 needs uint32 operands")  # explained by the rule
    shape = np.broadcast_shapes(*(a.shape for a in ops))
    n = int(np.prod(shape, dtype=np.int64))
    if xp is np and n >= NUMBA_MIN_SIZE and numba_or_none() is not None:
        # Single-element operands are read at index 0 (step 0); others at full size.
        flat = [a.reshape(-1) if a.size == 1 else
                np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1) for a in ops]
        steps = np.array([int(a.size == n) for a in flat], np.int64)
        y0, y1 = np.empty(n, u32), np.empty(n, u32)
        _threefry_compiled()(*flat, steps, y0, y1)
        return y0.reshape(shape), y1.reshape(shape)
    # Scalars stay scalars; arrays become flat operands of the full size.
    k1, k2, x0, x1 = (a.reshape(()) if a.size == 1 else
                      xp.ascontiguousarray(xp.broadcast_to(a, shape)).reshape(-1) for a in ops)
    ks = (k1, k2, k1 ^ k2 ^ u32.type(THREEFRY_PARITY))
    y0, y1 = xp.empty(n, u32), xp.empty(n, u32)
    chunk = _CHUNK if xp is np else max(n, 1)
    tmp = xp.empty(min(chunk, n), u32)

    def part(a: Any, lo: int, hi: int) -> Any:
        return a if a.ndim == 0 else a[lo:hi]

    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        a, b, t = y0[lo:hi], y1[lo:hi], tmp[:hi - lo]
        xp.add(part(x0, lo, hi), part(ks[0], lo, hi), out=a)
        xp.add(part(x1, lo, hi), part(ks[1], lo, hi), out=b)
        for i in range(5):
            for r in THREEFRY_ROTATIONS[i % 2]:
                xp.add(a, b, out=a)                      # a += b
                xp.left_shift(b, u32.type(r), out=t)     # b = rotl(b, r) ^ a
                xp.right_shift(b, u32.type(32 - r), out=b)
                xp.bitwise_or(b, t, out=b)
                xp.bitwise_xor(b, a, out=b)
            xp.add(a, part(ks[(i + 1) % 3], lo, hi), out=a)  # key injection i + 1
            xp.add(b, part(ks[(i + 2) % 3], lo, hi), out=b)
            xp.add(b, u32.type(i + 1), out=b)
    return y0.reshape(shape), y1.reshape(shape)


threefry2x32_p.def_impl(threefry2x32_impl)
threefry2x32_p.def_zero_vjp()
_threefry_elementwise_batch = elementwise_batch(threefry2x32_p)


@threefry2x32_p.def_batch
def _threefry_batch(args, dims):
    outs, d = _threefry_elementwise_batch(args, dims)  # elementwise in all four operands
    return outs, [d, d]


def threefry2x32(k1: Any, k2: Any, x0: Any, x1: Any) -> tuple[Any, Any]:
    """The Threefry-2x32 block function (20 rounds) of key ``(k1, k2)`` and counter
    ``(x0, x1)``, elementwise over the broadcast of the four uint32 operands.

    Returns:
        The two uint32 output words. The Random123 known answers hold, e.g. key
        ``(0, 0)`` and counter ``(0, 0)`` give ``(0x6b200159, 0x99ba4efe)``.

    Raises:
        DTypeError: an operand is not uint32. ShapeError: the shapes do not broadcast.
    """
    y0, y1 = bind(threefry2x32_p, k1, k2, x0, x1)
    return y0, y1


# -- random_bits ---------------------------------------------------------------------------------
#
# The bits functx.random draws: element i (C order) of an array of ``shape`` drawn with key
# (k1, k2) is threefry2x32((k1, k2), (hi(i), lo(i))) with i read as a 64-bit counter, the two
# output words xor-ed (32 bits) or concatenated, first word high (64 bits). As a primitive the
# counters are implicit: no counter arrays are made, and a trace holds nothing of the size of
# the request. Keys may carry leading batch axes (vmap): each key draws its own array.

random_bits_p = Primitive("random_bits")


@random_bits_p.def_abstract_eval
def _random_bits_aval(k1: AbstractArray, k2: AbstractArray, *, shape: tuple[int, ...],
                      width: int) -> AbstractArray:
    if np.dtype(k1.dtype) != np.uint32 or np.dtype(k2.dtype) != np.uint32:
        raise DTypeError(f"random_bits needs uint32 key words but got {fmt((k1, k2))}.")
    if tuple(k1.shape) != tuple(k2.shape):
        raise DTypeError(f"random_bits needs key words of one shape but got {fmt((k1, k2))}.")
    if width not in (32, 64):
        raise ValueError(f"random_bits draws 32 or 64 bits, not {width}.")
    return AbstractArray(tuple(k1.shape) + tuple(shape), np.dtype(f"u{width // 8}"), False)


_random_bits_kernels: dict[tuple[int, bool], Any] = {}
PARALLEL_MIN_SIZE = 1 << 18  # from this many elements random_bits runs on all cores


def _random_bits_compiled(width: int, parallel: bool) -> Any:
    """The Numba kernel: the block function of every counter and the words' combination,
    in one pass (about 4 ns per element on one core: LLVM vectorises the rounds)."""
    kernel = _random_bits_kernels.get((width, parallel))
    if kernel is not None:
        return kernel
    numba = numba_or_none()
    u32, u64 = np.uint32, np.uint64
    wide = width == 64

    def kernel(k1, k2, n, out):  # pragma: no cover (compiled)
        for b in range(k1.size):
            ka, kb = k1[b], k2[b]
            ks = (ka, kb, u32(ka ^ kb ^ u32(0x1BD11BDA)))
            for i in numba.prange(n):
                a = u32(u32(i >> 32) + ka)
                c = u32(u32(i & 0xFFFFFFFF) + kb)
                for r in range(5):
                    for j in range(4):
                        s = _ROTATIONS[r % 2, j]
                        a = u32(a + c)
                        c = u32(u32(u32(c << s) | u32(c >> u32(u32(32) - s))) ^ a)
                    a = u32(a + ks[(r + 1) % 3])
                    c = u32(u32(c + ks[(r + 2) % 3]) + u32(r + 1))
                if wide:
                    out[b * n + i] = (u64(a) << u64(32)) | u64(c)
                else:
                    out[b * n + i] = u32(a ^ c)
    kernel = njit_variant(kernel, f"{width}_{'parallel' if parallel else 'serial'}",
                          parallel=parallel)
    _random_bits_kernels[(width, parallel)] = kernel
    return kernel


def random_bits_impl(xp: Any, k1: Any, k2: Any, *, shape: tuple[int, ...], width: int) -> Any:
    k1, k2 = xp.asarray(k1), xp.asarray(k2)
    lead = tuple(k1.shape)
    n = int(np.prod(shape, dtype=np.int64))
    out_dtype = np.dtype(f"u{width // 8}")
    if xp is np and n * max(k1.size, 1) >= NUMBA_MIN_SIZE and numba_or_none() is not None:
        out = np.empty(k1.size * n, out_dtype)
        parallel = out.size >= PARALLEL_MIN_SIZE
        _random_bits_compiled(width, parallel)(k1.reshape(-1), k2.reshape(-1), n, out)
        return out.reshape(lead + tuple(shape))
    idx = xp.arange(n, dtype=np.uint64)
    hi = (idx >> np.uint64(32)).astype(np.uint32)
    lo = idx.astype(np.uint32)
    kb = (slice(None),) * len(lead) + (None,)  # keys against the flat counters
    y0, y1 = threefry2x32_impl(xp, k1[kb], k2[kb], hi, lo)
    if width == 64:
        out = (y0.astype(np.uint64) << np.uint64(32)) | y1.astype(np.uint64)
    else:
        out = y0 ^ y1
    return out.reshape(lead + tuple(shape))


random_bits_p.def_impl(random_bits_impl)
random_bits_p.def_zero_vjp()
random_bits_p.def_jvp(lambda tangents, primals, out, **params: None)


@random_bits_p.def_batch
def _random_bits_batch(args, dims, *, shape, width):
    size = next(np.shape(x)[d] for x, d in zip(args, dims) if d is not None)
    k1, k2 = (to_front(x, d, size) for x, d in zip(args, dims))
    return bind(random_bits_p, k1, k2, shape=shape, width=width), 0


def random_bits(k1: Any, k2: Any, shape: tuple[int, ...], width: int) -> Any:
    """Uniform random bits (uint32 or uint64 of ``width``) of ``shape`` from the key words
    ``(k1, k2)`` (0-d, or with leading batch axes); see the comment above."""
    return bind(random_bits_p, k1, k2, shape=tuple(int(d) for d in shape), width=int(width))
