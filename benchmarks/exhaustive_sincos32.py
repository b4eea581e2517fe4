"""Every float32 in ``[0, 2**20]`` through ``_vecmath32``'s moderate sin and cos (session 10).

Not a benchmark: the exhaustive check behind the module docstring's claim (at most 1 ulp
from the float64 NumPy function rounded to float32, 0.94% of the points off by 1 ulp), too
slow for the test suite (2-3 minutes a run on one core). Negative arguments follow by
symmetry (the functions reduce ``|x|`` and restore the sign exactly).

Usage::

    python benchmarks/exhaustive_sincos32.py [--fma]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
try:
    import functx  # noqa: F401
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(ROOT))
from functx.compiler import _vecmath32
from functx.primitives._numba import import_numba


def _loop(fn: Any, contract: bool) -> Callable:
    def run(x: Any, out: Any) -> None:
        for i in range(x.size):
            out[i] = fn(x[i])
    return import_numba().njit(error_model="numpy",
                               fastmath={"contract"} if contract else False)(run)


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 steps of two arrays of non-NaN float32."""
    def ordered(v: np.ndarray) -> np.ndarray:
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(a) - ordered(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fma", action="store_true", help="allow fused multiply-adds")
    args = parser.parse_args()
    loops = {name: _loop(_vecmath32.numba_helpers(helper)[0], args.fma)
             for name, helper in _vecmath32.MODERATE.items()}
    ref = {"sin": np.sin, "cos": np.cos}
    hist = {name: np.zeros(4, np.int64) for name in loops}
    top = int(np.float32(_vecmath32.MODERATE_MAX).view(np.int32))
    t0 = time.perf_counter()
    for start in range(0, top + 1, 1 << 23):  # a binade at a time
        x = np.arange(start, min(start + (1 << 23), top + 1), dtype=np.int32).view(np.float32)
        for name, loop in loops.items():
            out = np.empty_like(x)
            loop(x, out)
            d = _ulps(out, ref[name](x.astype(np.float64)).astype(np.float32))
            hist[name] += np.bincount(np.minimum(d, 3), minlength=4)
            if d.max() > 1:
                i = int(np.argmax(d))
                print(f"{name}({x[i]!r}) = {out[i]!r}: {d[i]} ulp")
    total = top + 1
    print(f"every float32 in [0, 2**20] ({total} points), FMA {'on' if args.fma else 'off'}, "
          f"{time.perf_counter() - t0:.0f} s")
    for name, h in hist.items():
        print(f"{name}: 0 ulp {h[0]}, 1 ulp {h[1]} ({100 * h[1] / total:.2f}%), "
              f"2 ulp {h[2]}, more {h[3]}")


if __name__ == "__main__":
    main()
