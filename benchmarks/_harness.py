"""Timing, result tables and the environment report for the benchmark scripts.

Timings are interleaved in blocks: each round runs every system for a block of consecutive
repeats, in a rotating order, so slow drifts of a noisy machine (other processes, frequency
changes) hit all systems alike. Blocks rather than single calls, each after a pause and
untimed calls, because the libraries keep their own BLAS/OpenMP thread pools, whose threads
spin for a while after a call (OpenBLAS's for about 0.1 s): alternating libraries call by
call makes them fight over the cores and measures that fight instead of the libraries, and
so does a block that starts while the previous system's threads still spin.
"""
from __future__ import annotations

import gc
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import attrs
import numpy as np


@attrs.frozen
class Timing:
    """The wall-clock times of one system on one workload, in seconds."""

    name: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def quartiles(self) -> tuple[float, float]:
        """The 25th and 75th percentiles (the spread reported next to the median)."""
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q[0], q[2]


def measure(steps: dict[str, Callable[[], object]], repeats: int, warmup: int,
            block: int = 10, settle: float = 0.25,
            clock: Callable[[], float] = time.perf_counter,
            rewarm: float = 0.0) -> list[Timing]:
    """Time each step function ``repeats`` times after ``warmup`` untimed calls.

    Args:
        steps: system name -> a function running one complete step (and waiting for any
            asynchronous work to finish).
        repeats: timed calls per system.
        warmup: untimed calls per system before timing starts.
        block: consecutive timed calls of one system within a round (each block starts
            with one more untimed call).
        settle: seconds to pause before each block, for the previous system's spinning
            threads to go to sleep.
        clock: the timer (``time.process_time``: CPU time of the whole process, every
            thread, for comparisons on a machine shared with other work).
        rewarm: seconds of untimed calls after each pause (at least one call): a pause
            lets the host's cores drop their clocks, and steps of a tenth of a millisecond
            would otherwise be timed while they ramp back up.

    Returns:
        One Timing per system, in the order of ``steps``.
    """
    names = list(steps)
    for name in names:
        for _ in range(warmup):
            steps[name]()
    samples: dict[str, list[float]] = {n: [] for n in names}
    rounds = -(-repeats // block)
    for r in range(rounds):
        k = r % len(names)
        n = min(block, repeats - r * block)
        for name in names[k:] + names[:k]:
            step = steps[name]
            time.sleep(settle)
            until = time.perf_counter() + rewarm
            step()
            while time.perf_counter() < until:
                step()
            for _ in range(n):
                t0 = clock()
                step()
                samples[name].append(clock() - t0)
    return [Timing(n, tuple(samples[n])) for n in names]


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """``max|got - want| / max|want|`` (0 when both are zero)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return float("inf")
    scale = float(np.max(np.abs(want), initial=0.0))
    err = float(np.max(np.abs(got - want), initial=0.0))
    return err / scale if scale else err


def markdown_table(timings: list[Timing], unit: str, scale: float, reference: str,
                   notes: dict[str, str] | None = None) -> str:
    """A markdown table: median, interquartile range and ratio to the reference system.

    Args:
        timings: the results, one row each.
        unit: the unit of the reported numbers (e.g. "µs/op").
        scale: multiplies seconds into that unit.
        reference: the system the ratio column compares against (``ref ÷ this``).
        notes: optional text per system for a last column.
    """
    ref = next((t for t in timings if t.name == reference), None)
    notes = notes or {}
    lines = [f"| system | median {unit} | p25–p75 {unit} | {reference} ÷ system | note |",
             "|---|---:|---:|---:|---|"]
    for t in timings:
        lo, hi = t.quartiles
        ratio = f"{ref.median / t.median:.2f}" if ref is not None else "-"
        lines.append(f"| {t.name} | {t.median * scale:.3g} | {lo * scale:.3g}–{hi * scale:.3g} "
                     f"| {ratio} | {notes.get(t.name, '')} |")
    return "\n".join(lines)


def git_commit(path: Path) -> str:
    """The commit of the checkout at ``path`` (with "+changes" if the tree is dirty)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=path, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=path, text=True, capture_output=True).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def environment_report(modules: dict[str, object], functx_root: Path) -> str:
    """Versions, thread settings and CPU facts that the numbers depend on (markdown list)."""
    lines = [f"- Python {platform.python_version()} on {platform.machine()}, "
             f"{os.cpu_count()} logical CPUs ({_cpu_model()})",
             f"- functx at commit {git_commit(functx_root)}, NumPy {np.__version__}"]
    try:
        from threadpoolctl import threadpool_info

        pools = [f"{p.get('internal_api')} {p.get('version')} "
                 f"({p.get('num_threads')} threads, {p.get('user_api')})"
                 for p in threadpool_info()]
        lines.append(f"- thread pools loaded (threadpoolctl): {'; '.join(pools) or 'none'}")
    except ImportError:
        lines.append("- thread pools: threadpoolctl not installed, NumPy's BLAS threads unknown")
    torch = modules.get("torch")
    if torch is not None:
        lines.append(f"- PyTorch {torch.__version__}: {torch.get_num_threads()} intra-op "
                     f"threads, {torch.get_num_interop_threads()} inter-op threads")
    jax = modules.get("jax")
    if jax is not None:
        lines.append(f"- JAX {jax.__version__} on {jax.devices()[0].platform}, x64 enabled")
    autograd = modules.get("autograd")
    if autograd is not None:
        lines.append(f"- HIPS autograd {_version('autograd')}")
    env = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS",
                                       "OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ}
    lines.append(f"- thread/BLAS environment variables: {env or 'none set'} "
                 "(thread settings are left at their defaults)")
    return "\n".join(lines)


