"""The CUDA code generator (functx.compiler.cuda) on a GPU: generated kernels against eager
functx on the CPU. Random elementwise/reduction programs (hypothesis), every reduction layout
(row, column, split into chunks, several axes), bfloat16 and float16 chains against the
CPU's ml_dtypes results, and jit with fusion on over a sample of the spec table (each
function, its VJP, JVP and vmap). The source-level checks (what is generated for which
cluster) run on the CPU in every CI run; the rest skips without a GPU.
"""
from __future__ import annotations

import gc
import os
import shutil
import subprocess
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functx as fx
import functx.compiler as compiler
import functx.nn as fnn
import functx.numpy as fnp
from functx.compiler import cuda as gen
from functx.compiler import partition, passes
from functx.compiler.lowering import fuse
from functx.primitives import elementwise as ew
from functx.primitives import reduction as red
from functx.primitives import shape as shp

from tests.test_cuda import IS_CUDA, assert_matches, to_dev
from tests.test_compiler import BINARY, UNARY, build, programs

needs_gpu = pytest.mark.skipif(not IS_CUDA, reason="needs CuPy on a GPU")
# a kernel that fails to compile makes jit warn and run unfused: here that is a failure
pytestmark = pytest.mark.filterwarnings("error:functx.jit:UserWarning")


@pytest.fixture(autouse=True)
def compiler_on():
    old = compiler.set_jit_compiler("numba")
    yield
    compiler.set_jit_compiler(old)


def kernels_for(f: Any, *xs: Any) -> list:
    return fuse(fx.make_trace(f)(*xs), "cuda")[1]


# -- source level (CPU) ----------------------------------------------------------------------

def test_a_sum_with_a_product_made_only_for_it_is_one_accumulating_gemm() -> None:
    from functx.compiler.lowering import accumulate_p

    a, b, c = (np.ones((8, 8), np.float32) for _ in range(3))
    fused, _ = fuse(fx.make_trace(lambda a, b, c: c + a @ b)(a, b, c), "cuda")
    assert [e.prim.name for e in fused.eqns] == ["accumulate"]
    e = fused.eqns[0]
    assert e.prim is accumulate_p and e.params["prim"].name == "dot_general"
    assert e.params["acc"] == 2 and e.inputs[2] is fused.in_vars[2]
    # a product read twice, or summed with a broadcast operand, stays apart
    twice = fuse(fx.make_trace(lambda a, b, c: (lambda p: (c + p) * p)(a @ b))(a, b, c),
                 "cuda")[0]
    assert "accumulate" not in [e.prim.name for e in twice.eqns]
    bias = fuse(fx.make_trace(lambda a, b, c: c[0] + a @ b)(a, b, c), "cuda")[0]
    assert "accumulate" not in [e.prim.name for e in bias.eqns]
    # the CPU lowering never folds (NumPy's matmul cannot add into its output)
    cpu = fuse(fx.make_trace(lambda a, b, c: c + a @ b)(a, b, c), "cpu")[0]
    assert "accumulate" not in [e.prim.name for e in cpu.eqns]


def test_elementwise_chain_is_one_flat_kernel_in_single_precision() -> None:
    x = np.ones((64, 32), np.float32)
    f = lambda a, b: fnp.tanh(fnp.sin(a) * b + 1.0)  # noqa: E731
    ks = kernels_for(f, x, x)
    assert len(ks) == 1
    src = ks[0].source
    assert 'extern "C" __global__ void kernel(' in src
    assert "sinf(" in src and "tanhf(" in src and "double" not in src
    assert "in0[i0]" in src and "out0[i0]" in src and " % " not in src  # one flat loop
    assert ks[0].launch["kind"] == "elementwise"
    src = kernels_for(f, x, x[:1])[0].source  # a broadcast row: read at the column index
    assert "in1[i1]" in src and "in0[i0 * 32 + i1]" in src


def test_a_lone_operation_is_generated_only_when_it_broadcasts() -> None:
    x, b = np.ones((64, 32), np.float32), np.ones(32, np.float32)
    (k,) = kernels_for(lambda a, c: a + c, x, b)  # a bias added: one generated kernel
    assert k.launch["kind"] == "elementwise" and "in1[i1]" in k.source
    assert kernels_for(lambda a, c: a + c, x, x) == []  # same shapes: CuPy's own add


def test_reduction_layouts_are_chosen_from_the_reduced_axes() -> None:
    x = np.ones((64, 4096), np.float32)
    row = kernels_for(lambda a: red.reduce_sum(fnp.exp(a) * 2.0, (1,)), x)[0]
    col = kernels_for(lambda a: red.reduce_sum(fnp.exp(a) * 2.0, (0,)), x)[0]
    full = kernels_for(lambda a: red.reduce_max(fnp.exp(a) * 2.0, (0, 1)), x)[0]
    assert row.launch["block"] == (gen.BLOCK,) and row.launch["grid"][0] == 64
    assert col.launch["block"] == (32, 8) and col.launch["grid"][0] == 4096 // 32
    assert full.launch["chunks"] > 1 and "kernel_finish" in full.source
    assert "double acc0" in row.source  # float32 sums accumulate in float64


