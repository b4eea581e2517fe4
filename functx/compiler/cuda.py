"""The CUDA code generator: each fusion cluster becomes one CUDA C kernel (NVRTC via CuPy).

The cluster's :class:`~functx.compiler.program.Program` (the same per-element program the
CPU generator renders as Numba) is written as C with the renderer of
:mod:`functx.compiler.c_expr`: float32 math in single precision (``sinf``, ``0.5f``),
bfloat16 and float16 loaded into float32, computed there and rounded once when stored
(``__float2bfloat16``, round to nearest even as ml_dtypes), so a fused chain of half-precision
operations is at least as accurate as the same operations one at a time.

Four kernel shapes, chosen from the cluster:

* **elementwise** (no reduction): a grid-stride loop over the merged iteration space, one
  element per thread and step; an elementwise chain over whole arrays is a flat loop that
  reads ``in0[i]``;
* **row reduction** (the last iteration axis is reduced: softmax/layer-norm statistics, a
  full sum): a block of threads per kept element, each thread striding over the reduced
  elements, then a tree in shared memory;
* **column reduction** (the last axis is kept: a bias gradient, a sum over the batch): a
  32 x 8 block per 32 kept elements, so loads stay coalesced, reduced over the 8 rows;
* **phased rows** (a row cluster that reads its own row reductions' results, or sums over
  every axis: a layer norm with what follows it and its gradient, see
  :func:`~functx.compiler.partition.partition`): a block per row whose threads hold the
  row's elements in registers, one loop over them per phase (:func:`_phased`).

Where the kept elements give too few blocks to fill the GPU, the reduced range is split into
chunks that write partial accumulators, and a second small kernel folds them (no atomics:
the result does not depend on scheduling). Accumulators have the reduction rule's dtype (a
float32 sum accumulates in float64, as on the CPU).

The source is specialised to the shapes (every size is a constant) and is its own cache
key: CuPy keeps the compiled module in memory and on disk (``~/.cupy/kernel_cache``, or
``CUPY_CACHE_DIR``), so a second process loads it instead of compiling.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Callable

import ml_dtypes
import numpy as np

from functx.compiler.c_expr import C_TYPES, CEmitter, c_literal
from functx.compiler.partition import Cluster
from functx.compiler.program import LoopNest, Program
from functx.registry.scalar import var

__all__ = ["CudaKernel", "generate_cuda", "COMPUTE", "cuda_policy", "cuda_worth", "BLOCK",
           "FILL_BLOCKS", "ROW_MAX"]

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)

# storage dtype -> compute dtype: half precision is computed in float32
COMPUTE = {F16: np.dtype(np.float32), BF16: np.dtype(np.float32)}

# threads per block of the elementwise and row kernels
BLOCK = 256
# a reduction whose kept elements give fewer blocks than this splits its reduced range
FILL_BLOCKS = 1056  # 8 blocks of 256 threads on each of an H100's 132 SMs: every thread slot
# the fewest steps each thread of a split reduction's chunk takes along the reduced range
MIN_STEPS = 16
# the reduction loop is unrolled by this much (loads of several steps in flight at once),
# where its body has at most UNROLL_LINES statements: a long body computes enough to hide
# its loads, and unrolled it takes NVRTC three times as long (ew24's: 0.63 s against 0.20)
UNROLL = 4
UNROLL_LINES = 48
# grid-stride loops launch at most this many blocks
MAX_BLOCKS = 65536
# a phased row kernel gives each thread at most this many of a row's elements (more for the
# longest rows, ROW_MAX, whose 1024 threads hold 16 each)
ROW_ELEMS = 8
ROW_MAX = 16384

_LOAD = {F16: "__half2float({})", BF16: "__bfloat162float({})"}
_STORE = {F16: "__float2half({})", BF16: "__float2bfloat16({})"}
_STORAGE = {F16: "__half", BF16: "__nv_bfloat16"}


# NVRTC compiles without the C library's headers: the constants the C renderer writes
PRELUDE = ("#ifndef INFINITY", "#define INFINITY __int_as_float(0x7f800000)", "#endif",
           "#ifndef NAN", "#define NAN __int_as_float(0x7fffffff)", "#endif")


def cuda_policy(e: Any, expr: Any) -> bool:
    """The CUDA generator's veto for :func:`~functx.compiler.partition.partition`: none
    (every function of the vocabulary runs at memory speed on a GPU)."""
    return True


def cuda_worth(c: Cluster) -> bool:
    """Which clusters the CUDA generator keeps: those of at least two computing equations
    (as on the CPU), every reduction (CuPy's reductions over a leading axis read with
    strides; the generated column kernel reads coalesced rows), and a single operation
    that broadcasts an operand (a bias added to a product: CuPy's kernel divides each
    index by the runtime shape, the generated one by constants)."""
    return (c.n_compute >= 2 or c.reduce_axes is not None
            or (c.n_compute == 1 and any(v.aval.shape != c.shape for v in c.inputs)))


def _storage(dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    return _STORAGE.get(dtype) or C_TYPES[dtype]


def _loaded(dtype: np.dtype, text: str) -> str:
    return _LOAD[dtype].format(text) if dtype in _LOAD else text


def _stored(dtype: np.dtype, compute: np.dtype, text: str) -> str:
    dtype = np.dtype(dtype)
    if dtype in _STORE:
        return _STORE[dtype].format(f"(float)({text})")
    return text if dtype == compute else f"({C_TYPES[dtype]})({text})"


def _offset(strides: list, idx: list) -> str:
    terms = [f"{v} * {s}" if s != 1 else v for v, s in zip(idx, strides) if s != 0]
    return " + ".join(terms) or "0"


def _coords(sizes: list, flat: str, names: list, itype: str) -> list:
    """C statements splitting the flat index ``flat`` over loops of ``sizes`` (the last
    fastest) into ``names``."""
    if not sizes:
        return []
    if len(sizes) == 1:
        return [f"const {itype} {names[0]} = {flat};"]
    out = [f"{itype} q_{names[0]} = {flat};"]
    for k in range(len(sizes) - 1, 0, -1):
        out.append(f"const {itype} {names[k]} = q_{names[0]} % {sizes[k]};")
        out.append(f"q_{names[0]} /= {sizes[k]};")
    out.append(f"const {itype} {names[0]} = q_{names[0]};")
    return out


class _Source:
    """Shared pieces of one kernel's source: parameters, loads, the body, stores."""

    def __init__(self, prog: Program, nest: LoopNest) -> None:
        c = prog.cluster
        self.prog, self.nest = prog, nest
        total = max(int(np.prod(c.shape, dtype=np.int64)), 1)
        self.itype = "long long" if total >= 2 ** 31 - 1 else "int"
        self.outs = list(c.outputs)
        # an input and an output that may share memory are not declared __restrict__
        self.inplace = _inplace_pairs(prog)
        ins, outs = {i for i, _ in self.inplace}, {j for _, j in self.inplace}
        self.params = [f"const {_storage(v.aval.dtype)}* {'' if i in ins else '__restrict__ '}in{i}"
                       for i, v in enumerate(c.inputs)]
        self.params += [f"{_storage(v.aval.dtype)}* {'' if i in outs else '__restrict__ '}out{i}"
                        for i, v in enumerate(self.outs)]
        self.includes = {"#include <cuda_fp16.h>" for v in [*c.inputs, *self.outs]
                         if np.dtype(v.aval.dtype) == F16}
        self.includes |= {"#include <cuda_bf16.h>" for v in [*c.inputs, *self.outs]
                          if np.dtype(v.aval.dtype) == BF16}
        self.em = CEmitter("t")

    def loads(self, idx: list, only: Callable | None = None) -> list:
        """Each load at loop indices ``idx`` (names or offsets per loop)."""
        lines = []
        for ld in self.prog.loads:
            dt = np.dtype(ld.var.aval.dtype)
            at = _offset(self.nest.stride(ld.name), idx)
            lines.append(f"const {C_TYPES[self.prog.dtype(ld.var)]} {ld.name} = "
                         f"{_loaded(dt, f'in{ld.input}[{at}]')};")
        return lines

    def stores(self, idx: list) -> list:
        lines = []
        at = _offset(self.nest.stride("store"), idx)
        for v, expr in self.prog.stores:
            name = self.em(expr)
            k = self.outs.index(v)
            lines.append(f"out{k}[{at}] = {_stored(v.aval.dtype, expr.dtype, name)};")
        return lines

    def header(self, name: str, extra: list = (), bounds: int | None = None) -> list:
        # __launch_bounds__: registers enough for a block of that many threads (spilling
        # if need be), so the launch never fails for want of them
        lb = f"__launch_bounds__({bounds}) " if bounds else ""
        return [*sorted(self.includes), *PRELUDE, "", f'extern "C" __global__ void {lb}{name}(',
                "    " + ",\n    ".join([*self.params, *extra]) + ") {"]


