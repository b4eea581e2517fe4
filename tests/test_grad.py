"""Reverse mode: grad, value_and_grad and vjp on pytrees, higher order, errors.

Expected values are closed forms or hand-derived NumPy gradients, never outputs of functx.
"""
from __future__ import annotations

import collections
import math
import typing

import attrs
import numpy as np
import pytest

import functx
import functx.numpy as fnp
from functx import tree
from functx.errors import GradError

Point = collections.namedtuple("Point", ["x", "y"])


@attrs.define
class Layer:
    w: typing.Any
    b: typing.Any


class Pair:
    """A user-registered pytree node."""

    def __init__(self, first: typing.Any, second: typing.Any) -> None:
        self.first, self.second = first, second


tree.register_pytree_node(Pair, lambda p: ((p.first, p.second), None),
                          lambda aux, children: Pair(*children))


def assert_read_only_arrays(x: typing.Any) -> None:
    """Every leaf of ``x`` is a read-only NumPy array (not a tracer, not writeable)."""
    for leaf in tree.leaves(x):
        assert type(leaf) is np.ndarray, f"{type(leaf).__name__} returned"
        assert not leaf.flags.writeable


# -- an MLP loss against a hand-derived gradient ------------------------------------------------

def mlp_loss(params: dict, x: np.ndarray, y: np.ndarray):
    """Mean squared error of a one-layer tanh network."""
    return fnp.mean((fnp.tanh(x @ params["w"] + params["b"]) - y) ** 2)


def mlp_grad_numpy(params: dict, x: np.ndarray, y: np.ndarray) -> dict:
    """d loss / d params by hand: r = tanh(z) - y, dz = 2 r (1 - tanh(z)^2) / r.size."""
    h = np.tanh(x @ params["w"] + params["b"])
    dz = 2 * (h - y) * (1 - h ** 2) / h.size
    return {"w": x.T @ dz, "b": dz.sum(axis=0)}


def test_mlp_loss_gradient_matches_hand_derivation() -> None:
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 3)), "b": rng.standard_normal(3)}
    x, y = rng.standard_normal((5, 4)), rng.standard_normal((5, 3))
    value, g = functx.value_and_grad(mlp_loss)(params, x, y)
    h = np.tanh(x @ params["w"] + params["b"])
    np.testing.assert_allclose(value, np.mean((h - y) ** 2), rtol=1e-12)
    expected = mlp_grad_numpy(params, x, y)
    assert set(g) == {"w", "b"}
    for k in ("w", "b"):
        assert g[k].shape == params[k].shape and g[k].dtype == np.float64
        np.testing.assert_allclose(g[k], expected[k], rtol=1e-10, atol=1e-14)
    assert_read_only_arrays((value, g))


# -- pytrees in and out -----------------------------------------------------------------------------

PYTREE_INPUTS = {
    "tuple": (np.array([1.0, 2.0]), np.array(3.0)),
    "list": [np.array([1.0, 2.0]), np.array(3.0)],
    "dict": {"b": np.array([1.0, 2.0]), "a": np.array(3.0)},
    "none_leaf": {"a": np.array([1.0, 2.0]), "skip": None, "c": (np.array(3.0), None)},
    "namedtuple": Point(np.array([1.0, 2.0]), np.array(3.0)),
    "attrs": Layer(np.array([1.0, 2.0]), np.array(3.0)),
    "user_node": Pair(np.array([1.0, 2.0]), (np.array(3.0),)),
    "nested": {"layers": [Layer(np.array([1.0, 2.0]), np.array(3.0))], "p": Point(
        np.array(-1.0), Pair(np.array([0.5]), None))},
}


def sum_of_squares(params: typing.Any):
    """sum over leaves of sum(leaf^2): its gradient is 2 * params, structure for structure."""
    total = 0.0
    for leaf in tree.leaves(params):
        total = total + fnp.sum(leaf ** 2)
    return total