class CpuMeter:
    """How much CPU time other processes used while the benchmark ran (Linux only).

    Busy time of all CPUs (``/proc/stat``) minus this process's own CPU time, as a share of
    the wall time of every CPU. Multi-threaded BLAS calls slow down badly when another
    process holds a core, so a run with a noticeable share is unreliable.
    """

    def __init__(self) -> None:
        self.start = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = fields
        hz = os.sysconf("SC_CLK_TCK")
        own = os.times()
        return (time.monotonic(), (user + nice + system + irq + softirq + steal) / hz,
                own.user + own.system)

    def report(self) -> str:
        """A markdown list item with the other processes' share of the CPUs."""
        end = self._read()
        if self.start is None or end is None:
            return "- CPU use by other processes during the run: unknown"
        wall = (end[0] - self.start[0]) * (os.cpu_count() or 1)
        others = max(0.0, (end[1] - self.start[1]) - (end[2] - self.start[2]))
        share = others / wall if wall > 0 else 0.0
        line = f"- CPU time used by other processes during the run: {share:.0%} of the CPUs"
        if share > 0.1:
            line += (" (other work competed for the cores: multi-threaded BLAS calls slow down "
                     "badly then, so these numbers are unreliable; rerun on an idle machine)")
        return line


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def log(msg: str) -> None:
    """Progress messages go to stderr so that stdout holds only the report."""
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# Memory (bench_memory.py, bench_scan.py): each case runs in a fresh process (Linux only)

MIB = 1 << 20
# glibc's thresholds fixed so that freed arrays go back to the OS at once and the resident
# set follows the live arrays (every array allocation becomes a fresh mapping, which costs
# time: use it for the memory cases); JAX on the CPU.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "131072",
              "JAX_PLATFORMS": "cpu"}


def proc_status(field: str) -> int:
    """A memory field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``...) in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_growth(fn: Callable[[], Any]) -> tuple[int, Any]:
    """Peak resident-set growth (bytes) while ``fn`` runs, and its result."""
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    before = proc_status("VmRSS")
    out = fn()
    return proc_status("VmHWM") - before, out


def traced_peak(fn: Callable[[], Any]) -> tuple[int, Any]:
    """Peak bytes allocated through tracemalloc-visible allocators (NumPy's included)
    while ``fn`` runs, and its result."""
    gc.collect()
    tracemalloc.start()
    try:
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, out


def mb(n: int | None) -> str:
    """Bytes as MiB with one decimal ("-" for None)."""
    return "-" if n is None else f"{n / MIB:.1f}"