def _elementwise(prog: Program, name: str) -> tuple[str, dict]:
    nest = prog.loop_nest()
    src = _Source(prog, nest)
    it = src.itype
    n = max(int(np.prod(nest.sizes, dtype=np.int64)), 1)
    idx = [f"i{k}" for k in range(len(nest.sizes))]
    body = _coords(nest.sizes, "i", idx, it) + src.loads(idx)
    em = src.em
    stores = src.stores(idx)
    body += em.lines + stores
    lines = src.header(name)
    lines.append(f"  for ({it} i = ({it})blockIdx.x * blockDim.x + threadIdx.x; i < {n}; "
                 f"i += ({it})gridDim.x * blockDim.x) {{")
    lines += ["    " + ln for ln in body] + ["  }", "}"]
    blocks = min(max(math.ceil(n / BLOCK), 1), MAX_BLOCKS)
    return "\n".join(lines) + "\n", {"kind": "elementwise", "grid": (blocks,),
                                    "block": (BLOCK,), "inplace": src.inplace}


def _reduction(prog: Program, name: str) -> tuple[str, dict]:
    c = prog.cluster
    red = tuple(c.reduce_axes or ())
    row = (len(c.shape) - 1) in red
    nest = prog.loop_nest()  # kept loops first, then the reduced ones
    src = _Source(prog, nest)
    it = src.itype
    kn = nest.n_kept
    K = max(int(np.prod(nest.sizes[:kn], dtype=np.int64)), 1)
    R = max(int(np.prod(nest.sizes[kn:], dtype=np.int64)), 1)
    kidx = [f"k{j}" for j in range(kn)]
    ridx = [f"r{j}" for j in range(len(nest.sizes) - kn)]
    blocks_k = K if row else math.ceil(K / 32)
    chunks = 1
    min_chunk = MIN_STEPS * (BLOCK if row else 8)  # reduced elements a chunk reads at least
    if blocks_k < FILL_BLOCKS and R > min_chunk:
        chunks = max(1, min(math.ceil(R / min_chunk), math.ceil(FILL_BLOCKS / blocks_k), 65535))
    ch = math.ceil(R / chunks)
    chunks = math.ceil(R / ch)
    threads = BLOCK if row else 8  # along the reduced range
    if row:
        threads = max(32, min(BLOCK, 1 << max(0, math.ceil(math.log2(max(ch, 1))))))
    reds = prog.reductions
    acc_t = [C_TYPES[r.acc] for r in reds]
    parts = [f"{acc_t[j]}* __restrict__ part{j}" for j in range(len(reds))] if chunks > 1 else []
    lines = src.header(name, parts)
    for j, r in enumerate(reds):
        shape = f"[{threads}]" if row else "[8][33]"
        lines.append(f"  __shared__ {acc_t[j]} sh{j}{shape};")
    if row:
        lines.append(f"  const {it} k = blockIdx.x;")
        tid, step = "threadIdx.x", threads
    else:
        lines.append(f"  const {it} k = ({it})blockIdx.x * 32 + threadIdx.x;")
        tid, step = "threadIdx.y", 8
    lines.append(f"  const {it} rlo = ({it})blockIdx.y * {ch};")
    lines.append(f"  const {it} rhi = rlo + {ch} < {R} ? rlo + {ch} : {R};")
    for j, r in enumerate(reds):
        lines.append(f"  {acc_t[j]} acc{j} = {c_literal(r.identity(), r.acc)};")
    inner = _coords(nest.sizes[kn:], "r", ridx, it) + src.loads(kidx + ridx)
    em = src.em
    elems = [em(r.element) for r in reds]
    for j, r in enumerate(reds):
        step_expr = r.rule.combine(var(f"acc{j}", r.acc), var(elems[j], r.acc))
        em.lines.append(f"acc{j} = {em(step_expr)};")
    stores = src.stores(kidx + ridx)
    inner += em.lines + stores
    guard = "" if row else f"if (k < {K}) "
    lines.append(f"  {guard}{{")
    lines += ["    " + ln for ln in _coords(nest.sizes[:kn], "k", kidx, it)]
    if len(inner) <= UNROLL_LINES:
        lines.append(f"    #pragma unroll {UNROLL}")
    lines.append(f"    for ({it} r = rlo + {tid}; r < rhi; r += {step}) {{")
    lines += ["      " + ln for ln in inner] + ["    }", "  }"]
    # the tree over the block
    for j in range(len(reds)):
        lines.append(f"  sh{j}[{'threadIdx.x' if row else 'threadIdx.y][threadIdx.x'}] = acc{j};")
    lines.append("  __syncthreads();")
    if row:
        lines += _tree(reds, lambda j, i: f"sh{j}[{i}]", "threadIdx.x", threads)
        lines.append("  if (threadIdx.x == 0) {")
        res = [f"sh{j}[0]" for j in range(len(reds))]
    else:
        lines += _tree(reds, lambda j, i: f"sh{j}[{i}][threadIdx.x]", "threadIdx.y", 8)
        lines.append(f"  if (threadIdx.y == 0 && k < {K}) {{")
        res = [f"sh{j}[0][threadIdx.x]" for j in range(len(reds))]
    for j, r in enumerate(reds):
        if chunks > 1:
            lines.append(f"    part{j}[({it})blockIdx.y * {K} + k] = {res[j]};")
        else:
            o = src.outs.index(r.var)
            lines.append(f"    out{o}[k] = {_stored(r.var.aval.dtype, r.acc, res[j])};")
    lines += ["  }", "}"]
    grid = (K, chunks) if row else (math.ceil(K / 32), chunks)
    block = (threads,) if row else (32, 8)
    launch = {"kind": "reduction", "grid": grid, "block": block, "chunks": chunks, "K": K,
              "parts": [(chunks * K, r.acc) for r in reds], "inplace": src.inplace}
    source = "\n".join(lines) + "\n"
    if chunks > 1:
        text, launch["finish"] = _finish(src, reds, name + "_finish", chunks, K)
        source += "\n" + text
    return source, launch