def ln_gelu(x: Any, w: Any, b: Any, g: Any) -> Any:
    """The layer norm -> tanh-GELU -> scale of bench_gpu.py, with a weighted sum."""
    return fnp.sum(fnn.gelu(fnn.layer_norm(x, x.shape[-1], w, b), approximate="tanh") * g)


def ln_gelu_args(rows: int, d: int, dtype: Any = np.float32, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) * sc + sh
            for s, sc, sh in [((rows, d), 2.0, 0.5), ((d,), 0.3, 1.0), ((d,), 0.2, 0.0),
                              ((rows, d), 1.0, 0.0)]]


def test_a_layer_norm_its_consumers_and_its_gradient_are_one_row_kernel() -> None:
    # expanded (prim.expand), the forward and backward statistics shared (CSE), then one
    # phased row cluster; the loss, a sum over every axis, is folded per row then summed
    args = ln_gelu_args(64, 256)
    fused, kernels = fuse(fx.make_trace(fx.value_and_grad(ln_gelu))(*args), "cuda")
    assert [e.prim.name for e in fused.eqns] == ["fused"]
    (k,) = kernels
    assert k.launch["kind"] == "rows" and k.launch["grid"] == (64,)
    assert k.cluster.phased and len(k.cluster.totals) == 1 and "kernel_finish" in k.source
    assert k.source.count("__shfl_xor_sync") == 5  # mean, variance, two gradient sums, loss
    assert "__launch_bounds__" in k.source


def test_a_layer_norm_with_no_fusible_neighbour_stays_one_primitive() -> None:
    x, w = np.ones((64, 256), np.float32), np.ones((256, 32), np.float32)
    trace = fuse(fx.make_trace(lambda a, m: fnn.layer_norm(a, 256) @ m)(x, w), "cuda")[0]
    assert [e.prim.name for e in trace.eqns] == ["layer_norm", "dot_general"]


@pytest.mark.parametrize("d", [16, gen.ROW_MAX * 2])
def test_rows_too_short_or_too_long_are_not_phased(d: int) -> None:
    args = ln_gelu_args(4, d)
    fused, kernels = fuse(fx.make_trace(fx.value_and_grad(ln_gelu))(*args), "cuda")
    assert "layer_norm" in [e.prim.name for e in fused.eqns]
    assert all(k.launch["kind"] != "rows" for k in kernels)


KEEP_UNARY = [ew.tanh, ew.sin, ew.logistic, lambda x: ew.mul(ew.tanh(x), 0.5)]


def row_program(phases: list, total: bool) -> Any:
    """``x, w ->`` an elementwise start, then per phase a row reduction brought back to
    the rows (``broadcast_in_dim``, or kept as ``(K, 1)``, an operation on it there, and
    NumPy broadcasting) and combined with the running value; optionally a total."""
    def f(x: Any, w: Any) -> Any:
        v = ew.mul(ew.tanh(x), w)
        for kind, op, u, keep in phases:
            r = {"sum": red.reduce_sum, "max": red.reduce_max, "min": red.reduce_min}[kind]
            s = r(v, (1,))
            if keep:  # a row statistic computed on as (K, 1), as keepdims=True code does
                # (a bounded function of it: exp of a sum of 300 terms, added to v, would
                # leave v's digits to the rounding of the sum)
                b = KEEP_UNARY[u % len(KEEP_UNARY)](shp.reshape(s, (v.shape[0], 1)))
            else:
                b = shp.broadcast_in_dim(s, v.shape, (0,))
            v = UNARY[u % len(UNARY)](BINARY[op % len(BINARY)](v, b))
        return (v, red.reduce_sum(ew.mul(v, x), (0, 1))) if total else (v,)
    return f


@st.composite
def row_programs(draw: Any) -> tuple:
    rows, d = draw(st.integers(1, 40)), draw(st.integers(partition.MIN_ROW, 300))
    phases = draw(st.lists(st.tuples(st.sampled_from(["sum", "max", "min"]),
                                     st.integers(0, 100), st.integers(0, 100),
                                     st.booleans()),
                           min_size=1, max_size=3))
    return rows, d, phases, draw(st.booleans()), draw(st.integers(0, 2**31 - 1))


@settings(max_examples=10, deadline=None)
@given(row_programs())
def test_row_programs_are_one_phased_kernel(program: tuple) -> None:
    rows, d, phases, total, _ = program
    x, w = np.ones((rows, d)), np.ones(d)
    kernels = kernels_for(row_program(phases, total), x, w)
    assert [k.launch["kind"] for k in kernels] == ["rows"]
    main = kernels[0].source.split("kernel_finish")[0]  # one barrier per phase
    assert main.count("__syncthreads()") == len(phases) + total
    assert ("kernel_finish" in kernels[0].source) == total


