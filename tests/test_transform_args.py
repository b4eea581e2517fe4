"""The arguments of the transforms are checked where the mistake is made ("Trustworthy
gradients"): repeated argnums, cotangents and tangents of the wrong type, non-callables,
argnums/axis/static arguments of the wrong kind, generators returned from traced functions,
jit's bounded cache, and grad's ``holomorphic``/``allow_int`` (as in JAX)."""
from __future__ import annotations

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
import functx.transforms.jit as jit_module
from functx.errors import ArgumentTypeError, FunctxError, GradError
from functx.transforms.grad import float0

rng = np.random.default_rng(0)
X = rng.normal(size=3)


def _sq(x, y=None):
    return fnp.sum(x ** 2) + (0.0 if y is None else fnp.sum(y ** 3))


# ----------------------------------------------------------------------------------------
# 1. repeated argnums


@pytest.mark.parametrize("transform", [fx.grad, fx.value_and_grad, fx.jacfwd, fx.jacrev])
@pytest.mark.parametrize("argnums", [(0, 0), (0, -2), (1, -1)])
def test_repeated_argnums_raise(transform, argnums) -> None:
    g = transform(_sq, argnums=argnums)
    with pytest.raises(GradError) as e:
        g(X, X + 1.0)  # two positional arguments: -2 is 0, -1 is 1
    msg = str(e.value)
    assert f"argnums={argnums}" in msg and "more than once" in msg
    assert "2 positional argument" in msg


def test_distinct_argnums_still_work() -> None:
    gx, gy = fx.grad(_sq, argnums=(0, -1))(X, X + 1.0)
    np.testing.assert_allclose(gx, 2 * X, rtol=1e-14)
    np.testing.assert_allclose(gy, 3 * (X + 1.0) ** 2, rtol=1e-14)


# ----------------------------------------------------------------------------------------
# 2. cotangents and tangents are checked (shape, dtype, structure)


@pytest.mark.parametrize("ct,got", [
    (np.ones(3, np.complex128), "complex128"),
    (np.ones(3, np.float32), "float32"),
    (np.ones(3, np.int64), "int64"),
    (np.ones(4), "(4,)"),
])
def test_vjp_rejects_cotangents_of_the_wrong_type(ct, got) -> None:
    _, f_vjp = fx.vjp(lambda x: x * 2.0, X)
    with pytest.raises(GradError) as e:
        f_vjp(ct)
    msg = str(e.value)
    assert got in msg and "(3,)" in msg and "float64" in msg and "leaf 0" in msg


def test_complex_cotangent_for_real_output_is_explained() -> None:
    _, f_vjp = fx.vjp(lambda x: fnp.sin(x), X)
    with pytest.raises(GradError, match="complex cotangent for a real output"):
        f_vjp(np.ones(3) * (1 + 1j))
    with pytest.raises(GradError, match="complex"):
        f_vjp(1j * np.ones(3))


def test_cotangent_mismatch_names_every_bad_leaf_and_the_structure() -> None:
    _, f_vjp = fx.vjp(lambda x: {"a": x, "b": x.astype(np.float32)}, X)
    with pytest.raises(GradError) as e:
        f_vjp({"a": np.ones(3, np.float32), "b": np.ones(2, np.float32)})
    msg = str(e.value)
    assert "leaf 0" in msg and "leaf 1" in msg and "(2,)" in msg
    with pytest.raises(GradError, match="structure"):
        f_vjp((np.ones(3), np.ones(3, np.float32)))


def test_valid_cotangents_are_accepted() -> None:
    x32 = X.astype(np.float32)
    _, f_vjp = fx.vjp(lambda x: fnp.sum(x) * 2.0, x32)
    (g,) = f_vjp(1.0)  # a Python scalar is weakly typed: it takes the output's dtype
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2.0 * np.ones(3, np.float32))
    (g,) = fx.vjp(lambda x: x * 2.0, x32)[1](np.ones(3, np.float32))
    assert g.dtype == np.float32
    _, f_vjp = fx.vjp(lambda z: z * 2.0, 1.0 + 1j)
    np.testing.assert_allclose(f_vjp(1j)[0], 2j)
    np.testing.assert_allclose(f_vjp(1.0)[0], 2.0)  # a Python float for a complex output
    assert f_vjp(1.0)[0].dtype == np.complex128
    # an integer output takes a cotangent of any dtype (its derivative is zero)
    _, f_vjp = fx.vjp(lambda x: (x * 2.0, fnp.argmax(x)), X)
    np.testing.assert_allclose(f_vjp((np.ones(3), np.zeros((), float0)))[0], 2.0)