def _tree(reds: list, cell: Callable, lane: str, n: int) -> list:
    """C statements folding each reduction's ``n`` shared values ``cell(j, 0..n-1)`` (``n``
    a power of two) into ``cell(j, 0)``: a tree over the threads numbered by ``lane``."""
    fold = CEmitter("f")
    lines = [f"  for (int s = {n // 2}; s > 0; s >>= 1) {{", f"    if ({lane} < s) {{"]
    for j, r in enumerate(reds):
        fold.lines = []
        v = fold(r.rule.combine(var(cell(j, lane), r.acc), var(cell(j, f"{lane} + s"), r.acc)))
        lines += ["      " + ln for ln in fold.lines] + [f"      {cell(j, lane)} = {v};"]
    return lines + ["    }", "    __syncthreads();", "  }"]


def _finish(src: _Source, reds: list, name: str, chunks: int, K: int) -> tuple[str, tuple]:
    """The kernel that folds the chunks' partial accumulators into the results, and its
    grid and block: ``TX`` threads (a power of two, up to 256) stride over the chunks of
    each of ``256 / TX`` kept elements a block, then fold in a tree."""
    tx = min(BLOCK, 1 << max(0, math.ceil(math.log2(chunks))))
    kpb = BLOCK // tx
    params = [f"const {C_TYPES[r.acc]}* __restrict__ part{j}" for j, r in enumerate(reds)]
    outs = {src.outs.index(r.var) for r in reds}
    params += [f"{_storage(v.aval.dtype)}* __restrict__ out{i}"
               for i, v in enumerate(src.outs) if i in outs]
    lines = [f'extern "C" __global__ void {name}(', "    " + ",\n    ".join(params) + ") {",
             f"  const int k = blockIdx.x * {kpb} + threadIdx.y;"]
    em = CEmitter("g")
    for j, r in enumerate(reds):
        ct = C_TYPES[r.acc]
        lines += [f"  __shared__ {ct} sh{j}[{kpb}][{tx}];",
                  f"  {ct} acc{j} = {c_literal(r.identity(), r.acc)};",
                  f"  if (k < {K}) for (int c = threadIdx.x; c < {chunks}; c += {tx}) {{"]
        em.lines = []
        v = em(r.rule.combine(var(f"acc{j}", r.acc), var(f"part{j}[c * {K} + k]", r.acc)))
        lines += ["    " + ln for ln in em.lines] + [f"    acc{j} = {v};", "  }",
                                                      f"  sh{j}[threadIdx.y][threadIdx.x] = acc{j};"]
    lines.append("  __syncthreads();")
    lines += _tree(reds, lambda j, i: f"sh{j}[threadIdx.y][{i}]", "threadIdx.x", tx)
    lines.append(f"  if (threadIdx.x == 0 && k < {K}) {{")
    for j, r in enumerate(reds):
        o = src.outs.index(r.var)
        lines.append(f"    out{o}[k] = {_stored(r.var.aval.dtype, r.acc, f'sh{j}[threadIdx.y][0]')};")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n", ((math.ceil(K / kpb),), (tx, kpb))


