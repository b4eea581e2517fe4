"""CUDA against CPU: every primitive of the spec table, its VJP, JVP and batching, on both.

Each check draws arguments from the primitive's spec (tests/specs), runs the same function
on NumPy arrays and on CuPy copies of them, and asserts the CUDA results are CuPy arrays of
the same shape and dtype whose values match the CPU's (to rounding: CUDA's libm, atomic
float additions and summation orders differ in the last bits). Then device-specific
checks: dtypes (float32, float16, bfloat16: every spec in bfloat16 against the CPU's
ml_dtypes results, and TF32 matmuls through ``fx.default_matmul_precision``), the CUDA
kernels (last-write-wins scatter, scatter_add per dtype, cuBLAS batched GEMM on transposed
and broadcast operands), device_put / to_numpy / default_device, mixing devices, DLPack with PyTorch and JAX, memory
statistics, an MLP gradient end to end, and the random generator's bits.

Without a CUDA backend (no CuPy, or no GPU) every test here skips with the reason.
``FUNCTX_TEST_DEVICE=fakegpu`` runs the device-generic checks on tests/test_backends.py's
fake device instead (a local dry run of this file's logic; CuPy-specific tests skip).
"""
from __future__ import annotations

import itertools
import math
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, given, settings, strategies as st

import functx as fx
import functx.backends as B
import functx.numpy as fnp
from functx import tree
from functx.errors import DeviceError, DTypeError
from functx.primitives import indexing as ix
from functx.primitives import linalg as la
from tests import test_complex_rules as cx_rules
from tests.specs import PrimSpec, all_specs
from tests.test_low_precision import (BF16, NO_VALUE_CHECK, NOT_HALF, _cast, _close, _dtypes,
                                      _is_f64, _low_like, _max_abs)
from tests.test_primitive_rules import (Call, cotangent_like, draw_rng, is_static, random_like,
                                        with_args)

DEVICE_NAME = os.environ.get("FUNCTX_TEST_DEVICE", "cuda")
if DEVICE_NAME == "fakegpu":
    # Under the name pytest imports it by (tests/ is on sys.path, with no __init__.py), so
    # that the collected test_backends module, its FakeArray and its fixture are this one.
    import test_backends as _fake

    B.register_backend(_fake.FAKE)
AVAILABLE = DEVICE_NAME in B.backends()
pytestmark = pytest.mark.skipif(
    not AVAILABLE, reason=f"no CUDA backend on this machine ({B.cuda_status()})")
IS_CUDA = AVAILABLE and DEVICE_NAME == "cuda"
needs_cupy = pytest.mark.skipif(not IS_CUDA, reason="needs CuPy on a GPU (not the fake device)")

DEV = B.get_backend(DEVICE_NAME) if AVAILABLE else None
xp = DEV.xp if AVAILABLE else np
DEVICE = fx.Device(DEVICE_NAME, 0)

# Primitives with no CUDA implementation, as in JAX (LAPACK's geev and gees have no cuSOLVER
# counterpart): on the device they raise a FunctxError saying so
# (test_cpu_only_primitives_refuse_the_device).
CPU_ONLY = {"eig", "schur"}
SPECS: list[PrimSpec] = [s for s in all_specs() if s.name not in CPU_ONLY]
DIFF_SPECS = [s for s in SPECS if s.diff_argnums]


def per_spec(specs: list[PrimSpec]) -> Any:
    return pytest.mark.parametrize("spec", specs, ids=[s.id for s in specs])


def examples(n: int) -> settings:
    """``n`` examples, reported as drawn (no shrinking: GPU time is scarce)."""
    return settings(max_examples=n, phases=(Phase.explicit, Phase.reuse, Phase.generate),
                    database=None)


# -- helpers -----------------------------------------------------------------------------------

def to_dev(x: Any) -> Any:
    """NumPy arrays and scalars (leaves of a pytree) copied to the device; Python scalars
    unchanged."""
    return tree.map(lambda a: DEV.put(np.asarray(a), 0)
                    if isinstance(a, (np.ndarray, np.generic)) else a, x)


def on_dev(x: Any) -> bool:
    return isinstance(x, DEV.array_types)


def assert_matches(got: Any, want: Any, what: str, rtol: float, atol: float) -> None:
    """``got`` (device pytree) has ``want``'s (host pytree) structure, shapes, dtypes and
    values; every array leaf of ``got`` lives on the device."""
    got_leaves, got_tree = tree.flatten(got)
    want_leaves, want_tree = tree.flatten(want)
    assert got_tree == want_tree, f"{what}: structure {got_tree} != {want_tree}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if g is None and w is None:
            continue
        assert on_dev(g), f"{what}: leaf {i} is a {type(g).__name__}, not a device array"
        h, w = DEV.to_host(g), np.asarray(w)
        assert (h.shape, h.dtype) == (w.shape, w.dtype), (
            f"{what}: leaf {i} is {h.dtype}{list(h.shape)}, the CPU gives {w.dtype}{list(w.shape)}")
        if w.dtype.kind in "fc":
            scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0))
            np.testing.assert_allclose(h, w, rtol=rtol, atol=atol * (1.0 + scale),
                                       equal_nan=True, err_msg=f"{what}: leaf {i}")
        else:
            np.testing.assert_array_equal(h, w, err_msg=f"{what}: leaf {i}")


def tolerances(spec: PrimSpec, dtype: Any = np.float64) -> tuple[float, float]:
    if np.dtype(dtype) == np.float64:
        return max(spec.rtol, 1e-11), max(spec.atol, 1e-11)
    return 2e-5, 2e-5  # float32: CUDA's libm and orders of summation


def as_float32(args: tuple) -> tuple:
    return tree.map(lambda a: a.astype(np.float32) if isinstance(a, (np.ndarray, np.generic))
                    and a.dtype == np.float64 else a, args)


# -- every primitive: implementation, VJP, JVP, batching -----------------------------------------

@per_spec(SPECS)
@examples(3)
@given(data=st.data())
def test_impl_cuda_matches_cpu(spec: PrimSpec, data: Any) -> None:
    args = data.draw(spec.args, label="args")
    want = spec.fn(*args)
    got = spec.fn(*to_dev(args))
    assert_matches(got, want, f"{spec.id} (float64)", *tolerances(spec))


