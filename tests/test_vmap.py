"""vmap's public behaviour: in_axes/out_axes (prefix semantics), axis_size, broadcasting of
unbatched outputs, errors, composition with grad, per-example gradients, the loop fallback."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import functx as fx
from functx.registry import Registry
import functx.numpy as fnp

rng = np.random.default_rng(0)


def test_in_axes_ints_none_and_out_axes() -> None:
    a, b, c = rng.normal(size=(4, 3)), rng.normal(size=3), rng.normal(size=(3, 4))
    out = fx.vmap(lambda a, b, c: a * b + c, in_axes=(0, None, 1), out_axes=1)(a, b, c)
    want = np.stack([a[i] * b + c[:, i] for i in range(4)], axis=1)
    np.testing.assert_allclose(out, want)
    neg = fx.vmap(lambda a: a.sum(), in_axes=-1)(c)
    np.testing.assert_allclose(neg, c.sum(0))


def test_pytree_in_axes_prefix_semantics() -> None:
    params = {"w": rng.normal(size=(3,)), "b": rng.normal(size=(5,))}
    f = lambda p, x: fnp.sum(p["w"] * x) + p["b"]  # noqa: E731
    xs = rng.normal(size=(5, 3))
    out = fx.vmap(f, in_axes=({"w": None, "b": 0}, 0))(params, xs)
    np.testing.assert_allclose(out, xs @ params["w"] + params["b"])
    kw = fx.vmap(lambda x, scale: x * scale)(xs, scale=np.arange(5.0))
    np.testing.assert_allclose(kw, xs * np.arange(5.0)[:, None])


def test_keyword_arguments_in_any_order() -> None:
    """Keyword arguments are matched by name whatever order they are passed in (a pytree
    orders dict keys; the leaves once came in call order, swapping b and a here)."""
    x, b, a = np.zeros((2, 3)), np.ones((2, 3)), np.full((2, 1), 2.0)
    f = lambda x, *, b, a: x + 10 * a + b  # noqa: E731
    np.testing.assert_array_equal(fx.vmap(f)(x, b=b, a=a), np.full((2, 3), 21.0))
    with pytest.raises(fx.VmapError, match="keyword argument 'b'"):
        fx.vmap(f)(x, b=np.ones((3, 3)), a=a)


def test_unbatched_outputs_are_broadcast_and_axis_size() -> None:
    out = fx.vmap(lambda x: (x * 2, np.float64(7.0)))(np.arange(3.0))
    np.testing.assert_allclose(out[1], [7.0, 7.0, 7.0])
    np.testing.assert_allclose(fx.vmap(lambda: fnp.ones(2), axis_size=4)(), np.ones((4, 2)))
    const = fx.vmap(lambda x: fnp.sum(x), in_axes=None, axis_size=2)(np.ones(3))
    np.testing.assert_allclose(const, [3.0, 3.0])
    unmapped = fx.vmap(lambda x, y: y * 2, in_axes=(0, None), out_axes=(None))(np.ones(3), 5.0)
    assert float(unmapped) == 10.0


def test_nested_vmap_and_vmap_of_grad_and_grad_of_vmap() -> None:
    xss = rng.normal(size=(2, 3, 4))
    np.testing.assert_allclose(fx.vmap(fx.vmap(lambda x: fnp.sum(x ** 2)))(xss),
                               (xss ** 2).sum(-1))
    X = rng.normal(size=(6, 4))
    p = rng.normal(size=4)
    g = fx.grad(lambda p: fx.vmap(lambda p, x: fnp.tanh(fnp.dot(p, x)), in_axes=(None, 0))(p, X)
                .sum())(p)
    np.testing.assert_allclose(g, ((1 - np.tanh(X @ p) ** 2)[:, None] * X).sum(0), rtol=1e-13)


def _mlp_loss(params, x, y):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    return fnp.mean((h @ params["w2"] - y) ** 2)


def test_per_example_gradients_of_an_mlp_equal_the_loop() -> None:
    params = {"w1": rng.normal(size=(3, 8)), "b1": rng.normal(size=8),
              "w2": rng.normal(size=(8, 2))}
    X, Y = rng.normal(size=(10, 3)), rng.normal(size=(10, 2))
    per = fx.vmap(fx.grad(_mlp_loss), in_axes=(None, 0, 0))(params, X, Y)
    for i in range(10):
        gi = fx.grad(_mlp_loss)(params, X[i], Y[i])
        for k in params:
            np.testing.assert_allclose(per[k][i], gi[k], rtol=1e-12, atol=1e-14)


def test_errors_name_the_argument() -> None:
    f = lambda a, b: a + b  # noqa: E731
    with pytest.raises(fx.ShapeError, match="different sizes.*argument 0.*argument 1"):
        fx.vmap(f)(np.ones(3), np.ones(4))
    with pytest.raises(fx.ShapeError, match="in_axes=2 for argument 1"):
        fx.vmap(f, in_axes=(0, 2))(np.ones(3), np.ones(3))
    with pytest.raises(fx.ShapeError, match="2 entries.*3 positional"):
        fx.vmap(lambda a, b, c: a, in_axes=(0, 0))(np.ones(2), np.ones(2), np.ones(2))
    with pytest.raises(fx.ShapeError, match="argument 0.*not a pytree prefix"):
        fx.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": np.ones(2)})
    with pytest.raises(fx.ShapeError, match="axis_size"):
        fx.vmap(f, in_axes=None)(np.ones(2), np.ones(2))
    with pytest.raises(fx.ShapeError, match="out_axes is None"):
        fx.vmap(lambda a: a, out_axes=None)(np.ones(2))


def test_python_control_flow_on_batched_values_says_use_where() -> None:
    def f(x):
        return x if x > 0 else -x
    with pytest.raises(fx.ConcretizationError, match="where"):
        fx.vmap(f)(np.array([1.0, -1.0]))
    np.testing.assert_allclose(fx.vmap(lambda x: fnp.where(x > 0, x, -x))(np.array([1.0, -1.0])),
                               [1.0, 1.0])


def test_primitive_without_batch_rule_loops_and_warns_once() -> None:
    reg = Registry()  # not the global one: its coverage test wants specs for every entry
    p = fx.Primitive("test_twice_no_batch", registry=reg)
    p.def_abstract_eval(lambda x: x)
    p.def_impl(lambda xp, x: x * 2)
    p.def_vjp(lambda ct, ins, out: (ct * 2,))
    xs = rng.normal(size=(3, 2))
    with pytest.warns(UserWarning, match="test_twice_no_batch has no batching rule"):
        out = fx.vmap(p.bind)(xs)
    np.testing.assert_allclose(out, xs * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fx.vmap(p.bind)(xs)  # no second warning
    assert reg.coverage()["test_twice_no_batch"]["batch"] == ""


def test_vmap_does_not_mutate_inputs() -> None:
    x = rng.normal(size=(3, 2))
    xc = x.copy()
    fx.vmap(lambda r: r * 2)(x)
    np.testing.assert_array_equal(x, xc)