def _phase_of(reds: list) -> Callable:
    """``phase(expr)``: the loop of a phased row kernel from which ``expr`` can be computed
    (0: from the loads alone; a reduction's result ``rv{j}`` is known after the loop of
    its element's phase)."""
    memo: dict = {}

    def phase(x: Any) -> int:
        got = memo.get(id(x))
        if got is None:
            if x.op == "var" and x.value.startswith("rv"):
                got = phase(reds[int(x.value[2:])].element) + 1
            else:
                got = max((phase(y) for y in x.args), default=0)
            memo[id(x)] = got
        return got
    return phase


def _warp_fold(j: int, r: Any, W: int) -> tuple[list, list]:
    """C statements folding ``acc{j}`` over the block: ``(shuffles, fold)``. The shuffles
    leave each warp's value in ``sh{j}[warp]``; after a ``__syncthreads()`` the fold
    leaves the block's value in ``acc{j}`` of every thread (the same order everywhere)."""
    ct = C_TYPES[r.acc]
    shuffled = (f"(bool)__shfl_xor_sync(0xffffffffu, (int)acc{j}, o)" if ct == "bool"
                else f"__shfl_xor_sync(0xffffffffu, acc{j}, o)")
    em = CEmitter(f"s{j}_")
    step = em(r.rule.combine(var(f"acc{j}", r.acc), var(f"y{j}", r.acc)))
    shuffles = ["for (int o = 16; o > 0; o >>= 1) {", f"  const {ct} y{j} = {shuffled};",
                *["  " + ln for ln in em.lines], f"  acc{j} = {step};", "}",
                f"if ((threadIdx.x & 31) == 0) sh{j}[threadIdx.x >> 5] = acc{j};"]
    em = CEmitter(f"w{j}_")
    step = em(r.rule.combine(var(f"acc{j}", r.acc), var(f"sh{j}[w]", r.acc)))
    fold = [f"acc{j} = sh{j}[0];", f"for (int w = 1; w < {W}; ++w) {{",
            *["  " + ln for ln in em.lines], f"  acc{j} = {step};", "}"]
    return shuffles, fold