F32_SPECS = [s for s in SPECS if s.diff_argnums and s.reverse]  # drawn as float64: run in float32
REVERSE_SPECS = [s for s in SPECS if s.reverse]  # (while: forward mode only)
FORWARD_SPECS = [s for s in SPECS if s.diff_argnums]


@per_spec(F32_SPECS)
@examples(2)
@given(data=st.data())
def test_impl_and_vjp_cuda_match_cpu_float32(spec: PrimSpec, data: Any) -> None:
    """float32 outputs and cotangents keep float32 on CUDA too (Python scalars in rules
    stay weak) and match the CPU."""
    call = Call(spec, as_float32(data.draw(spec.args, label="args")))
    rng = draw_rng(data)
    out, f_vjp = fx.vjp(call.fn, *call.dyn_args)
    out_d, f_vjp_d = fx.vjp(call.fn, *to_dev(call.dyn_args))
    assert_matches(out_d, out, f"{spec.id} (float32)", *tolerances(spec, np.float32))
    u = cotangent_like(out, rng)
    assert_matches(f_vjp_d(to_dev(u)), f_vjp(u), f"{spec.id}: float32 cotangents",
                   *tolerances(spec, np.float32))


@per_spec(REVERSE_SPECS)
@examples(2)
@given(data=st.data())
def test_vjp_cuda_matches_cpu(spec: PrimSpec, data: Any) -> None:
    call = Call(spec, data.draw(spec.args, label="args"))
    rng = draw_rng(data)
    out, f_vjp = fx.vjp(call.fn, *call.dyn_args)
    u = cotangent_like(out, rng)
    want = f_vjp(u)
    out_d, f_vjp_d = fx.vjp(call.fn, *to_dev(call.dyn_args))
    assert_matches(out_d, out, f"{spec.id}: vjp output", *tolerances(spec))
    got = f_vjp_d(to_dev(u))
    rtol, atol = tolerances(spec)
    assert_matches(got, want, f"{spec.id}: cotangents", rtol * 10, atol * 10)


@per_spec(FORWARD_SPECS)
@examples(2)
@given(data=st.data())
def test_jvp_cuda_matches_cpu(spec: PrimSpec, data: Any) -> None:
    call = Call(spec, data.draw(spec.args, label="args"))
    rng = draw_rng(data)
    tangents = tuple(random_like(a, rng) if np.asarray(a).dtype.kind == "f"
                     else np.zeros_like(np.asarray(a)) for a in call.dyn_args)
    want = fx.jvp(call.fn, call.dyn_args, tangents)
    got = fx.jvp(call.fn, to_dev(call.dyn_args), to_dev(tangents))
    rtol, atol = tolerances(spec)
    assert_matches(got, want, f"{spec.id}: jvp", rtol * 10, atol * 10)


@per_spec(SPECS)
@examples(1)
@given(data=st.data())
def test_vmap_cuda_matches_cpu(spec: PrimSpec, data: Any) -> None:
    """vmap over a batch of two examples (the drawn one and its reverse-order copy for float
    arguments); scalars and other non-array arguments are held fixed."""
    call = Call(spec, data.draw(spec.args, label="args"))
    args = call.dyn_args
    batched = tuple(i for i, a in enumerate(args) if isinstance(a, (np.ndarray, np.generic)))
    stacked = tuple(np.stack([args[i], args[i][::-1] if args[i].ndim and
                              args[i].dtype.kind == "f" else args[i]]) for i in batched)

    def example(*xs: Any) -> Any:
        return call.fn(*with_args(args, batched, xs))

    want = fx.vmap(example)(*stacked)
    got = fx.vmap(example)(*to_dev(stacked))
    assert_matches(got, want, f"{spec.id}: vmap", *tolerances(spec))


# -- complex input: every primitive whose shape rule takes it (tests/test_complex_rules.py) -----

def complex_case(spec: PrimSpec, data: Any) -> tuple[Call, np.random.Generator]:
    """The spec on complex128 arguments (float64 ``x`` -> ``x + i y``), or a skip where a
    shape rule rejects them."""
    rng = draw_rng(data)
    call = Call(spec, cx_rules.complexify(data.draw(spec.args, label="args"), rng))
    reason = cx_rules.complex_rejection(spec, call)
    if reason is not None:
        pytest.skip(reason)
    return call, rng


@per_spec(REVERSE_SPECS)
@examples(2)
@given(data=st.data())
def test_complex_impl_and_vjp_cuda_match_cpu(spec: PrimSpec, data: Any) -> None:
    """Outputs and (complex) cotangents of complex arguments, CUDA against the CPU."""
    call, rng = complex_case(spec, data)
    out, f_vjp = fx.vjp(call.fn, *call.dyn_args)
    out_d, f_vjp_d = fx.vjp(call.fn, *to_dev(call.dyn_args))
    rtol, atol = tolerances(spec)
    assert_matches(out_d, out, f"{spec.id} (complex128)", rtol, atol)
    if not call.diff:
        return
    u = cx_rules.cotangent_of(out, rng)
    assert_matches(f_vjp_d(to_dev(u)), f_vjp(u), f"{spec.id}: complex cotangents",
                   rtol * 10, atol * 10)


@per_spec(DIFF_SPECS)
@examples(2)
@given(data=st.data())
def test_complex_jvp_cuda_matches_cpu(spec: PrimSpec, data: Any) -> None:
    """Complex tangents (real ones for real outputs), CUDA against the CPU."""
    call, rng = complex_case(spec, data)
    tangents = cx_rules.tangents_of(call, [cx_rules.random_of(call.dyn_args[i], rng)
                                           for i in call.diff])
    want = fx.jvp(call.fn, call.dyn_args, tangents)
    got = fx.jvp(call.fn, to_dev(call.dyn_args), to_dev(tangents))
    rtol, atol = tolerances(spec)
    assert_matches(got, want, f"{spec.id}: complex jvp", rtol * 10, atol * 10)


