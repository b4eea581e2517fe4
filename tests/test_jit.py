"""jit: results equal to the un-jitted function, one trace per signature, static arguments,
composition with every transform, dead-code pruning, errors."""
from __future__ import annotations

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.errors import ConcretizationError, FunctxError
from functx.transforms.interpret import last_uses, prune, prune_with_last_uses

rng = np.random.default_rng(0)


def _loss(params, x, y):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    return fnp.mean((h @ params["w2"] - y) ** 2)


PARAMS = {"w1": rng.normal(size=(3, 5)), "b1": rng.normal(size=5), "w2": rng.normal(size=(5, 2))}
X, Y = rng.normal(size=(7, 3)), rng.normal(size=(7, 2))

# (name, function, arguments): jit(f)(*args) must equal f(*args), leaf for leaf.
CASES = [
    ("loss", _loss, (PARAMS, X, Y)),
    ("grad", fx.grad(_loss), (PARAMS, X, Y)),
    ("value_and_grad", fx.value_and_grad(_loss), (PARAMS, X, Y)),
    ("per-example grads", fx.vmap(fx.grad(_loss), in_axes=(None, 0, 0)), (PARAMS, X, Y)),
    ("hessian", fx.hessian(lambda x: fnp.sum(fnp.sin(x) ** 3)), (rng.normal(size=4),)),
    ("python scalar", lambda x, s: x * s + s, (X, 2.5)),
    ("int and bool", lambda x, n, b: fnp.where(b, x ** n, -x), (X, 3, True)),
    ("integer array", lambda i, x: x[i] * 2.0, (np.array([2, 0, 1]), X)),
    ("random", lambda k: fx.random.normal(k, (3, 4)), (fx.random.key(1),)),
    ("constant output", lambda x: (x, fnp.ones(3)), (X,)),
]


@pytest.mark.parametrize("name,f,args", CASES, ids=[c[0] for c in CASES])
def test_jit_equals_eager(name, f, args) -> None:
    jf = fx.jit(f)
    want = f(*args)
    for _ in range(2):  # the first call traces, the second replays the cached trace
        got = jf(*args)
        assert fx.tree.structure(got) == fx.tree.structure(want)
        for g, w in zip(fx.tree.leaves(got), fx.tree.leaves(want)):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-14, atol=0)
    assert jf.cache_size() == 1


def test_one_trace_per_signature() -> None:
    calls = []

    def f(x, y):
        calls.append(1)  # a Python side effect runs when f is traced, not when replayed
        return x * y

    jf = fx.jit(f)
    a, b = rng.normal(size=3), rng.normal(size=3)
    for _ in range(3):
        np.testing.assert_allclose(jf(a, b), a * b)
    assert len(calls) == 1
    jf(rng.normal(size=4), rng.normal(size=4))          # new shape: traced again
    jf(a.astype(np.float32), b.astype(np.float32))      # new dtype: traced again
    jf(rng.normal(size=3), rng.normal(size=3))          # old signature, new values: cached
    assert len(calls) == 3 and jf.cache_size() == 3
    jf.clear_cache()
    jf(a, b)
    assert len(calls) == 4


def test_static_argnums_and_argnames() -> None:
    def f(x, n, *, mode):
        out = x
        for _ in range(n):  # Python control flow on a static value
            out = fnp.sin(out) if mode == "sin" else fnp.cos(out)
        return out

    jf = fx.jit(f, static_argnums=1, static_argnames="mode")
    x = rng.normal(size=5)
    np.testing.assert_allclose(jf(x, 3, mode="sin"), np.sin(np.sin(np.sin(x))), rtol=1e-15)
    np.testing.assert_allclose(jf(x, 2, mode="cos"), np.cos(np.cos(x)), rtol=1e-15)
    np.testing.assert_allclose(jf(x, 3, mode="sin"), np.sin(np.sin(np.sin(x))), rtol=1e-15)
    assert jf.cache_size() == 2


def test_errors() -> None:
    jf = fx.jit(lambda x: x * 2 if x.sum() > 0 else x)
    with pytest.raises(ConcretizationError, match="static_argnums"):
        jf(np.ones(3))
    with pytest.raises(FunctxError, match="not hashable"):
        fx.jit(lambda x, s: x, static_argnums=1)(np.ones(2), [1, 2])
    with pytest.raises(FunctxError, match="not an array"):
        fx.jit(lambda x: x)("a string")
    with pytest.raises(fx.ShapeError):
        fx.jit(lambda a, b: a @ b)(np.ones((2, 3)), np.ones((2, 3)))


