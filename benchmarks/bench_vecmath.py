"""Per-element cost of the transcendental functions on one thread (issue 17).

For each function: NumPy's own (SIMD) loop on the array, a Numba loop calling Numba's
function of a scalar (libm: what ``jit``'s CPU kernels called before session 8), and for
float32 a Numba loop calling :mod:`functx.compiler._vecmath` (what they call now). The
ratios are what :data:`functx.compiler.cpu.NUMPY_SPEEDUP` records: how many threads a fused
loop needs to beat NumPy's one-threaded loop.

Each number is the median of ``--repeats`` calls on ``--size`` elements (inputs drawn in
the function's usual range: ``[-10, 10]``, ``log`` on ``(0, 10]``, ``log1p`` on ``(-1, 9]``),
the systems interleaved call by call (all are one-threaded, nothing spins). Process CPU
time, so other processes on a shared machine count less.

Usage::

    python benchmarks/bench_vecmath.py [--size N] [--repeats N] [--dtype float32|float64|both]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import functx  # noqa: F401
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(ROOT))
from functx.compiler import _vecmath
from functx.primitives._numba import import_numba

from _harness import environment_report, log

NAMES = ("sin", "cos", "tanh", "exp", "expm1", "log", "log1p")
_NUMPY = {"sin": np.sin, "cos": np.cos, "tanh": np.tanh, "exp": np.exp, "expm1": np.expm1,
          "log": np.log, "log1p": np.log1p}


def _loop(fn: Any) -> Callable:
    """A one-threaded Numba loop ``out[i] = fn(x[i])``."""
    numba = import_numba()

    def loop(x: Any, out: Any) -> None:
        for i in range(x.size):
            out[i] = fn(x[i])
    return numba.njit(error_model="numpy")(loop)


def _inputs(name: str, n: int, dtype: Any) -> np.ndarray:
    u = np.random.default_rng(0).random(n)
    x = {"log": 10 * u + 1e-3, "log1p": 10 * u - 0.999}.get(name, 20 * u - 10)
    return x.astype(dtype)


def _median_ns(fns: dict, x: np.ndarray, out: np.ndarray, repeats: int) -> dict:
    for fn in fns.values():
        fn(x, out)  # compile, warm up
    samples: dict = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.process_time()
            fn(x, out)
            samples[k].append(time.process_time() - t0)
    return {k: statistics.median(v) / x.size * 1e9 for k, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--dtype", choices=("float32", "float64", "both"), default="both")
    args = parser.parse_args()
    numba = import_numba()
    dtypes = ("float32", "float64") if args.dtype == "both" else (args.dtype,)
    print(environment_report({"numpy": np, "numba": numba}, ROOT))
    print(f"\nns per element, one thread, {args.size} elements, median of {args.repeats}\n")
    print("| dtype | function | NumPy loop | Numba + libm | Numba + vecmath | libm ÷ NumPy "
          "| vecmath ÷ NumPy |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for dt in dtypes:
        for name in NAMES:
            log(f"{dt} {name}")
            x = _inputs(name, args.size, dt)
            out = np.empty_like(x)
            np_fn = _NUMPY[name]
            fns = {"numpy": lambda x, out, f=np_fn: f(x, out=out),
                   "libm": _loop(getattr(np, np_fn.__name__))}
            if dt == "float32":
                fns["vecmath"] = _loop(_vecmath.numba_helpers(_vecmath.FUNCTIONS[name])[0])
            ns = _median_ns(fns, x, out, args.repeats)
            vm = ns.get("vecmath")
            print(f"| {dt} | {name} | {ns['numpy']:.2f} | {ns['libm']:.2f} | "
                  + (f"{vm:.2f}" if vm else "-") + f" | {ns['libm'] / ns['numpy']:.1f} | "
                  + (f"{vm / ns['numpy']:.1f}" if vm else "-") + " |")


if __name__ == "__main__":
    main()