def softmax_keepdims(x: Any) -> Any:
    m = fnp.max(x, axis=-1, keepdims=True)
    e = fnp.exp(x - m)
    return e / fnp.sum(e, axis=-1, keepdims=True)


def rms_norm_loss(x: Any, w: Any) -> Any:
    return fnp.sum(x / fnp.sqrt(fnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w)


@pytest.mark.parametrize("f,n_args", [(softmax_keepdims, 1),
                                      (fx.value_and_grad(rms_norm_loss), 2),
                                      (fx.value_and_grad(lambda x: fnp.sum(
                                          softmax_keepdims(x) * x)), 1)],
                         ids=["softmax", "rms_norm_step", "softmax_step"])
def test_keepdims_statistics_written_by_hand_are_one_row_kernel(f: Any, n_args: int) -> None:
    # the statistics kept as (K, 1) (a unit-axis reshape), computed on there (sqrt), and
    # broadcast back NumPy's way all join the row cluster
    args = [np.ones((64, 128), np.float32), np.ones(128, np.float32)][:n_args]
    fused, kernels = fuse(passes.optimize(fx.make_trace(f)(*args)), "cuda")
    assert [e.prim.name for e in fused.eqns] == ["fused"]
    assert [k.launch["kind"] for k in kernels] == ["rows"]


def test_a_row_vector_broadcast_along_the_columns_is_not_read_per_row() -> None:
    # (K,) against (K, R) with K == R aligns with the columns (NumPy): not a row statistic
    f = lambda x: x - red.reduce_sum(x, (1,))  # noqa: E731
    x = np.arange(64.0 * 64).reshape(64, 64)
    fused, kernels = fuse(fx.make_trace(f)(x), "cuda")
    assert all(k.launch["kind"] != "rows" for k in kernels)


def test_an_input_read_only_where_an_output_is_written_may_share_its_memory() -> None:
    # jit's memory planner may hand a dying input's buffer to such an output; those two
    # are then not declared __restrict__. A broadcast read never shares.
    x, b = np.ones((64, 256), np.float32), np.ones(256, np.float32)
    (k,) = kernels_for(lambda a, c: fnp.tanh(a) * c, x, b)
    assert k.inplace == {(0, 0)}
    assert "const float* in0" in k.source and "const float* __restrict__ in1" in k.source
    (k,) = kernels_for(lambda a: red.reduce_sum(fnp.exp(a) * 2.0, (0,)), x)
    assert k.inplace == frozenset()  # a reduction's result is no element of its input
    (k,) = kernels_for(fx.value_and_grad(ln_gelu), *ln_gelu_args(64, 256))
    assert (0, 1) in k.inplace  # the phased kernel reads its rows into registers first


def masked_softmax_loss(s: Any, mask: Any, g: Any) -> Any:
    """Attention's probabilities written out: scale, additive mask, softmax."""
    return fnp.sum(fnn.softmax(s * 0.125 + mask, dim=-1) * g)


def test_a_softmax_and_what_feeds_it_are_one_row_kernel_each_way() -> None:
    s = np.ones((4, 64, 64), np.float32)
    mask = np.where(np.tri(64, dtype=bool), 0.0, -np.inf).astype(np.float32)
    fused, kernels = fuse(passes.optimize(fx.make_trace(fx.value_and_grad(masked_softmax_loss))(
        s, mask, s)), "cuda")
    assert "softmax" not in [e.prim.name for e in fused.eqns]
    assert [k.launch["kind"] for k in kernels] == ["rows"]  # the forward, loss and VJP


def test_half_precision_loads_and_stores_round_once() -> None:
    x = np.ones(1000, ml_dtypes.bfloat16)
    k = kernels_for(lambda a: fnp.tanh(a * a) + a, x)[0]
    assert "__bfloat162float(in0[i0])" in k.source and "__float2bfloat16(" in k.source
    assert "#include <cuda_bf16.h>" in k.source and "tanhf(" in k.source


def test_lowered_text_names_the_target() -> None:
    low = fx.jit(lambda a: fnp.sin(a) * 2.0 + 1.0).lower(np.ones(8, np.float32))
    assert "target: cpu" in low.as_text()


# Where the CUDA toolkit is installed (not a GPU), nvcc compiles what the generator writes
NVCC = shutil.which("nvcc")


def nvcc_compiles(kernels: list, tmp_path: Any) -> None:
    src = "\n".join(k.source.replace("void kernel", f"void kernel{i}_")
                    for i, k in enumerate(kernels))
    path = tmp_path / "fused.cu"
    path.write_text(src)
    done = subprocess.run([NVCC, "-std=c++17", "-arch=sm_80", "-c", str(path), "-o",
                           str(tmp_path / "fused.o")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:] + "\n" + src


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit) to compile sources")
@settings(max_examples=6, deadline=None)
@given(program=programs())
def test_generated_sources_compile_with_nvcc(program: tuple, tmp_path_factory: Any) -> None:
    dtype, in_shapes, steps, reduce, axes, seed = program
    xs = [np.ones(s, dtype) for s in in_shapes]
    kernels = kernels_for(build(steps, reduce, axes), *xs)
    half = [np.ones((8, 33), ml_dtypes.bfloat16), np.ones(33, np.float16)]
    kernels += kernels_for(lambda a, b: (fnp.tanh(a * b.astype(a.dtype)) * 2.0,
                                         red.reduce_sum(a * a, (0,))), *half)
    kernels += kernels_for(fx.value_and_grad(ln_gelu), *ln_gelu_args(8, 300))
    nvcc_compiles(kernels, tmp_path_factory.mktemp("nvcc"))


# -- on the GPU --------------------------------------------------------------------------------

@needs_gpu
@settings(max_examples=25, deadline=None)
@given(programs())
def test_random_programs_on_cuda_agree_with_the_cpu(program: tuple) -> None:
    dtype, in_shapes, steps, reduce, axes, seed = program
    rng = np.random.default_rng(seed)
    xs = [rng.uniform(-2, 2, s).astype(dtype) for s in in_shapes]
    f = build(steps, reduce, axes)
    with np.errstate(all="ignore"):
        want = f(*xs)
        got = fx.jit(f)(*to_dev(xs))
    tol = 2e-5 if dtype == np.float32 else 1e-12
    assert_matches(got, want, "fused on CUDA", tol, tol)


@needs_gpu
@settings(max_examples=25, deadline=None)
@given(row_programs())
def test_row_programs_on_cuda_agree_with_the_cpu(program: tuple) -> None:
    rows, d, phases, total, seed = program
    rng = np.random.default_rng(seed)
    xs = [rng.uniform(-2, 2, (rows, d)), rng.uniform(-2, 2, d)]
    f = row_program(phases, total)
    with np.errstate(all="ignore"):
        want = f(*xs)
        got = fx.jit(f)(*to_dev(xs))
    # float64; each phase adds a sum of up to 300 terms (|sum| ~ 100) to every element, in
    # another order than NumPy's pairwise sum: ~1e-14 relative per phase, then amplified
    assert_matches(got, want, "a phased row kernel", 1e-9, 1e-9)


@needs_gpu
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_expanded_softmaxes_on_cuda_match_the_cpu(dtype: Any, tol: float) -> None:
    rng = np.random.default_rng(6)
    s, g = (rng.standard_normal((3, 100, 100)).astype(dtype) for _ in range(2))
    mask = np.where(np.tri(100, dtype=bool), 0.0, -np.inf).astype(dtype)
    mask[7] = -np.inf  # a fully masked row: NaN, as the primitive gives
    step = fx.value_and_grad(masked_softmax_loss, argnums=(0, 2))
    with np.errstate(all="ignore"):
        assert_matches(fx.jit(step)(*to_dev([s, mask, g])), step(s, mask, g),
                       "softmax expanded", tol, tol)
    ls = lambda a: fnn.log_softmax(a * 3.0, dim=-1) + a  # noqa: E731
    assert_matches(fx.jit(ls)(*to_dev([s])), ls(s), "log_softmax expanded", tol, tol)


@needs_gpu
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_keepdims_statistics_on_cuda_match_the_cpu(dtype: Any, tol: float) -> None:
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((50, 300)).astype(dtype), rng.standard_normal(300).astype(dtype)
    for f, args in [(softmax_keepdims, (x,)), (fx.value_and_grad(rms_norm_loss), (x, w)),
                    (fx.grad(lambda x: fnp.sum(softmax_keepdims(x) * x)), (x,))]:
        assert_matches(fx.jit(f)(*to_dev(list(args))), f(*args), "a keepdims row kernel",
                       tol, tol)


@needs_gpu
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5),
                                       (ml_dtypes.bfloat16, 2e-2)])
