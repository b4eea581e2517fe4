"""The CPU code generator: each fusion cluster becomes one Numba loop nest.

A :class:`~functx.compiler.partition.Cluster` is written as the source of one Python
function compiled by Numba (``@njit(parallel=..., fastmath=False, error_model="numpy",
cache=True)``): a loop nest over the cluster's iteration shape, ``prange`` on the outer loop
when the cluster is big enough for threads to pay (:data:`PARALLEL_MIN` elements), that
reads each input through constant strides (0 along broadcast axes), computes every
equation's element from its primitive's scalar rule (:mod:`functx.registry.scalar`), writes
the values used later, and folds the reductions into accumulators. Adjacent loop axes that
every operand walks contiguously are merged, so an elementwise chain over full arrays is a
single flat loop. A reduction over every axis is split into :data:`CHUNKS` parallel partial
results, combined at the end.

The source is specialised to the shapes (jit traces per signature) and is its own cache
key: it is written once to ``$FUNCTX_CACHE_DIR/numba`` (default ``~/.cache/functx/numba``)
under its hash, and Numba caches the machine code beside it, so a second process loads it
from disk instead of compiling. Numba is imported on the first compile only.

Precision: float32 stays float32 (constants are typed, functions are Numba's single-precision
ones, and ``sin``, ``cos``, ``tanh``, ``exp``, ``expm1``, ``log``, ``log1p`` the vectorisable
ones of :mod:`functx.compiler._vecmath32`, in float32 arithmetic, at most 1-2 ulp from the
correctly rounded value; :data:`FLOAT32_MATH` selects :mod:`functx.compiler._vecmath`'s
instead, float64 arithmetic rounded once, at most 1 ulp); float32 sums accumulate in
float64 (the reduction rule's accumulator) and are rounded once. Results agree with the
NumPy path to a few ulps per operation (transcendental functions come from LLVM/libm or
_vecmath rather than NumPy's own loops).

A kernel calling _vecmath allows fused multiply-adds (``fastmath={'contract'}``: its
polynomials run 18% faster; other kernels keep ``fastmath=False``), and a parallel flat
one is written as a serial body function over a slice, two interleaved streams per
iteration, and a ``prange`` over 64 slices calling it (:func:`_outline`: compile time and
latency). When that kernel calls float32 ``sin`` or ``cos``, the body runs in blocks of
:data:`BLOCK` elements, each first with ``_vecmath32``'s moderate versions (``|x| <=
2**20``; half of ew24's gradient time) while a flag records an argument beyond that bound,
then again with the exact ones in a one-stream function where it is set; such a kernel
never runs in place (``Kernel.inplace`` empty: the second pass reads the inputs again).
A parallel reduction over every element calling _vecmath is outlined too, one chunk per
body call, in blocks whose elements to reduce are stored in a buffer and added in order
after the block (:func:`_reduce_in_blocks`: the same sums, but the block's loop
vectorises), with the moderate sin/cos as above.
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import re
import sys
import threading
import types
from typing import Any, Callable

import numpy as np

from functx.compiler import _vecmath, _vecmath32
from functx.compiler.partition import Cluster, calls, literal_expr, operand_dtype, scalar_expr
from functx.compiler.program import LoopNest, contiguous_strides
from functx.ir import Literal, Var
from functx.primitives._numba import import_numba, serialised
from functx.registry.scalar import Expr, var

__all__ = ["Kernel", "generate", "fuse_policy", "PARALLEL_MIN", "CHUNKS", "VECTOR_MIN",
           "NUMPY_SPEEDUP", "numpy_faster", "threads", "cache_dir", "FLOAT32_MATH", "BLOCK",
           "float32_math"]

# Clusters with at least this many elements in their iteration space run on all cores
# (prange); smaller ones run serially (thread start-up costs more than it saves, and on a
# loaded machine a parallel loop waits for its slowest thread).
PARALLEL_MIN = int(os.environ.get("FUNCTX_PARALLEL_MIN", 1 << 18))

# Functions NumPy evaluates with SIMD loops faster than a fused loop, and by how much: the
# cost per element of a call inside a fused loop over NumPy's loop, one thread each.
# NumPy's loop runs on one thread, a fused loop on all: on arrays of at least VECTOR_MIN
# elements an equation calling one of them stays a NumPy call (the arithmetic around it
# still fuses) when the machine has fewer threads than that ratio.
# float32 sin, cos, tanh, exp, expm1, log, log1p call functx.compiler._vecmath32 (vectorised
# float32 arithmetic, see FLOAT32_MATH; before session 8, scalar libm at 5-27x NumPy's cost).
# Their ratios are those of a dependent chain of calls (benchmarks/bench_vecmath.py, "chain"
# columns), as in a fused kernel, where latency rather than throughput bounds a loop body,
# rounded up: session 9 (_vecmath32, 512-bit vectors) 1.2-3.7x, session 8 (_vecmath)
# 2.5-6x (x86-64 with AVX-512, NumPy 2.4, 1M elements). tanh, exp, expm1 (1.2-1.7x now) stay
# at 2.5: on 2 cores ew24 ran 22 ms with exp fused, 17 ms with it left to NumPy (session 8),
# not measured again. float64 keeps libm (its ratios: independent calls). ew24 (jit(grad),
# 1024x1024 float32), one thread, CPU time: every function left to NumPy 16-18 ms, all fused
# 24.5 ms (_vecmath: 33 ms; libm: 128 ms; JAX jit: 55 ms); on 2 cores NumPy's loops win, on
# 16 cores all fuse. (With FLOAT32_MATH = "float64" session 8's ratios fit better: sin 6,
# cos 5.5, tanh 4, log 4.5, log1p 4.5.) (On a 16-core host before _vecmath: left to NumPy
# 45 ms, all fused with libm 17 ms, only tanh left 14 ms, JAX 8.6 ms.) Session 10: parallel
# flat kernels call sin/cos's moderate versions first (chain ratio 2, ew24 all fused 12 ms
# on one thread; full reductions too); sin/cos stay at 4 here, for the kernels that call the
# exact ones (serial, strided, reductions over some axes).
NUMPY_SPEEDUP = {np.dtype(np.float32): {"sin": 4, "cos": 4, "tanh": 2.5, "exp": 2.5,
                                        "expm1": 2.5, "log": 3, "log1p": 3},
                 np.dtype(np.float64): {"tanh": 11, "exp": 4.5, "expm1": 8, "log": 4,
                                        "log1p": 8}}
VECTOR_MIN = 4096

# The float32 sin, cos, tanh, exp, expm1, log, log1p that kernels call: "float32"
# (functx.compiler._vecmath32: float32 arithmetic, 16 AVX-512 lanes, at most 1-2 ulp from
# the correctly rounded value; session 9) or "float64" (functx.compiler._vecmath: float64
# arithmetic rounded once, at most 1 ulp; session 8). The float32 ones take 0.6-0.8x the
# time in a dependent chain (benchmarks/bench_vecmath.py) and ew24's fused gradient kernel
# ~0.7x (benchmarks/README.md, session 9). Environment: FUNCTX_FLOAT32_MATH.
FLOAT32_MATH = os.environ.get("FUNCTX_FLOAT32_MATH", "float32")
_MATH = {"float32": _vecmath32, "float64": _vecmath}


def float32_math() -> types.ModuleType:
    """The module of float32 transcendental functions kernels call (:data:`FLOAT32_MATH`).

    Raises:
        ValueError: FLOAT32_MATH is neither "float32" nor "float64".
    """
    mod = _MATH.get(FLOAT32_MATH)
    if mod is None:
        raise ValueError(f"functx.compiler.cpu.FLOAT32_MATH (or FUNCTX_FLOAT32_MATH) is "
                         f"{FLOAT32_MATH!r}; it must be 'float32' or 'float64'.")
    return mod


def threads() -> int:
    """The threads a parallel fused loop runs on (Numba's default: the usable CPUs, or
    ``NUMBA_NUM_THREADS``), read without importing Numba."""
    env = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def numpy_faster(dtype: np.dtype) -> frozenset:
    """The functions of ``dtype`` that stay NumPy calls on big arrays on this machine (see
    :data:`NUMPY_SPEEDUP`)."""
    n = threads()
    return frozenset(f for f, r in NUMPY_SPEEDUP.get(np.dtype(dtype), {}).items() if r > n)


# A reduction over every axis is split into this many partial results (parallel).
CHUNKS = 64

# A parallel flat kernel calling float32 sin or cos computes its slices in blocks of this
# many elements per stream, each first with their moderate versions (see _outline).
BLOCK = 1024

_FUNCS = {
    "sin": "np.sin", "cos": "np.cos", "tan": "np.tan", "asin": "np.arcsin",
    "acos": "np.arccos", "atan": "np.arctan", "atan2": "np.arctan2", "sinh": "np.sinh",
    "cosh": "np.cosh", "tanh": "np.tanh", "exp": "np.exp", "expm1": "np.expm1",
    "log": "np.log", "log1p": "np.log1p", "sqrt": "np.sqrt", "erf": "math.erf",
    "floor": "np.floor", "ceil": "np.ceil", "rint": "np.rint", "abs": "np.abs",
    "pow": "np.power", "isfinite": "np.isfinite", "isnan": "np.isnan",
}
_BINOPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "eq": "==",
           "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "&", "or": "|",
           "xor": "^"}


def fuse_policy(e: Any, expr: Expr) -> bool:
    """The CPU generator's veto for :func:`~functx.compiler.partition.partition`: False for
    an equation on at least :data:`VECTOR_MIN` elements whose expression calls a function
    that NumPy computes faster on this machine (:func:`numpy_faster`)."""
    if e.outputs[0].aval.size < VECTOR_MIN:
        return True
    return not (calls(expr) & numpy_faster(e.outputs[0].aval.dtype))


def cache_dir() -> str:
    """Where generated kernels and Numba's cache of them live."""
    root = os.environ.get("FUNCTX_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "functx")
    return os.path.join(root, "numba")


def _typed(dtype: np.dtype, text: str) -> str:
    if dtype == np.bool_:
        return f"np.bool_({text})"
    return f"np.{dtype.name}({text})"


def _literal_text(v: Any, dtype: np.dtype) -> str:
    """A number as Numba-Python source of that dtype (``np.float32(0.9)``, ``np.inf``...)."""
    dtype = np.dtype(dtype)
    v = np.asarray(v).astype(dtype).item()
    if dtype == np.bool_:
        return repr(bool(v))
    if isinstance(v, float) and not math.isfinite(v):
        return _typed(dtype, "np.nan" if v != v else ("np.inf" if v > 0 else "-np.inf"))
    return _typed(dtype, repr(v))


class _Emitter:
    """Renders per-element expressions as Numba-Python statements, one temporary per
    node (shared nodes once), constants hoisted to the top of the function."""

    def __init__(self, math: types.ModuleType) -> None:
        self.consts: dict = {}
        self.n = 0
        self.math = math  # functx.compiler._vecmath32 or _vecmath (float32_math())
        self.helpers: set = set()  # its functions called

    def constant(self, e: Expr) -> str:
        key = (e.dtype.str, repr(e.value))
        name = self.consts.get(key)
        if name is None:
            text = _literal_text(e.value, e.dtype)
            name = self.consts[key] = f"k{len(self.consts)}"
            self.const_lines.append(f"{name} = {text}")
        return name

    const_lines: list

    def expr(self, e: Expr, lines: list, memo: dict) -> str:
        got = memo.get(id(e))
        if got is not None:
            return got
        if e.op == "var":
            return e.value
        if e.op == "const":
            return self.constant(e)
        args = [self.expr(a, lines, memo) for a in e.args]
        op = e.op
        if op == "call":
            helper = self.math.FUNCTIONS.get(e.value)
            if helper and e.dtype == np.float32 and all(a.dtype == np.float32 for a in e.args):
                self.helpers.add(helper)  # vectorisable arithmetic instead of libm
                text = f"{helper}({', '.join(args)})"
            else:  # Numba's functions of float32 return float32 (checked by the tests)
                text = f"{_FUNCS[e.value]}({', '.join(args)})"
        elif op in _BINOPS:
            text = f"({args[0]} {_BINOPS[op]} {args[1]})"
        elif op == "neg":
            text = f"(-{args[0]})"
        elif op == "not":
            text = f"(not {args[0]})"
        elif op == "where":
            text = f"({args[1]} if {args[0]} else {args[2]})"
        elif op == "cast":
            text = f"({args[0]} != 0)" if e.dtype == np.bool_ else _typed(e.dtype, args[0])
        else:
            raise ValueError(f"the Numba generator cannot render {op!r}")
        self.n += 1
        name = f"t{self.n}"
        lines.append(f"{name} = {text}")
        memo[id(e)] = name
        return name


class _Plan(LoopNest):
    """The loop nest of a cluster (:class:`~functx.compiler.program.LoopNest`) in the CPU's
    order, operands numbered in the order they are added."""

    def __init__(self, c: Cluster) -> None:
        n = len(c.shape)
        red = tuple(c.reduce_axes or ())
        # Memory order with an array of accumulators when the last axis is kept (a sum over
        # the batch: rows added to a row, contiguous and vectorisable); else the kept axes
        # outside and one scalar accumulator per reduced run.
        self.natural = bool(red) and (n - 1) not in red
        super().__init__(c.shape, red, list(range(n)) if self.natural else
                         [a for a in range(n) if a not in red] + list(red))
        self.operands = self.strides  # operand number -> its stride per loop

    def add(self, strides_by_axis: list) -> int:
        k = len(self.strides)
        super().add(k, strides_by_axis)
        return k


def _offset(strides: list, loop_vars: list) -> str:
    terms = [f"{v} * {s}" if s != 1 else v for v, s in zip(loop_vars, strides) if s != 0]
    return " + ".join(terms) or "0"


def generate(c: Cluster, name: str, math: types.ModuleType | None = None
             ) -> tuple[str, list, bool, frozenset, tuple]:
    """The Numba source of cluster ``c`` as a function ``name(in..., out...)`` of flat
    contiguous arrays, the cluster's output variables in argument order, whether it
    runs in parallel, the (input, output) index pairs that may share memory (the input
    is read only at the element the output writes, before it is written: no reduction,
    no broadcast or transposed read of it, so the kernel may run in place), and the
    functions of ``math`` (default :func:`float32_math`: :mod:`functx.compiler._vecmath32`
    or :mod:`functx.compiler._vecmath`) the source calls (sorted names)."""
    size = int(np.prod(c.shape, dtype=np.int64))
    parallel = size >= PARALLEL_MIN
    plan = _Plan(c)
    em = _Emitter(math or float32_math())
    em.const_lines = []
    body: list = []
    names: dict = {}          # var -> local name of its element
    loads: dict = {}          # (var, axes) -> (local name, operand index)
    in_names = [f"in{i}" for i in range(len(c.inputs))]
    in_index = {v: i for i, v in enumerate(c.inputs)}
    red_out: list = []        # (result var, accumulator name, its dtype, the reduction rule)
    red_src: dict = {}        # accumulator name -> (the element it reduces, its dtype)

    def load(v: Var, axes: tuple) -> str:
        key = (v, axes)
        got = loads.get(key)
        if got is None:
            shape = tuple(v.aval.shape)
            st = contiguous_strides(shape)
            by_axis = [0] * len(c.shape)
            for i, a in enumerate(axes):
                if shape[i] != 1:  # a unit axis is never read, wherever it maps
                    by_axis[a] = st[i]
            got = loads[key] = (f"a{len(loads)}", plan.add(by_axis), in_names[in_index[v]])
        return got[0]

    for e in c.eqns:
        rule = e.prim.scalar
        like = operand_dtype(e)
        if rule.kind == "reduction":
            x = e.inputs[0]
            src = names.get(x) or load(x, tuple(range(len(c.shape))))
            dt = np.dtype(x.aval.dtype)
            acc_dt = rule.accumulator(dt) if rule.accumulator else dt
            acc = f"acc{len(red_out)}"
            red_out.append((e.outputs[0], acc, acc_dt, rule))
            red_src[acc] = (src, dt)
            step = rule.combine(var("r" + acc, acc_dt), var(src, dt) if dt == acc_dt else
                                Expr("cast", (var(src, dt),), acc_dt))
            lines = [f"r{acc} = {acc}[ko]" if plan.natural else f"r{acc} = {acc}"]
            text = em.expr(step, lines, {})
            body.append(("reduce", acc, text, lines))
            continue
        avals = tuple(a.aval for a in e.inputs)
        axes = rule.operand_axes(avals, e.outputs[0].aval, **e.params)
        leaves = []
        for a, ax in zip(e.inputs, axes):
            if type(a) is Literal:
                leaves.append(literal_expr(a, like))
            elif a in names:
                leaves.append(var(names[a], a.aval.dtype))
            else:
                leaves.append(var(load(a, tuple(ax)), a.aval.dtype))
        expr = scalar_expr(e, leaves)
        lines: list = []
        out = e.outputs[0]
        text = em.expr(expr, lines, {})  # a memo per equation (ids of dead nodes recur)
        if not lines:  # the element is an operand as it is (a broadcast): a new name for it
            lines.append(f"v{len(names)} = {text}")
            text = f"v{len(names)}"
        body.append(("lines", lines))
        names[out] = text

    outs = list(c.outputs)
    out_names = [f"out{i}" for i in range(len(outs))]
    red_vars = {r[0] for r in red_out}
    stores = []
    full = contiguous_strides(c.shape)
    kept = [a for a in range(len(c.shape)) if a not in (c.reduce_axes or ())]
    kept_size = int(np.prod([c.shape[a] for a in kept], dtype=np.int64))
    by_axis = [0] * len(c.shape)
    for st, a in zip(contiguous_strides(tuple(c.shape[a] for a in kept)), kept):
        by_axis[a] = st
    kept_op = plan.add(by_axis)  # the offset of a reduction's result
    for v, oname in zip(outs, out_names):
        if v in red_vars:
            stores.append(("red", v, oname, kept_op))
        else:
            stores.append(("elem", v, oname, plan.add(list(full))))
    plan.merge()

    L = len(plan.sizes)
    kept_n = sum(not r for r in plan.reduced)
    loop_vars = [f"i{k}" for k in range(L)]
    src = [f"def {name}({', '.join(in_names + out_names)}):"]
    src += ["    " + ln for ln in em.const_lines]
    inner: list = []
    buffered: list = []  # inner with each reduced element stored in a buffer b{acc} instead
    for key, (lname, op, arr) in loads.items():
        inner.append(f"{lname} = {arr}[{_offset(plan.operands[op], loop_vars)}]")
    if red_out and plan.natural:
        inner.append(f"ko = {_offset(plan.operands[kept_op], loop_vars)}")
    buffered += inner
    for item in body:
        if item[0] == "lines":
            inner += item[1]
            buffered += item[1]
        else:
            _, acc, step, lines = item
            inner += lines + [f"{acc}[ko] = {step}" if plan.natural else f"{acc} = {step}"]
            buffered.append(f"b{acc}[i0] = {red_src[acc][0]}")
    for kind, v, oname, op in stores:
        if kind == "elem":
            line = f"{oname}[{_offset(plan.operands[op], loop_vars)}] = {names[v]}"
            inner.append(line)
            buffered.append(line)
    chunked = bool(red_out) and kept_n == 0 and L > 0 and not plan.natural
    loop = "prange" if parallel else "range"
    ind = "    "
    init = [f"{acc} = {_literal_text(rule.identity(dt), dt)}" for _, acc, dt, rule in red_out]
    finals = []
    for kind, v, oname, op in stores:
        if kind == "red":
            acc, dt_out = next((a, np.dtype(r.aval.dtype)) for r, a, _, _ in red_out if r is v)
            finals.append((oname, op, acc, dt_out))
    if plan.natural:
        src += [f"    {acc} = np.full({kept_size}, {_literal_text(rule.identity(dt), dt)})"
                for _, acc, dt, rule in red_out]
        depth = 1
        for k in range(L):
            rng = loop if k == 0 and not plan.reduced[0] else "range"  # no race on acc
            src.append(ind * depth + f"for {loop_vars[k]} in {rng}({plan.sizes[k]}):")
            depth += 1
        src += [ind * depth + ln for ln in inner]
        if finals:
            src.append(f"    for ko in range({kept_size}):")
            src += [f"        {oname}[ko] = {_typed(dt_out, acc + '[ko]')}"
                    for oname, op, acc, dt_out in finals]
    elif not chunked:
        depth = 1
        for k in range(L):
            if k == kept_n:  # the first reduced loop: the accumulators start here
                src += [ind * depth + ln for ln in init]
            src.append(ind * depth + f"for {loop_vars[k]} in {loop if k == 0 else 'range'}"
                       f"({plan.sizes[k]}):")
            depth += 1
        if kept_n == L:  # no reduced loop left (size-1 axes): one element per accumulator
            src += [ind * depth + ln for ln in init]
        src += [ind * depth + ln for ln in inner]
        for oname, op, acc, dt_out in finals:
            at = _offset(plan.operands[op][:kept_n], loop_vars[:kept_n])
            src.append(ind * (1 + kept_n) + f"{oname}[{at}] = {_typed(dt_out, acc)}")
    else:
        n0 = plan.sizes[0]
        P = min(CHUNKS, n0)
        for _, acc, dt, _r in red_out:
            src.append(f"    p{acc} = np.empty({P}, np.{dt.name})")
        src.append(f"    for c in {loop}({P}):")
        src += ["        " + ln for ln in init]
        src.append(f"        for i0 in range(c * {n0} // {P}, (c + 1) * {n0} // {P}):")
        depth = 3
        for k in range(1, L):
            src.append(ind * depth + f"for {loop_vars[k]} in range({plan.sizes[k]}):")
            depth += 1
        src += [ind * depth + ln for ln in inner]
        src += [f"        p{acc}[c] = {acc}" for _, acc, _, _ in red_out]
        tail = ["    " + ln for ln in init] + [f"    for c in range({P}):"]
        tail += ["        " + ln for ln in _combine(em.math, red_out, "p{acc}[c]", "{acc}")]
        tail += [f"    {oname}[0] = {_typed(dt_out, acc)}" for oname, op, acc, dt_out in finals]
        src += tail
    strides: dict = {}  # array -> its strides along the (single) loop
    for lname, op, arr in loads.values():
        strides.setdefault(arr, set()).add(plan.operands[op][0] if L == 1 else None)
    for kind, v, oname, op in stores:
        strides.setdefault(oname, set()).add(plan.operands[op][0] if L == 1 else None)
    flat = em.helpers and parallel and L == 1 and all(
        st <= {0} or st == {1} for st in strides.values())
    outlined = flat and not red_out
    # sin/cos in blocks, each tried with the moderate reduction first (see _outline)
    moderate = {em.math.FUNCTIONS[f]: g for f, g in getattr(em.math, "MODERATE", {}).items()
                if em.math.FUNCTIONS[f] in em.helpers} if flat and (outlined or chunked) else {}
    loop_text = "\n".join(src)
    if sum(len(re.findall(rf"\b{h}\(", loop_text)) for h in moderate) != sum(
            len(re.findall(rf"\b{h}\(\w+\)", loop_text)) for h in moderate):
        moderate = {}  # (each argument must be a name: the flag reads them; always so now)
    if outlined:
        src = _outline(src, name, in_names + out_names, len(em.const_lines), plan.sizes[0],
                       [a for a, st in strides.items() if st == {1}], moderate,
                       getattr(em.math, "MODERATE_MAX", None))
        em.helpers.update(moderate.values())
    elif flat and chunked:  # a parallel reduction over every element: chunk by chunk
        src = _reduce_in_blocks(name, in_names + out_names, em.const_lines, buffered,
                                red_out, red_src, tail, plan.sizes[0],
                                [a for a, st in strides.items() if st == {1}], moderate,
                                em.math)
        em.helpers.update(moderate.values())
    else:
        src.insert(0, _decorator("prange(" in "".join(src), bool(em.helpers)))
    text = "\n".join(src) + "\n"
    inplace: set = set()
    # (a block computed again reads its inputs after writing its outputs: never in place)
    if not red_out and not (outlined and plan.sizes[0] % 2) and not moderate:
        for j, (kind, v, oname, op) in enumerate(stores):
            for i, u in enumerate(c.inputs):
                ops = [o for (lv, _ax), (_l, o, _a) in loads.items() if lv is u]
                if ops and tuple(u.aval.shape) == tuple(v.aval.shape) and all(
                        plan.operands[o] == plan.operands[op] for o in ops):
                    inplace.add((i, j))
    return text, outs, "prange(" in text, frozenset(inplace), tuple(sorted(em.helpers))


_LOCAL = re.compile(r"\b([atv]\d+)\b")  # the loop body's per-element names


def _outline(src: list, name: str, args: list, n_consts: int, n0: int,
             sliced: list, moderate: dict | None = None, bound: Any = None) -> list:
    """The parallel kernel ``src`` (its definition, ``n_consts`` constant lines, then one
    flat loop ``for i0 in prange(n0)`` reading the arrays ``sliced`` at ``i0`` and the others
    at 0) as a serial function ``{name}_body(args..., lo, hi)`` for the elements
    ``[lo, hi)``, and the kernel calling it on :data:`CHUNKS` slices in parallel (of even
    sizes, but the last one when ``n0`` is odd).

    For kernels calling :mod:`functx.compiler._vecmath`. Numba inlines those functions into
    its IR, and on big loop bodies its passes over a ``prange`` loop (copy propagation) take
    quadratic time: compiling the ew24 gradient's kernel took 26 s, 8 s outlined. The body
    slices its arrays and loops from 0: indexed from ``lo`` instead, LLVM vectorised a loop
    with three outputs no more (30 ns per element instead of 5). And the body runs two
    streams, the slice's halves, statement by statement interleaved: a chain of these
    functions is bound by latency (each iteration is too long for the CPU to overlap the
    next), and two independent chains in one iteration took ew24's gradient from 44 to 26
    ns per element (twice the compile time). With an odd count the halves share their
    middle element, computed twice (so such a kernel must not run in place).

    ``moderate`` (helper name -> its cheaper version for ``|x| <= bound``, and NaN:
    ``_vecmath32.MODERATE``): the body runs in blocks of :data:`BLOCK` elements per stream,
    each with the cheaper functions while OR-ing a flag ``|x| > bound`` over their arguments
    (a vectorised reduction, one flag per stream), then once more with the exact ones,
    ``{name}_exact``, where the flag is set (a vectorised loop computes both sides of a
    select: a choice per element would cost as much as the exact functions). The second
    pass reads the block's inputs after the first wrote its outputs: such a kernel must
    not run in place."""
    moderate = moderate or {}
    names = "|".join(map(re.escape, moderate)) or "(?!)"
    call, arg = re.compile(rf"\b({names})\("), re.compile(rf"\b(?:{names})\((\w+)\)")
    streams, fast, flags = [], [], []
    for k in (0, 1):
        def rename(line: str, k: int = k) -> str:
            line = _LOCAL.sub(lambda m: f"{m.group(1)}_{k}", line)
            for a in sliced:
                line = re.sub(rf"\b{a}\[", f"{a}_{k}[", line)
            return line
        streams.append([rename(ln) for ln in src[2 + n_consts:]])
        fast.append([call.sub(lambda m: moderate[m.group(1)] + "(", ln) for ln in streams[k]])
        used = dict.fromkeys(arg.findall("\n".join(streams[k])))  # (in order, once each)
        tests = [f"(abs({v}) > bound)" for v in used]
        flags += [f"            big_{k} = big_{k} | " + " | ".join(tests[j:j + 4])
                  for j in range(0, len(tests), 4)]  # (four to a line)
    head = [f"def {name}_body({', '.join(args)}, lo, hi):", "    h = (hi - lo + 1) // 2"]
    consts = src[1:1 + n_consts]
    if not moderate:
        body = [*head, *[f"    {a}_0 = {a}[lo:lo + h]" for a in sliced],
                *[f"    {a}_1 = {a}[hi - h:hi]" for a in sliced], *consts,
                "    for i0 in range(h):", *[ln for pair in zip(*streams) for ln in pair]]
    else:  # (the exact pass, rarely run, in one stream: less code to compile)
        exact = [f"def {name}_exact({', '.join(args)}, lo, hi):",
                 *[f"    {a}_0 = {a}[lo:hi]" for a in sliced], *consts,
                 "    for i0 in range(hi - lo):", *streams[0], "", "", _decorator(False, True)]
        call_exact = f"{name}_exact({', '.join(args)}, "
        body = [*exact, *head, *consts, f"    bound = {_literal_text(bound, np.float32)}",
                f"    for s in range(0, h, {BLOCK}):", f"        n = min({BLOCK}, h - s)",
                *[f"        {a}_0 = {a}[lo + s:lo + s + n]" for a in sliced],
                *[f"        {a}_1 = {a}[hi - h + s:hi - h + s + n]" for a in sliced],
                "        big_0 = big_1 = False",
                "        for i0 in range(n):",
                *["    " + ln for pair in zip(*fast) for ln in pair],
                *flags,
                "        if big_0:  # an argument beyond bound: the block again, exactly",
                f"            {call_exact}lo + s, lo + s + n)",
                "        if big_1:", f"            {call_exact}hi - h + s, hi - h + s + n)"]
    P, H = min(CHUNKS, n0 // 2), n0 // 2
    return [_decorator(False, True), *body, "", "", _decorator(True), src[0],
            f"    for c in prange({P}):",
            f"        hi = {n0} if c == {P - 1} else 2 * ((c + 1) * {H} // {P})",
            f"        {name}_body({', '.join(args)}, 2 * (c * {H} // {P}), hi)"]


def _renamed(em_lines: list) -> list:
    """Statements of a second emitter, their temporaries and constants renamed apart from
    a loop body's (``t1`` -> ``tc1``, ``k0`` -> ``kc0``)."""
    return [re.sub(r"\b([tk])(\d+)\b", r"\1c\2", ln) for ln in em_lines]


def _combine(math: types.ModuleType, red_out: list, part: str, total: str) -> list:
    """Statements combining each accumulator's partial result ``part`` into ``total``
    (``{acc}`` in them names the accumulator)."""
    lines: list = []
    for _, acc, dt, rule in red_out:
        em = _Emitter(math)
        em.const_lines = []
        body: list = []
        step = em.expr(rule.combine(var(total.format(acc=acc), dt),
                                    var(part.format(acc=acc), dt)), body, {})
        lines += _renamed(em.const_lines + body + [f"{total.format(acc=acc)} = {step}"])
    return lines


def _reduce_in_blocks(name: str, args: list, consts: list, buffered: list, red_out: list,
                      red_src: dict, tail: list, n0: int, sliced: list, moderate: dict,
                      math: types.ModuleType) -> list:
    """A parallel kernel reducing over all its ``n0`` elements that calls
    :mod:`functx.compiler._vecmath` or ``_vecmath32``, written as :func:`_outline` writes a
    flat one: a serial ``{name}_body`` computing a chunk's partial results (the kernel's
    ``prange`` over :data:`CHUNKS` chunks, then ``tail``, combining them), in blocks of
    :data:`BLOCK` elements. The loop body ``buffered`` stores each element to reduce in a
    buffer ``b{acc}`` of the block, folded into the chunk's accumulator, in order, after
    the block: the same result as one loop, but the block's loop vectorises (an ordered
    floating-point reduction does not: ew24's value_and_grad took 348 ms on one thread,
    20 ms now). With ``moderate`` (float32 sin/cos) each block is computed first with the
    moderate versions and a flag, then again with the exact ones (``{name}_exact``) if it
    is set. One stream (no interleaving as in :func:`_outline`)."""
    names = "|".join(map(re.escape, moderate)) or "(?!)"
    call, arg = re.compile(rf"\b({names})\("), re.compile(rf"\b(?:{names})\((\w+)\)")
    exact = []
    for line in buffered:
        for a in sliced:
            line = re.sub(rf"\b{a}\[", f"{a}_0[", line)
        exact.append(line)
    fast = [call.sub(lambda m: moderate[m.group(1)] + "(", ln) for ln in exact]
    tests = [f"(abs({v}) > bound)" for v in dict.fromkeys(arg.findall("\n".join(exact)))]
    accs = ", ".join(acc for _, acc, _, _ in red_out)
    bufs = ", ".join(f"b{acc}" for _, acc, _, _ in red_out)
    fold: list = []
    for _, acc, acc_dt, rule in red_out:
        src, dt = red_src[acc]
        item = var(f"b{acc}[i0]", dt)
        em = _Emitter(math)
        em.const_lines = []
        lines = [f"r{acc} = {acc}"]
        step = em.expr(rule.combine(var("r" + acc, acc_dt), item if dt == acc_dt else
                                    Expr("cast", (item,), acc_dt)), lines, {})
        fold += _renamed(em.const_lines + lines + [f"{acc} = {step}"])
    dec = _decorator(False, True)
    P = min(CHUNKS, n0)
    exact_fn = [
        dec, f"def {name}_exact({', '.join(args)}, {bufs}, lo, hi):",
        *[f"    {a}_0 = {a}[lo:hi]" for a in sliced], *["    " + ln for ln in consts],
        "    for i0 in range(hi - lo):", *["        " + ln for ln in exact], "", ""]
    again = [
        *["            big = big | " + " | ".join(tests[j:j + 4])
          for j in range(0, len(tests), 4)],
        "        if big:  # an argument beyond bound: the block again, exactly",
        f"            {name}_exact({', '.join(args)}, {bufs}, s, s + n)"]
    return [
        *(exact_fn if moderate else []),
        dec, f"def {name}_body({', '.join(args)}, lo, hi):",
        *["    " + ln for ln in consts],
        *([f"    bound = {_literal_text(math.MODERATE_MAX, np.float32)}"] if moderate else []),
        *[f"    b{acc} = np.empty({BLOCK}, np.{red_src[acc][1].name})"
          for _, acc, _, _ in red_out],
        *[f"    {acc} = {_literal_text(rule.identity(dt), dt)}" for _, acc, dt, rule in red_out],
        f"    for s in range(lo, hi, {BLOCK}):", f"        n = min({BLOCK}, hi - s)",
        *[f"        {a}_0 = {a}[s:s + n]" for a in sliced],
        *(["        big = False"] if moderate else []),
        "        for i0 in range(n):", *["            " + ln for ln in fast],
        *(again if moderate else []),
        "        for i0 in range(n):  # (in order)", *["            " + ln for ln in fold],
        f"    return {accs}", "", "",
        _decorator(True), f"def {name}({', '.join(args)}):",
        *[f"    p{acc} = np.empty({P}, np.{dt.name})" for _, acc, dt, _r in red_out],
        f"    for c in prange({P}):",
        f"        {accs} = {name}_body({', '.join(args)}, c * {n0} // {P}, "
        f"(c + 1) * {n0} // {P})",
        *[f"        p{acc}[c] = {acc}" for _, acc, _, _ in red_out], *tail]


_NUMBA_TYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
                np.dtype(np.bool_): "boolean", np.dtype(np.int32): "int32",
                np.dtype(np.int64): "int64"}
_HEADER = "import math\nimport numpy as np\nfrom numba import njit, prange\n"
# float32 transcendentals (functx.compiler._vecmath); its VERSION in the source (the cache
# key) makes a change of those functions recompile the kernels that inline them
_HELPERS = ("from {module} import numba_helpers\n"
            "{names} = numba_helpers({quoted})  # vecmath {version}\n")


def _decorator(parallel: bool, contract: bool = False) -> str:
    """``contract``: allow fused multiply-adds (a loop calling _vecmath: its polynomials and
    reductions are written for either rounding; 18% less time on ew24's gradient)."""
    fastmath = "{'contract'}" if contract else "False"
    return f"@njit(parallel={parallel}, fastmath={fastmath}, error_model='numpy', cache=True)"


_LOCK = threading.Lock()


class Kernel:
    """One compiled cluster: its source, and the callable that runs it on arrays.

    Calling it with the cluster's input arrays returns the list of its output arrays
    (compiling on the first call). ``outs=`` gives preallocated C-contiguous outputs (one
    array or None per output, of its shape and dtype): the kernel writes into them and
    returns them (``jit``'s memory planner, :mod:`functx.compiler.memory`). An output may
    share memory with an input only for the pairs in ``kernel.inplace``."""

    def __init__(self, c: Cluster, index: int) -> None:
        math = float32_math()
        body, self.outputs, self.parallel, self.inplace, helpers = generate(c, "kernel", math)
        self.source = _HEADER + (_HELPERS.format(
            module=math.__name__, names=", ".join(helpers) + ("," if len(helpers) == 1 else ""),
            quoted=", ".join(repr(h) for h in helpers), version=math.VERSION)
            if helpers else "") + "\n\n" + body
        digest = hashlib.sha256(self.source.encode()).hexdigest()[:20]
        self.name = f"fused_{index}"
        self.key = f"functx_kernel_{digest}"
        self.out_avals = [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in self.outputs]
        self.flat_avals = [(max(int(np.prod(s, dtype=np.int64)), 1), d) for s, d in self.out_avals]
        self.signature = "void({})".format(", ".join(
            f"{_NUMBA_TYPES[np.dtype(v.aval.dtype)]}[::1]" for v in [*c.inputs, *self.outputs]))
        self.n_inputs = len(c.inputs)
        self.cluster = c
        self.fn: Callable | None = None

    def __repr__(self) -> str:
        return self.name

    def compile(self) -> Callable:
        """Load the kernel: from Numba's disk cache when this source was compiled before,
        else compile it (and cache it). Raises ImportError without Numba."""
        if self.fn is None:
            with _LOCK:
                if self.fn is None:
                    fn = _load(self.key, self.source)
                    sig = self._types()
                    if tuple(sig.args) not in fn.signatures:  # (a kernel of the same source
                        fn.compile(sig)  # loaded it) now, or from the disk cache, not at a call
                    # one specialisation: read-only inputs, which writable ones convert to
                    # (else a call with the other kind compiled the kernel a second time)
                    fn.disable_compile()
                    # (a parallel kernel launches under the process-wide lock: see _numba)
                    self.fn = serialised(fn) if self.parallel else fn
        return self.fn

    def _types(self) -> tuple:
        """The Numba signature of :attr:`signature`, the inputs typed read-only."""
        T = import_numba().types
        args = [T.Array(getattr(T, _NUMBA_TYPES[np.dtype(v.aval.dtype)]), 1, "C",
                        readonly=k < self.n_inputs)
                for k, v in enumerate([*self.cluster.inputs, *self.outputs])]
        return T.void(*args)

    def __call__(self, *arrays: Any, outs: list | None = None) -> list:
        fn = self.fn or self.compile()
        # ravel: a view of a contiguous array, a contiguous copy of a strided one
        flat = [np.ravel(a) for a in arrays]
        if outs is None:
            new = [np.empty(size, dtype) for size, dtype in self.flat_avals]
            fn(*flat, *new)
            return [o.reshape(shape) for o, (shape, _) in zip(new, self.out_avals)]
        outs = [np.empty(shape, dtype) if o is None else o
                for o, (shape, dtype) in zip(outs, self.out_avals)]
        # (a 0-d output is a 1-element flat view, as flat_avals says)
        fn(*flat, *[o.reshape(-1) for o in outs])
        return outs


def _load(key: str, source: str) -> Callable:
    # Numba with functx's threading policy (functx.primitives._numba: the workqueue layer,
    # whose threads sleep between kernels, unless the user chose one); ImportError if absent.
    import_numba()

    mod = sys.modules.get(key)
    if mod is None:
        folder = cache_dir()
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, key + ".py")
        if not os.path.exists(path):  # a stable file keeps Numba's disk cache valid
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(key, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[key] = mod
    return mod.kernel