@per_spec(SPECS)
@examples(1)
@given(data=st.data())
def test_complex_vmap_cuda_matches_cpu(spec: PrimSpec, data: Any) -> None:
    """vmap over two complex examples (the drawn one and its conjugate for complex
    arguments), CUDA against the CPU."""
    call, _ = complex_case(spec, data)
    args = call.dyn_args
    batched = tuple(i for i, a in enumerate(args) if isinstance(a, (np.ndarray, np.generic)))
    stacked = tuple(np.stack([args[i], np.conj(args[i]) if args[i].dtype.kind == "c"
                              else args[i]]) for i in batched)

    def example(*xs: Any) -> Any:
        return call.fn(*with_args(args, batched, xs))

    want = fx.vmap(example)(*stacked)
    got = fx.vmap(example)(*to_dev(stacked))
    assert_matches(got, want, f"{spec.id}: complex vmap", *tolerances(spec))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_abs_and_its_gradient_keep_their_dtypes(dtype: Any) -> None:
    """abs: complex64 -> float32, complex128 -> float64 on the device; the gradient
    ``conj(z) / |z|`` (JAX's convention) keeps the input's dtype; rfft's power spectrum
    differentiates to the CPU's gradient."""
    z = np.array([3 + 4j, 0j, -1 + 0.5j], dtype)
    real = np.finfo(np.dtype(dtype)).dtype
    out = fnp.abs(to_dev(z))
    assert on_dev(out) and out.dtype == real
    g = fx.grad(lambda a: fnp.sum(fnp.abs(a)))(to_dev(z))
    tol = 1e-6 if dtype == np.complex64 else 1e-12
    assert_matches(g, np.conj(z) / np.where(z == 0, 1, np.abs(z)), "grad abs", tol, tol)
    x = np.random.default_rng(6).standard_normal(16).astype(real)
    f = lambda a: fnp.sum(fnp.abs(fnp.fft.rfft(a)))
    assert_matches(fx.grad(f)(to_dev(x)), fx.grad(f)(x), "grad sum |rfft|", tol * 10, tol * 10)


# -- dtypes ------------------------------------------------------------------------------------

def test_float16_operations_match_the_cpu() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 16, 32)).astype(np.float16)
    b = rng.standard_normal((8, 32, 4)).astype(np.float16)
    ops = {
        "tanh(a) * a + 1": lambda a, b: fnp.add(fnp.multiply(fnp.tanh(a), a), 1.0),
        "exp(a).sum(-1)": lambda a, b: fnp.sum(fnp.exp(a), axis=-1),
        "batched matmul": lambda a, b: fnp.matmul(a, b),
        "erf": lambda a, b: fx.bind(fx.registry["erf"], a),
    }
    for name, f in ops.items():
        want = f(a, b)
        got = f(*to_dev((a, b)))
        assert_matches(got, want, f"float16 {name}", 1e-2, 1e-2)
    g = fx.grad(lambda a: fnp.sum(fnp.matmul(a, to_dev(b)) ** 2).astype(np.float32))(to_dev(a))
    assert on_dev(g) and g.dtype == np.float16


def test_bfloat16_is_supported_or_refused_clearly() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.linspace(-2, 2, 12, dtype=np.float32).astype(ml_dtypes.bfloat16)
    if DEV.supports_dtype(np.dtype(ml_dtypes.bfloat16)):
        got = fnp.tanh(fx.device_put(x, DEVICE))
        assert_matches(got, fnp.tanh(x), "bfloat16 tanh", 1e-2, 1e-2)
    else:
        with pytest.raises(DTypeError, match="bfloat16 cannot live on"):
            fx.device_put(x, DEVICE)


# bfloat16 on the device: every spec whose arguments hold floats, rounded to bfloat16, gives
# the CPU's (ml_dtypes) values within bfloat16 rounding. Both sides compute in float32 inside
# and round once, so they differ by an ulp or two of bfloat16 (2**-8 relative) where
# float32's libm, summation orders or atomics differ; RTOL_BF16 allows a few.
RTOL_BF16 = 2e-2
BF16_SPECS = [s for s in SPECS if s.id not in NOT_HALF]
BF16_VJP_SPECS = [s for s in BF16_SPECS if s.diff_argnums and s.reverse]


def _bf16_call(spec: PrimSpec, data: Any) -> Call:
    raw = data.draw(spec.args, label="args")
    if not any(_is_f64(leaf) for a in raw if not is_static(a) for leaf in tree.leaves(a)):
        pytest.skip("no floating-point argument to round to bfloat16")
    if not DEV.supports_dtype(BF16):
        pytest.skip(f"the {DEVICE_NAME} backend has no bfloat16 (needs CuPy 14 and ml_dtypes)")
    return Call(spec, _cast(raw, BF16))


def _bf16_matches(got: Any, want: Any, what: str, scale: float) -> None:
    """Device leaves with the CPU's structure, shapes and dtypes (bfloat16 kept), values
    within RTOL_BF16 (see test_low_precision._close: relative to each entry, with a floor
    relative to the largest entry or ``scale``)."""
    got_leaves, got_tree = tree.flatten(got)
    want_leaves, want_tree = tree.flatten(want)
    assert got_tree == want_tree, f"{what}: structure {got_tree} != {want_tree}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if g is None and w is None:
            continue
        assert on_dev(g), f"{what}: leaf {i} is a {type(g).__name__}, not a device array"
        h, w = DEV.to_host(g), np.asarray(w)
        assert (h.shape, h.dtype) == (w.shape, w.dtype), (
            f"{what}: leaf {i} is {h.dtype}{list(h.shape)}, the CPU gives {w.dtype}{list(w.shape)}")
        if w.dtype.kind in "fc" or w.dtype == BF16:
            _close(h, w, RTOL_BF16, f"{what}: leaf {i}", scale)
        else:
            np.testing.assert_array_equal(h, w, err_msg=f"{what}: leaf {i}")