@pytest.mark.parametrize("t,got", [
    (np.ones(3, np.int64), "int64"),
    (np.ones(3, np.float32), "float32"),
    (np.ones(3, np.complex128), "complex128"),
    (np.ones(2), "(2,)"),
])
def test_jvp_and_linearize_reject_tangents_of_the_wrong_type(t, got) -> None:
    with pytest.raises(GradError) as e:
        fx.jvp(lambda x: x * 2.0, (X,), (t,))
    assert got in str(e.value) and "float64" in str(e.value)
    _, f_lin = fx.linearize(lambda x: x * 2.0, X)
    with pytest.raises(GradError) as e:
        f_lin(t)
    assert got in str(e.value) and "(3,)" in str(e.value)


def test_jvp_tangent_conversions_that_stay_allowed() -> None:
    _, t = fx.jvp(lambda x: x * 2.0, (np.float32(1.5),), (1.0,))  # weak Python scalar
    assert t.dtype == np.float32 and t == 2.0
    with pytest.raises(GradError, match="complex"):  # ... but not a complex one for a real x
        fx.jvp(lambda x: x * 2.0, (1.5,), (1j,))
    # an integer primal takes a tangent of any dtype, float0 included; it is ignored
    out, t = fx.jvp(lambda x, n: x * n, (X, 3), (np.ones(3), np.zeros((), float0)))
    np.testing.assert_allclose(t, 3.0 * np.ones(3))


# ----------------------------------------------------------------------------------------
# 3. argument checks at the call that made the mistake


@pytest.mark.parametrize("make", [
    lambda: fx.grad(3), lambda: fx.value_and_grad(3), lambda: fx.vmap(3),
    lambda: fx.jvp(3, (1.0,), (1.0,)), lambda: fx.vjp(3, 1.0), lambda: fx.linearize(3, 1.0),
    lambda: fx.jacfwd(3), lambda: fx.jacrev(3), lambda: fx.hessian(3),
    lambda: fx.checkpoint(3), lambda: fx.jit(3),
], ids=["grad", "value_and_grad", "vmap", "jvp", "vjp", "linearize", "jacfwd", "jacrev",
        "hessian", "checkpoint", "jit"])
def test_non_callable_raises_at_the_transform(make) -> None:
    with pytest.raises(FunctxError, match="needs a callable") as e:
        make()
    assert isinstance(e.value, TypeError) and "int" in str(e.value)


@pytest.mark.parametrize("transform", [fx.grad, fx.value_and_grad, fx.jacfwd, fx.jacrev,
                                       fx.hessian])
@pytest.mark.parametrize("argnums", ["a", 1.0, (0, 1.5), True])
def test_bad_argnums_raise_when_the_transform_is_made(transform, argnums) -> None:
    with pytest.raises(GradError, match="argnums") as e:
        transform(_sq, argnums=argnums)  # no call: the mistake is in this line
    assert repr(argnums) in str(e.value) or "bool" in str(e.value)


def test_argnums_out_of_range_names_the_number_of_arguments() -> None:
    with pytest.raises(GradError, match=r"argnums=\(0, 2\).*2 positional argument"):
        fx.grad(_sq, argnums=(0, 2))(X, X)


@pytest.mark.parametrize("fn", [fnp.sum, fnp.mean, fnp.max, fnp.prod, fnp.any, fnp.std,
                                fnp.cumsum, fnp.argmax, fnp.expand_dims, fnp.squeeze,
                                fnp.flip, fnp.logsumexp])
@pytest.mark.parametrize("axis", [1.5, "a", True])
def test_bad_axis_raises_a_functx_type_error(fn, axis) -> None:
    with pytest.raises(ArgumentTypeError, match="axis must be an int") as e:
        fn(np.ones((2, 1)), axis=axis)
    assert isinstance(e.value, TypeError) and fn.__name__ in str(e.value)


def test_bad_axis_in_a_tuple_and_good_axes() -> None:
    with pytest.raises(ArgumentTypeError, match=r"\(0, 1\.5\).*1\.5"):
        fnp.sum(np.ones((2, 3)), axis=(0, 1.5))
    with pytest.raises(ArgumentTypeError, match="axis must be an int"):
        fnp.swapaxes(np.ones((2, 3)), 1.5, 0)
    a = rng.normal(size=(2, 3))
    np.testing.assert_allclose(fnp.sum(a, axis=np.int64(1)), a.sum(1))
    np.testing.assert_allclose(fnp.sum(a, axis=[0, -1]), a.sum((0, 1)))
    np.testing.assert_allclose(fnp.sum(a, axis=np.array([1])), a.sum(1))


