"""Strided operands for the flash attention kernels (_flash.py, _flash32.py): an operand
``lead + (rows, E)`` whose last axis is contiguous is read (or written) in place when its
batch dims fold into at most two levels of strides, ``n = n1 * nb + n2`` over the flattened
batch index (element offset ``n1 * s1 + n2 * s2 + row * rs + col``); otherwise it is copied
contiguous. Outputs are allocated in their matching input's memory order, so that a later
transpose back (``(B, H, L, E) -> (B, L, H, E)``) is free. Importing this module needs no
CuPy.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

LOG2E = 1.4426950408889634  # the kernels' exp2f takes logits scaled by log2(e)

Layout = tuple  # (nb, s1, s2, rs): Python ints, strides in elements

# The kernels' side, prepended to both families' sources (none of raw_function's
# placeholders): the layout of an operand and the cp.async group helpers.
CUDA = r"""
// Where an operand's rows are (elements): batch entry n = n1 * nb + n2 (nb common to all
// operands) starts at n1 * s1 + n2 * s2, its row r at r * rs after that; a row's D
// elements are contiguous.
struct fx_lay {
    long long s1, s2;
    int rs;  // (|rs| < 2**31: the host checks)
};

// Offset (elements) of row `row` of batch entry n1 * nb + n2.
__device__ __forceinline__ long long fx_off(const fx_lay& a, int n1, int n2, long long row) {
    return n1 * a.s1 + n2 * a.s2 + row * a.rs;
}

