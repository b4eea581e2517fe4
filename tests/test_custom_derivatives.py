"""custom_vjp and custom_jvp: user rules used by every transform, errors for bad rules."""
from __future__ import annotations

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.test_util import check_grads


@fx.custom_vjp
def clip_gradient(lo, hi, x):
    return x


clip_gradient.defvjp(lambda lo, hi, x: (x, (lo, hi)),
                     lambda res, g: (None, None, fnp.clip(g, res[0], res[1])))


def test_custom_vjp_replaces_the_gradient() -> None:
    assert float(fx.grad(lambda x: 3.0 * clip_gradient(-1.0, 1.0, x))(2.0)) == 1.0
    assert float(fx.grad(lambda x: 0.5 * clip_gradient(-1.0, 1.0, x))(2.0)) == 0.5
    np.testing.assert_array_equal(clip_gradient(-1.0, 1.0, np.array([5.0])), [5.0])


@fx.custom_vjp
def sin_vjp(x):
    return fnp.sin(x)


sin_vjp.defvjp(lambda x: (fnp.sin(x), fnp.cos(x)), lambda c, g: (g * c,))


def test_custom_vjp_twice_differentiable_and_in_every_transform() -> None:
    x = np.array([0.3, 1.1])
    np.testing.assert_allclose(fx.grad(lambda x: fnp.sum(sin_vjp(x)))(x), np.cos(x))
    hess = fx.hessian(lambda x: fnp.sum(sin_vjp(x)))(x)
    np.testing.assert_allclose(hess, np.diag(-np.sin(x)), atol=1e-15)
    np.testing.assert_allclose(fx.jvp(sin_vjp, (x,), (np.ones(2),))[1], np.cos(x))
    np.testing.assert_allclose(fx.vmap(fx.grad(lambda x: sin_vjp(x)))(x), np.cos(x))
    np.testing.assert_allclose(fx.jacfwd(sin_vjp)(x), np.diag(np.cos(x)))
    check_grads(sin_vjp, (x,), order=2)


def test_custom_vjp_nondiff_argnums_and_pytrees() -> None:
    from functools import partial

    @partial(fx.custom_vjp, nondiff_argnums=(0,))
    def scale(k, p):
        return {"y": p["a"] * k}

    def fwd(k, p):
        return scale(k, p), None

    def bwd(k, res, g):
        return ({"a": g["y"] * k * 10.0},)

    scale.defvjp(fwd, bwd)
    g = fx.grad(lambda a: fnp.sum(scale(2.0, {"a": a})["y"]))(np.ones(3))
    np.testing.assert_allclose(g, 20.0 * np.ones(3))


def test_custom_vjp_bwd_errors_name_the_function() -> None:
    @fx.custom_vjp
    def bad(x, y):
        return x * y

    bad.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g,))
    with pytest.raises(fx.GradError, match="bad: bwd must return a tuple with one cotangent "
                                           "per differentiable argument"):
        fx.grad(lambda x: bad(x, 2.0))(1.0)

    @fx.custom_vjp
    def bad_shape(x):
        return x

    bad_shape.defvjp(lambda x: (x, None), lambda res, g: (fnp.ones(5),))
    with pytest.raises(fx.GradError, match="bad_shape: bwd returned a cotangent of shape"):
        fx.grad(lambda x: fnp.sum(bad_shape(x)))(np.ones(3))

    @fx.custom_vjp
    def undefined(x):
        return x
    with pytest.raises(fx.FunctxError, match="defvjp"):
        fx.grad(undefined)(1.0)


@fx.custom_jvp
def log1pexp(x):
    return fnp.log1p(fnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * fnp.where(x > 0, 1 / (1 + fnp.exp(-x)), fnp.exp(x) / (1 + fnp.exp(x)))


def test_custom_jvp_in_forward_and_reverse_mode() -> None:
    # The naive derivative exp(x)/(1+exp(x)) is nan at x = 1000; the rule is not.
    assert float(fx.grad(log1pexp)(1000.0)) == 1.0
    assert float(fx.jvp(log1pexp, (1000.0,), (2.0,))[1]) == 2.0
    x = np.array([-2.0, 0.5, 3.0])
    sig = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(fx.vmap(fx.grad(log1pexp))(x), sig, rtol=1e-15)
    np.testing.assert_allclose(fx.hessian(lambda x: fnp.sum(log1pexp(x)))(x),
                               np.diag(sig * (1 - sig)), rtol=1e-12)
    check_grads(log1pexp, (x,), order=2)


def test_custom_jvp_nondiff_argnums() -> None:
    from functools import partial

    @partial(fx.custom_jvp, nondiff_argnums=(0,))
    def power(n, x):
        return x ** n

    @power.defjvp
    def _(n, primals, tangents):
        return power(n, primals[0]), n * primals[0] ** (n - 1) * tangents[0]

    np.testing.assert_allclose(fx.grad(lambda x: power(3, x))(2.0), 12.0)
    np.testing.assert_allclose(fx.jvp(lambda x: power(3, x), (2.0,), (1.0,))[1], 12.0)


def test_custom_jvp_rule_errors() -> None:
    @fx.custom_jvp
    def f(x):
        return x * 2

    @f.defjvp
    def _(primals, tangents):
        return f(primals[0]), fnp.ones(7)

    with pytest.raises(fx.GradError, match="f: the JVP rule returned a tangent of shape"):
        fx.jvp(f, (np.ones(2),), (np.ones(2),))