def _phased(prog: Program, name: str) -> tuple[str, dict]:
    """A phased row cluster (see :func:`~functx.compiler.partition.partition`): a block of
    ``T`` threads per row, each holding ``E`` of the row's elements of every load in
    registers; loop ``p`` over them folds the row reductions of phase ``p``, whose results
    every thread then reads (``rv{j}``); the last loop stores the elementwise results and
    folds the totals, whose per-row values a second kernel sums."""
    c = prog.cluster
    nest = prog.loop_nest()  # the kept loops, then the row
    src = _Source(prog, nest)
    it = src.itype
    kn = nest.n_kept
    K = max(int(np.prod(nest.sizes[:kn], dtype=np.int64)), 1)
    R = int(c.shape[-1])
    T = min(1024, max(32, 1 << math.ceil(math.log2(math.ceil(R / ROW_ELEMS)))))
    E, W = math.ceil(R / T), T // 32
    reds = prog.reductions
    totals = [j for j, r in enumerate(reds) if r.var in c.totals]
    phase = _phase_of(reds)
    n_loops = 1 + max((phase(r.element) for j, r in enumerate(reds) if j not in totals),
                      default=-1)
    kidx = [f"k{j}" for j in range(kn)]
    parts = [f"{C_TYPES[reds[j].acc]}* __restrict__ part{j}" for j in totals]
    lines = src.header(name, parts, bounds=T)
    lines += [f"  __shared__ {C_TYPES[r.acc]} sh{j}[{W}];" for j, r in enumerate(reds)]
    lines.append(f"  const {it} k = blockIdx.x;")
    lines += ["  " + ln for ln in _coords(nest.sizes[:kn], "k", kidx, it)]
    guard = "" if R % T == 0 else f"if (r < {R}) "

    def loop(body: list) -> list:
        return ["  #pragma unroll", f"  for (int e = 0; e < {E}; ++e) {{",
                f"    const {it} r = threadIdx.x + ({it})e * {T};", f"    {guard}{{",
                *["      " + ln for ln in body], "    }", "  }"]

    def _at(ld: Any) -> str:
        return f"in{ld.input}[{_offset(nest.stride(ld.name), kidx + ['r'])}]"

    loads = [(ld, C_TYPES[prog.dtype(ld.var)]) for ld in prog.loads]
    lines += [f"  {ct} {ld.name}_r[{E}];" for ld, ct in loads]
    lines += loop([f"{ld.name}_r[e] = {_loaded(np.dtype(ld.var.aval.dtype), _at(ld))};"
                   for ld, _ in loads])
    reads = [f"const {ct} {ld.name} = {ld.name}_r[e];" for ld, ct in loads]
    for j, r in enumerate(reds):
        lines.append(f"  {C_TYPES[r.acc]} acc{j} = {c_literal(r.identity(), r.acc)};")
    per_element = [(v, x) for v, x in prog.stores if tuple(v.aval.shape) == c.shape]
    per_row = [(v, x) for v, x in prog.stores if tuple(v.aval.shape) != c.shape]
    for p in range(n_loops + 1):
        mine = [j for j, r in enumerate(reds)
                if (j in totals and p == n_loops) or (j not in totals and phase(r.element) == p)]
        stores = per_element if p == n_loops else []
        if not mine and not stores:
            continue
        em = CEmitter(f"t{p}_")
        for j in mine:
            step = em(reds[j].rule.combine(var(f"acc{j}", reds[j].acc), reds[j].element))
            em.lines.append(f"acc{j} = {step};")
        at = _offset(nest.stride("store"), kidx + ["r"])
        for v, expr in stores:
            em.lines.append(f"out{src.outs.index(v)}[{at}] = "
                            f"{_stored(v.aval.dtype, expr.dtype, em(expr))};")
        lines += loop(reads + em.lines)
        if not mine:  # the last loop, of stores only
            continue
        folds = [_warp_fold(j, reds[j], W) for j in mine]
        lines += ["  " + ln for sh, _ in folds for ln in sh] + ["  __syncthreads();"]
        if p == n_loops:  # the totals: one value per row for the second kernel
            lines.append("  if (threadIdx.x == 0) {")
            lines += ["    " + ln for _, fold in folds for ln in fold]
            lines += [f"    part{j}[k] = acc{j};" for j in mine] + ["  }"]
            continue
        lines += ["  " + ln for _, fold in folds for ln in fold]
        for j in mine:
            v = reds[j].var
            dt = np.dtype(v.aval.dtype)
            lines.append(f"  const {C_TYPES[prog.dtype(v)]} rv{j} = "
                         f"{_loaded(dt, _stored(dt, reds[j].acc, f'acc{j}'))};")
            if v in src.outs:
                lines.append(f"  if (threadIdx.x == 0) out{src.outs.index(v)}[k] = "
                             f"{_stored(dt, reds[j].acc, f'acc{j}')};")
    if per_row:  # row statistics used after the kernel: one value a row, by thread 0
        em = CEmitter("q")
        for v, expr in per_row:
            em.lines.append(f"out{src.outs.index(v)}[k] = "
                            f"{_stored(v.aval.dtype, expr.dtype, em(expr))};")
        lines += ["  if (threadIdx.x == 0) {",
                  *[f"    const {ct} {ld.name} = {ld.name}_r[0];" for ld, ct in loads],
                  *["    " + ln for ln in em.lines], "  }"]
    lines.append("}")
    launch = {"kind": "rows", "grid": (K,), "block": (T,), "K": K, "inplace": src.inplace}
    source = "\n".join(lines) + "\n"
    if totals:
        tot = [reds[j] for j in totals]
        text, launch["finish"] = _finish(src, tot, name + "_finish", K, 1)
        launch["parts"] = [(K, r.acc) for r in tot]
        launch["finish_outs"] = sorted(src.outs.index(r.var) for r in tot)
        source += "\n" + text
    return source, launch


