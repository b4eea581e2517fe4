"""Per-element cost of the transcendental functions on one thread (issue 17).

For each function: NumPy's own (SIMD) loop on the array, a Numba loop calling Numba's
function of a scalar (libm: what ``jit``'s CPU kernels called before session 8), and for
float32 a Numba loop calling :mod:`functx.compiler._vecmath` (what they call now, with
fused multiply-adds allowed as in those kernels). The
ratios are what :data:`functx.compiler.cpu.NUMPY_SPEEDUP` records: how many threads a fused
loop needs to beat NumPy's one-threaded loop.

The "chain" columns time a loop applying ``v = f(v) * a + b`` 8 times to each element (ns
per call): a dependent chain, as in a fused kernel, whose cost is latency more than
throughput; ``chain ÷ NumPy`` is the ratio that decides whether fusing pays.

Each number is the median of ``--repeats`` calls on ``--size`` elements (inputs drawn in
the function's usual range: ``[-10, 10]``, ``log`` on ``(0, 10]``, ``log1p`` on ``(-0.9, 9]``),
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


def _loop(fn: Any, contract: bool = False) -> Callable:
    """A one-threaded Numba loop ``out[i] = fn(x[i])`` (``contract``: fused multiply-adds
    allowed, as in the generated kernels calling _vecmath)."""
    numba = import_numba()

    def loop(x: Any, out: Any) -> None:
        for i in range(x.size):
            out[i] = fn(x[i])
    return numba.njit(error_model="numpy", fastmath={"contract"} if contract else False)(loop)


# v = f(v) * A + B keeps a chain of calls in each function's domain
_CHAIN = {"exp": (0.25, -0.3), "log": (0.5, 2.0)}
CHAIN = 8  # calls per element in the chain loop


def _chain_loop(fn: Any, dtype: Any, name: str, contract: bool = False) -> Callable:
    """A one-threaded Numba loop applying ``v = fn(v) * A + B`` :data:`CHAIN` times to each
    element: a dependent chain, as in a fused kernel (latency, not throughput)."""
    numba = import_numba()
    a, b = (dtype.type(c) for c in _CHAIN.get(name, (0.5, 0.1)))
    steps = "\n".join("        v = fn(v) * a + b" for _ in range(CHAIN))
    src = f"def loop(x, out):\n    for i in range(x.size):\n        v = x[i]\n{steps}\n" \
          "        out[i] = v\n"
    scope = {"fn": fn, "a": a, "b": b}
    exec(src, scope)  # noqa: S102  (the unrolled chain)
    return numba.njit(error_model="numpy",
                      fastmath={"contract"} if contract else False)(scope["loop"])


def _inputs(name: str, n: int, dtype: Any) -> np.ndarray:
    u = np.random.default_rng(0).random(n)
    x = {"log": 10 * u + 1e-3, "log1p": 10 * u - 0.9}.get(name, 20 * u - 10)
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
          f"| vecmath ÷ NumPy | libm, chain of {CHAIN} | vecmath, chain of {CHAIN} "
          "| chain ÷ NumPy (libm, vecmath) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for dt in dtypes:
        for name in NAMES:
            log(f"{dt} {name}")
            x = _inputs(name, args.size, dt)
            out = np.empty_like(x)
            np_fn = _NUMPY[name]
            fns = {"numpy": lambda x, out, f=np_fn: f(x, out=out),
                   "libm": _loop(getattr(np, np_fn.__name__))}
            libm = getattr(np, np_fn.__name__)
            fns["libm chain"] = _chain_loop(libm, x.dtype, name)
            if dt == "float32":
                helper = _vecmath.numba_helpers(_vecmath.FUNCTIONS[name])[0]
                fns["vecmath"] = _loop(helper, contract=True)
                fns["vecmath chain"] = _chain_loop(helper, x.dtype, name, contract=True)
            ns = _median_ns(fns, x, out, args.repeats)
            base = ns["numpy"]
            vm, vmc, lc = ns.get("vecmath"), ns.get("vecmath chain"), ns["libm chain"] / CHAIN
            print(f"| {dt} | {name} | {base:.2f} | {ns['libm']:.2f} | "
                  + (f"{vm:.2f}" if vm else "-") + f" | {ns['libm'] / base:.1f} | "
                  + (f"{vm / base:.1f}" if vm else "-") + f" | {lc:.2f} | "
                  + (f"{vmc / CHAIN:.2f}" if vmc else "-") + f" | {lc / base:.1f}, "
                  + (f"{vmc / CHAIN / base:.1f}" if vmc else "-") + " |")


if __name__ == "__main__":
    main()
