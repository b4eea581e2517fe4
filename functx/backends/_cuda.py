"""The CUDA backend record: CuPy as the array module (imported only when CuPy sees a GPU).

Memory figures come from CuPy's default memory pool. ``peak_bytes_in_use`` is kept by an
allocator wrapped around the current one, installed by the first
``reset_peak_memory_stats`` (it reads the pool's in-use counter after every allocation),
so code that never asks for it pays nothing.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from functx.backends import Backend

# True while functx captures a CUDA graph (functx.compiler.cuda_graph): implementations whose
# CuPy routines refuse stream capture (every cuBLAS call through CuPy) take a capturable
# path instead (functx.primitives.cuda.linalg's GEMMs call cuBLAS directly).
CAPTURING = [False]
# The captured CUDA graphs (each holds its step's working memory in its own ``pool`` for as
# long as it lives): memory_stats counts those bytes as in use.
GRAPH_POOLS: "weakref.WeakSet" = weakref.WeakSet()


class _PeakTracker:
    """Wraps CuPy's allocator and keeps the high-water mark of the pool's bytes in use."""

    def __init__(self, cupy: Any) -> None:
        self.cupy = cupy
        self.pool = cupy.get_default_memory_pool()
        self.inner = cupy.cuda.get_allocator()
        self.peak: dict[int, int] = {}

    def malloc(self, size: int) -> Any:
        mem = self.inner(size)
        dev = mem.device_id
        used = self.pool.used_bytes()
        if used > self.peak.get(dev, 0):
            self.peak[dev] = used
        return mem

    def reset(self) -> None:
        self.peak[self.cupy.cuda.runtime.getDevice()] = self.pool.used_bytes()


def make_backend(cupy: Any, count: int) -> Any:
    """The CUDA :class:`functx.backends.Backend` for ``count`` GPUs."""
    runtime = cupy.cuda.runtime
    pool = cupy.get_default_memory_pool()
    tracker: list[_PeakTracker] = []
    scalars: dict = {}
    dtype_ok: dict = {}

    def memory_stats() -> dict:
        free, total = runtime.memGetInfo()
        dev = runtime.getDevice()
        graphs = sum(int(g.pool.total_bytes()) for g in list(GRAPH_POOLS))
        peak = tracker[0].peak.get(dev) if tracker else None
        return {
            "bytes_in_use": int(pool.used_bytes()) + graphs,
            "bytes_reserved": int(pool.total_bytes()) + graphs,
            "peak_bytes_reserved": int(pool.total_bytes()) + graphs,
            "peak_bytes_in_use": None if peak is None else peak + graphs,
            "cuda_graph_bytes": graphs,
            "device_free_bytes": int(free),
            "device_total_bytes": int(total),
        }

    def reset_peak_memory() -> None:
        if not tracker:
            tracker.append(_PeakTracker(cupy))
        if cupy.cuda.get_allocator() != tracker[0].malloc:  # not installed, or replaced since
            if tracker[0].inner != cupy.cuda.get_allocator():
                tracker[0].inner = cupy.cuda.get_allocator()
            cupy.cuda.set_allocator(tracker[0].malloc)
        tracker[0].reset()

    def put(x: Any, device_id: int) -> Any:
        if isinstance(x, cupy.ndarray) and x.device.id == device_id:
            return x
        with cupy.cuda.Device(device_id):
            if isinstance(x, cupy.ndarray):
                return x.copy()  # a peer copy onto the current device
            return cupy.asarray(x)  # (np.ascontiguousarray would make 0-d arrays 1-d)

    def scalar_from_host(a: Any) -> Any:
        # Keyed by the bits (so -0.0 and NaN payloads are kept apart) and the current GPU.
        key = (a.dtype, a.tobytes(), runtime.getDevice())
        out = scalars.get(key)
        if out is None:
            if len(scalars) > 4096:
                scalars.clear()
            # A fill kernel with the value as its argument: no synchronising host copy.
            out = scalars[key] = cupy.full((), a.item(), dtype=a.dtype)
        return out

    def supports_dtype(dtype: np.dtype) -> bool:
        ok = dtype_ok.get(dtype)
        if ok is None:
            try:
                cupy.empty((0,), dtype)
                ok = dtype.kind in "biufc"
            except Exception:  # CuPy raises for dtypes it has no kernels for (bfloat16)
                ok = False
            dtype_ok[dtype] = ok
        return ok

    def synchronize() -> None:
        cupy.cuda.get_current_stream().synchronize()

    return Backend(
        name="cuda",
        xp=cupy,
        array_types=(cupy.ndarray,),
        to_host=cupy.asnumpy,
        from_host=cupy.asarray,
        synchronize=synchronize,
        memory_stats=memory_stats,
        read_only_outputs=False,
        device_count=count,
        device_id=lambda x: x.device.id,
        put=put,
        scalar_from_host=scalar_from_host,
        use_device=cupy.cuda.Device,
        reset_peak_memory=reset_peak_memory,
        supports_dtype=supports_dtype,
    )