def generate_cuda(prog: Program, name: str) -> tuple[str, dict]:
    """The CUDA C source of a cluster's program (``Program(cluster, COMPUTE)``) as a kernel
    ``name(in..., out...[, part...])`` of contiguous arrays (outputs in the order of
    ``cluster.outputs``), and its launch configuration (with ``"inplace"``: the (input,
    output) pairs that may share memory, see :func:`_inplace_pairs`)."""
    if prog.cluster.phased:
        return _phased(prog, name)
    return _reduction(prog, name) if prog.reductions else _elementwise(prog, name)


def _inplace_pairs(prog: Program) -> frozenset:
    """The (input, output) index pairs that may share memory (jit's memory planner hands
    a dying input's buffer to the output): the output is stored one element at a time and
    every load of the input walks the iteration space as that store does, so each element
    is read by the thread that writes it, before it writes it (a phased kernel reads its
    row into registers first). Same shape and dtype."""
    c = prog.cluster
    nest = prog.loop_nest()
    store = nest.stride("store")
    stored = {v for v, _ in prog.stores if tuple(v.aval.shape) == c.shape}
    pairs = set()
    for i, u in enumerate(c.inputs):
        loads = [ld for ld in prog.loads if ld.var is u]
        if not loads or any(nest.stride(ld.name) != store for ld in loads):
            continue
        pairs.update((i, j) for j, v in enumerate(c.outputs) if v in stored
                     and (tuple(u.aval.shape), u.aval.dtype) == (tuple(v.aval.shape),
                                                                 v.aval.dtype))
    return frozenset(pairs)