@pytest.mark.parametrize("params", PYTREE_INPUTS.values(), ids=PYTREE_INPUTS.keys())
def test_grad_of_pytree_input_has_its_structure(params: typing.Any) -> None:
    g = functx.grad(sum_of_squares)(params)
    assert tree.structure(g) == tree.structure(params)
    assert type(g) is type(params)
    for gl, pl in zip(tree.leaves(g), tree.leaves(params)):
        np.testing.assert_allclose(gl, 2 * pl)
        assert gl.shape == pl.shape and gl.dtype == pl.dtype
    assert_read_only_arrays(g)


@pytest.mark.parametrize("params", PYTREE_INPUTS.values(), ids=PYTREE_INPUTS.keys())
def test_value_and_grad_of_pytree_input(params: typing.Any) -> None:
    value, g = functx.value_and_grad(sum_of_squares)(params)
    np.testing.assert_allclose(value, sum(float(np.sum(p ** 2)) for p in tree.leaves(params)))
    assert tree.structure(g) == tree.structure(params)
    assert_read_only_arrays((value, g))


@pytest.mark.parametrize("params", PYTREE_INPUTS.values(), ids=PYTREE_INPUTS.keys())
def test_vjp_with_pytree_input_and_output(params: typing.Any) -> None:
    """f maps a pytree to the pytree of sin of its leaves; f_vjp(u) = u * cos(params)."""
    def f(p):
        return tree.map(fnp.sin, p)

    out, f_vjp = functx.vjp(f, params)
    assert tree.structure(out) == tree.structure(params)
    for o, p in zip(tree.leaves(out), tree.leaves(params)):
        np.testing.assert_allclose(o, np.sin(p))
    u = tree.map(lambda p: np.full(np.shape(p), 0.5) + p, params)
    (ct,) = f_vjp(u)
    assert tree.structure(ct) == tree.structure(params)
    for c, p, ul in zip(tree.leaves(ct), tree.leaves(params), tree.leaves(u)):
        np.testing.assert_allclose(c, ul * np.cos(p))
    assert_read_only_arrays((out, ct))


def test_vjp_output_structures() -> None:
    """Outputs may be tuples, lists, dicts with None, namedtuples, attrs classes, user nodes."""
    x = np.array([0.5, -1.0])

    def f(x):
        return {"t": (x * 2.0, [x ** 2]), "n": None,
                "p": Point(fnp.sin(x), Layer(x * 3.0, Pair(fnp.exp(x), None)))}

    out, f_vjp = functx.vjp(f, x)
    ones = tree.map(np.ones_like, out)
    (ct,) = f_vjp(ones)
    np.testing.assert_allclose(ct, 2 + 2 * x + np.cos(x) + 3 + np.exp(x))
    assert isinstance(out["p"], Point) and isinstance(out["p"].y, Layer)
    assert isinstance(out["p"].y.b, Pair) and out["n"] is None


def test_vjp_with_several_primals() -> None:
    out, f_vjp = functx.vjp(lambda x, y: x * y, 2.0, 3.0)
    np.testing.assert_allclose(out, 6.0)
    gx, gy = f_vjp(1.0)
    assert (float(gx), float(gy)) == (3.0, 2.0)


# -- argnums and has_aux ----------------------------------------------------------------------------

def f3(x, y, z):
    return fnp.sum(x * y ** 2 + fnp.sin(z))


X3 = (np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([0.5, 0.25]))


@pytest.mark.parametrize("argnums, expected", [
    (0, lambda x, y, z: x * 0 + y ** 2),
    (1, lambda x, y, z: 2 * x * y),
    (-1, lambda x, y, z: np.cos(z)),
    (-3, lambda x, y, z: y ** 2),
])
def test_argnums_int(argnums, expected) -> None:
    g = functx.grad(f3, argnums=argnums)(*X3)
    np.testing.assert_allclose(g, expected(*X3))


def test_argnums_tuple() -> None:
    x, y, z = X3
    g = functx.grad(f3, argnums=(2, 0))(*X3)
    assert isinstance(g, tuple) and len(g) == 2
    np.testing.assert_allclose(g[0], np.cos(z))
    np.testing.assert_allclose(g[1], y ** 2)
    (g1,) = functx.grad(f3, argnums=(-2,))(*X3)
    np.testing.assert_allclose(g1, 2 * x * y)