@per_spec(BF16_SPECS)
@examples(2)
@given(data=st.data())
def test_bfloat16_impl_cuda_matches_cpu(spec: PrimSpec, data: Any) -> None:
    """Every primitive accepts bfloat16 on the device, returns the CPU's dtypes (bfloat16
    where the CPU keeps it) and values; under jit too."""
    call = _bf16_call(spec, data)
    want = call.fn(*call.dyn_args)
    got = call.fn(*to_dev(call.dyn_args))
    if spec.id in NO_VALUE_CHECK:
        assert _dtypes(got) == _dtypes(want), f"{spec.id}: dtypes {_dtypes(got)}"
        return
    scale = _max_abs(call.dyn_args)
    _bf16_matches(got, want, f"{spec.id} (bfloat16)", scale)
    _bf16_matches(fx.jit(call.fn)(*to_dev(call.dyn_args)), want, f"{spec.id} (bfloat16, jit)",
                  scale)


@per_spec(BF16_VJP_SPECS)
@examples(2)
@given(data=st.data())
def test_bfloat16_vjp_cuda_matches_cpu(spec: PrimSpec, data: Any) -> None:
    """bfloat16 cotangents on the device: the CPU's dtypes and values."""
    call = _bf16_call(spec, data)
    if spec.id in NO_VALUE_CHECK:
        pytest.skip(NO_VALUE_CHECK[spec.id])
    rng = draw_rng(data)
    out, f_vjp = fx.vjp(call.fn, *call.dyn_args)
    u = tree.map(lambda o: _low_like(o, rng, BF16), out)
    want = f_vjp(u)
    _, f_vjp_d = fx.vjp(call.fn, *to_dev(call.dyn_args))
    got = f_vjp_d(to_dev(u))
    diff = call.diff
    _bf16_matches([got[i] for i in diff], [want[i] for i in diff], f"{spec.id}: bfloat16 "
                  "cotangents", _max_abs(u) * max(1.0, _max_abs(call.dyn_args)))


def test_bfloat16_mlp_and_fused_layers_on_the_device() -> None:
    """A bfloat16 MLP with layer norm, GELU, softmax cross-entropy and attention: values and
    gradients on the device are bfloat16 and match the CPU's."""
    if not DEV.supports_dtype(BF16):
        pytest.skip(f"the {DEVICE_NAME} backend has no bfloat16")
    import functx.nn as nn

    rng = np.random.default_rng(7)
    w1, w2 = ((rng.standard_normal(s) * 0.2).astype(BF16) for s in ((16, 32), (32, 8)))
    q = rng.standard_normal((2, 2, 5, 8)).astype(BF16)
    x, ln_w = rng.standard_normal((6, 16)).astype(BF16), np.ones(32, BF16)
    labels = rng.integers(0, 8, size=6)

    def loss(w1, w2, q, x, ln_w, labels):
        h = nn.gelu(nn.layer_norm(x @ w1, 32, ln_w), approximate="tanh")
        logits = h @ w2
        a = nn.dot_product_attention(q, q, q)
        nll = -fnp.take_along_axis(nn.log_softmax(logits, dim=-1), labels[:, None], 1)
        return fnp.mean(nll) + fnp.mean(nn.softmax(a, dim=-1) * a)

    want = fx.value_and_grad(loss, argnums=(0, 1, 2, 4))(w1, w2, q, x, ln_w, labels)
    got = fx.value_and_grad(loss, argnums=(0, 1, 2, 4))(*to_dev((w1, w2, q, x, ln_w, labels)))
    assert all(leaf.dtype == BF16 for leaf in tree.leaves(got[1]))  # (gradients)
    _bf16_matches(got, want, "bfloat16 MLP value_and_grad", 1.0)


@needs_cupy
@pytest.mark.parametrize("bf16_kernels", [True, False])
def test_bfloat16_fused_row_kernels_match_the_cpu(bf16_kernels: bool, monkeypatch: Any) -> None:
    """The fused primitives' CUDA row kernels on bfloat16 rows longer than one pass of a
    block (and a moved axis): loading and storing bfloat16 themselves (float32 inside), or,
    with BF16_KERNELS off, on float32 copies; the CPU's ml_dtypes values either way."""
    from functx.primitives import fused as fu
    from functx.primitives.cuda import _kernels

    monkeypatch.setattr(_kernels, "BF16_KERNELS", bf16_kernels)
    rng = np.random.default_rng(10)
    for rows, d in ((3, 5000), (65, 96)):
        x, g = (rng.standard_normal((rows, d)).astype(BF16) for _ in range(2))
        w, b = (rng.standard_normal(d).astype(BF16) for _ in range(2))
        y = fu.log_softmax(x, axis=-1)
        cases = {
            "layer_norm": lambda x, w, b, g, y: fu.layer_norm(x, w, b, eps=1e-5),
            "layer_norm_grad": lambda x, w, b, g, y: fu.layer_norm_grad(x, w, g, eps=1e-5),
            "layer_norm_grads": lambda x, w, b, g, y: fu.layer_norm_grads(x, w, g, eps=1e-5),
            "softmax": lambda x, w, b, g, y: fu.softmax(x, axis=-1),
            "softmax(axis=0)": lambda x, w, b, g, y: fu.softmax(x, axis=0),
            "log_softmax": lambda x, w, b, g, y: fu.log_softmax(x, axis=-1),
            "log_softmax_grad": lambda x, w, b, g, y: fu.log_softmax_grad(y, g, axis=-1),
            "gelu": lambda x, w, b, g, y: fu.gelu(x, approximate="tanh"),
            "gelu_grad": lambda x, w, b, g, y: fu.gelu_grad(x, g, approximate="none"),
        }
        for name, f in cases.items():
            want = f(x, w, b, g, y)
            got = f(*to_dev((x, w, b, g, y)))
            scale = float(np.sqrt(d)) if name == "layer_norm_grads" else 1.0
            _bf16_matches(got, want, f"{name} on ({rows}, {d}) bfloat16", scale)