@pytest.mark.parametrize("d", [256, 300, 4096])
def test_layer_norm_gelu_step_as_one_row_kernel_matches_the_cpu(dtype: Any, tol: float,
                                                                 d: int) -> None:
    args = ln_gelu_args(70, d, dtype, seed=d)
    step = fx.value_and_grad(ln_gelu, argnums=(0, 3))
    want = step(*args)
    got = fx.jit(step)(*to_dev(args))
    assert_matches(got, want, "ln_gelu's step fused", tol, tol)


@needs_gpu
@pytest.mark.parametrize("lead,d,dtype", [((2, 35), 300, np.float32),
                                          ((3,), gen.ROW_MAX, np.float64)],
                         ids=["two-kept-axes", "longest-rows-float64"])
def test_phased_kernels_over_several_kept_axes_and_the_longest_rows(lead: tuple, d: int,
                                                                    dtype: Any) -> None:
    # kept axes (2, 35) flattened to one row index; rows of ROW_MAX float64 elements,
    # 1024 threads holding 16 each of five loads (the kernel's launch bounds let it spill)
    rng = np.random.default_rng(1)
    x, g = (rng.standard_normal(lead + (d,)).astype(dtype) for _ in range(2))
    w, b = rng.standard_normal(d).astype(dtype), rng.standard_normal(d).astype(dtype)
    step = fx.value_and_grad(ln_gelu)
    (k,) = kernels_for(step, x, w, b, g)
    assert k.launch["kind"] == "rows" and k.launch["grid"] == (int(np.prod(lead)),)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    assert_matches(fx.jit(step)(*to_dev([x, w, b, g])), step(x, w, b, g),
                   "a phased kernel", tol, tol)


