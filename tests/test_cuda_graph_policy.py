"""The CUDA-graph state machine of ``functx.compiler.cuda_graph.CudaGraph`` on the CPU.

A fake ``cupy`` module stands in for CuPy: its arrays live at fake addresses, its "graphs"
replay closures recorded during capture that hold the very array objects they read and write
(as a real graph's kernels hold addresses), and its copies are counted and cost time on a
fake clock. So the decisions are checked without a GPU: a direct graph reads the caller's
arrays in place; inputs that move make a copying graph; a timed step keeps its graph only
while a replay (its copies included) is faster than an eager call, so one whose graph pays
for copying its outputs but not its inputs too runs eagerly once they move; donated steps
copy from the start. (The same paths run for real in tests/test_compiler_cuda.py on a GPU
host.)
"""
from __future__ import annotations

import contextlib
import itertools
import sys
import types

import numpy as np
import pytest

from functx.compiler import cuda_graph

_ADDR = itertools.count(1 << 20, 1 << 12)


class FakeArray:
    def __init__(self, shape, dtype=np.float32):
        self.a = np.zeros(shape, dtype)
        self.data = types.SimpleNamespace(ptr=next(_ADDR))
        FAKE.memory[self.data.ptr] = self

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    nbytes = property(lambda self: self.a.nbytes)
    strides = property(lambda self: self.a.strides)
    flags = property(lambda self: types.SimpleNamespace(c_contiguous=True))

    def __setitem__(self, index, src):
        self.a[index] = src.a


class FakeStream:
    ptr = 7
    recording: list | None = None

    def synchronize(self):
        pass

    def record(self):
        return None

    def wait_event(self, event):
        pass

    def begin_capture(self):
        FAKE.recording = []

    def end_capture(self):
        kernels, FAKE.recording = FAKE.recording, None
        return types.SimpleNamespace(launch=lambda: [k() for k in kernels])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _memcpy(dst, src, nbytes, kind, stream):
    FAKE.copies += 1
    FAKE.clock[0] += FAKE.copy_s
    FAKE.memory[dst].a[...] = FAKE.memory[src].a


# copy_s: what each copy costs on the fake clock; freed: pools whose memory was given back
FAKE = types.SimpleNamespace(memory={}, copies=0, recording=None, clock=[0.0], copy_s=0.0,
                             freed=0)
_current = FakeStream()
fake_cupy = types.ModuleType("cupy")
fake_cupy.ndarray = FakeArray
fake_cupy.empty = lambda shape, dtype=np.float32: FakeArray(shape, dtype)
fake_cupy.cuda = types.SimpleNamespace(
    Device=lambda: types.SimpleNamespace(id=0),
    get_current_stream=lambda: _current,
    Stream=lambda non_blocking=False: FakeStream(),
    MemoryPool=lambda: types.SimpleNamespace(
        malloc=None, total_bytes=lambda: 0,
        free_all_blocks=lambda: setattr(FAKE, "freed", FAKE.freed + 1)),
    using_allocator=lambda fn: contextlib.nullcontext(),
    runtime=types.SimpleNamespace(memcpyAsync=_memcpy))