@needs_cupy
def test_bfloat16_matmul_runs_on_tensor_cores_with_float32_accumulation() -> None:
    """2-D and batched bfloat16 products (CuPy's matmul and functx's strided batched GEMM)
    equal the float32 product of the same bfloat16 values rounded once: a bfloat16
    accumulator would lose ~k * 2**-9 of it."""
    rng = np.random.default_rng(8)
    k = 4096
    for xs, ys in (((64, k), (k, 32)), ((3, 64, k), (3, k, 32))):
        x, y = rng.random(xs).astype(BF16), rng.random(ys).astype(BF16)
        exact = np.matmul(x.astype(np.float64), y.astype(np.float64))
        got = fnp.matmul(*to_dev((x, y)))
        assert got.dtype == BF16
        np.testing.assert_allclose(DEV.to_host(got).astype(np.float64), exact, rtol=8e-3)


@needs_cupy
@pytest.mark.parametrize("batched", [False, True])
def test_tf32_only_when_asked_and_within_tf32_tolerance(batched: bool) -> None:
    """float32 products: bit-identical to precision="highest" by default; with TF32 (the
    context manager, the config option or precision=) they differ from them but stay
    within TF32's error (10-bit mantissa: ~1e-3 relative to the terms). CuPy's global
    compute type is restored after each product."""
    from cupy._core import _routines_linalg as cp_linalg

    if os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
        pytest.skip("NVIDIA_TF32_OVERRIDE=0 turns TF32 off in cuBLAS for this process")
    if int(xp.cuda.Device().compute_capability) < 80:
        pytest.skip("TF32 needs compute capability 8.0 (Ampere) or later")
    rng = np.random.default_rng(9)
    shape_x, shape_y = ((2, 512, 1024), (2, 1024, 512)) if batched else ((512, 1024), (1024, 512))
    x = rng.standard_normal(shape_x).astype(np.float32)
    y = rng.standard_normal(shape_y).astype(np.float32)
    xd, yd = to_dev((x, y))
    exact = np.matmul(x.astype(np.float64), y.astype(np.float64))
    scale = math.sqrt(shape_x[-1])  # the size of the terms' sum
    before = cp_linalg.get_compute_type(np.float32)
    highest = DEV.to_host(fnp.matmul(xd, yd, precision="highest"))
    default = DEV.to_host(fnp.matmul(xd, yd))
    np.testing.assert_array_equal(default, highest)
    assert np.max(np.abs(highest - exact)) < 1e-4 * scale
    with fx.default_matmul_precision("tensorfloat32"):
        tf32 = DEV.to_host(fnp.matmul(xd, yd))
        jitted = DEV.to_host(fx.jit(fnp.matmul)(xd, yd))
    assert cp_linalg.get_compute_type(np.float32) == before
    err = np.max(np.abs(tf32 - exact))
    assert err > 1e-4 * scale, f"TF32 was asked for but the product is float32 (error {err})"
    assert err < 2e-2 * scale, f"TF32 product too far from the exact one (error {err})"
    np.testing.assert_array_equal(jitted, tf32)
    np.testing.assert_array_equal(DEV.to_host(fnp.matmul(xd, yd, precision="high")), tf32)
    fx.config.update("default_matmul_precision", "tensorfloat32")
    try:
        np.testing.assert_array_equal(DEV.to_host(fnp.matmul(xd, yd)), tf32)
        np.testing.assert_array_equal(  # an explicit argument wins
            DEV.to_host(fnp.matmul(xd, yd, precision="highest")), highest)
    finally:
        fx.config.update("default_matmul_precision", None)
    np.testing.assert_array_equal(DEV.to_host(fnp.matmul(xd, yd)), highest)
    # float64 is never affected
    x64, y64 = to_dev((x.astype(np.float64), y.astype(np.float64)))
    with fx.default_matmul_precision("tensorfloat32"):
        np.testing.assert_allclose(DEV.to_host(fnp.matmul(x64, y64)), exact, rtol=1e-12,
                                   atol=1e-12 * scale)


@needs_cupy
def test_batched_gemm_reads_transposed_and_broadcast_operands() -> None:
    rng = np.random.default_rng(2)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5), (np.float16, 1e-2)):
        for tx in (False, True):
            for ty in (False, True):
                x = rng.standard_normal((3, 5, 4)).astype(dtype)
                y = rng.standard_normal((3, 4, 6)).astype(dtype)
                xd = xp.asarray(x.transpose(0, 2, 1).copy()).transpose(0, 2, 1) if tx \
                    else xp.asarray(x)
                yd = xp.asarray(y.transpose(0, 2, 1).copy()).transpose(0, 2, 1) if ty \
                    else xp.asarray(y)
                want = np.matmul(x.astype(np.float64), y.astype(np.float64))
                got = la.dot_general(xd, yd, dimension_numbers=(((2,), (1,)), ((0,), (0,))))
                assert got.dtype == dtype
                np.testing.assert_allclose(got.get().astype(np.float64), want, rtol=tol,
                                           atol=tol * 10, err_msg=f"{dtype} {tx} {ty}")
        yb = xp.broadcast_to(xp.asarray(y[:1]), (3, 4, 6))  # batch stride 0
        got = la.dot_general(xp.asarray(x), yb, dimension_numbers=(((2,), (1,)), ((0,), (0,))))
        np.testing.assert_allclose(got.get().astype(np.float64),
                                   np.matmul(x, np.broadcast_to(y[:1], (3, 4, 6))).astype(
                                       np.float64), rtol=tol, atol=tol * 10)


@needs_cupy
def test_scatter_last_write_wins_under_heavy_duplication() -> None:
    rng = np.random.default_rng(3)
    for axis in (0, 1):
        x = rng.standard_normal((6, 5, 3)) if axis == 1 else rng.standard_normal((5, 4))
        idx = rng.integers(0, 5, size=(200,))
        upd_shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
        upd = rng.standard_normal(upd_shape)
        want = ix.scatter(x, idx, upd, axis=axis)
        for _ in range(3):
            got = ix.scatter(*to_dev((x, idx, upd)), axis=axis)
            np.testing.assert_array_equal(got.get(), want)


@needs_cupy
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int64, np.int32,
                                   np.uint8, np.int16, np.complex128, np.bool_])