def test_jit_static_argument_checks() -> None:
    f2 = lambda x, y: x * y  # noqa: E731
    with pytest.raises(ArgumentTypeError, match="static_argnums"):
        fx.jit(f2, static_argnums="a")
    with pytest.raises(ArgumentTypeError, match="static_argnums"):
        fx.jit(f2, static_argnums=1.0)
    with pytest.raises(ArgumentTypeError, match="static_argnames"):
        fx.jit(f2, static_argnames=3)
    # beyond the signature: at jit(...)
    with pytest.raises(ArgumentTypeError, match=r"static_argnums=5.*2 positional.*\(x, y\)"):
        fx.jit(f2, static_argnums=5)
    # unknown names of a function without **kwargs: at jit(...)
    with pytest.raises(ArgumentTypeError, match="'z'"):
        fx.jit(f2, static_argnames="z")
    fx.jit(lambda x, **kw: x, static_argnames="z")  # **kwargs: any name may come

    def star(*args):
        return args[0] * 2.0

    js = fx.jit(star, static_argnums=3)  # *args: checked at the call
    with pytest.raises(ArgumentTypeError, match=r"static_argnums=3.*2 positional"):
        js(X, 1.0)
    np.testing.assert_allclose(js(X, 1.0, 2.0, "static"), 2 * X)


def test_jit_infers_static_names_and_positions() -> None:
    def f(x, n):
        return x * n if n > 1 else x  # Python control flow: n must be static

    np.testing.assert_allclose(fx.jit(f, static_argnames="n")(X, 3), 3 * X)
    np.testing.assert_allclose(fx.jit(f, static_argnums=1)(X, n=3), 3 * X)

    def g(x, n=2):
        return x * n if n > 1 else x

    jg = fx.jit(g, static_argnums=1)
    np.testing.assert_allclose(jg(X), 2 * X)  # the default, not passed: fine


# ----------------------------------------------------------------------------------------
# 4. a function that returns a generator


@pytest.mark.parametrize("transform", [fx.jit, fx.vmap, fx.checkpoint, fx.make_trace])
def test_returning_a_generator_says_so(transform) -> None:
    f = transform(lambda x: (x * i for i in range(2)))
    with pytest.raises(FunctxError) as e:
        f(np.ones((2, 3)))
    msg = str(e.value)
    assert "generator" in msg and "tuple or list" in msg
    assert "static" not in msg


def test_grad_and_jvp_of_a_generator_say_so() -> None:
    with pytest.raises(GradError, match="tuple or list"):
        fx.vjp(lambda x: (x * i for i in range(2)), X)
    with pytest.raises(GradError, match="tuple or list"):
        fx.jvp(lambda x: (x * i for i in range(2)), (X,), (X,))


# ----------------------------------------------------------------------------------------
# 5. jit's cache is bounded (least recently used evicted)


def test_jit_cache_is_a_bounded_lru(monkeypatch) -> None:
    assert jit_module.CACHE_SIZE == 64
    traces = []

    def f(x):
        traces.append(x.shape)  # runs once per trace
        return x + 1.0

    jf = fx.jit(f)
    for n in range(1000):
        jf(np.ones(n))
    assert jf.cache_size() == jit_module.CACHE_SIZE
    assert len(traces) == 1000
    jf(np.ones(999))  # the most recent signature: cached
    assert len(traces) == 1000
    jf(np.ones(0))  # evicted long ago: traced again
    assert len(traces) == 1001

    monkeypatch.setattr(jit_module, "CACHE_SIZE", 3)
    jg = fx.jit(f)
    traces.clear()
    for n in (1, 2, 3):
        jg(np.ones(n))
    jg(np.ones(1))  # used again: becomes the most recent
    jg(np.ones(4))  # evicts the least recently used, shape (2,)
    assert jg.cache_size() == 3
    jg(np.ones(1))
    jg(np.ones(3))
    assert traces == [(1,), (2,), (3,), (4,)]  # 1 and 3 were kept
    jg(np.ones(2))
    assert traces[-1] == (2,)


# ----------------------------------------------------------------------------------------
# 6. holomorphic and allow_int, as in JAX


def test_float0_is_jax_float0() -> None:
    assert float0 == np.dtype([("float0", np.void, 0)]) and float0.itemsize == 0