def test_argnums_out_of_range_raises() -> None:
    with pytest.raises(GradError, match="argnums"):
        functx.grad(f3, argnums=3)(*X3)


def test_grad_passes_keyword_arguments_through() -> None:
    g = functx.grad(lambda x, *, scale: fnp.sum(scale * x ** 2))(np.array([1.0, 2.0]), scale=3.0)
    np.testing.assert_allclose(g, [6.0, 12.0])


def test_has_aux_returns_concrete_aux() -> None:
    """aux holds arrays (not tracers) and arbitrary Python values, undifferentiated."""
    def f(x):
        h = fnp.tanh(x)
        return fnp.sum(h ** 2), {"h": h, "note": "hello", "n": 3}

    x = np.array([0.3, -0.7])
    g, aux = functx.grad(f, has_aux=True)(x)
    t = np.tanh(x)
    np.testing.assert_allclose(g, 2 * t * (1 - t ** 2))
    assert type(aux["h"]) is np.ndarray
    np.testing.assert_allclose(aux["h"], t)
    assert aux["note"] == "hello" and aux["n"] == 3
    (value, aux2), g2 = functx.value_and_grad(f, has_aux=True)(x)
    np.testing.assert_allclose(value, np.sum(t ** 2))
    assert type(aux2["h"]) is np.ndarray
    out, f_vjp, aux3 = functx.vjp(f, x, has_aux=True)
    assert type(aux3["h"]) is np.ndarray
    np.testing.assert_allclose(f_vjp(np.array(1.0))[0], g)


def test_has_aux_needs_a_pair() -> None:
    with pytest.raises(GradError, match="pair"):
        functx.grad(lambda x: x * 2.0, has_aux=True)(1.0)


# -- closures, control flow -------------------------------------------------------------------------

def test_closure_over_arrays() -> None:
    w = np.array([1.0, -2.0, 3.0])
    g = functx.grad(lambda x: fnp.sum(fnp.sin(x * w)))(np.array([0.1, 0.2, 0.3]))
    np.testing.assert_allclose(g, w * np.cos(np.array([0.1, 0.2, 0.3]) * w))


def test_python_if_on_values() -> None:
    def f(x):
        if x > 0:
            return x ** 2
        return -(x ** 3)

    assert float(functx.grad(f)(3.0)) == 6.0
    assert float(functx.grad(f)(-2.0)) == -12.0


def test_python_while_loop_on_values() -> None:
    """Doubling until the value exceeds 10: the gradient is 2 ** (number of doublings)."""
    def f(x):
        while x < 10.0:
            x = x * 2.0
        return x

    assert float(functx.grad(f)(3.0)) == 4.0     # 3 -> 6 -> 12
    assert float(functx.grad(f)(0.5)) == 32.0    # 0.5 -> ... -> 16
    assert float(functx.grad(f)(11.0)) == 1.0


def test_python_for_loop_and_float_conversion() -> None:
    def f(x):
        # a concrete value steers the loop; int(x) itself would drop x's derivative, so it
        # is refused (tests/test_escapes.py): the constant is taken through stop_gradient
        n = int(float(functx.stop_gradient(x)))
        for _ in range(n):
            x = fnp.sin(x)
        return x

    x = 2.5  # two iterations: sin(sin(x))
    np.testing.assert_allclose(functx.grad(f)(x), np.cos(np.sin(x)) * np.cos(x))


# -- higher order --------------------------------------------------------------------------------------

HIGHER = {
    # name: (f, [f', f'', f'''])
    "sin": (fnp.sin, [math.cos, lambda x: -math.sin(x), lambda x: -math.cos(x)]),
    "exp_times_x": (lambda x: fnp.exp(x) * x,
                    [lambda x: math.exp(x) * (x + 1), lambda x: math.exp(x) * (x + 2),
                     lambda x: math.exp(x) * (x + 3)]),
    "tanh": (fnp.tanh, [lambda x: 1 - math.tanh(x) ** 2,
                        lambda x: -2 * math.tanh(x) * (1 - math.tanh(x) ** 2),
                        lambda x: -2 * (1 - math.tanh(x) ** 2) * (1 - 3 * math.tanh(x) ** 2)]),
    "cube": (lambda x: x ** 3, [lambda x: 3 * x ** 2, lambda x: 6 * x, lambda x: 6.0]),
    "log1p": (fnp.log1p, [lambda x: 1 / (1 + x), lambda x: -1 / (1 + x) ** 2,
                          lambda x: 2 / (1 + x) ** 3]),
}


