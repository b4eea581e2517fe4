"""Per-element cost of the transcendental functions on one thread (issue 17).

For each function: NumPy's own (SIMD) loop on the array, a Numba loop calling Numba's
function of a scalar (libm: what ``jit``'s CPU kernels called before session 8), and for
float32 Numba loops calling :mod:`functx.compiler._vecmath` (float64 arithmetic rounded
once: "vecmath64", session 8) and :mod:`functx.compiler._vecmath32` (float32 arithmetic:
"vecmath32", session 9; rows "sin moderate", "cos moderate": its versions for ``|x| <=
2**20`` that parallel kernels try first, session 10), with fused multiply-adds allowed as
in the kernels. The ratios are what :data:`functx.compiler.cpu.NUMPY_SPEEDUP` records: how
many threads a fused loop needs to beat NumPy's one-threaded loop.

The "chain" columns time a loop applying ``v = f(v) * a + b`` 8 times to each element (ns
per call): a dependent chain, as in a fused kernel, whose cost is latency more than
throughput; ``chain ÷ NumPy`` is the ratio that decides whether fusing pays.

Each number is the median of ``--repeats`` calls on ``--size`` elements (inputs drawn in
the function's usual range: ``[-10, 10]``, ``log`` on ``(0, 10]``, ``log1p`` on ``(-0.9, 9]``),
the systems interleaved call by call (all are one-threaded, nothing spins). Process CPU
time, so other processes on a shared machine count less.

``--ew24``: instead, the fully fused ew24 gradient kernel (``jit(grad)`` of
benchmarks/bench_jit_cpu.py's ew24, float32 1024x1024, every function fused:
``NUMPY_SPEEDUP`` emptied, what a 16-core host runs) on one thread (``NUMBA_NUM_THREADS=1``),
with ``FLOAT32_MATH`` "float64" (_vecmath) and "float32" (_vecmath32) alternately, each in
fresh processes with an empty kernel cache: the first call's wall time (trace + compile)
and the median process CPU time of ``--repeats`` calls; and JAX jit on one thread (XLA's
Eigen thread pool off) when JAX is installed.

Usage::

    python benchmarks/bench_vecmath.py [--size N] [--repeats N] [--dtype float32|float64|both]
    python benchmarks/bench_vecmath.py --ew24 [--rounds N] [--repeats N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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
from functx.compiler import _vecmath, _vecmath32
from functx.primitives._numba import import_numba

from _harness import environment_report, log

# "sin moderate", "cos moderate": _vecmath32's versions for |x| <= MODERATE_MAX (session 10)
NAMES = ("sin", "sin moderate", "cos", "cos moderate", "tanh", "exp", "expm1", "log", "log1p")
_NUMPY = {"sin": np.sin, "cos": np.cos, "tanh": np.tanh, "exp": np.exp, "expm1": np.expm1,
          "log": np.log, "log1p": np.log1p}
_NUMPY.update({"sin moderate": np.sin, "cos moderate": np.cos})


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


def _ew24_child(system: str, repeats: int) -> None:
    """One process: ew24's gradient under ``system`` ("float64", "float32": functx jit with
    that FLOAT32_MATH, all fused; "jax": JAX jit), one thread; prints JSON."""
    from bench_jit_cpu import ew24_fn, workload  # (benchmarks/ on the path)
    _, (x,), _ = workload("ew24")
    if system == "jax":
        import jax
        import jax.numpy as jnp
        g = jax.jit(jax.grad(ew24_fn(jnp)))
        run = lambda: g(x).block_until_ready()  # noqa: E731
    else:
        import functx as fx
        import functx.compiler
        import functx.numpy as fnp
        from functx.compiler import cpu
        cpu.NUMPY_SPEEDUP = {}
        cpu.FLOAT32_MATH = system
        functx.compiler.set_jit_compiler("numba")
        g = fx.jit(fx.grad(ew24_fn(fnp)))
        run = lambda: g(x)  # noqa: E731
    t0 = time.perf_counter()
    run()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        run()
        times.append(time.process_time() - t0)
    print(json.dumps({"first": first, "cpu": statistics.median(times)}))


def ew24_main(rounds: int, repeats: int) -> None:
    """ew24's fully fused gradient kernel on one thread, float64 and float32 internals
    alternately in fresh processes (each with an empty kernel cache), and JAX."""
    try:
        import jax  # noqa: F401
        systems = ("float64", "float32", "jax")
    except ImportError:
        systems = ("float64", "float32")
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
               JAX_PLATFORMS="cpu")
    results: dict = {k: [] for k in systems}
    for r in range(rounds):
        for system in systems:
            log(f"round {r + 1}: {system}")
            with tempfile.TemporaryDirectory(prefix="functx-bench-") as cache:
                out = subprocess.run(
                    [sys.executable, __file__, "--ew24-child", system, "--repeats",
                     str(repeats)], env=dict(env, FUNCTX_CACHE_DIR=cache),
                    capture_output=True, text=True, check=True)
            results[system].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"\new24 jit(grad), float32 1024x1024, fully fused, one thread; per round: median "
          f"process CPU time of {repeats} calls (ms), first call wall time (s)\n")
    print("| system | CPU time per call (ms), each round | first call (s), each round |")
    print("|---|---|---|")
    names = {"float64": "functx, FLOAT32_MATH='float64' (_vecmath)",
             "float32": "functx, FLOAT32_MATH='float32' (_vecmath32)", "jax": "JAX jit"}
    for system, rs in results.items():
        cpu_ms = ", ".join(f"{d['cpu'] * 1e3:.1f}" for d in rs)
        first = ", ".join(f"{d['first']:.1f}" for d in rs)
        print(f"| {names[system]} | {cpu_ms} | {first} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--dtype", choices=("float32", "float64", "both"), default="both")
    parser.add_argument("--ew24", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ew24-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ew24_child:
        return _ew24_child(args.ew24_child, args.repeats)
    if args.ew24:
        return ew24_main(args.rounds, args.repeats)
    numba = import_numba()
    dtypes = ("float32", "float64") if args.dtype == "both" else (args.dtype,)
    print(environment_report({"numpy": np, "numba": numba}, ROOT))
    print(f"\nns per element, one thread, {args.size} elements, median of {args.repeats}\n")
    print("| dtype | function | NumPy loop | Numba + libm | Numba + vecmath64 "
          "| Numba + vecmath32 | libm ÷ NumPy | vecmath64 ÷ NumPy | vecmath32 ÷ NumPy "
          f"| libm, chain of {CHAIN} | vecmath64, chain | vecmath32, chain "
          "| chain ÷ NumPy (libm, vecmath64, vecmath32) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
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
                for key, mod in (("vecmath64", _vecmath), ("vecmath32", _vecmath32)):
                    fname, _, moderate = name.partition(" ")
                    table = getattr(mod, "MODERATE", {}) if moderate else mod.FUNCTIONS
                    if fname not in table:
                        continue
                    helper = mod.numba_helpers(table[fname])[0]
                    fns[key] = _loop(helper, contract=True)
                    fns[key + " chain"] = _chain_loop(helper, x.dtype, name, contract=True)
            ns = _median_ns(fns, x, out, args.repeats)
            base = ns["numpy"]

            def cell(key: str, div: float = 1.0, ratio: bool = False) -> str:
                v = ns.get(key)
                if v is None:
                    return "-"
                return f"{v / div / base:.1f}" if ratio else f"{v / div:.2f}"
            print(f"| {dt} | {name} | {base:.2f} | {cell('libm')} | {cell('vecmath64')} "
                  f"| {cell('vecmath32')} | {cell('libm', ratio=True)} "
                  f"| {cell('vecmath64', ratio=True)} | {cell('vecmath32', ratio=True)} "
                  f"| {cell('libm chain', CHAIN)} | {cell('vecmath64 chain', CHAIN)} "
                  f"| {cell('vecmath32 chain', CHAIN)} | {cell('libm chain', CHAIN, True)}, "
                  f"{cell('vecmath64 chain', CHAIN, True)}, "
                  f"{cell('vecmath32 chain', CHAIN, True)} |")


if __name__ == "__main__":
    main()