LAYOUTS = [((4096, 300), (1,)), ((300, 4096), (0,)), ((1 << 20,), (0,)), ((3, 5, 7), (0, 2)),
           ((64, 1, 33), (2,)), ((2, 40000), (0, 1)), ((5, 3000, 2), (1,)), ((7, 9), (0,))]


@needs_gpu
@pytest.mark.parametrize("shape,axes", LAYOUTS, ids=[f"{s}-{a}" for s, a in LAYOUTS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_reduction_layout(shape: tuple, axes: tuple, dtype: Any) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    x.flat[3] = np.nan if shape == (7, 9) else x.flat[3]  # NaN propagates through max

    def f(a):
        e = fnp.tanh(a) * 1.5 + a
        return red.reduce_sum(e * e, axes), red.reduce_max(e, axes), e * 2.0

    assert len(fx.jit(f).lower(to_dev(x)).kernels) >= 1
    with np.errstate(all="ignore"):
        want = f(x)
        got = fx.jit(f)(to_dev(x))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert_matches(got, want, f"reductions over {axes} of {shape}", tol, tol)


@needs_gpu
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_half_precision_chains_match_the_cpu_within_rounding(dtype: Any) -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (256, 128)).astype(dtype)
    b = rng.uniform(-1, 1, (128,)).astype(dtype)

    def f(a, c):
        h = fnp.tanh(a * c + 0.5) * a
        return h, red.reduce_sum(h, (1,)), red.reduce_max(h, (0,))

    want = f(x, b)
    got = fx.jit(f)(*to_dev((x, b)))
    assert [str(np.dtype(g.dtype)) for g in got] == [np.dtype(dtype).name] * 3
    # the CPU rounds after every operation, the fused kernel once: a few half-precision ulps
    eps = float(ml_dtypes.finfo(dtype).eps)
    for g, w in zip(got, want):
        g = np.asarray(g.get(), np.float32)
        w = np.asarray(w, np.float32)
        np.testing.assert_allclose(g, w, rtol=8 * eps, atol=8 * eps * (1 + np.abs(w).max()))


@needs_gpu
def test_grad_of_an_mlp_step_is_fused_and_matches_the_cpu() -> None:
    rng = np.random.default_rng(2)
    W1, W2 = rng.standard_normal((16, 32)) * 0.3, rng.standard_normal((32, 4)) * 0.3
    X, Y = rng.standard_normal((8, 16)), rng.standard_normal((8, 4))

    def loss(p, x, y):
        h = fnp.tanh(x @ p[0])
        return fnp.mean((h @ p[1] - y) ** 2) + 1e-3 * fnp.sum(p[0] ** 2)

    step = fx.jit(fx.value_and_grad(loss))
    args = to_dev(([W1, W2], X, Y))
    assert len(step.lower(*args).kernels) >= 2
    assert_matches(step(*args), fx.value_and_grad(loss)([W1, W2], X, Y), "MLP step", 1e-11,
                   1e-12)


# -- jit with fusion over the spec table, on CUDA ----------------------------------------------

from tests.test_compiler import ALL, SAMPLE  # noqa: E402
from tests.test_cuda import SPECS as CUDA_SPECS  # noqa: E402  (no CPU-only primitives)

TABLE = CUDA_SPECS if ALL else [s for s in CUDA_SPECS if s.name in SAMPLE and not s.label]
from tests.test_primitive_rules import Call, cotangent_like, draw_rng  # noqa: E402
from tests.test_primitive_transforms import tangents_for  # noqa: E402


@needs_gpu
@pytest.mark.parametrize("spec", TABLE, ids=[s.id for s in TABLE])
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_jit_with_fusion_on_cuda_matches_cpu_eager(spec: Any, data: Any) -> None:
    call = Call(spec, data.draw(spec.args, label="args"))
    rng = draw_rng(data)
    args = call.dyn_args
    rtol, atol = max(spec.rtol, 1e-11), max(spec.atol, 1e-11)
    with np.errstate(all="ignore"):
        assert_matches(fx.jit(call.fn)(*to_dev(args)), call.fn(*args), f"{spec.id}: jit",
                       rtol, atol)
        if not call.diff:
            return
        if spec.reverse:  # (while_loop: forward mode only)
            u = cotangent_like(call.fn(*args), rng)

            def pull(u: Any, *xs: Any) -> Any:
                cts = fx.vjp(call.fn, *xs)[1](u)
                return tuple(cts[i] for i in call.diff)

            assert_matches(fx.jit(pull)(*to_dev((u, *args))), pull(u, *args),
                           f"{spec.id}: jit(vjp)", rtol, atol)
        _, tangents = tangents_for(call, rng)

        def push(ts: Any, *xs: Any) -> Any:
            return fx.jvp(call.fn, xs, ts)[1]

        assert_matches(fx.jit(push)(*to_dev((tangents, *args))), push(tangents, *args),
                       f"{spec.id}: jit(jvp)", rtol, atol)


# -- CUDA graphs ---------------------------------------------------------------------------------

from functx.backends._cuda import GRAPH_POOLS  # noqa: E402
from functx.compiler import cuda_graph  # noqa: E402


@needs_gpu
def test_a_jitted_step_with_gemms_replays_as_a_graph_without_aliasing() -> None:
    rng = np.random.default_rng(3)
    W = [rng.standard_normal((32, 64)).astype(np.float32) * 0.2,
         rng.standard_normal((64, 8)).astype(np.float32) * 0.2]
    xs = [rng.standard_normal((16, 32)).astype(np.float32) for _ in range(4)]

    def loss(p, x):
        return fnp.sum(fnp.tanh(fnp.tanh(x @ p[0]) @ p[1]) ** 2)

    step = fx.jit(fx.grad(loss))
    before = dict(cuda_graph.STATS)
    got = [step(to_dev(W), to_dev(x)) for x in xs]  # eager, capture, replay, replay
    assert cuda_graph.STATS["captured"] == before["captured"] + 1
    assert cuda_graph.STATS["failed"] == before["failed"]
    for g, x in zip(got, xs):  # earlier results are not overwritten by later replays
        assert_matches(g, fx.grad(loss)(W, x), "graph replay", 1e-5, 1e-5)


def _new_graph(old: set) -> Any:
    """The one CudaGraph captured since ``old = set(GRAPH_POOLS)`` was taken."""
    from functx.backends._cuda import GRAPH_POOLS

    (graph,) = set(GRAPH_POOLS) - old
    return graph


@needs_gpu
def test_a_graph_reads_unmoved_inputs_in_place_and_copies_once_they_move() -> None:
    rng = np.random.default_rng(7)
    W = to_dev([rng.standard_normal((32, 64)).astype(np.float32) * 0.2,
                rng.standard_normal((64, 8)).astype(np.float32) * 0.2])
    x = to_dev(rng.standard_normal((16, 32)).astype(np.float32))

    def loss(p, x):
        return fnp.sum(fnp.tanh(fnp.tanh(x @ p[0]) @ p[1]) ** 2)

    step = fx.jit(fx.grad(loss))
    want = fx.grad(loss)(fx.to_numpy(W), fx.to_numpy(x))
    before, old = dict(cuda_graph.STATS), set(GRAPH_POOLS)
    got = [step(W, x) for _ in range(4)]  # eager, capture (direct), two direct replays
    graph = _new_graph(old)
    assert graph.captured.ins is None  # no copies of the inputs held or made
    assert cuda_graph.STATS["captured"] == before["captured"] + 1
    for g in got:
        assert_matches(g, want, "direct replay", 1e-5, 1e-5)
    # the same values at other addresses: captured again, reading copies from now on
    W2, x2 = [w * 1.5 for w in W], x * -1.0
    want2 = fx.grad(loss)(fx.to_numpy(W2), fx.to_numpy(x2))
    got2 = step(W2, x2)
    assert cuda_graph.STATS["recaptured"] == before["recaptured"] + 1
    assert graph.captured.ins is not None
    assert_matches(got2, want2, "copying replay", 1e-5, 1e-5)
    for args, w in [((W, x), want), ((W2, x2), want2), ((W, x), want)]:
        assert_matches(step(*args), w, "copying replay", 1e-5, 1e-5)
    assert cuda_graph.STATS["recaptured"] == before["recaptured"] + 1  # once only
    for g in got:  # results of the direct graph survive its release and later replays
        assert_matches(g, want, "direct replay", 1e-5, 1e-5)
    assert cuda_graph.STATS["failed"] == before["failed"]


@needs_gpu
def test_a_graph_of_a_step_with_donated_arguments_always_copies_them() -> None:
    x0 = np.linspace(-1.0, 1.0, 64).astype(np.float32)
    f = fx.jit(lambda a, b: fnp.sin(a) * b + 1.0, donate_argnums=0)
    b = to_dev(np.full(64, 2.0, np.float32))
    before, old = dict(cuda_graph.STATS), set(GRAPH_POOLS)
    for k in range(4):
        a = to_dev(x0 + k)
        assert_matches(f(a, b), np.sin(x0 + k) * 2.0 + 1.0, "donated step", 1e-6, 1e-6)
    assert _new_graph(old).captured.ins is not None
    assert cuda_graph.STATS["captured"] == before["captured"] + 1
    assert cuda_graph.STATS["recaptured"] == before["recaptured"]


@needs_gpu
def test_a_step_flattening_many_gradients_into_one_bucket_is_captured() -> None:
    # CuPy's concatenate of many operands copies their addresses from the host, which a
    # capturing stream refuses: the data-parallel step (ravel_pytree of the gradient) ran
    # eagerly because of it
    from functx.flatten_util import ravel_pytree

    rng = np.random.default_rng(5)
    params = [rng.standard_normal((4, k + 1)).astype(np.float32) for k in range(30)]

    def loss(p, x):
        return sum(fnp.sum(fnp.tanh(w * x) ** 2) for w in p)

    step = fx.jit(lambda p, x: ravel_pytree(fx.grad(loss)(p, x))[0])
    before = dict(cuda_graph.STATS)
    xs = [np.full((4, 1), 0.5 + 0.1 * k, np.float32) for k in range(4)]
    got = [step(to_dev(params), to_dev(x)) for x in xs]
    assert cuda_graph.STATS["captured"] == before["captured"] + 1
    assert cuda_graph.STATS["failed"] == before["failed"]
    for g, x in zip(got, xs):
        assert_matches(g, ravel_pytree(fx.grad(loss)(params, x))[0], "graph replay", 1e-5,
                       1e-5)


@needs_gpu
def test_a_step_that_reads_the_host_runs_eagerly() -> None:
    def f(x):
        y = fx.pure_callback(lambda a: np.asarray(a) * 2, fx.ShapeDtype(x.shape, x.dtype), x)
        return fnp.sin(y) + 1.0

    g = fx.jit(f)
    x = np.linspace(0, 1, 16)
    for _ in range(3):
        assert_matches(g(to_dev(x)), np.sin(2 * x) + 1.0, "uncapturable step", 1e-12, 1e-12)


@needs_gpu
def test_a_timed_step_whose_replays_are_not_faster_drops_its_graph(monkeypatch) -> None:
    # a replay must beat an eager call by a factor no time can (KEEP_BELOW 0): after two
    # timed eager calls, the capture and two timed replays, the graph is dropped
    monkeypatch.setattr(cuda_graph, "KEEP_BELOW", 0.0)
    monkeypatch.setattr(cuda_graph, "WARM_CALLS", 1)
    monkeypatch.setattr(cuda_graph, "TIMED_CALLS", 2)
    x = to_dev(np.ones((2048, 2048), np.float32))
    f = fx.jit(lambda a: fnp.sin(a) * 2.0 + 1.0)  # one kernel, 32 MB in and out: timed
    before = dict(cuda_graph.STATS)
    gc.collect()
    held = fx.memory_stats("cuda")["cuda_graph_bytes"]  # by other tests' graphs
    for i in range(8):
        assert_matches(f(x), (np.sin(np.ones((2048, 2048))) * 2 + 1).astype(np.float32),
                       "declined step", 1e-6, 1e-6)
        if i == 3:  # captured: the graph holds its buffers
            assert fx.memory_stats("cuda")["cuda_graph_bytes"] > held
    assert cuda_graph.STATS["declined"] == before["declined"] + 1
    assert cuda_graph.STATS["captured"] == before["captured"] + 1
    gc.collect()
    assert fx.memory_stats("cuda")["cuda_graph_bytes"] == held  # given back


@needs_gpu
def test_a_big_step_whose_host_time_pays_for_its_copies_is_captured(monkeypatch) -> None:
    # every step timed (BYTES_PER_LAUNCH 0), any replay kept (KEEP_BELOW inf): captured at
    # the fourth call, after the timed second and third, and kept
    monkeypatch.setattr(cuda_graph, "BYTES_PER_LAUNCH", 0)
    monkeypatch.setattr(cuda_graph, "KEEP_BELOW", float("inf"))
    monkeypatch.setattr(cuda_graph, "WARM_CALLS", 1)
    monkeypatch.setattr(cuda_graph, "TIMED_CALLS", 2)
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 4, 512, 64)).astype(np.float32) for _ in range(3))

    def loss(q, k, v):
        return fnp.sum(fnn.scaled_dot_product_attention(q, k, v, is_causal=True) ** 2)

    want = fx.grad(loss, argnums=(0, 1, 2))(q, k, v)
    g = fx.jit(fx.grad(loss, argnums=(0, 1, 2)))
    before = dict(cuda_graph.STATS)
    for i in range(7):
        got = g(*to_dev((q, k, v)))
        assert cuda_graph.STATS["captured"] == before["captured"] + (i >= 3)
        for a, b in zip(got, want):
            assert_matches(a, b, "captured attention step", 2e-4, 2e-4)
    assert cuda_graph.STATS["declined"] == before["declined"]