@pytest.fixture(autouse=True)
def fake(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    FAKE.copies, FAKE.copy_s, FAKE.freed = 0, 0.0, 0
    clock = FAKE.clock = [0.0]
    monkeypatch.setattr(cuda_graph.time, "perf_counter", lambda: clock[0])
    return clock


def make_step(clock, host_s=0.0):
    """``[2 * x + y]`` as one recorded "kernel" (the host time it costs: ``host_s``, or
    ``host_s[k]`` at the k-th call)."""
    times = iter(host_s) if isinstance(host_s, (list, tuple)) else None

    def step(ins):
        x, y = ins
        out = FakeArray(x.shape)

        def kernel():
            out.a[...] = 2 * x.a + y.a
        if FAKE.recording is not None:
            FAKE.recording.append(kernel)
        kernel()
        clock[0] += host_s if times is None else next(times)
        return [out]
    return step


def call(g, ins):
    """As jit calls a signature's graph: while it has not failed, else the step itself."""
    return g.step(ins) if g.failed else g(ins)


def arrays(value, n=4):
    x, y = FakeArray((n,)), FakeArray((n,))
    x.a[...], y.a[...] = value, 1.0
    return [x, y]


def test_unmoved_inputs_are_read_in_place_and_moved_ones_copied(fake) -> None:
    before = dict(cuda_graph.STATS)
    g = cuda_graph.CudaGraph(make_step(fake), launches=1)
    a = arrays(3.0)
    outs = [g(a)[0] for _ in range(4)]  # eager, capture, replay, replay
    assert g.captured.ins is None and cuda_graph.STATS["captured"] == before["captured"] + 1
    assert FAKE.copies == 3  # the outputs of the three graph calls only
    a[0].a[...] = 5.0  # new values at the same addresses: read there
    assert g(a)[0].a.tolist() == [11.0] * 4
    assert all(o.a.tolist() == [7.0] * 4 for o in outs)  # results are not overwritten
    b = arrays(-1.0)  # other addresses: captured again, copying
    assert g(b)[0].a.tolist() == [-1.0] * 4
    assert g.captured.ins is not None
    assert g(a)[0].a.tolist() == [11.0] * 4 and g(b)[0].a.tolist() == [-1.0] * 4
    assert cuda_graph.STATS["recaptured"] == before["recaptured"] + 1


def timed(monkeypatch, copy_s=1.0):
    """Every step timed (BYTES_PER_LAUNCH 0) from its second call, over two calls and two
    replays; each copy costing ``copy_s`` seconds."""
    monkeypatch.setattr(cuda_graph, "BYTES_PER_LAUNCH", 0)
    monkeypatch.setattr(cuda_graph, "WARM_CALLS", 1)
    monkeypatch.setattr(cuda_graph, "TIMED_CALLS", 2)
    FAKE.copy_s = copy_s


def test_a_timed_step_keeps_a_graph_that_pays_for_its_output_copies_until_inputs_move(
        fake, monkeypatch) -> None:
    timed(monkeypatch)
    before = dict(cuda_graph.STATS)
    # an eager call takes 3 s; a direct replay copies one output (1 s): kept
    g = cuda_graph.CudaGraph(make_step(fake, host_s=3.0), launches=1)
    a = arrays(1.0)
    for _ in range(7):  # eager, timed twice, capture, timed replays twice, replay
        assert call(g, a)[0].a.tolist() == [3.0] * 4
    assert g.captured is not None and g.captured.ins is None and not g.failed
    assert (g.eager_s, g.graph_s) == (3.0, 1.0)
    # the inputs move: a copying replay copies two inputs and the output (3 s): dropped
    b = arrays(2.0)
    for _ in range(4):
        assert call(g, b)[0].a.tolist() == [5.0] * 4
    assert g.failed and g.captured is None and FAKE.freed == 1
    assert cuda_graph.STATS["declined"] == before["declined"] + 1
    assert cuda_graph.STATS["recaptured"] == before["recaptured"] + 1
    assert call(g, a)[0].a.tolist() == [3.0] * 4  # eagerly, wherever the inputs are


def test_the_fastest_timed_calls_decide(fake, monkeypatch) -> None:
    timed(monkeypatch)
    # the first timed eager call is slow (the pool grew, say: 9 s), the second takes 1 s: a
    # replay (one copy, 1 s) is not faster, so the graph goes
    g = cuda_graph.CudaGraph(make_step(fake, host_s=[0.0, 9.0, 1.0] + [0.0] * 9), launches=1)
    a = arrays(1.0)
    for _ in range(7):
        assert call(g, a)[0].a.tolist() == [3.0] * 4
    assert g.failed and g.captured is None and FAKE.freed == 1
    # both eager calls slow (9 s, 5 s): the graph stays
    g = cuda_graph.CudaGraph(make_step(fake, host_s=[0.0, 9.0, 5.0] + [0.0] * 9), launches=1)
    for _ in range(7):
        assert call(g, a)[0].a.tolist() == [3.0] * 4
    assert not g.failed and g.captured is not None and g.eager_s == 5.0


def test_a_timed_copying_step_counts_its_input_copies(fake, monkeypatch) -> None:
    timed(monkeypatch)
    g = cuda_graph.CudaGraph(make_step(fake, host_s=3.0), launches=1, donated=True)
    a = arrays(1.0)
    for _ in range(7):
        assert call(g, a)[0].a.tolist() == [3.0] * 4
    assert g.failed and g.captured is None  # 3 copies (3 s) are no faster than 3 s


def test_a_timed_step_warms_up_before_it_is_timed(fake, monkeypatch) -> None:
    monkeypatch.setattr(cuda_graph, "BYTES_PER_LAUNCH", 0)
    FAKE.copy_s = 1.0
    n_warm, n_timed = cuda_graph.WARM_CALLS, cuda_graph.TIMED_CALLS
    # the slow warm-up calls (9 s) are not timed; the timed calls take 2 s and a replay (one
    # copy) 1 s: the graph is kept
    times = [9.0] * n_warm + [2.0] * n_timed + [0.0] * (n_timed + 4)
    g = cuda_graph.CudaGraph(make_step(fake, host_s=times), launches=1)
    a = arrays(1.0)
    for k in range(n_warm + n_timed + 1 + n_timed):
        assert call(g, a)[0].a.tolist() == [3.0] * 4
        assert (g.captured is not None) == (k >= n_warm + n_timed)
    assert (g.eager_s, g.graph_s, g.failed) == (2.0, 1.0, False)


def test_an_untimed_step_is_captured_at_its_second_call(fake) -> None:
    g = cuda_graph.CudaGraph(make_step(fake, host_s=3.0), launches=1)  # 32 bytes: untimed
    a = arrays(1.0)
    for _ in range(2):
        assert call(g, a)[0].a.tolist() == [3.0] * 4
    assert not g.timed and g.captured is not None


def test_donated_steps_read_copies_from_the_start(fake) -> None:
    g = cuda_graph.CudaGraph(make_step(fake), launches=1, donated=True)
    for k in range(4):
        assert g(arrays(float(k)))[0].a.tolist() == [2.0 * k + 1.0] * 4
    assert g.captured.ins is not None and not g.failed
