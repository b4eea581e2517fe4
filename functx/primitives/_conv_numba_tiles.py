"""Register tiles for the direct convolution kernels (:mod:`functx.primitives._conv_numba`).

Numba intrinsics that emit explicit 512-bit LLVM vectors (16 float32 or 8 float64 lanes),
so the kernels' inner steps are a fixed tile of fused multiply-adds whatever width LLVM's
vectorizers would pick (on AVX-512 Xeons they prefer 256 bits). A tile's accumulators live
in a stack buffer (:func:`tile_alloc`, an ``alloca`` in the kernel's entry block) that is
only ever read and written whole vectors at constant offsets, so LLVM's scalar replacement
keeps them in registers across the loops around the steps (checked with
``kernel.inspect_asm``: ``vfmadd231ps`` on ``zmm`` registers, no stack traffic in the loop).
On a machine without AVX-512 LLVM splits the vectors into the widths it has (correct, but
the tiles no longer fit in the registers: :func:`wide_vectors` says which).

* :func:`tile_fwd`: ``FWD_ROWS`` output channels x ``TILE_VECS`` vectors of consecutive
  output positions += one weight per channel x ``TILE_VECS`` vectors of input.
* :func:`tile_dot`: ``DOT_ROWS`` x ``DOT_ROWS`` dot products, one vector of each of
  ``DOT_ROWS`` input rows and ``DOT_ROWS`` kernel rows (``DOT_ROWS ** 2`` accumulators).
* :func:`tile_zero`, :func:`tile_copy`, :func:`tile_accumulate`: clear the accumulators;
  copy them, whole vectors, into a second buffer that the kernel then reads element by
  element; add them, whole vectors, into an array.

Like the kernels, this module imports Numba at its top and is imported on the first
convolution only. Numba's disk cache of the kernels is keyed on ``_conv_numba_kernels.py``
alone: after editing this module, touch that file (or delete its cache) so they recompile.
The tile shape is repeated in ``_conv_numba`` (which must not import Numba), checked by a
test.
"""
from __future__ import annotations

import llvmlite.binding as llvm
import llvmlite.ir as ir
from numba.core import cgutils, config, types
from numba.extending import intrinsic

FWD_ROWS = 4  # output channels of a forward tile
TILE_VECS = 4  # vectors of positions per forward tile row
DOT_ROWS = 4  # input rows and kernel rows of a dot tile
VECTOR_BITS = 512
TILE_SLOTS = max(FWD_ROWS * TILE_VECS, DOT_ROWS * DOT_ROWS)  # vectors per buffer

_I32 = ir.IntType(32)


def wide_vectors() -> bool:
    """Whether Numba compiles for 512-bit vector registers (AVX-512F: 32 of them, room for a
    tile). Elsewhere each vector takes two or four registers and the tiles spill."""
    features = config.CPU_FEATURES or llvm.get_host_cpu_features().flatten()
    return "+avx512f" in features.split(",")


def lanes_of(dtype: types.Type) -> int:
    """Lanes of one vector of ``dtype``."""
    return VECTOR_BITS // dtype.bitwidth


def _vec(context, dtype) -> ir.VectorType:
    return ir.VectorType(context.get_value_type(dtype), lanes_of(dtype))


def _slot(builder, acc, vty, i: int):
    return builder.gep(builder.bitcast(acc, vty.as_pointer()), [ir.Constant(_I32, i)])


def _data(context, builder, aryty, ary, index):
    """The address of ``ary.flat[index]`` (a contiguous 1-d array)."""
    data = context.make_array(aryty)(context, builder, ary).data
    return builder.gep(data, [index])


def _load_vec(builder, ptr, vty, itemsize: int, offset: int = 0):
    if offset:
        ptr = builder.gep(ptr, [ir.Constant(_I32, offset)])
    return builder.load(builder.bitcast(ptr, vty.as_pointer()), align=itemsize)


def _fma(builder, a, b, c):
    """``a * b + c``, one fused multiply-add per lane (``llvm.fma`` on vectors)."""
    vty = a.type
    name = f"llvm.fma.v{vty.count}f{64 if isinstance(vty.element, ir.DoubleType) else 32}"
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vty, [vty] * 3), name)
    return builder.call(fn, [a, b, c])


def _splat(builder, scalar, vty):
    lanes = vty.count
    one = builder.insert_element(ir.Constant(vty, ir.Undefined), scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vty, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, lanes), [0] * lanes))


@intrinsic
def tile_positions(typingctx, zero):
    """Output positions per forward tile row for ``zero``'s dtype (a constant)."""
    count = TILE_VECS * lanes_of(zero)

    def codegen(context, builder, sig, args):
        return ir.Constant(ir.IntType(64), count)
    return types.int64(zero), codegen


@intrinsic
def tile_lanes(typingctx, zero):
    """Lanes of one vector of ``zero``'s dtype (a constant)."""
    count = lanes_of(zero)

    def codegen(context, builder, sig, args):
        return ir.Constant(ir.IntType(64), count)
    return types.int64(zero), codegen


