"""Whole jit steps replayed as CUDA graphs: one launch instead of one per kernel.

A jitted signature on CUDA runs its step list eagerly on its first call (that compiles the
fused kernels and lets cuBLAS and CuPy set themselves up), captures it into a CUDA graph on
its second call, and from then on replays the graph. A graph replays in a few microseconds
of host time however many kernels it holds, which is what steps bound by host time (small
models, loop bodies) need.

Inputs: a graph's kernels read fixed addresses. The first graph of a signature reads the
caller's arrays where they are (a *direct* graph, keyed by the inputs' addresses and
strides): as long as later calls pass arrays at the same addresses (the same parameters and
data, or buffers a loop reuses), a replay copies nothing in. At the first call whose inputs
live elsewhere the direct graph is dropped and the step captured again reading buffers of
its own (a *copying* graph): each replay then copies the inputs into them first. A step with
donated arguments (which it may overwrite) is captured copying from the start. Outputs are
always copied out of the graph's buffers into fresh arrays (so results never alias the next
call's).

A step whose inputs and outputs are large next to its number of steps
(:data:`BYTES_PER_LAUNCH`) is *timed*: a replay must copy its outputs out (and, for a copying
graph, its inputs in) while its launches may already hide behind the GPU's work (a layer
norm over 400 MB in four kernels), so whether the graph pays is measured, not guessed. It
runs eagerly for :data:`WARM_CALLS` calls (an eager step is slower for its first few calls:
on an H100, ln_gelu's took 1.25, 0.57, 0.53, 0.52 ms at its second to fifth calls, 0.47
later), then :data:`TIMED_CALLS` more timed to the end of their work; then it is captured,
and that many replays after the capture are timed the same way; if the fastest of them is
not faster than the fastest eager call, the graph is dropped (its memory freed) and the step
runs eagerly from then on. When a timed step's inputs move, its copying graph is timed
again. Only the timed calls wait for the device.

Memory: everything the step allocates while it is captured comes from a memory pool of the
graph's own (reused inside the step as it would be eagerly, never handed to other code), so
a graph holds one step's working memory for as long as its signature is cached. Every
capture of a signature runs on the same capturing stream, so a copying graph reuses the
memory its direct predecessor freed.

What cannot be captured: CuPy's cuBLAS wrappers refuse stream capture, so while a step is
captured (:data:`functx.backends._cuda.CAPTURING`) the GEMMs call cuBLAS directly; anything
else that needs the host (reading a value, cuSOLVER's info, a ``while_loop`` predicate, a
callback) makes the capture fail: the signature then runs eagerly from then on, with no
warning (the result is the same, only slower). ``FUNCTX_CUDA_GRAPHS=0`` (read at import) or
:func:`set_cuda_graphs` turns graphs off.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable

from functx.backends._cuda import CAPTURE_KEEP, CAPTURING, GRAPH_POOLS

__all__ = ["CudaGraph", "set_cuda_graphs", "cuda_graphs_enabled", "STATS"]

# how many steps were captured (and captured again, copying, when their inputs moved),
# and how many could not be (for tests and benchmarks)
STATS = {"captured": 0, "recaptured": 0, "failed": 0, "declined": 0}

# A replay copies the step's inputs and outputs (device to device, about 2 TB/s on an H100)
# and saves the host time of each kernel launch (5-10 us): a step that moves more than this
# many bytes per launch is timed eagerly and as a graph before it keeps the graph. A small
# MLP's step (25 launches, 0.2 MB) is captured at once; layer norm on 8192x4096 (4
# launches, 400 MB) is timed.
BYTES_PER_LAUNCH = 5 << 20
# a timed step's eager calls before it is timed (its first included), then how many calls
# are timed eagerly and how many replays of its graph (the fastest of each counts)
WARM_CALLS = 3
TIMED_CALLS = 3
# a timed step keeps its graph if its fastest replay took less than this times its fastest
# eager call
KEEP_BELOW = 1.0

_D2D = 3  # cudaMemcpyDeviceToDevice
_STATE = {"on": os.environ.get("FUNCTX_CUDA_GRAPHS", "1").strip() not in ("0", "false", "off")}


def set_cuda_graphs(on: bool) -> bool:
    """Whether jit replays CUDA steps as graphs from now on (for signatures traced after
    the call); returns the previous setting."""
    old, _STATE["on"] = _STATE["on"], bool(on)
    return old


def cuda_graphs_enabled() -> bool:
    """The current setting of :func:`set_cuda_graphs`."""
    return _STATE["on"]


class _Captured:
    """One captured graph: ``ins`` are its own input buffers (None for a direct graph, or
    per input that is not a CuPy array), ``outs`` the buffers it writes its outputs into,
    ``keep`` the pinned host constants it copies from, ``key`` the input addresses a
    direct graph reads."""

    __slots__ = ("graph", "ins", "outs", "keep", "key")

    def __init__(self, graph: Any, ins: list | None, outs: list, keep: list,
                 key: tuple | None) -> None:
        self.graph, self.ins, self.outs, self.keep, self.key = graph, ins, outs, keep, key


def _address_key(cupy: Any, inputs: list) -> tuple:
    """What a direct graph's kernels baked in of ``inputs``: each CuPy array's address and
    strides (the shapes and dtypes are the signature's)."""
    return tuple((a.data.ptr, a.strides) if isinstance(a, cupy.ndarray) else None
                 for a in inputs)


def _timed(cupy: Any, run: Callable[[], list]) -> tuple[list, float]:
    """``run()``'s results and its time from an idle stream to the end of its work."""
    stream = cupy.cuda.get_current_stream()
    stream.synchronize()
    start = time.perf_counter()
    outs = run()
    stream.synchronize()
    return outs, time.perf_counter() - start


class CudaGraph:
    """Runs ``step(inputs) -> outputs`` (CuPy arrays, ``launches`` kernels) eagerly once,
    then as a CUDA graph (direct, then copying if the inputs move: see the module
    docstring).

    ``failed`` is set when capture was impossible, or did not pay (a timed step); the
    caller then runs the step itself. ``donated``: the step may write into its inputs
    (``donate_argnums``), so its graphs always read copies.
    """

    __slots__ = ("step", "launches", "calls", "failed", "captured", "pool", "stream",
                 "device", "timed", "eager_s", "graph_s", "trials", "direct", "__weakref__")

    def __init__(self, step: Callable[[list], list], launches: int,
                 donated: bool = False) -> None:
        self.step, self.launches = step, launches
        self.calls = 0
        self.failed = False
        self.captured: _Captured | None = None
        self.pool = self.stream = self.device = None
        # a timed step: its fastest eager call and graph replay (seconds, to the end of
        # their work), and how many replays of the current graph were timed
        self.timed = False
        self.eager_s = self.graph_s = float("inf")
        self.trials = 0
        self.direct = not donated  # the next capture may read the caller's arrays in place

    def __call__(self, inputs: list) -> list:
        import cupy

        self.calls += 1
        fresh = False  # captured at this call (its replay is not timed: uploads, first use)
        if self.captured is None:
            if self.calls == 1:
                outs = self.step(inputs)
                moved = sum(a.nbytes for a in [*inputs, *outs] if isinstance(a, cupy.ndarray))
                self.timed = moved > self.launches * BYTES_PER_LAUNCH
                return outs
            if self.timed and self.calls <= WARM_CALLS:
                return self.step(inputs)
            if self.timed and self.calls <= WARM_CALLS + TIMED_CALLS:
                outs, took = _timed(cupy, lambda: self.step(inputs))
                self.eager_s = min(self.eager_s, took)
                return outs
            if not self._capture(cupy, inputs):
                return self._fail(inputs)
            STATS["captured"] += 1
            fresh = True
        if cupy.cuda.Device().id != self.device:
            return self.step(inputs)
        c = self.captured
        if c.key is not None and c.key != _address_key(cupy, inputs):
            # the inputs moved: read copies from now on (the direct graph's memory goes
            # back to the pool for the new capture once its last replay is done)
            cupy.cuda.get_current_stream().synchronize()
            self.captured, self.direct = None, False
            if not self._capture(cupy, inputs):
                return self._fail(inputs)
            STATS["recaptured"] += 1
            c, fresh, self.trials, self.graph_s = self.captured, True, 0, float("inf")
        if self.timed and not fresh and self.trials < TIMED_CALLS:
            self.trials += 1
            outs, took = _timed(cupy, lambda: self._replay(cupy, c, inputs))
            self.graph_s = min(self.graph_s, took)
            if self.trials == TIMED_CALLS and self.graph_s >= KEEP_BELOW * self.eager_s:
                del c  # (the graph's last reference here: _drop frees its memory)
                self._drop()  # the copies cost more than the launches saved
            return outs
        return self._replay(cupy, c, inputs)

    def _replay(self, cupy: Any, c: _Captured, inputs: list) -> list:
        stream = cupy.cuda.get_current_stream().ptr
        copy = cupy.cuda.runtime.memcpyAsync
        if c.ins is not None:
            # raw asynchronous copies on the current stream: a CuPy elementwise copy costs
            # several times the host time, and a step of small arrays is all host time
            for dst, src in zip(c.ins, inputs):  # (dst is C-contiguous)
                if dst is not None:
                    if src.flags.c_contiguous:
                        copy(dst.data.ptr, src.data.ptr, dst.nbytes, _D2D, stream)
                    else:  # a view (a transpose, a slice): copied element by element
                        dst[...] = src
        c.graph.launch()
        outs = []
        for o in c.outs:
            r = cupy.empty(o.shape, o.dtype)
            copy(r.data.ptr, o.data.ptr, o.nbytes, _D2D, stream)
            outs.append(r)
        return outs

    def _drop(self) -> None:
        """Run eagerly from now on, and give the graph's memory back (its replays are
        done: timed replays wait for the device)."""
        self.failed, self.captured = True, None
        STATS["declined"] += 1
        GRAPH_POOLS.discard(self)
        self.pool.free_all_blocks()

    def _fail(self, inputs: list) -> list:
        self.failed = True
        STATS["failed"] += 1
        return self.step(inputs)

    def _capture(self, cupy: Any, inputs: list) -> bool:
        if self.pool is None:
            self.pool = cupy.cuda.MemoryPool()
            self.stream = cupy.cuda.Stream(non_blocking=True)
        pool, stream = self.pool, self.stream
        current = cupy.cuda.get_current_stream()
        ins = key = None
        if self.direct:
            key = _address_key(cupy, inputs)
        else:
            with cupy.cuda.using_allocator(pool.malloc):  # C-contiguous: see __call__'s copies
                ins = [cupy.empty(x.shape, x.dtype) if isinstance(x, cupy.ndarray) else None
                       for x in inputs]
            for dst, src in zip(ins, inputs):
                if dst is not None:
                    dst[...] = src
        stream.wait_event(current.record())
        graph = None
        try:
            with cupy.cuda.using_allocator(pool.malloc), stream:
                CAPTURING[0] = True
                CAPTURE_KEEP.clear()
                stream.begin_capture()
                try:
                    reads = inputs if ins is None else [
                        d if d is not None else x for d, x in zip(ins, inputs)]
                    outs = self.step(reads)
                finally:
                    CAPTURING[0] = False
                    graph = stream.end_capture()
                    keep = list(CAPTURE_KEEP)
                    CAPTURE_KEEP.clear()
        except Exception:  # something in the step cannot be captured: run it eagerly
            return False
        if any(not isinstance(o, cupy.ndarray) for o in outs):
            return False
        current.wait_event(stream.record())
        self.captured = _Captured(graph, ins, list(outs), keep, key)
        GRAPH_POOLS.add(self)  # memory_stats counts what graphs hold (``pool``)
        self.device = cupy.cuda.Device().id
        return True