@pytest.mark.parametrize("name", HIGHER)
@pytest.mark.parametrize("x", [-0.7, 0.3, 1.9])
def test_higher_order_derivatives(name: str, x: float) -> None:
    f, derivs = HIGHER[name]
    d1 = functx.grad(f)
    d2 = functx.grad(d1)
    d3 = functx.grad(d2)
    for d, exact in zip((d1, d2, d3), derivs):
        got = d(x)
        assert type(got) is np.ndarray and got.shape == () and got.dtype == np.float64
        np.testing.assert_allclose(got, exact(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("x, y", [(1.5, -2.0), (0.3, 0.7)])
def test_mixed_partials_of_a_product(x: float, y: float) -> None:
    """f(x, y) = x^2 y sin(y): all second partials against closed forms."""
    def f(x, y):
        return x ** 2 * y * fnp.sin(y)

    fx_ = functx.grad(f, argnums=0)
    fy_ = functx.grad(f, argnums=1)
    np.testing.assert_allclose(fx_(x, y), 2 * x * y * math.sin(y))
    np.testing.assert_allclose(fy_(x, y), x ** 2 * (math.sin(y) + y * math.cos(y)))
    np.testing.assert_allclose(functx.grad(fx_, argnums=0)(x, y), 2 * y * math.sin(y))
    np.testing.assert_allclose(functx.grad(fx_, argnums=1)(x, y),
                               2 * x * (math.sin(y) + y * math.cos(y)))
    np.testing.assert_allclose(functx.grad(fy_, argnums=0)(x, y),
                               2 * x * (math.sin(y) + y * math.cos(y)))
    np.testing.assert_allclose(functx.grad(fy_, argnums=1)(x, y),
                               x ** 2 * (2 * math.cos(y) - y * math.sin(y)))


def test_closure_over_an_outer_tracer() -> None:
    """d/dx [d/dy (x y) at y=2] = d/dx x = 1."""
    assert float(functx.grad(lambda x: functx.grad(lambda y: x * y)(2.0))(3.0)) == 1.0


def test_no_perturbation_confusion() -> None:
    """d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1 (a confused implementation gives 2)."""
    assert float(functx.grad(lambda x: x * functx.grad(lambda y: x + y)(4.0))(3.0)) == 1.0


def test_no_perturbation_confusion_nonlinear() -> None:
    """d/dx [x * d/dy (x y^2) at y=1] = d/dx [2 x^2] = 4x."""
    g = functx.grad(lambda x: x * functx.grad(lambda y: x * y ** 2)(1.0))
    np.testing.assert_allclose(g(1.5), 6.0)


def test_grad_of_value_and_grad_value() -> None:
    """The value returned by an inner value_and_grad is differentiable too."""
    g = functx.grad(lambda x: functx.value_and_grad(lambda y: fnp.sin(y) * x)(x)[0])
    np.testing.assert_allclose(g(0.4), math.sin(0.4) + 0.4 * math.cos(0.4))


def test_stop_gradient() -> None:
    assert float(functx.grad(lambda x: x * functx.stop_gradient(x))(3.0)) == 3.0
    g = functx.grad(lambda p: fnp.sum(p["a"] * functx.stop_gradient(p)["b"]))(
        {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])})
    np.testing.assert_array_equal(g["a"], [3.0, 4.0])
    np.testing.assert_array_equal(g["b"], [0.0, 0.0])


def test_stop_gradient_inside_second_order() -> None:
    """d2/dx2 [x^2 * sg(x)] = 2 sg(x): the stopped factor stays constant at every order."""
    f = lambda x: x ** 2 * functx.stop_gradient(x)  # noqa: E731
    np.testing.assert_allclose(functx.grad(functx.grad(f))(1.5), 3.0)


# -- vjp reuse, read-only outputs, no mutation -------------------------------------------------------