@intrinsic
def tile_alloc(typingctx, zero):
    """A stack buffer of ``TILE_SLOTS`` vectors of ``zero``'s dtype (one per call site, in
    the function's entry block), as a pointer to its first element."""
    def codegen(context, builder, sig, args):
        vty = _vec(context, zero)
        buf = cgutils.alloca_once(builder, ir.ArrayType(vty, TILE_SLOTS))
        buf.align = VECTOR_BITS // 8
        return builder.bitcast(buf, context.get_value_type(zero).as_pointer())
    return types.CPointer(zero)(zero), codegen


@intrinsic
def tile_zero(typingctx, acc):
    """Every accumulator of ``acc`` to zero."""
    def codegen(context, builder, sig, args):
        vty = _vec(context, acc.dtype)
        for i in range(TILE_SLOTS):
            builder.store(ir.Constant(vty, None), _slot(builder, args[0], vty, i))
        return context.get_dummy_value()
    return types.none(acc), codegen


@intrinsic
def tile_copy(typingctx, acc, dst):
    """``dst``'s vectors = ``acc``'s (whole vectors: ``acc`` stays in registers)."""
    def codegen(context, builder, sig, args):
        vty = _vec(context, acc.dtype)
        for i in range(TILE_SLOTS):
            builder.store(builder.load(_slot(builder, args[0], vty, i)),
                          _slot(builder, args[1], vty, i))
        return context.get_dummy_value()
    return types.none(acc, dst), codegen


@intrinsic
def tile_accumulate(typingctx, acc, dst, di):
    """``dst[di + i * lanes : ... + lanes] += acc[i]`` for every accumulator ``i`` (``dst``:
    a contiguous 1-d array)."""
    def codegen(context, builder, sig, args):
        vty = _vec(context, acc.dtype)
        size = acc.dtype.bitwidth // 8
        base = _data(context, builder, sig.args[1], args[1], args[2])
        for i in range(TILE_SLOTS):
            ptr = builder.bitcast(builder.gep(base, [ir.Constant(_I32, i * vty.count)]),
                                  vty.as_pointer())
            total = builder.fadd(builder.load(ptr, align=size),
                                 builder.load(_slot(builder, args[0], vty, i)))
            builder.store(total, ptr, align=size)
        return context.get_dummy_value()
    return types.none(acc, dst, di), codegen


@intrinsic
def tile_fwd(typingctx, acc, x, xi, w, wi):
    """``acc[b, v] += w[wi + b] * x[xi + v * lanes : ... + lanes]`` for ``b <
    FWD_ROWS``, ``v < TILE_VECS`` (``x``, ``w``: contiguous 1-d arrays)."""
    def codegen(context, builder, sig, args):
        accp, xa, xidx, wa, widx = args
        dtype = acc.dtype
        vty = _vec(context, dtype)
        size = dtype.bitwidth // 8
        px = _data(context, builder, sig.args[1], xa, xidx)
        pw = _data(context, builder, sig.args[3], wa, widx)
        xs = [_load_vec(builder, px, vty, size, v * vty.count) for v in range(TILE_VECS)]
        for b in range(FWD_ROWS):
            ws = _splat(builder, builder.load(builder.gep(pw, [ir.Constant(_I32, b)])), vty)
            for v in range(TILE_VECS):
                slot = _slot(builder, accp, vty, b * TILE_VECS + v)
                builder.store(_fma(builder, ws, xs[v], builder.load(slot)), slot)
        return context.get_dummy_value()
    return types.none(acc, x, xi, w, wi), codegen


@intrinsic
def tile_dot(typingctx, acc, x, xi, xs, w, wi, ws):
    """``acc[i, q] += x[xi + i xs : ... + lanes] * w[wi + q ws : ... + lanes]`` (elementwise;
    summed by the caller after the loop) for ``i, q < DOT_ROWS`` (rows ``xs`` and ``ws``
    apart: two addresses and two strides in registers, not eight addresses)."""
    def codegen(context, builder, sig, args):
        accp, xa, xidx, xstep, wa, widx, wstep = args
        dtype = acc.dtype
        vty = _vec(context, dtype)
        size = dtype.bitwidth // 8
        px = _data(context, builder, sig.args[1], xa, xidx)
        pw = _data(context, builder, sig.args[4], wa, widx)
        xs_, ws_ = [], []
        for i in range(DOT_ROWS):
            step = ir.Constant(xstep.type, i)
            xs_.append(_load_vec(builder, builder.gep(px, [builder.mul(xstep, step)]), vty, size))
            ws_.append(_load_vec(builder, builder.gep(pw, [builder.mul(wstep, step)]), vty, size))
        for i in range(DOT_ROWS):
            for q in range(DOT_ROWS):
                slot = _slot(builder, accp, vty, i * DOT_ROWS + q)
                builder.store(_fma(builder, xs_[i], ws_[q], builder.load(slot)), slot)
        return context.get_dummy_value()
    return types.none(acc, x, xi, xs, w, wi, ws), codegen