def test_scatter_add_every_dtype(dtype: Any) -> None:
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((7, 3)) * 4).astype(dtype)
    idx = rng.integers(-1, 8, size=(4, 5))
    upd = (rng.standard_normal((4, 5, 3)) * 4).astype(dtype)
    want = ix.scatter_add(x, idx, upd, axis=0)
    got = ix.scatter_add(*to_dev((x, idx, upd)), axis=0)
    assert got.dtype == want.dtype
    tol = 1e-2 if dtype == np.float16 else 1e-6
    if np.dtype(dtype).kind in "fc":
        np.testing.assert_allclose(got.get(), want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got.get(), want)


@needs_cupy
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_kernels_match_the_cpu(dtype: Any) -> None:
    """The max pooling kernels (functx/primitives/cuda/pooling.py) against the CPU's, bit for
    bit, on ties, NaN and -inf: windows that tile the planes (no atomics), overlapping and
    dilated windows (atomic adds of halves: exact in any order), 1-d to 3-d."""
    from functx.primitives import pooling as pl

    rng = np.random.default_rng(7)
    cases = [((64, 6, 28, 28), (2, 2), (2, 2), (1, 1)), ((3, 5, 31), (3,), (2,), (1,)),
             ((2, 3, 9, 10), (3, 3), (1, 1), (1, 1)), ((2, 2, 11, 9), (2, 3), (3, 1), (2, 2)),
             ((2, 2, 6, 7, 8), (2, 2, 2), (2, 2, 2), (1, 1, 1)),
             ((1, 2, 7, 6, 9), (3, 2, 2), (1, 2, 3), (1, 2, 1))]
    for shape, window, strides, dilation in cases:
        x = rng.integers(-2, 3, shape).astype(dtype)
        x[rng.random(shape) < 0.05] = np.nan
        x[rng.random(shape) < 0.05] = -np.inf
        want = pl.max_pool(x, window, strides, dilation)
        g = (rng.integers(-8, 9, want.shape) / 2).astype(dtype)
        want_g = pl.max_pool_grad(x, g, window, strides, dilation)
        got = pl.max_pool(to_dev(x), window, strides, dilation)
        got_g = pl.max_pool_grad(to_dev(x), to_dev(g), window, strides, dilation)
        assert got.dtype == dtype and got_g.dtype == dtype
        np.testing.assert_array_equal(got.get(), want, err_msg=str(shape))
        np.testing.assert_array_equal(got_g.get(), want_g, err_msg=str(shape))


@needs_cupy
@pytest.mark.parametrize("split", [False, True])
def test_fused_attention_kernels_match_the_cpu(split: bool, monkeypatch: Any) -> None:
    """The attention's GEMMs and row kernels (functx/primitives/attention.py) on rows longer
    than one pass of a block, with biases read through broadcast, transposed and reversed
    strides, -inf entries (fully masked rows), causal masks with L < S and L > S, soft-caps
    and the bias's cotangent; with ``split`` the batch is cut into several chunks and causal
    queries into row blocks (as for large logits)."""
    from functx.primitives import attention as att
    from functx.primitives.cuda import attention as cuda_att

    if split:
        monkeypatch.setattr(cuda_att, "_ATTENTION_SCRATCH_BYTES", 40_000)
        monkeypatch.setattr(cuda_att, "_ATTENTION_BLOCK_ABOVE", 0)
        monkeypatch.setattr(cuda_att, "_ATTENTION_BLOCK_ROWS", 64)
    rng = np.random.default_rng(5)
    B, H, E, Ev = 2, 3, 16, 8
    for L, S in ((37, 300), (40, 7), (256, 100)):
        q, k, v, ct = (rng.standard_normal((B, H, n, d)) for n, d in
                       ((L, E), (S, E), (S, Ev), (L, Ev)))
        masked = np.where(rng.random((B, 1, L, S)) < 0.3, -np.inf, 0.0)
        masked[0, 0, 3] = -np.inf  # a fully masked row
        # name: (array, view of it taken on each device)
        biases = {"none": (None, None), "(L, S)": (rng.standard_normal((L, S)), None),
                  "(B, 1, 1, S)": (rng.standard_normal((B, 1, 1, S)), None),
                  "transposed (1, H, L, S)": (rng.standard_normal((1, H, S, L)),
                                              lambda a: a.swapaxes(-1, -2)),
                  "reversed (B, H, L, S)": (rng.standard_normal((B, H, L, S)),
                                            lambda a: a[::-1, :, ::-1]),
                  "masked": (masked, None)}
        for (name, (base, view)), causal, cap in itertools.product(
                biases.items(), (False, True), (None, 2.0)):
            opts = {"scale": 0.3, "causal": causal, "softcap": cap}
            what = f"L={L} S={S} bias {name} {opts}"
            bias = base if view is None else view(base)
            want = att.dot_product_attention(q, k, v, bias, **opts)
            want_g = att.dot_product_attention_grad(q, k, v, bias, ct,
                                                    bias_grad=bias is not None, **opts)
            assert name != "masked" or not np.any(want[0, :, 3])
            # float16 computes in float32 and rounds once: against the exact attention of
            # the operands rounded to float16
            for dtype, tol in ((np.float64, 1e-10), (np.float32, 2e-4), (np.float16, 2e-3)):
                host = [a.astype(dtype) for a in (q, k, v, ct)]
                b_h = None if base is None else base.astype(dtype)
                want_d, want_gd = want, want_g
                if dtype == np.float16:
                    exact = [a.astype(np.float64) for a in host]
                    b_x = None if b_h is None else b_h.astype(np.float64)
                    b_x = b_x if view is None else view(b_x)
                    want_d = att.dot_product_attention(*exact[:3], b_x, **opts)
                    want_gd = att.dot_product_attention_grad(*exact[:3], b_x, exact[3],
                                                             bias_grad=bias is not None,
                                                             **opts)
                q_d, k_d, v_d, ct_d = (xp.asarray(a) for a in host)
                b_d = None if b_h is None else xp.asarray(b_h)
                b_d = b_d if view is None else view(b_d)
                got = att.dot_product_attention(q_d, k_d, v_d, b_d, **opts)
                got_g = att.dot_product_attention_grad(q_d, k_d, v_d, b_d, ct_d,
                                                       bias_grad=bias is not None, **opts)
                assert_matches(got, want_d.astype(dtype), f"{what} {dtype.__name__}", tol, tol)
                assert_matches(got_g, tuple(g.astype(dtype) for g in want_gd),
                               f"{what} {dtype.__name__} gradients", tol, tol)