def test_composes_with_transforms() -> None:
    f = lambda x: fnp.sum(fnp.tanh(x) ** 2 * x)  # noqa: E731
    jf = fx.jit(f)
    x, v = rng.normal(size=4), rng.normal(size=4)
    np.testing.assert_allclose(fx.grad(jf)(x), fx.grad(f)(x), rtol=1e-14)
    np.testing.assert_allclose(fx.jvp(jf, (x,), (v,))[1], fx.jvp(f, (x,), (v,))[1], rtol=1e-14)
    xs = rng.normal(size=(3, 4))
    np.testing.assert_allclose(fx.vmap(jf)(xs), [f(r) for r in xs], rtol=1e-14)
    np.testing.assert_allclose(fx.jit(fx.grad(jf))(x), fx.grad(f)(x), rtol=1e-14)
    np.testing.assert_allclose(fx.hessian(jf)(x), fx.hessian(f)(x), rtol=1e-13)
    np.testing.assert_allclose(fx.grad(fx.checkpoint(jf))(x), fx.grad(f)(x), rtol=1e-14)


def test_closure_over_an_outer_tracer_is_not_cached_stale() -> None:
    x = rng.normal(size=3)

    def outer(p):
        return fnp.sum(fx.jit(lambda x: fnp.sin(x * p))(x))

    for p in (0.3, 1.7):  # each grad call has a new tracer for p
        np.testing.assert_allclose(fx.grad(outer)(p), np.sum(np.cos(x * p) * x), rtol=1e-14)

    inner = fx.jit(lambda x, p: fnp.sin(x * p))
    g = fx.grad(lambda p: fnp.sum(inner(x, p)))
    for p in (0.3, 1.7):  # p is an argument: one cached trace serves both tracers
        np.testing.assert_allclose(g(p), np.sum(np.cos(x * p) * x), rtol=1e-14)
    assert inner.cache_size() == 1


def test_inputs_not_mutated_and_outputs_read_only() -> None:
    a = rng.normal(size=3)
    before = a.copy()
    out = fx.jit(lambda a: a)(a)
    assert out is not a and not out.flags.writeable
    np.testing.assert_array_equal(a, before)
    assert a.flags.writeable


def test_prune_removes_dead_equations_only() -> None:
    def f(x):
        unused = fnp.exp(x) * 3.0  # noqa: F841  (dead code)
        return fnp.sin(x) + 1.0

    trace = fx.make_trace(f)(np.ones(3))
    pruned = prune(trace)
    assert [e.prim.name for e in pruned.eqns] == ["sin", "add"]
    assert len(trace.eqns) == len(pruned.eqns) + 2
    x = rng.normal(size=3)
    np.testing.assert_allclose(fx.eval_trace(pruned, x)[0], np.sin(x) + 1.0, rtol=1e-15)
    # grad's trace computes the loss value too, which the gradient does not return
    gtrace = fx.make_trace(fx.grad(lambda x: fnp.sum(x ** 3)))(np.ones(3))
    assert len(prune(gtrace).eqns) < len(gtrace.eqns)
    # the one-walk version gives the same trace and the same liveness as the two passes
    mlp = fx.make_trace(fx.vmap(fx.grad(_loss), in_axes=(None, 0, 0)))(PARAMS, X, Y)
    for t in (trace, gtrace, mlp):
        pruned, dying = prune_with_last_uses(t)
        assert pruned.eqns == prune(t).eqns
        assert dying == last_uses(prune(t))


def test_grad_under_jit_holds_no_constant_of_the_inputs_size() -> None:
    """Reverse mode's seed is staged into jit's trace: the cotangent broadcast from a sum is
    an equation, not a constant array of the input's size kept by the jitted function."""
    x = np.linspace(-1.0, 1.0, 4096)
    g = fx.jit(fx.grad(lambda a: fnp.sum(fnp.sin(a) * a)))
    trace = g.lower(x).trace
    assert all(np.size(c) <= 1 for c in trace.const_values), [np.shape(c) for c in trace.const_values]
    np.testing.assert_allclose(g(x), np.cos(x) * x + np.sin(x), rtol=1e-12)
