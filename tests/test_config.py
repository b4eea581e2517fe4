"""fx.config and the matmul precision (functx/config.py): names, the context manager, what a
trace records, jit's cache key, derivative/batching rules passing the precision on, and the
``precision=`` arguments of functx.numpy and functx.lax (no effect on CPU values).

TF32 itself (a different result on CUDA) is tested in tests/test_cuda.py.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import functx as fx
import functx.lax as lax
import functx.numpy as fnp
from functx import config
from functx.primitives import linalg as la

X = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
Y = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)


def _precisions(trace: fx.Trace) -> list:
    """The precision parameter of every dot_general of a trace (None where absent)."""
    return [e.params.get("precision") for e in trace.eqns if e.prim.name == "dot_general"]


@pytest.fixture(autouse=True)
def _restore():
    yield
    config.update("default_matmul_precision", None)


@pytest.mark.parametrize("name, want", [
    ("highest", "float32"), ("float32", "float32"), ("HIGHEST", "float32"),
    ("high", "tensorfloat32"), ("tensorfloat32", "tensorfloat32"),
    ("bfloat16_3x", "tensorfloat32"), ("default", "tensorfloat32"),
    ("fastest", "tensorfloat32"), (None, None),
    (("highest", "high"), "float32"), (("high", "default"), "tensorfloat32")])
def test_precision_names_are_canonicalised(name, want) -> None:
    assert config.canonical_precision(name) == want


def test_precision_enum_members_are_read_by_name() -> None:
    class Precision:  # stands in for jax.lax.Precision
        def __init__(self, name):
            self.name = name

    assert config.canonical_precision(Precision("HIGHEST")) == "float32"
    assert config.canonical_precision(Precision("DEFAULT")) == "tensorfloat32"


def test_unknown_names_and_options_are_refused() -> None:
    with pytest.raises(fx.ArgumentError, match="Unknown matmul precision 'fp8'"):
        config.update("default_matmul_precision", "fp8")
    with pytest.raises(fx.ArgumentError, match="Unknown functx config option 'x64'"):
        config.update("x64", True)
    with pytest.raises(fx.ArgumentError, match="Unknown matmul precision"):
        with fx.default_matmul_precision("fp8"):
            pass
    assert config.get("default_matmul_precision") == "float32"


def test_default_update_and_context_manager() -> None:
    assert config.get("default_matmul_precision") == "float32"  # TF32 off by default
    config.update("jax_default_matmul_precision", "high")  # JAX's option name too
    assert config.get("default_matmul_precision") == "tensorfloat32"
    with fx.default_matmul_precision("highest"):
        assert fx.config.get("default_matmul_precision") == "float32"
        with fx.default_matmul_precision("tensorfloat32"):
            assert config.get("default_matmul_precision") == "tensorfloat32"
        assert config.get("default_matmul_precision") == "float32"
    assert config.get("default_matmul_precision") == "tensorfloat32"
    config.update("default_matmul_precision", None)
    assert config.get("default_matmul_precision") == "float32"


def test_context_manager_is_thread_local() -> None:
    seen = []
    with fx.default_matmul_precision("tensorfloat32"):
        t = threading.Thread(target=lambda: seen.append(config.get("default_matmul_precision")))
        t.start()
        t.join()
    assert seen == ["float32"]


def test_traces_record_only_a_non_default_precision() -> None:
    f = lambda a, b: la.dot_general(a, b)
    assert _precisions(fx.make_trace(f)(X, Y)) == [None]
    with fx.default_matmul_precision("tensorfloat32"):
        assert _precisions(fx.make_trace(f)(X, Y)) == ["tensorfloat32"]
        # an explicit argument wins over the default
        g = lambda a, b: la.dot_general(a, b, precision="highest")
        assert _precisions(fx.make_trace(g)(X, Y)) == [None]
    h = lambda a, b: la.dot_general(a, b, precision=lax.Precision.HIGH
                                    if hasattr(lax, "Precision") else "high")
    assert _precisions(fx.make_trace(h)(X, Y)) == ["tensorfloat32"]


@pytest.mark.parametrize("name, fn", [
    ("matmul", lambda a, b, **k: fnp.matmul(a, b, **k)),
    ("dot", lambda a, b, **k: fnp.dot(a, b, **k)),
    ("tensordot", lambda a, b, **k: fnp.tensordot(a, b, 1, **k)),
    ("einsum", lambda a, b, **k: fnp.einsum("ij,jk->ik", a, b, **k)),
    ("inner", lambda a, b, **k: fnp.inner(a, b.T, **k)),
    ("vdot", lambda a, b, **k: fnp.vdot(a[:, :1], b[:2, :2], **k)),
    ("linalg.matmul", lambda a, b, **k: fnp.linalg.matmul(a, b, **k)),
    ("lax.dot_general", lambda a, b, **k: lax.dot_general(a, b, (((1,), (0,)), ((), ())), **k)),
])
def test_numpy_and_lax_products_take_precision(name, fn) -> None:
    want = fn(X, Y)
    got = fn(X, Y, precision="tensorfloat32")
    np.testing.assert_array_equal(got, want)  # the CPU ignores it
    assert _precisions(fx.make_trace(lambda a, b: fn(a, b, precision="high"))(X, Y)) \
        == ["tensorfloat32"]
    assert _precisions(fx.make_trace(lambda a, b: fn(a, b, precision="highest"))(X, Y)) \
        == [None]
    assert config.get("default_matmul_precision") == "float32"  # the scope ended


def test_gradients_jvps_and_vmap_keep_the_precision() -> None:
    loss = lambda a, b: fnp.sum(la.dot_general(a, b, precision="tensorfloat32") ** 2)
    grad_trace = fx.make_trace(fx.grad(loss, argnums=(0, 1)))(X, Y)
    assert _precisions(grad_trace) == ["tensorfloat32"] * 3
    jvp_trace = fx.make_trace(lambda a, b: fx.jvp(loss, (a, b), (a, b)))(X, Y)
    assert set(_precisions(jvp_trace)) == {"tensorfloat32"}
    vm = fx.make_trace(fx.vmap(lambda a: la.dot_general(a, Y, precision="high")))(X[None])
    assert _precisions(vm) == ["tensorfloat32"]
    # the values are the float32 ones on the CPU
    np.testing.assert_allclose(fx.grad(loss)(X, Y), 4 * X @ Y @ Y.T / 2, rtol=1e-5)


def test_jit_retraces_when_the_default_precision_changes() -> None:
    traced = []

    def f(a, b):
        traced.append(config.get("default_matmul_precision"))
        return fnp.matmul(a, b)

    jf = fx.jit(f)
    jf(X, Y)
    jf(X, Y)
    assert traced == ["float32"] and jf.cache_size() == 1
    with fx.default_matmul_precision("tensorfloat32"):
        np.testing.assert_allclose(jf(X, Y), X @ Y, rtol=1e-6)
    assert traced == ["float32", "tensorfloat32"] and jf.cache_size() == 2
    config.update("default_matmul_precision", "high")
    jf(X, Y)
    assert jf.cache_size() == 2 and len(traced) == 2  # the tensorfloat32 trace, again
    lowered = jf.lower(X, Y).as_text()
    assert "tensorfloat32" in lowered
