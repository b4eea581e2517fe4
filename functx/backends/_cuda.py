"""The CUDA backend record: CuPy as the array module (imported only when CuPy sees a GPU).

bfloat16: CuPy 14 runs ``ml_dtypes.bfloat16`` arrays (most ufuncs, reductions, copies, casts
and cuBLAS products keep bfloat16), so bfloat16 arrays may live on the GPU when CuPy can
make them. Some of CuPy's functions have no bfloat16 loop: they raise, or promote to
float32 (``cupy.where``, ``cupyx.scipy.special``). Every primitive implementation therefore
runs through :func:`bfloat16_guard` (the backend's ``adapt_impl``): when a bfloat16 array is
among its arguments and the implementation raises, it runs again on those arguments
widened to float32; and a float32/float64 result where the primitive's abstract-eval rule
says bfloat16 is rounded to bfloat16 once. Implementations that want float32 inside for
accuracy (sums, the fused row kernels, special functions) do it themselves
(functx/primitives/cuda/); the guard makes every primitive accept and return bfloat16.

Memory figures come from CuPy's default memory pool. ``peak_bytes_in_use`` is kept by an
allocator wrapped around the current one, installed by the first
``reset_peak_memory_stats`` (it reads the pool's in-use counter after every allocation),
so code that never asks for it pays nothing.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import ml_dtypes
import numpy as np

from functx import ir
from functx.backends import Backend
from functx.errors import FunctxError

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_F32 = np.dtype(np.float32)


def bfloat16_guard(fn: Callable, prim: Any, array_type: type) -> Callable:
    """``fn`` (a primitive's implementation, ``xp`` bound) made to accept and return
    bfloat16 where the array module lacks a bfloat16 kernel (see the module docstring).

    Without a bfloat16 array of type ``array_type`` among the arguments, ``fn`` runs as it
    is (one loop over the arguments). With one: ``fn`` runs; if it raises (other than a
    FunctxError), it runs again with the bfloat16 arrays widened to float32 (the first
    error is raised if that fails too); then each float32 or float64 result whose dtype the
    primitive's abstract-eval rule gives as bfloat16 is rounded to bfloat16 once.

    Args:
        fn: ``fn(*arrays, **params)``.
        prim: the primitive (its ``abstract_eval`` and ``multiple_results`` are read).
        array_type: the backend's array type (``cupy.ndarray``).

    Returns:
        The guarded implementation.

    Example:
        >>> guarded = bfloat16_guard(functools.partial(rule, cupy), where_p, cupy.ndarray)
    """
    def run(*args: Any, **params: Any) -> Any:
        for a in args:
            if type(a) is array_type and a.dtype == BFLOAT16:
                return _run_bfloat16(fn, prim, args, params, array_type)
        return fn(*args, **params)

    run.__wrapped__ = fn  # type: ignore[attr-defined]
    return run


def _missing_kernel(err: Exception, prim: Any) -> bool:
    """Whether ``err`` says the array module has no kernel for the dtypes (CuPy: a
    TypeError for a ufunc without a matching loop, NotImplementedError, NVRTC's
    CompileException), and ``prim`` may run twice (it has no effects: callbacks,
    collectives and other effects never run again)."""
    kind = isinstance(err, (TypeError, NotImplementedError)) or \
        type(err).__name__ == "CompileException"
    return kind and not isinstance(err, FunctxError) and prim.has_effects is False


def _run_bfloat16(fn: Callable, prim: Any, args: tuple, params: dict,
                  array_type: type) -> Any:
    try:
        out = fn(*args, **params)
    except Exception as err:
        if not _missing_kernel(err, prim):
            raise
        wide = tuple(a.astype(_F32) if type(a) is array_type and a.dtype == BFLOAT16 else a
                     for a in args)
        try:
            out = fn(*wide, **params)
        except Exception:
            raise err from None
    return _rounded_back(prim, args, params, out)


def _rounded_back(prim: Any, args: tuple, params: dict, out: Any) -> Any:
    """``out`` with the float32/float64 results that should be bfloat16 rounded to it."""
    outs = tuple(out) if prim.multiple_results else (out,)
    if not any(getattr(o, "dtype", None) is not None and o.dtype.kind == "f"
               and o.dtype.itemsize >= 4 for o in outs):
        return out  # (the common case: the kernels kept bfloat16)
    want = prim.abstract_eval(*[ir.abstractify(a) for a in args], **params)
    want = tuple(want) if prim.multiple_results else (want,)
    fixed = [o.astype(BFLOAT16) if w.dtype == BFLOAT16 and getattr(o, "dtype", None)
             is not None and o.dtype != BFLOAT16 else o for o, w in zip(outs, want)]
    if not prim.multiple_results:
        return fixed[0]
    return type(out)(fixed) if isinstance(out, (list, tuple)) else fixed

# True while functx captures a CUDA graph (functx.compiler.cuda_graph): implementations whose
# CuPy routines refuse stream capture (every cuBLAS call through CuPy) take a capturable
# path instead (functx.primitives.cuda.linalg's GEMMs call cuBLAS directly).
CAPTURING = [False]
# Host arrays copied to the device while a graph is captured, staged in pinned host memory:
# the graph's copy reads that memory at every replay, so the capture takes these buffers
# with it (functx.compiler.cuda_graph) and keeps them alive as long as the graph.
CAPTURE_KEEP: list = []
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
    # CuPy 14 added bfloat16 kernels (through ml_dtypes); older CuPy stores bf16 but has none
    major = str(getattr(cupy, "__version__", "0")).split(".")[0]
    bf16_kernels = major.isdigit() and int(major) >= 14

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

    def from_host(a: Any) -> Any:
        if not CAPTURING[0]:
            return cupy.asarray(a)
        # CuPy refuses host-to-device copies on a capturing stream (their source could
        # change before a replay); a copy from pinned memory that nothing else holds is
        # captured as the graph's own constant.
        a = np.asarray(a)
        host = np.ascontiguousarray(a)
        pinned = cupy.cuda.alloc_pinned_memory(max(host.nbytes, 1))
        staged = np.ndarray(host.shape, host.dtype, buffer=pinned)
        staged[...] = host
        out = cupy.empty(host.shape, host.dtype)
        if host.nbytes:
            runtime.memcpyAsync(out.data.ptr, pinned.ptr, host.nbytes, 1,  # host to device
                                cupy.cuda.get_current_stream().ptr)
        CAPTURE_KEEP.append(pinned)
        return out

    def put(x: Any, device_id: int) -> Any:
        if isinstance(x, cupy.ndarray) and x.device.id == device_id:
            return x
        with cupy.cuda.Device(device_id):
            if isinstance(x, cupy.ndarray):
                return x.copy()  # a peer copy onto the current device
            return from_host(x)

    def scalar_from_host(a: Any) -> Any:
        # Keyed by the bits (so -0.0 and NaN payloads are kept apart) and the current GPU.
        key = (a.dtype, a.tobytes(), runtime.getDevice())
        out = scalars.get(key)
        if out is None:
            if len(scalars) > 4096:
                scalars.clear()
            if a.dtype == BFLOAT16:  # (a copy: exact, and made once per value)
                out = scalars[key] = cupy.asarray(np.asarray(a))
            else:  # A fill kernel with the value as its argument: no synchronising copy.
                out = scalars[key] = cupy.full((), a.item(), dtype=a.dtype)
        return out

    def supports_dtype(dtype: np.dtype) -> bool:
        ok = dtype_ok.get(dtype)
        if ok is None:
            try:
                cupy.empty((0,), dtype)
                # bfloat16 through ml_dtypes (CuPy 14); not the other ml_dtypes types
                ok = dtype.kind in "biufc" or (dtype == BFLOAT16 and bf16_kernels)
            except Exception:  # CuPy raises for dtypes it has no kernels for (bfloat16
                ok = False     # before CuPy 14)
            dtype_ok[dtype] = ok
        return ok

    def synchronize() -> None:
        cupy.cuda.get_current_stream().synchronize()

    return Backend(
        name="cuda",
        xp=cupy,
        array_types=(cupy.ndarray,),
        to_host=cupy.asnumpy,
        from_host=from_host,
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
        adapt_impl=lambda fn, prim: bfloat16_guard(fn, prim, cupy.ndarray),
    )