# -- placement, defaults, mixing -----------------------------------------------------------------

def test_devices_and_device_put_round_trip() -> None:
    assert DEVICE in fx.devices() and fx.devices()[0] == fx.Device("cpu")
    x = np.arange(6.0).reshape(2, 3)
    d = fx.device_put({"x": x, "s": np.float32(2.0)}, DEVICE_NAME)
    assert on_dev(d["x"]) and on_dev(d["s"]) and d["s"].dtype == np.float32
    assert fx.device_of(d["x"]) == DEVICE
    assert fx.device_put(d["x"], DEVICE) is d["x"]
    back = fx.to_numpy(d)
    assert type(back["x"]) is np.ndarray
    np.testing.assert_array_equal(back["x"], x)
    cpu = fx.device_put(d["x"], "cpu")
    assert type(cpu) is np.ndarray and not cpu.flags.writeable


def test_block_until_ready_waits_for_device_work() -> None:
    x = fx.device_put(np.linspace(0.0, 1.0, 512 * 512).reshape(512, 512), DEVICE_NAME)
    out = {"y": fnp.tanh(x @ x) @ x, "host": np.ones(2), "n": 3}
    assert fx.block_until_ready(out) is out and on_dev(out["y"])
    if IS_CUDA:
        assert xp.cuda.get_current_stream().done  # nothing left queued on the stream
    want = np.tanh(fx.to_numpy(x) @ fx.to_numpy(x)) @ fx.to_numpy(x)
    np.testing.assert_allclose(fx.to_numpy(out["y"]), want, rtol=1e-10, atol=1e-10)


def test_default_device_places_created_arrays() -> None:
    with fx.default_device(DEVICE_NAME):
        made = [fnp.zeros((2, 3)), fnp.ones(4, np.float32), fnp.full((2,), 1.5), fnp.eye(3),
                fnp.arange(5), fnp.zeros_like(1.0)]
        assert fx.get_default_device() == DEVICE
    assert all(on_dev(a) for a in made)
    assert made[1].dtype == np.float32 and made[4].dtype == np.int64
    np.testing.assert_array_equal(DEV.to_host(made[3]), np.eye(3))
    assert type(fnp.zeros(2)) is np.ndarray


def test_mixing_devices_names_both_and_scalars_join() -> None:
    x = fx.device_put(np.ones(3, np.float32), DEVICE)
    with pytest.raises(DeviceError, match=rf"add got arrays on two devices: f32\[3\] on "
                                          rf"cpu:0 and f32\[3\] on {DEVICE_NAME}:0"):
        fnp.add(np.ones(3, np.float32), x)
    # (Operators on a raw CuPy array are CuPy's own; functx.numpy functions go through functx.)
    for out in (fnp.multiply(x, 2.0), fnp.add(x, 1), fnp.power(2, x),
                fnp.maximum(x, np.float32(0.5)), fnp.true_divide(x, np.asarray(2.0, np.float32)),
                fnp.where(fnp.greater(x, 0), x, -1.0)):
        assert on_dev(out) and out.dtype == np.float32
    y = fnp.subtract(fnp.multiply(fnp.tanh(x), 3.0), 1)
    np.testing.assert_allclose(DEV.to_host(y), np.tanh(1.0) * 3 - 1, rtol=1e-6)


_IX = np.array([0, 2, 2])
_ON_DEVICE = [False]  # whether the case being run is the device run (its indices go there too)
# .at[] updates (and functions that reshape their operands) with Python scalars: the scalar
# joins the device of the array, eagerly, under grad and under jit, as in every operation.
SCALAR_UPDATES = {
    # (the index lives where x does: on the device for the device run, on the host for the
    # reference; see _ON_DEVICE)
    "at[ix].add(1.)": lambda x: fnp.at(x)[to_dev(_IX) if _ON_DEVICE[0] else _IX].add(1.0),
    "at[host ix].add(1.)": lambda x: fnp.at(x)[_IX].add(1.0),
    "at[1:3].set(0.)": lambda x: fnp.at(x)[1:3].set(0.0),
    "at[1:3].set(0)": lambda x: fnp.at(x)[1:3].set(0),
    "at[1:3].mul(2.)": lambda x: fnp.at(x)[1:3].mul(2.0),
    "at[ix].multiply(np.float64(2))": lambda x: fnp.at(x)[_IX].multiply(np.float64(2.0)),
    "at[::2].min(0.5)": lambda x: fnp.at(x)[::2].min(0.5),
    "at[ix].max(2.)": lambda x: fnp.at(x)[_IX].max(2.0),
    "at[-1].set(7.)": lambda x: fnp.at(x)[-1].set(7.0),
    "outer(x, 2.)": lambda x: fnp.outer(x, 2.0),
    "kron(2., x)": lambda x: fnp.kron(2.0, x),
    "linspace(x, 2., 3)": lambda x: fnp.linspace(x, 2.0, 3),
}


@pytest.mark.parametrize("mode", ["eager", "grad", "jit"])
@pytest.mark.parametrize("name", sorted(SCALAR_UPDATES))
def test_python_scalars_join_the_device_in_index_updates(name: str, mode: str) -> None:
    f = SCALAR_UPDATES[name]
    x = np.linspace(0.5, 2.0, 5)
    if mode == "grad":
        f = fx.grad(lambda x, f=f: fnp.sum(fnp.sin(f(x))))
    elif mode == "jit":
        f = fx.jit(f)
    want = f(x)
    _ON_DEVICE[0] = True
    try:
        got = f(to_dev(x))
    finally:
        _ON_DEVICE[0] = False
    assert_matches(got, want, f"{name} ({mode})", 1e-12, 1e-13)