@needs_gpu
def test_graphs_can_be_turned_off() -> None:
    old = cuda_graph.set_cuda_graphs(False)
    try:
        before = dict(cuda_graph.STATS)
        f = fx.jit(lambda a: fnp.sin(a) * 2.0 + 1.0)
        x = to_dev(np.ones(8))
        for _ in range(3):
            f(x)
        assert cuda_graph.STATS == before
    finally:
        cuda_graph.set_cuda_graphs(old)


@needs_gpu
def test_grad_of_a_scan_is_captured_whole_and_matches_the_cpu() -> None:
    from functx import lax

    rng = np.random.default_rng(4)
    W = rng.standard_normal((8, 8)) * 0.3
    xs, h0, r = rng.standard_normal((20, 4, 8)), np.zeros((4, 8)), rng.standard_normal((8, 1))

    def make(xs, h0, r):
        def loss(w):
            def step(h, x):
                h = fnp.tanh(x + h @ w)
                return h, h @ r
            return fnp.sum(lax.scan(step, h0, xs)[1]) / 20
        return loss

    want = fx.grad(make(xs, h0, r))(W)
    g = fx.jit(fx.grad(make(*to_dev((xs, h0, r)))))
    before = dict(cuda_graph.STATS)
    for _ in range(3):
        assert_matches(g(to_dev(W)), want, "jit(grad(scan)) on CUDA", 1e-11, 1e-12)
    assert cuda_graph.STATS["declined"] == before["declined"]
    assert cuda_graph.STATS["captured"] == before["captured"] + 1


