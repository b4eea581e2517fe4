"""Forward mode and composed transforms: jvp, linearize, jacfwd, jacrev, hessian.

Closed-form derivatives are the oracle; every composition order of grad, jvp, jacfwd, jacrev
and hessian is checked on polynomials, exp/log/trig, a softmax cross-entropy and a small MLP.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import functx as fx
from functx.registry import Registry
import functx.numpy as fnp
from functx import tree

rng = np.random.default_rng(0)


# -- jvp ----------------------------------------------------------------------------------------

def test_jvp_closed_forms() -> None:
    x = np.array([0.3, -1.2, 2.0])
    v = np.array([1.0, 0.5, -2.0])
    y, t = fx.jvp(lambda x: fnp.exp(fnp.sin(x)), (x,), (v,))
    np.testing.assert_allclose(y, np.exp(np.sin(x)), rtol=1e-15)
    np.testing.assert_allclose(t, np.cos(x) * np.exp(np.sin(x)) * v, rtol=1e-14)


def test_jvp_pytrees_and_multiple_outputs() -> None:
    p = {"w": np.array([1.0, 2.0]), "b": np.array(0.5)}
    tp = {"w": np.array([0.1, 0.2]), "b": np.array(1.0)}
    (a, b), (ta, tb) = fx.jvp(lambda p: (p["w"] * p["b"], fnp.sum(p["w"] ** 2)), (p,), (tp,))
    np.testing.assert_allclose(ta, tp["w"] * 0.5 + p["w"] * 1.0)
    np.testing.assert_allclose(tb, np.sum(2 * p["w"] * tp["w"]))


def test_jvp_of_constant_output_is_zero_and_integer_inputs_ignored() -> None:
    x = np.array([1.0, 2.0])
    y, t = fx.jvp(lambda x, n: (x * 0 + 3.0, n * 2), (x, np.array([1, 2])), (x, np.array([5, 5])))
    np.testing.assert_array_equal(t[0], np.zeros(2))
    np.testing.assert_array_equal(t[1], np.zeros(2, int))
    np.testing.assert_array_equal(y[1], [2, 4])


def test_jvp_has_aux_and_python_control_flow() -> None:
    def f(x):
        if x.sum() > 0:  # concrete values: Python control flow works
            return fnp.sin(x), "positive"
        return fnp.cos(x), "negative"

    y, t, aux = fx.jvp(f, (np.array([1.0]),), (np.array([1.0]),), has_aux=True)
    assert aux == "positive"
    np.testing.assert_allclose(t, np.cos([1.0]))


def test_jvp_errors_name_the_problem() -> None:
    with pytest.raises(fx.GradError, match="tuples"):
        fx.jvp(fnp.sin, np.ones(2), np.ones(2))
    with pytest.raises(fx.GradError, match="shape"):
        fx.jvp(fnp.sin, (np.ones(2),), (np.ones(3),))
    with pytest.raises(fx.GradError, match="structure"):
        fx.jvp(lambda a, b: a * b, (np.ones(2), np.ones(2)), (np.ones(2),))
    with pytest.raises(fx.GradError, match="dtype"):
        fx.jvp(fnp.sin, (np.ones(2),), (np.ones(2, np.float32),))


def test_jvp_does_not_mutate_and_returns_read_only() -> None:
    x, v = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    xc, vc = x.copy(), v.copy()
    y, t = fx.jvp(lambda x: x, (x,), (v,))
    np.testing.assert_array_equal(x, xc)
    np.testing.assert_array_equal(v, vc)
    assert y is not x and t is not v
    assert not y.flags.writeable and not t.flags.writeable


def test_linearize_matches_jvp_for_many_tangents_and_runs_primal_once() -> None:
    calls = []

    def f(x):
        calls.append(1)
        return fnp.tanh(x) * fnp.sum(x ** 2)

    x = rng.normal(size=4)
    y, f_lin = fx.linearize(f, x)
    assert len(calls) == 1
    for _ in range(3):
        v = rng.normal(size=4)
        np.testing.assert_allclose(f_lin(v), fx.jvp(f, (x,), (v,))[1], rtol=1e-13)
    assert len(calls) == 4  # the three jvp calls, none from f_lin
    np.testing.assert_allclose(y, f(x))
    with pytest.raises(fx.GradError, match="shape"):
        f_lin(np.ones(3))


# -- compositions ---------------------------------------------------------------------------------

def test_perturbation_confusion() -> None:
    """d/dx [x * d/dy (x + y)] at any point is 1 (not 2)."""
    def f(x):
        return x * fx.jvp(lambda y: x + y, (1.0,), (1.0,))[1]
    assert fx.jvp(f, (2.0,), (1.0,))[1] == 1.0
    g = fx.grad(lambda x: x * fx.grad(lambda y: x + y)(1.0))
    assert g(2.0) == 1.0


def test_closures_over_outer_tracers() -> None:
    assert fx.grad(lambda x: fx.grad(lambda y: x * y)(2.0))(3.0) == 1.0
    np.testing.assert_allclose(fx.jvp(lambda x: fx.grad(lambda y: x * y ** 2)(2.0), (3.0,),
                                      (1.0,))[1], 4.0)


def test_grad_to_third_order_mixed_with_jvp() -> None:
    f = lambda x: fnp.sin(x) * x  # noqa: E731
    x = 0.7
    d3 = -3 * np.sin(x) - x * np.cos(x)  # (x sin x)''' = -3 sin x - x cos x
    np.testing.assert_allclose(fx.grad(fx.grad(fx.grad(f)))(x), d3, rtol=1e-13)
    np.testing.assert_allclose(fx.jvp(fx.grad(fx.grad(f)), (x,), (1.0,))[1], d3, rtol=1e-13)
    np.testing.assert_allclose(fx.grad(lambda x: fx.jvp(fx.grad(f), (x,), (1.0,))[1])(x), d3,
                               rtol=1e-13)
    np.testing.assert_allclose(
        fx.jvp(lambda x: fx.jvp(fx.grad(f), (x,), (1.0,))[1], (x,), (1.0,))[1], d3, rtol=1e-13)


# closed forms: f, its gradient and Hessian
def _poly(x):
    return fnp.sum(x ** 3) + x[0] * x[1]


def _poly_grad(x):
    g = 3 * x ** 2
    g[0] += x[1]
    g[1] += x[0]
    return g


def _poly_hess(x):
    h = np.diag(6 * x)
    h[0, 1] += 1
    h[1, 0] += 1
    return h


def _trig(x):
    return fnp.sum(fnp.exp(fnp.sin(x)) + fnp.log(1 + x ** 2))


def _trig_grad(x):
    return np.cos(x) * np.exp(np.sin(x)) + 2 * x / (1 + x ** 2)


def _trig_hess(x):
    return np.diag((np.cos(x) ** 2 - np.sin(x)) * np.exp(np.sin(x))
                   + (2 - 2 * x ** 2) / (1 + x ** 2) ** 2)


_LABEL = 2


def _xent(z):
    return fnp.log(fnp.sum(fnp.exp(z - fnp.max(z)))) + fnp.max(z) - z[_LABEL]


def _xent_grad(z):
    p = np.exp(z - z.max())
    p /= p.sum()
    e = np.zeros_like(z)
    e[_LABEL] = 1
    return p - e


def _xent_hess(z):
    p = np.exp(z - z.max())
    p /= p.sum()
    return np.diag(p) - np.outer(p, p)


CLOSED_FORMS = [("poly", _poly, _poly_grad, _poly_hess),
                ("trig", _trig, _trig_grad, _trig_hess),
                ("softmax_xent", _xent, _xent_grad, _xent_hess)]

HESSIAN_WAYS: list[tuple[str, Callable]] = [
    ("hessian", lambda f: fx.hessian(f)),
    ("jacfwd(jacrev)", lambda f: fx.jacfwd(fx.jacrev(f))),
    ("jacrev(jacfwd)", lambda f: fx.jacrev(fx.jacfwd(f))),
    ("jacfwd(jacfwd)", lambda f: fx.jacfwd(fx.jacfwd(f))),
    ("jacrev(jacrev)", lambda f: fx.jacrev(fx.jacrev(f))),
    ("jacfwd(grad)", lambda f: fx.jacfwd(fx.grad(f))),
    ("jacrev(grad)", lambda f: fx.jacrev(fx.grad(f))),
    ("vmap(hvp)", lambda f: lambda x: fx.vmap(
        lambda v: fx.jvp(fx.grad(f), (x,), (v,))[1])(np.eye(x.size))),
    ("vmap(grad of grad.v)", lambda f: lambda x: fx.vmap(
        lambda v: fx.grad(lambda y: fnp.vdot(fx.grad(f)(y), v))(x))(np.eye(x.size))),
]


@pytest.mark.parametrize("name,f,g,h", CLOSED_FORMS, ids=[c[0] for c in CLOSED_FORMS])
@pytest.mark.parametrize("way", HESSIAN_WAYS, ids=[w[0] for w in HESSIAN_WAYS])
def test_every_composition_gives_the_closed_form_hessian(way, name, f, g, h) -> None:
    x = np.random.default_rng(1).normal(size=4)
    np.testing.assert_allclose(way[1](f)(x), h(x), rtol=1e-12, atol=1e-12, err_msg=way[0])


@pytest.mark.parametrize("name,f,g,h", CLOSED_FORMS, ids=[c[0] for c in CLOSED_FORMS])
def test_gradients_and_jacobians_of_closed_forms(name, f, g, h) -> None:
    x = np.random.default_rng(2).normal(size=4)
    for way in (fx.grad(f), fx.jacrev(f), fx.jacfwd(f),
                lambda x: fx.vmap(lambda v: fx.jvp(f, (x,), (v,))[1])(np.eye(4))):
        np.testing.assert_allclose(way(x), g(x), rtol=1e-12, atol=1e-13)


def test_third_derivative_tensor_of_a_cubic() -> None:
    x = np.array([0.5, -1.0, 2.0])
    t = fx.jacfwd(fx.hessian(lambda x: fnp.sum(x ** 3)))(x)
    want = np.zeros((3, 3, 3))
    for i in range(3):
        want[i, i, i] = 6.0
    np.testing.assert_allclose(t, want, atol=1e-12)
    np.testing.assert_allclose(fx.jacrev(fx.jacrev(fx.jacrev(lambda x: fnp.sum(x ** 3))))(x),
                               want, atol=1e-12)


def _mlp(params, x):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    return fnp.sum((h @ params["w2"]) ** 2)


def test_mlp_hessian_all_orders_agree_and_match_finite_differences() -> None:
    r = np.random.default_rng(3)
    params = {"w1": r.normal(size=(3, 4)), "b1": r.normal(size=4), "w2": r.normal(size=(4, 2))}
    x = r.normal(size=(5, 3))
    f = lambda w1: _mlp({**params, "w1": w1}, x)  # noqa: E731
    hs = [way(f)(params["w1"]) for _, way in HESSIAN_WAYS[:7]]
    for (name, _), hh in zip(HESSIAN_WAYS[:7], hs):
        assert hh.shape == (3, 4, 3, 4), name
        np.testing.assert_allclose(hh, hs[0], rtol=1e-11, atol=1e-11, err_msg=name)
    eps = 1e-6
    w = params["w1"]
    fd = np.zeros((3, 4, 3, 4))
    for i in range(3):
        for j in range(4):
            d = np.zeros_like(w)
            d[i, j] = eps
            fd[:, :, i, j] = (fx.grad(f)(w + d) - fx.grad(f)(w - d)) / (2 * eps)
    np.testing.assert_allclose(hs[0], fd, rtol=1e-6, atol=1e-7)


def test_hessian_of_pytree_inputs_gives_nested_blocks() -> None:
    p = {"a": np.array([1.0, 2.0]), "b": np.array(3.0)}
    f = lambda p: fnp.sum(p["a"] ** 2) * p["b"]  # noqa: E731
    H = fx.hessian(f)(p)
    assert set(H) == {"a", "b"} and set(H["a"]) == {"a", "b"}
    np.testing.assert_allclose(H["a"]["a"], 2 * 3.0 * np.eye(2))
    np.testing.assert_allclose(H["a"]["b"], 2 * p["a"])
    assert H["a"]["b"].shape == (2,) and H["b"]["b"].shape == ()
    np.testing.assert_allclose(H["b"]["a"], 2 * p["a"])


@pytest.mark.parametrize("jac", [fx.jacfwd, fx.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_shapes_argnums_has_aux_like_jax(jac) -> None:
    x, y = np.ones((2, 3)), np.ones(4)
    f = lambda x, y: {"s": fnp.sum(x) * y, "m": x * 2.0}  # noqa: E731
    J = jac(f)(x, y)
    assert J["s"].shape == (4, 2, 3) and J["m"].shape == (2, 3, 2, 3)
    J2 = jac(f, argnums=(0, 1))(x, y)
    assert isinstance(J2["s"], tuple) and J2["s"][1].shape == (4, 4)
    np.testing.assert_allclose(J2["s"][1], np.eye(4) * 6.0)
    Ja, aux = jac(lambda x: (x ** 2, "aux"), has_aux=True)(np.array([1.0, 2.0]))
    assert aux == "aux"
    np.testing.assert_allclose(Ja, np.diag([2.0, 4.0]))
    with pytest.raises(fx.GradError, match="floating-point"):
        jac(lambda n: n * 2)(np.array([1, 2]))


def test_jacfwd_and_jacrev_of_tall_and_wide_maps_agree() -> None:
    A = rng.normal(size=(30, 5))
    tall = lambda x: fnp.tanh(A @ x)  # noqa: E731
    wide = lambda x: fnp.tanh(A.T @ x)  # noqa: E731
    x5, x30 = rng.normal(size=5), rng.normal(size=30)
    want = (1 - np.tanh(A @ x5) ** 2)[:, None] * A
    np.testing.assert_allclose(fx.jacfwd(tall)(x5), want, rtol=1e-13)
    np.testing.assert_allclose(fx.jacrev(tall)(x5), want, rtol=1e-13)
    np.testing.assert_allclose(fx.jacfwd(wide)(x30), fx.jacrev(wide)(x30), rtol=1e-13)


def test_forward_mode_uses_transposed_vjp_for_a_primitive_without_jvp_rule() -> None:
    p = fx.Primitive("test_cube_no_jvp", registry=Registry())
    p.def_abstract_eval(lambda x: x)
    p.def_impl(lambda xp, x: x ** 3)
    p.def_vjp(lambda ct, ins, out: (3 * ins[0] ** 2 * ct,), save_inputs=(0,))
    x, v = np.array([1.0, 2.0]), np.array([1.0, -1.0])
    np.testing.assert_allclose(fx.jvp(p.bind, (x,), (v,))[1], 3 * x ** 2 * v)
    np.testing.assert_allclose(fx.jacfwd(p.bind)(x), np.diag(3 * x ** 2))
    np.testing.assert_allclose(fx.jacfwd(fx.grad(lambda x: fnp.sum(p.bind(x))))(x),
                               np.diag(6 * x))


def test_check_grads_catches_a_wrong_rule() -> None:
    from functx.test_util import check_grads

    check_grads(_trig, (np.array([0.1, 0.7]),), order=3)
    p = fx.Primitive("test_wrong_vjp", registry=Registry())
    p.def_abstract_eval(lambda x: x)
    p.def_impl(lambda xp, x: xp.sin(x))
    p.def_vjp(lambda ct, ins, out: (fnp.cos(ins[0]) * ct * 1.01,), save_inputs=(0,))
    p.def_jvp(lambda t, x, out: fnp.cos(x[0]) * t[0])
    with pytest.raises(AssertionError, match="VJP does not match finite differences"):
        check_grads(p.bind, (np.array([0.3, 0.4]),), order=1)
    with pytest.raises(AssertionError, match="JVP .against finite differences. does not"):
        check_grads(_wrong_jvp_fn(), (np.array([0.3]),), order=1, modes=("fwd",))


def _wrong_jvp_fn() -> Any:
    @fx.custom_jvp
    def f(x):
        return fnp.sin(x)

    @f.defjvp
    def _(primals, tangents):
        return fnp.sin(primals[0]), 2.0 * tangents[0]

    return f


def test_tree_util_structures_of_outputs() -> None:
    out = fx.jvp(lambda x: [x, {"k": x}], (np.ones(2),), (np.ones(2),))[1]
    assert tree.structure(out) == tree.structure([0, {"k": 0}])