// cp.async groups (both kernel families stage their tiles with cp.async): commit this
// thread's pending copies as a group; wait until at most N groups are pending.
__device__ __forceinline__ void fx_cp_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void fx_cp_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
"""


def batch_layout(shape: Sequence[int], strides: Sequence[int]) -> Layout | None:
    """The two-level description of an operand ``lead + (rows, E)``, or None.

    Args:
        shape: the logical shape, at least 2-d.
        strides: its strides in elements (not bytes), as many as ``shape``.

    Returns:
        ``(nb, s1, s2, rs)``: batch entry ``n`` (row-major over ``lead``) starts at element
        ``(n // nb) * s1 + (n % nb) * s2`` and its row ``r`` at ``r * rs`` after that; or
        None when the last axis is not contiguous (stride 1) or the batch dims need more
        than two levels. Dims of size 1 ignore their stride (taken as 0).

    Example:
        >>> batch_layout((2, 4, 10, 8), (320, 8, 32, 1))  # (2, 10, 4, 8) transposed
        (4, 320, 8, 32)
    """
    shape, strides = tuple(int(s) for s in shape), tuple(int(s) for s in strides)
    if len(shape) < 2 or len(strides) != len(shape):
        return None
    if shape[-1] > 1 and strides[-1] != 1:
        return None
    rs = strides[-2] if shape[-2] > 1 else 0
    groups: list = []  # [size, stride], outermost first, merged where mergeable
    for size, stride in zip(shape[:-2], strides[:-2]):
        if size == 1:
            continue
        if groups and groups[-1][1] == size * stride:
            groups[-1] = [groups[-1][0] * size, stride]
        else:
            groups.append([size, stride])
    if not groups:
        return (1, 0, 0, rs)
    if len(groups) == 1:
        return (1, groups[0][1], 0, rs)
    if len(groups) == 2:
        return (groups[1][0], groups[0][1], groups[1][1], rs)
    return None


def _pointer(a: Any) -> int:
    """The address of ``a``'s first element (CuPy; NumPy for the CPU tests)."""
    if isinstance(a, np.ndarray):
        return int(a.__array_interface__["data"][0])
    return int(a.data.ptr)


def _aligned_layout(a: Any) -> Layout | None:
    """``batch_layout`` of a device array whose data and row starts are 16-byte aligned
    (the kernels' ``cp.async`` and vector accesses), else None."""
    item = np.dtype(a.dtype).itemsize
    if any(s % item for s in a.strides) or _pointer(a) % 16:
        return None
    lay = batch_layout(a.shape, [s // item for s in a.strides])
    if lay is None or any((s * item) % 16 for s in lay[1:]) or abs(lay[3]) >= 2**31:
        return None
    return lay


def with_nb(lay: Layout, nb: int) -> tuple | None:
    """A layout's ``(s1, s2, rs)`` for the kernels' common ``nb`` (batch entry ``n`` at
    ``(n // nb) * s1 + (n % nb) * s2``), or None where it has two levels of another size.

    Example:
        >>> with_nb((1, 512, 0, 8), 4)  # one level (n * 512) as n1 * 2048 + n2 * 512
        (2048, 512, 8)
    """
    n0, s1, s2, rs = lay
    if n0 == nb:
        return (s1, s2, rs)
    if n0 == 1:  # n * s1 = (n // nb) * (nb * s1) + (n % nb) * s1
        return (nb * s1, s1, rs)
    return None


def operands(xp: Any, named: dict) -> tuple:
    """The kernels' operands: each read through its strides where it can be, else a
    16-byte aligned C-contiguous copy.

    Args:
        xp: cupy.
        named: name -> device array ``lead + (rows, E)`` (the same ``lead`` size).

    Returns:
        ``(ops, nb)``: name -> ``(array, (s1, s2, rs))`` and the common ``nb`` (the first
        two-level layout's; an operand with two levels of another size is copied).
    """
    lays = {a: _aligned_layout(x) for a, x in named.items()}
    nb = next((lay[0] for lay in lays.values() if lay is not None and lay[0] > 1), 1)
    ops = {}
    for a, x in named.items():
        st = None if lays[a] is None else with_nb(lays[a], nb)
        if st is None:
            x = xp.ascontiguousarray(x)
            if _pointer(x) % 16:
                x = x.copy()
            lay = _aligned_layout(x)  # (one level: contiguous rows of E, a multiple of 8)
            assert lay is not None and lay[0] == 1, (x.shape, x.strides)
            st = with_nb(lay, nb)
        ops[a] = (x, st)
    return ops, nb


def output_like(xp: Any, a: Any, dtype: Any, nb: int, zero: bool = False) -> tuple:
    """A new array of ``a``'s shape and ``dtype`` laid out in ``a``'s memory order (last
    axis last and contiguous), or C-contiguous where that order has no layout for ``nb``.

    Args:
        xp: cupy.
        a: the matching input (q for out and dq, k for dk, v for dv).
        dtype: the output's dtype.
        nb: the kernels' common ``nb`` (see :func:`operands`).
        zero: zero-filled (an ``atomicAdd`` target) rather than uninitialised.

    Returns:
        ``(array, (s1, s2, rs))``.
    """
    make = xp.zeros if zero else xp.empty
    shape, nd = tuple(a.shape), a.ndim
    order = sorted(range(nd - 1), key=lambda i: -abs(int(a.strides[i]))) + [nd - 1]
    inverse = [order.index(i) for i in range(nd)]
    out = make(tuple(shape[i] for i in order), dtype).transpose(inverse)
    lay = _aligned_layout(out)
    st = None if lay is None else with_nb(lay, nb)
    if st is None:
        out = make(shape, dtype)
        lay = _aligned_layout(out)
        assert lay is not None and lay[0] == 1, (out.shape, out.strides)
        st = with_nb(lay, nb)
    return out, st


def args(st: tuple) -> tuple:
    """Strides ``(s1, s2, rs)`` as the kernels' arguments: int64, int64, int32."""
    s1, s2, rs = st
    return (np.int64(s1), np.int64(s2), np.int32(rs))


def kernel_params(names: Sequence[str]) -> str:
    """The C parameters of the named operands' strides (a kernel wrapper's signature):
    ``long long q_s1, long long q_s2, int q_rs, ...``."""
    return ", ".join(f"long long {a}_s1, long long {a}_s2, int {a}_rs" for a in names)


def kernel_layouts(names: Sequence[str]) -> str:
    """The ``fx_lay`` values built from :func:`kernel_params` (a wrapper's call)."""
    return ", ".join(f"fx_lay{{{a}_s1, {a}_s2, {a}_rs}}" for a in names)


def wrappers(template: str, groups: dict) -> str:
    """``template`` with each key ``@X@`` of ``groups`` replaced by the named operands'
    :func:`kernel_params` and ``@X@_CALL`` by their :func:`kernel_layouts`."""
    for key, names in groups.items():
        template = (template.replace(key + "_CALL", kernel_layouts(names))
                    .replace(key, kernel_params(names)))
    return template


# Kernels allowed more than 48 KiB of dynamic shared memory (a driver call, made once each).
_BIG_SHARED: set = set()


def launch(fn: Any, grid: tuple, threads: int, smem: int, args: tuple) -> None:
    """Launches the flash kernel ``fn`` with ``threads`` threads per block and ``smem``
    bytes of dynamic shared memory (allowing it more than 48 KiB once)."""
    if smem > 48 * 1024 and fn not in _BIG_SHARED:
        fn.max_dynamic_shared_size_bytes = smem
        _BIG_SHARED.add(fn)
    fn(grid, (threads,), args, shared_mem=smem)


def check_sizes(what: str, n: int, L: int, S: int, tile: int) -> None:
    """Raises ValueError where the grid (batch entries x tiles of ``tile`` rows) does not
    fit the kernels' launch."""
    if n >= 2**31 or -(-max(L, S) // tile) >= 65536:
        raise ValueError(f"the {what} kernels support fewer than 2**31 batch entries and "
                         f"fewer than {65536 * tile} queries and keys (got {n}, {L} and "
                         f"{S}).")


def supported(xp: Any, q: Any, k: Any, v: Any, b: Any, softcap: float | None,
              dtypes: tuple, head_dims: tuple) -> bool:
    """Whether a flash family (its ``dtypes`` and ``head_dims``) handles this attention
    call: CuPy arrays, no soft-cap, a 0-d bias, head dims ``E == Ev`` and at least one
    query and one key."""
    if getattr(xp, "__name__", "") != "cupy" or softcap is not None or np.ndim(b) != 0:
        return False
    e = q.shape[-1]
    return (np.dtype(q.dtype) in dtypes and e in head_dims and k.shape[-1] == e
            and v.shape[-1] == e and q.shape[-2] >= 1 and k.shape[-2] >= 1
            and math.prod(q.shape[:-2]) >= 1)


def grad_operands(xp: Any, q: Any, k: Any, v: Any, g: Any, out: Any) -> tuple:
    """The backward's operands as :func:`operands` makes them: q, k, v, ``dout`` (``g``)
    and the forward output ``out`` (where None, q stands in: the kernel does not read it)."""
    named = {"q": q, "k": k, "v": v, "dout": g}
    if out is not None:
        named["out"] = out
    ops, nb = operands(xp, named)
    if out is None:
        ops["out"] = ops["q"]
    return ops, nb


def launch_forward(fn: Any, smem: int, threads: int, tile: int, ops: dict, nb: int, bias: Any,
                   lse: Any, delta: Any, n: int, scale: float, causal: bool, want_out: bool,
                   want_stats: int) -> None:
    """A family's forward kernel ``fn`` (one block of ``threads`` per batch entry and tile of
    ``tile`` queries, ``smem`` bytes of shared memory) on ``ops``: name -> (array, strides)
    for q, k, v, out, dout; ``want_stats`` 0 (none), 1 (lse and delta, computing the
    output again) or 2 (reading it from ``out``)."""
    names = ("q", "k", "v", "out", "dout")
    q, k, v, out, dout = (ops[a][0] for a in names)
    L, S = q.shape[-2], k.shape[-2]
    strides = sum((args(ops[a][1]) for a in names), ())
    launch(fn, (n, -(-L // tile)), threads, smem,
           (q, k, v, bias, out, lse, dout, delta) + strides
           + (np.int32(nb), np.int32(L), np.int32(S), np.float32(scale * LOG2E),
              np.int32(causal), np.int32(want_out), np.int32(want_stats)))
