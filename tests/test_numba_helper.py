"""functx.primitives._numba: the one place that decides whether Numba is used and how its
threads behave (FUNCTX_NUMBA=0, the TBB threading layer where oneTBB loads, else workqueue,
one launch at a time)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.compiler import lowering
from functx.primitives import _conv_numba, _numba

pytest.importorskip("numba")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str, **env: str) -> str:
    """Run ``code`` in a fresh interpreter (the threading layer is chosen once per process)
    with ``env`` added to a copy of the environment without Numba/OpenMP settings."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("NUMBA_THREADING_LAYER", "OMP_WAIT_POLICY", "FUNCTX_NUMBA",
                         "FUNCTX_TBB")}
    base.update(env)
    base["PYTHONPATH"] = ROOT + os.pathsep + base.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=base,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


# A parallel kernel: random bits of 2**18 values run on all cores (functx.primitives.bits).
_PARALLEL = """
import os, threading
import numpy as np
import functx.random as fr
from functx.primitives import _numba
key = fr.key(0)
def draw():
    return np.asarray(fr.bits(key, (1 << 18,)))
want = draw()
"""


_LAYER = """
import numba
print(numba.threading_layer(), os.environ.get("OMP_WAIT_POLICY"), _numba.tbb_loadable())
"""


def test_tbb_layer_where_it_loads_else_workqueue_and_no_omp_setting_by_default() -> None:
    layer, omp, tbb = _run(_PARALLEL + _LAYER).split()
    assert (layer, omp) == ("tbb" if tbb == "True" else "workqueue", "None")
    assert tbb == str(_numba.tbb_loadable())
    # FUNCTX_TBB=0: workqueue, and no TBB
    assert _run(_PARALLEL + _LAYER, FUNCTX_TBB="0") == "workqueue None False"


def test_user_choice_of_layer_wins_and_openmp_waits_passively() -> None:
    got = _run(_PARALLEL + """
import numba
print(numba.config.THREADING_LAYER, os.environ.get("OMP_WAIT_POLICY"))
""", NUMBA_THREADING_LAYER="omp")
    assert got == "omp passive"


def test_concurrent_parallel_launches_from_threads_do_not_abort() -> None:
    # The workqueue layer terminates the process on concurrent launches; functx's parallel
    # kernels take turns under one lock (TBB's launches from threads are safe as well).
    code = _PARALLEL + """
bad = []
def member():
    for _ in range(5):
        if not np.array_equal(draw(), want):
            bad.append(1)
threads = [threading.Thread(target=member) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
import numba
print(numba.threading_layer(), len(bad))
"""
    for env, layer in (({}, "tbb" if _numba.tbb_loadable() else "workqueue"),
                       ({"FUNCTX_TBB": "0"}, "workqueue")):
        assert _run(code, **env) == f"{layer} 0"


def test_parallel_kernels_are_serialised() -> None:
    numba = _numba.import_numba()
    seen = []

    def fn(x, out):  # pragma: no cover (compiled)
        for i in range(x.size):
            out[i] = x[i] + 1.0

    k = _numba.njit_variant(fn, "test_serial")
    assert not hasattr(k, "dispatcher")

    def fn2(x, out):  # pragma: no cover (compiled)
        for i in numba.prange(x.size):
            out[i] = x[i] * 2.0

    kp = _numba.njit_variant(fn2, "test_parallel", parallel=True)
    inner = kp.dispatcher

    def spy(*args):
        seen.append(_numba.LAUNCH_LOCK.locked())
        return inner(*args)

    kp2 = _numba.serialised(spy)
    x, out = np.arange(4.0), np.empty(4)
    kp2(x, out)
    np.testing.assert_array_equal(out, 2 * x)
    assert seen == [True] and not _numba.LAUNCH_LOCK.locked()


def test_functx_numba_0_turns_every_user_off(monkeypatch) -> None:
    monkeypatch.setenv("FUNCTX_NUMBA", "0")
    assert _numba.numba_or_none() is None
    assert not _numba.numba_enabled() and _numba.numba_installed()
    # jit replays, without the "not installed" warning
    monkeypatch.setattr(lowering, "_warned", [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not lowering.numba_available()
        got = fx.jit(lambda x: fnp.exp(fnp.sin(x)))(np.ones(3))
    np.testing.assert_allclose(got, np.exp(np.sin(np.ones(3))))
    # convolutions take the NumPy path even where the direct kernels would pay
    calls = []
    monkeypatch.setattr(_conv_numba, "ENABLED", True)
    monkeypatch.setattr(_conv_numba, "FORCE", True)
    monkeypatch.setattr(_conv_numba, "direct_conv", lambda *a, **k: calls.append(1))
    params = dict(window_strides=(1,), padding=((0, 0),), lhs_dilation=(1,),
                  rhs_dilation=(1,), feature_group_count=1)
    out = _conv_numba.conv_numba(np, np.ones((1, 1, 5)), np.ones((2, 1, 3)), **params)
    assert calls == [] and out.shape == (1, 2, 3)
    np.testing.assert_array_equal(out, np.full((1, 2, 3), 3.0))
    monkeypatch.delenv("FUNCTX_NUMBA")
    assert _numba.numba_enabled()