def test_vjp_called_twice_gives_the_same_result() -> None:
    x = np.array([0.2, 0.5, -1.0])
    out, f_vjp = functx.vjp(lambda x: fnp.exp(fnp.sin(x)) * x, x)
    u = np.array([1.0, -2.0, 0.5])
    first = f_vjp(u)[0].copy()
    second = f_vjp(u)[0]
    expected = u * (np.exp(np.sin(x)) * np.cos(x) * x + np.exp(np.sin(x)))
    np.testing.assert_allclose(first, expected)
    np.testing.assert_array_equal(second, first)
    np.testing.assert_allclose(f_vjp(2 * u)[0], 2 * expected)


def test_outputs_read_only_and_inputs_untouched() -> None:
    x = np.array([0.2, 0.5, -1.0])
    y = np.array([1.0, 2.0, 3.0])
    y.flags.writeable = False
    xs, ys = x.copy(), y.copy()
    value, g = functx.value_and_grad(lambda x, y: fnp.sum(x * y), argnums=(0, 1))(x, y)
    out, f_vjp = functx.vjp(lambda x, y: x * y, x, y)
    u = np.ones(3)
    cts = f_vjp(u)
    assert_read_only_arrays((value, g, out, cts))
    np.testing.assert_array_equal(x, xs)
    np.testing.assert_array_equal(y, ys)
    assert x.flags.writeable and not y.flags.writeable
    assert u.flags.writeable and np.all(u == 1)


def test_eager_stop_gradient_leaves_the_users_array_alone() -> None:
    """An impl that returns its input (stop_gradient's) must not flip the user's flag."""
    for x in (np.array(1.5), np.ones((2, 3))):
        out = functx.stop_gradient(x)
        assert x.flags.writeable, "stop_gradient made the user's array read-only"
        assert not out.flags.writeable
        np.testing.assert_array_equal(out, x)


def test_vjp_of_identity_does_not_return_the_users_arrays() -> None:
    """An output or cotangent that is the user's own writeable array would let later writes
    to that array change functx's (read-only) results; they must be fresh or read-only
    copies."""
    x = np.array([1.0, 2.0])
    out, f_vjp = functx.vjp(lambda x: x, x)
    assert out is not x
    assert type(out) is np.ndarray and not out.flags.writeable
    u = np.array([5.0, 6.0])
    (ct,) = f_vjp(u)
    assert not ct.flags.writeable
    x[0] = 100.0
    u[0] = 100.0
    np.testing.assert_array_equal(out, [1.0, 2.0])
    np.testing.assert_array_equal(ct, [5.0, 6.0])


def test_unused_input_gets_zero_gradient_of_its_shape_and_dtype() -> None:
    x = np.array([1.0, 2.0])
    y = np.ones((2, 3), np.float32)
    gx, gy = functx.grad(lambda x, y: fnp.sum(x ** 2), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, 2 * x)
    assert gy.shape == (2, 3) and gy.dtype == np.float32 and not np.any(gy)
    assert_read_only_arrays((gx, gy))


def test_constant_function_has_zero_gradient() -> None:
    g = functx.grad(lambda x: np.float64(2.0))(np.array(3.0))
    assert g.shape == () and float(g) == 0.0
    assert_read_only_arrays(g)


def test_float32_stays_float32() -> None:
    x = np.array([0.5, 1.5], np.float32)
    value, g = functx.value_and_grad(lambda x: fnp.sum(fnp.sin(x) * 2.0))(x)
    assert value.dtype == np.float32 and g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * np.cos(x), rtol=1e-6)
    out, f_vjp = functx.vjp(lambda x: fnp.exp(x), x)
    assert out.dtype == np.float32 and f_vjp(np.ones(2, np.float32))[0].dtype == np.float32