@needs_gpu
@pytest.mark.parametrize("jitted", [False, True])
def test_scan_carries_updated_in_place_never_touch_the_callers_arrays(jitted) -> None:
    # On CUDA a scan donates its carries to its body (accumulations become GEMMs with
    # beta = 1 into them): carries that are the caller's arrays, a constant passed through,
    # a slice of xs, or one array twice must still come out right and leave inputs alone.
    from functx import lax

    rng = np.random.default_rng(6)
    w = rng.standard_normal((16, 16)).astype(np.float32) * 0.2
    k = rng.standard_normal((4, 16)).astype(np.float32)
    xs = rng.standard_normal((6, 4, 16)).astype(np.float32)
    c0 = rng.standard_normal((16, 16)).astype(np.float32)

    def run(w, k, xs, c0):
        def step(carry, x):
            acc, h, kk, last, twin = carry
            h = fnp.tanh(x + h @ w)
            acc = acc + h.T @ x          # accumulated: one GEMM into the donated carry
            return (acc, h, k, x, acc), fnp.sum(h)
        return lax.scan(step, (c0, fnp.zeros_like(k), k, xs[0], c0), xs)

    want = run(w, k, xs, c0)
    args = to_dev((w, k, xs, c0))
    snapshot = [fx.to_numpy(a).copy() for a in args]
    f = fx.jit(run) if jitted else run
    for _ in range(3 if jitted else 1):
        got = f(*args)
        for g, e in zip(fx.tree.leaves(got), fx.tree.leaves(want)):
            assert_matches(g, e, "scan with donated carries", 1e-5, 1e-5)
    for a, s0 in zip(args, snapshot):  # the caller's arrays are unchanged
        np.testing.assert_array_equal(fx.to_numpy(a), s0)


@needs_gpu
def test_graph_inputs_in_other_layouts_are_copied_by_element() -> None:
    """A replay whose input is a transposed view (same shape and dtype as the captured one)
    reads it by element, not by its bytes."""
    rng = np.random.default_rng(5)
    w = to_dev(rng.standard_normal((32, 32)))

    def loss(a, b):
        return fnp.sum(fnp.tanh(a @ b) ** 2)

    step = fx.jit(fx.grad(loss))
    xs = [rng.standard_normal((32, 32)) for _ in range(4)]
    for k, x in enumerate(xs):
        d = to_dev(x)
        arg = d if k < 3 else to_dev(np.ascontiguousarray(x.T)).T  # a view, last call
        assert_matches(step(arg, w), fx.grad(loss)(x, fx.to_numpy(w)), "graph replay", 1e-11,
                       1e-12)
