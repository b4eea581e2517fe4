"""Collectives across the GPUs of one process, on NCCL (``cupy.cuda.nccl``).

``pmap`` runs one member of the mapped axis per GPU and calls these with each GPU's
operand (``xs[k]`` on ``device_ids[k]``, in the order of the axis). One communicator
clique per tuple of devices is made once with ``NcclCommunicator.initAll`` and cached.
Each call enqueues one NCCL operation per GPU on that GPU's current CuPy stream, between
``groupStart`` and ``groupEnd`` (NCCL's rule for driving several GPUs from one thread), so
it is ordered after the kernels that produced the operands and before those that read the
results; nothing here synchronises the host.

Layout: NCCL works on flat contiguous buffers. ``all_gather`` gathers along a new leading
axis and moves it into place; ``psum_scatter`` moves the scattered axis to the front (a
contiguous copy) so that each member's block is contiguous; ``all_to_all`` and
``ppermute`` are grouped point-to-point ``send``/``recv`` (NCCL >= 2.7).

Complex operands travel as pairs of reals (sums only); bool as uint8. CuPy is imported
when a collective first runs, never at ``import functx``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

_COMMS: dict[tuple, list] = {}


def _modules() -> tuple:
    import cupy
    from cupy.cuda import nccl

    return cupy, nccl


def communicators(device_ids: Sequence[int]) -> list:
    """The NCCL communicators of ``device_ids`` (rank k on device_ids[k]), made once."""
    key = tuple(int(d) for d in device_ids)
    comms = _COMMS.get(key)
    if comms is None:
        _, nccl = _modules()
        comms = _COMMS[key] = nccl.NcclCommunicator.initAll(list(key))
    return comms


def _nccl_dtype(nccl: Any, dtype: np.dtype) -> int:
    table = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
             "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
             "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64",
             "bfloat16": "NCCL_BFLOAT16"}
    name = table.get(np.dtype(dtype).name)
    code = getattr(nccl, name, None) if name else None
    if code is None:
        raise TypeError(f"NCCL has no data type for {np.dtype(dtype)} in this CuPy/NCCL "
                        "build; cast the operand (e.g. to float32) before the collective.")
    return code


def _as_wire(cupy: Any, x: Any, reducing_max: bool = False) -> Any:
    """``x`` contiguous, in a dtype NCCL carries (complex as real pairs, bool as uint8)."""
    x = cupy.ascontiguousarray(x)
    if x.dtype.kind == "c":
        if reducing_max:
            raise TypeError("pmax/pmin of complex values are undefined.")
        return x.view(x.real.dtype)
    if x.dtype == np.bool_:
        return x.view(np.uint8)
    return x


def _from_wire(x: Any, dtype: np.dtype) -> Any:
    return x.view(dtype) if x.dtype != dtype else x


def _stream(cupy: Any) -> int:
    return cupy.cuda.get_current_stream().ptr


def _all_reduce(xs: list, ids: list, op_name: str) -> list:
    cupy, nccl = _modules()
    comms = communicators(ids)
    op = getattr(nccl, op_name)
    sends, recvs = [], []
    for x, d in zip(xs, ids):
        with cupy.cuda.Device(d):
            w = _as_wire(cupy, x, reducing_max=op_name != "NCCL_SUM")
            sends.append(w)
            recvs.append(cupy.empty_like(w))
    nccl.groupStart()
    try:
        for comm, s, r, d in zip(comms, sends, recvs, ids):
            with cupy.cuda.Device(d):
                comm.allReduce(s.data.ptr, r.data.ptr, s.size, _nccl_dtype(nccl, s.dtype), op,
                               _stream(cupy))
    finally:
        nccl.groupEnd()
    return [_from_wire(r, x.dtype).reshape(x.shape) for r, x in zip(recvs, xs)]


def psum(xs: list, ids: list, *, axis_name: tuple) -> list:
    """Sum over the GPUs: ncclAllReduce(sum)."""
    return _all_reduce(xs, ids, "NCCL_SUM")


def pmax(xs: list, ids: list, *, axis_name: tuple) -> list:
    """Maximum over the GPUs: ncclAllReduce(max)."""
    return _all_reduce(xs, ids, "NCCL_MAX")


def pmin(xs: list, ids: list, *, axis_name: tuple) -> list:
    """Minimum over the GPUs: ncclAllReduce(min)."""
    return _all_reduce(xs, ids, "NCCL_MIN")


def all_gather(xs: list, ids: list, *, axis_name: tuple, axis: int, tiled: bool,
               axis_size: int) -> list:
    """ncclAllGather into (n, *shape), then the gathered axis moved to ``axis``."""
    cupy, nccl = _modules()
    comms = communicators(ids)
    n = len(xs)
    sends, recvs = [], []
    for x, d in zip(xs, ids):
        with cupy.cuda.Device(d):
            w = _as_wire(cupy, x)
            sends.append(w)
            recvs.append(cupy.empty((n,) + w.shape, w.dtype))
    nccl.groupStart()
    try:
        for comm, s, r, d in zip(comms, sends, recvs, ids):
            with cupy.cuda.Device(d):
                comm.allGather(s.data.ptr, r.data.ptr, s.size, _nccl_dtype(nccl, s.dtype),
                               _stream(cupy))
    finally:
        nccl.groupEnd()
    outs = []
    for r, x, d in zip(recvs, xs, ids):
        with cupy.cuda.Device(d):
            g = _from_wire(r, x.dtype).reshape((n,) + x.shape)
            g = cupy.moveaxis(g, 0, axis)
            if tiled:
                shape = g.shape
                g = g.reshape(shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])
            outs.append(cupy.ascontiguousarray(g))
    return outs


def psum_scatter(xs: list, ids: list, *, axis_name: tuple, scatter_dimension: int,
                 tiled: bool, axis_size: int) -> list:
    """ncclReduceScatter(sum) over blocks made contiguous along the scattered axis."""
    cupy, nccl = _modules()
    comms = communicators(ids)
    n, sd = len(xs), scatter_dimension
    sends, recvs, out_shapes = [], [], []
    for x, d in zip(xs, ids):
        with cupy.cuda.Device(d):
            shape = x.shape
            blocked = x.reshape(shape[:sd] + (n, shape[sd] // n) + shape[sd + 1:])
            front = cupy.moveaxis(blocked, sd, 0)  # (n, ...block...)
            w = _as_wire(cupy, front)
            block = front.shape[1:]
            sends.append(w)
            recvs.append(cupy.empty(w.shape[1:], w.dtype))
            out_shapes.append(block if tiled else block[:sd] + block[sd + 1:])
    nccl.groupStart()
    try:
        for comm, s, r, d in zip(comms, sends, recvs, ids):
            with cupy.cuda.Device(d):
                comm.reduceScatter(s.data.ptr, r.data.ptr, r.size, _nccl_dtype(nccl, s.dtype),
                                   nccl.NCCL_SUM, _stream(cupy))
    finally:
        nccl.groupEnd()
    return [_from_wire(r, x.dtype).reshape(shape) for r, x, shape in zip(recvs, xs, out_shapes)]


def _exchange(blocks: list, ids: list, pairs: list) -> dict:
    """Grouped point-to-point: for each (src, dst, key) send blocks[src][key] to dst.
    Returns {(dst, key): received array on dst}."""
    cupy, nccl = _modules()
    comms = communicators(ids)
    received = {}
    for src, dst, key in pairs:
        b = blocks[src][key]
        with cupy.cuda.Device(ids[dst]):
            received[(dst, key)] = cupy.empty(b.shape, b.dtype)
    nccl.groupStart()
    try:
        for src, dst, key in pairs:
            b = blocks[src][key]
            with cupy.cuda.Device(ids[src]):
                comms[src].send(b.data.ptr, b.size, _nccl_dtype(nccl, b.dtype), dst,
                                _stream(cupy))
            r = received[(dst, key)]
            with cupy.cuda.Device(ids[dst]):
                comms[dst].recv(r.data.ptr, r.size, _nccl_dtype(nccl, r.dtype), src,
                                _stream(cupy))
    finally:
        nccl.groupEnd()
    return received


def all_to_all(xs: list, ids: list, *, axis_name: tuple, split_axis: int, concat_axis: int,
               tiled: bool, axis_size: int) -> list:
    """Grouped send/recv of every block (a GPU's block for itself stays where it is)."""
    cupy, _ = _modules()
    n = len(xs)
    blocks = []  # blocks[j][(j, i)]: what GPU j sends to GPU i
    for j, (x, d) in enumerate(zip(xs, ids)):
        with cupy.cuda.Device(d):
            parts = cupy.split(x, n, axis=split_axis)
            blocks.append({(j, i): _as_wire(cupy, p if tiled else cupy.squeeze(p, split_axis))
                           for i, p in enumerate(parts)})
    pairs = [(j, i, (j, i)) for j in range(n) for i in range(n) if i != j]
    got = _exchange(blocks, ids, pairs)
    outs = []
    for i, (x, d) in enumerate(zip(xs, ids)):
        with cupy.cuda.Device(d):
            parts = [_from_wire(blocks[i][(i, i)] if j == i else got[(i, (j, i))], x.dtype)
                     for j in range(n)]
            outs.append(cupy.concatenate(parts, axis=concat_axis) if tiled
                        else cupy.stack(parts, axis=concat_axis))
    return outs


def ppermute(xs: list, ids: list, *, axis_name: tuple, perm: tuple) -> list:
    """Grouped send/recv along ``perm``; GPUs no pair sends to get zeros."""
    cupy, _ = _modules()
    blocks = []
    for x, d in zip(xs, ids):
        with cupy.cuda.Device(d):
            blocks.append({"x": _as_wire(cupy, x)})
    moves = [(src, dst, "x") for src, dst in perm if src != dst]
    got = _exchange(blocks, ids, moves)
    outs = []
    receivers = {dst: src for src, dst in perm}
    for i, (x, d) in enumerate(zip(xs, ids)):
        with cupy.cuda.Device(d):
            if i not in receivers:
                outs.append(cupy.zeros_like(x))
            elif receivers[i] == i:
                outs.append(x)
            else:
                outs.append(_from_wire(got[(i, "x")], x.dtype).reshape(x.shape))
    return outs


def axis_index(xs: list, ids: list, *, axis_name: tuple) -> list:
    """Each GPU's position along the mapped axis (an int32 scalar on that GPU)."""
    cupy, _ = _modules()
    outs = []
    for k, d in enumerate(ids):
        with cupy.cuda.Device(d):
            outs.append(cupy.asarray(k, dtype=np.int32))
    return outs