def test_mlp_gradient_runs_on_the_device_end_to_end() -> None:
    rng = np.random.default_rng(5)
    sizes = [16, 32, 8]
    params = [(rng.standard_normal((a, b)) / math.sqrt(a), np.zeros(b))
              for a, b in zip(sizes, sizes[1:])]
    X, Y = rng.standard_normal((10, 16)), rng.standard_normal((10, 8))

    def loss(params, X, Y):
        h = X
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = fnp.tanh(h)
        return fnp.mean((h - Y) ** 2)

    want = fx.value_and_grad(loss)(params, X, Y)
    got = fx.value_and_grad(loss)(*fx.device_put((params, X, Y), DEVICE))
    assert_matches(got, want, "MLP value_and_grad", 1e-11, 1e-12)
    hvp = lambda p, v: fx.jvp(lambda q: fx.grad(loss)(q, X, Y), (p,), (v,))[1]
    want_h = hvp(params, params)
    got_h = fx.jvp(lambda q: fx.grad(loss)(q, *to_dev((X, Y))), (to_dev(params),),
                   (to_dev(params),))[1]
    assert_matches(got_h, want_h, "MLP hessian-vector product", 1e-10, 1e-11)
    # jit: one trace per device (its constants live there), replayed on the device
    jgrad = fx.jit(fx.vmap(fx.grad(lambda p, x, y: loss(p, x[None], y[None])),
                           in_axes=(None, 0, 0)))
    want_j = jgrad(params, X, Y)
    for _ in range(2):
        assert_matches(jgrad(*fx.device_put((params, X, Y), DEVICE)), want_j,
                       "jit(vmap(grad)) of the MLP", 1e-11, 1e-12)
    assert jgrad.cache_size() == 2
    f32 = tree.map(lambda a: a.astype(np.float32), (params, X, Y))
    jvg = fx.jit(fx.value_and_grad(loss))  # float32 literals (0-d host arrays) join the device
    assert_matches(jvg(*fx.device_put(f32, DEVICE)), fx.value_and_grad(loss)(*f32),
                   "jit(value_and_grad) in float32", 1e-5, 1e-6)
    scaled = fx.jit(lambda x, s: fnp.tanh(x * s))
    assert_matches(scaled(to_dev(X), 0.5), np.tanh(X * 0.5), "jit with a Python scalar",
                   1e-12, 1e-13)


def test_random_bits_match_the_cpu() -> None:
    fxr = pytest.importorskip("functx.random")
    key = fxr.key(42)
    kd = fx.device_put(key, DEVICE)
    pairs = [
        (fxr.split(key, 3), fxr.split(kd, 3)),
        (fxr.fold_in(key, 7), fxr.fold_in(kd, 7)),
        (fxr.bits(key, (3, 5)), fxr.bits(kd, (3, 5))),
        (fxr.bits(key, (7,), np.uint64), fxr.bits(kd, (7,), np.uint64)),
        (fxr.uniform(key, (4, 4), np.float32), fxr.uniform(kd, (4, 4), np.float32)),
        (fxr.normal(key, (1000,)), fxr.normal(kd, (1000,))),
        (fxr.bernoulli(key, 0.3, (50,)), fxr.bernoulli(kd, 0.3, (50,))),
    ]
    for i, (want, got) in enumerate(pairs):
        assert on_dev(got), f"draw {i} left the device"
        h = DEV.to_host(got)
        if h.dtype.kind in "uib":
            np.testing.assert_array_equal(h, want, err_msg=f"draw {i}")
        else:  # the bits are the same; normal's erf_inv may round differently in libm
            np.testing.assert_allclose(h, want, rtol=1e-6 if h.dtype == np.float32 else 1e-13,
                                       atol=1e-13, err_msg=f"draw {i}")
    u_cpu = fxr.uniform(key, (64,), np.float32)
    u_dev = DEV.to_host(fxr.uniform(kd, (64,), np.float32))
    np.testing.assert_array_equal(u_dev.view(np.uint32), u_cpu.view(np.uint32))


# -- CuPy specifics: memory, DLPack ---------------------------------------------------------------

@needs_cupy
def test_memory_stats_track_a_peak() -> None:
    fx.reset_peak_memory_stats(DEVICE)
    before = fx.memory_stats(DEVICE)
    big = xp.ones((64, 1024, 1024), np.float32)  # 256 MiB
    del big
    stats = fx.memory_stats(DEVICE)
    assert set(stats) >= {"bytes_in_use", "bytes_reserved", "peak_bytes_in_use",
                          "peak_bytes_reserved", "device_free_bytes", "device_total_bytes"}
    assert stats["peak_bytes_in_use"] >= before["bytes_in_use"] + 256 * 2**20
    assert stats["bytes_in_use"] < stats["peak_bytes_in_use"]
    assert stats["device_total_bytes"] > stats["device_free_bytes"] > 0


@needs_cupy
def test_dlpack_zero_copy_with_torch() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch here has no CUDA")
    t = torch.arange(5, dtype=torch.float32, device="cuda")
    x = fx.from_dlpack(t)
    assert on_dev(x) and x.data.ptr == t.data_ptr()
    y = fnp.sin(x) * 2.0  # a functx (CuPy) array: PyTorch reads it in place
    ty = torch.from_dlpack(y)
    assert ty.data_ptr() == y.data.ptr and ty.device.type == "cuda"
    torch.testing.assert_close(ty, torch.sin(t) * 2)


@needs_cupy
def test_dlpack_with_jax() -> None:
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX here has no GPU")
    j = jax.numpy.arange(4.0, dtype=jax.numpy.float32)
    x = fx.from_dlpack(j)
    assert on_dev(x)
    np.testing.assert_array_equal(x.get(), np.arange(4.0, dtype=np.float32))
    back = jax.dlpack.from_dlpack(fnp.exp(x))
    np.testing.assert_allclose(np.asarray(back), np.exp(np.arange(4.0)), rtol=1e-6)


@needs_cupy
@pytest.mark.parametrize("name", sorted(CPU_ONLY))
def test_cpu_only_primitives_refuse_the_device(name: str) -> None:
    from functx.primitives import eigen

    a = to_dev(np.array([[2.0, 1.0], [0.5, 3.0]]))
    with pytest.raises(fx.FunctxError, match=name):
        getattr(eigen, name)(a)