_LOCK = threading.Lock()


class CudaKernel:
    """One cluster compiled for CUDA: its source, launch configuration and the callable that
    runs it on CuPy arrays (compiled with NVRTC on the first call, per device).

    Calling it with the cluster's input arrays returns the list of its output arrays;
    ``outs=`` gives preallocated contiguous outputs (memory planning)."""

    def __init__(self, c: Cluster, index: int) -> None:
        self.name = f"fused_{index}"
        prog = Program(c, COMPUTE)
        self.source, self.launch = generate_cuda(prog, "kernel")
        self.outputs = list(c.outputs)
        self.out_avals = [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in self.outputs]
        self.cluster = c
        self.parallel = True
        self.inplace = self.launch["inplace"]  # (input, output) pairs that may share memory
        reduced = {r.var for r in prog.reductions}
        self._reduced = [i for i, v in enumerate(self.outputs) if v in reduced]
        self._fns: dict = {}

    def __repr__(self) -> str:
        return self.name

    def compile(self, device: int | None = None) -> tuple:
        """The compiled kernel functions for ``device`` (default: the current one)."""
        import cupy  # lazily: the CUDA backend is optional

        dev = cupy.cuda.Device().id if device is None else device
        got = self._fns.get(dev)
        if got is None:
            with _LOCK:
                with cupy.cuda.Device(dev):
                    mod = cupy.RawModule(code=self.source, options=("--std=c++17",))
                    fin = mod.get_function("kernel_finish") if "finish" in self.launch else None
                    got = self._fns[dev] = (mod.get_function("kernel"), fin)
        return got

    def __call__(self, *arrays: Any, outs: list | None = None) -> list:
        import cupy

        fn, fin = self._fns.get(cupy.cuda.Device().id) or self.compile()
        ins = [a if a.flags.c_contiguous else cupy.ascontiguousarray(a) for a in arrays]
        if outs is None:
            outs = [cupy.empty(shape, dtype) for shape, dtype in self.out_avals]
        elif any(o is None for o in outs):  # the memory planner gave buffers to some only
            outs = [cupy.empty(shape, dtype) if o is None else o
                    for o, (shape, dtype) in zip(outs, self.out_avals)]
        launch = self.launch
        parts = [cupy.empty(n, dt) for n, dt in launch.get("parts", ())] \
            if fin is not None else []
        fn(launch["grid"], launch["block"], (*ins, *outs, *parts))
        if fin is not None:
            grid, block = launch["finish"]
            fin(grid, block, (*parts, *[outs[i] for i in launch.get("finish_outs",
                                                                    self._reduced)]))
        return outs