def test_grad_holomorphic_is_the_complex_derivative() -> None:
    z = 0.7 - 1.3j
    np.testing.assert_allclose(fx.grad(lambda z: z ** 2, holomorphic=True)(z), 2 * z,
                               rtol=1e-14)
    np.testing.assert_allclose(fx.grad(fnp.sin, holomorphic=True)(z), np.cos(z), rtol=1e-14)
    v, g = fx.value_and_grad(fnp.exp, holomorphic=True)(z)
    np.testing.assert_allclose((v, g), (np.exp(z), np.exp(z)), rtol=1e-14)
    # against a complex finite difference
    f = lambda z: z ** 3 / (1.0 + z)  # noqa: E731
    h = 1e-7 * (1 + 1j) / np.sqrt(2)
    np.testing.assert_allclose(fx.grad(f, holomorphic=True)(z), (f(z + h) - f(z - h)) / (2 * h),
                               rtol=1e-6)


def test_holomorphic_needs_complex_inputs_and_outputs() -> None:
    with pytest.raises(GradError, match="holomorphic=True needs complex inputs"):
        fx.grad(lambda z: z ** 2, holomorphic=True)(1.5)
    with pytest.raises(GradError, match="holomorphic=True needs complex outputs"):
        fx.grad(lambda z: fnp.real(z), holomorphic=True)(1.5 + 1j)


def test_complex_output_needs_holomorphic() -> None:
    with pytest.raises(GradError, match="holomorphic=True") as e:
        fx.grad(lambda x: x * (1 + 2j))(1.5)
    assert "c128" in str(e.value) and "vjp" in str(e.value)
    with pytest.raises(GradError, match="holomorphic=True"):
        fx.jacrev(lambda x: x * 1j)(X)


def test_real_function_of_complex_input_follows_jax_convention() -> None:
    # df/dx - i df/dy for z = x + iy: 6 - 8j for |z|**2 at 3 + 4j
    for f in (lambda z: fnp.real(z * fnp.conj(z)), lambda z: fnp.real(z) ** 2 + fnp.imag(z) ** 2):
        np.testing.assert_allclose(fx.grad(f)(3 + 4j), 6 - 8j, rtol=1e-14)


def test_allow_int_gives_float0_zeros() -> None:
    f = lambda x, n: fnp.sum(x ** 2) * n  # noqa: E731
    with pytest.raises(GradError, match="allow_int=True"):
        fx.grad(f, argnums=(0, 1))(X, 2)
    g = fx.grad(lambda x, n: fnp.sum(x ** 2) * fnp.sum(n), argnums=(0, 1), allow_int=True)
    gx, gn = g(X, np.array([2, 3]))
    np.testing.assert_allclose(gx, 10 * X, rtol=1e-14)
    assert gn.dtype == float0 and gn.shape == (2,)
    g_int = fx.grad(lambda x, n: fnp.sum(x ** 2) * n, argnums=(0, 1), allow_int=True)(X, 2)
    np.testing.assert_allclose(g_int[0], 4 * X, rtol=1e-14)
    assert g_int[1].dtype == float0 and g_int[1].shape == ()
    (v, g) = fx.value_and_grad(lambda n: n * 1.5, allow_int=True)(np.int32(2))
    assert v == 3.0 and g.dtype == float0


def test_jacobians_holomorphic_and_allow_int() -> None:
    z = np.array([1 + 2j, -0.5j])
    for jac in (fx.jacfwd, fx.jacrev):
        np.testing.assert_allclose(jac(lambda z: z ** 2, holomorphic=True)(z), np.diag(2 * z),
                                   rtol=1e-14)
    np.testing.assert_allclose(fx.hessian(lambda z: fnp.sum(z ** 3), holomorphic=True)(z),
                               np.diag(6 * z), rtol=1e-14)
    with pytest.raises(GradError, match="holomorphic=True"):
        fx.jacfwd(lambda z: z ** 2)(z)  # complex inputs need holomorphic=True (as JAX)
    with pytest.raises(GradError, match="complex outputs"):
        fx.jacfwd(lambda z: fnp.real(z), holomorphic=True)(z)
    jx, jn = fx.jacrev(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(X, np.arange(3))
    np.testing.assert_allclose(jx, np.diag(np.arange(3.0)))
    assert jn.dtype == float0 and jn.shape == (3, 3)
    with pytest.raises(GradError, match="allow_int"):
        fx.jacrev(lambda x, n: x * n, argnums=(0, 1))(X, np.arange(3))