def test_python_scalar_operands_of_primitives() -> None:
    """Primitives accept Python scalars of a matching kind (recorded as literals); the
    backward pass hands those literals to VJP rules that read them (mul saves both inputs)."""
    from functx.primitives import elementwise as ew

    np.testing.assert_allclose(functx.grad(lambda x: ew.mul(x, 2.0))(3.0), 2.0)
    np.testing.assert_allclose(functx.grad(lambda x: ew.mul(2.0, ew.sin(x)))(0.5),
                               2 * math.cos(0.5))
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(functx.grad(lambda x: fnp.sum(ew.div(x, 4.0)))(x), [0.25, 0.25])
    np.testing.assert_allclose(functx.grad(lambda x: fnp.sum(ew.pow(x, 3.0)))(x), 3 * x ** 2)
    np.testing.assert_allclose(functx.grad(functx.grad(lambda x: ew.mul(ew.mul(x, x), 0.5)))(
        1.0), 1.0)


def test_python_float_inputs() -> None:
    g = functx.grad(lambda x, y: x * y + fnp.sin(x), argnums=(0, 1))(2.0, 3.0)
    assert all(type(a) is np.ndarray and a.shape == () and a.dtype == np.float64 for a in g)
    np.testing.assert_allclose(g, [3.0 + math.cos(2.0), 2.0])


# -- errors --------------------------------------------------------------------------------------------

def test_integer_input_raises() -> None:
    with pytest.raises(GradError, match=r"int64.*floating-point") as e:
        functx.grad(lambda x: x * 2.0)(np.array(3))
    assert "astype" in str(e.value)
    with pytest.raises(GradError, match="floating-point"):
        functx.grad(lambda x: x * 2.0)(3)
    with pytest.raises(GradError, match="argument 1"):
        functx.grad(lambda x, n: x * n, argnums=(0, 1))(2.0, {"n": np.array([1, 2])})


def test_non_scalar_output_raises_mentioning_vjp() -> None:
    with pytest.raises(GradError) as e:
        functx.grad(lambda x: x * 2.0)(np.array([1.0, 2.0]))
    msg = str(e.value)
    assert "vjp" in msg and "jacrev" in msg and "f64[2]" in msg
    with pytest.raises(GradError, match="vjp"):
        functx.grad(lambda x: (x, x))(1.0)


def test_integer_output_raises() -> None:
    with pytest.raises(GradError, match="real scalar"):
        functx.grad(lambda x: fnp.sum(x > 0))(np.array([1.0, -1.0]))


def test_string_output_raises() -> None:
    with pytest.raises(GradError, match="str"):
        functx.grad(lambda x: "not an array")(1.0)
    with pytest.raises(GradError, match="str"):
        functx.vjp(lambda x: {"a": x, "b": "oops"}, 1.0)


def test_non_array_input_raises() -> None:
    with pytest.raises(GradError, match="str"):
        functx.vjp(lambda s: s, "text")


def test_cotangent_of_wrong_shape_raises() -> None:
    _, f_vjp = functx.vjp(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(GradError, match=r"shape \(2,\).*\(3,\)"):
        f_vjp(np.ones(2))


def test_cotangent_of_wrong_structure_raises() -> None:
    _, f_vjp = functx.vjp(lambda x: (x, x * 2.0), np.ones(3))
    with pytest.raises(GradError, match="structure"):
        f_vjp(np.ones(3))


def test_backward_pass_from_vjp_records_of_an_evaluated_trace() -> None:
    """vjp_records builds, from any evaluated trace, the records concrete tracing keeps:
    the backward pass over them gives grad's gradient."""
    from functx.transforms.reverse import backward_pass, vjp_records

    def f(x, w):
        return fnp.sum(fnp.tanh(x @ w) * fnp.exp(w[0]))

    x, w = np.linspace(-1, 1, 6).reshape(2, 3), np.linspace(0.1, 0.9, 9).reshape(3, 3)
    trace = functx.make_trace(f)(x, w)
    env = dict(zip(trace.in_vars, (x, w)))
    env.update(zip(trace.const_vars, trace.const_values))
    for e in trace.eqns:
        ins = [a.value if isinstance(a, functx.Literal) else env[a] for a in e.inputs]
        out = functx.bind(e.prim, *ins, **e.params)
        env.update(zip(e.outputs, out if e.prim.multiple_results else (out,)))
    cts = backward_pass(trace, vjp_records(trace, env), [np.ones(())])
    want = functx.grad(f, argnums=(0, 1))(x, w)
    for got, expected in zip(cts, want):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
