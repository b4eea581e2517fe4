"""functx.numpy's complex helpers (angle, iscomplexobj, isrealobj, real_if_close) against
NumPy, and the gradient of angle against finite differences."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.errors import ConcretizationError
from functx.test_util import check_grads

ANGLE_INPUTS = [
    np.array([1 + 1j, -1 + 0j, -1 - 0j, 0j, -2.5 + 0.5j, 3 - 4j, 1j, -1j]),
    np.array([[1 + 2j, -3 - 1j]], np.complex64),
    np.array([1.0, -2.0, 0.0, -0.0, np.inf, -np.inf]),
    np.array([1.0, -2.0], np.float32),
    np.array([1.0, -2.0], np.float16),
    np.array([3, -2, 0], np.int8),
    np.array([3, -2, 0], np.int64),
    np.array([True, False]),
    np.array(2 - 2j),
    -2.0, 3, 1j,
]


@pytest.mark.parametrize("z", ANGLE_INPUTS, ids=lambda z: f"{np.asarray(z).dtype}")
@pytest.mark.parametrize("deg", [False, True])
def test_angle_matches_numpy(z: Any, deg: bool) -> None:
    got, want = fnp.angle(z, deg=deg), np.angle(z, deg=deg)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_allclose(got, want, rtol=1e-6 if np.asarray(want).dtype.itemsize > 2
                               else 1e-3)


def test_angle_positional_deg_and_numpy_dispatch() -> None:
    z = np.array([1j, -1.0 + 0j, 1 + 1j])
    np.testing.assert_allclose(fnp.angle(z, True), [90.0, 180.0, 45.0])
    # np.angle on a tracer reaches functx.numpy.angle.
    np.testing.assert_allclose(fx.grad(lambda t: np.sum(np.angle(t * 1j + 1.0)))(
        np.array([0.5])), [1 / 1.25])


def _angle_of_parts(t: Any) -> Any:
    """angle(t0 + i t1): the real function atan2(t1, t0) of real parameters."""
    return fnp.sum(fnp.angle(t[..., 0] + 1j * t[..., 1]) * np.array([1.0, 2.0, -1.0]))


def test_grad_of_angle_against_finite_differences() -> None:
    t = np.array([[0.3, 0.7], [-1.2, 0.4], [2.0, -0.5]])
    g = fx.grad(_angle_of_parts)(t)
    # Independent reference: central differences of NumPy's angle.
    ref = np.zeros_like(t)
    eps = 1e-6
    for idx in np.ndindex(t.shape):
        d = np.zeros_like(t)
        d[idx] = eps
        f = lambda u: np.sum(np.angle(u[..., 0] + 1j * u[..., 1]) * [1.0, 2.0, -1.0])  # noqa
        ref[idx] = (f(t + d) - f(t - d)) / (2 * eps)
    np.testing.assert_allclose(g, ref, rtol=1e-7, atol=1e-9)
    # Closed form: d atan2(y, x) = (x dy - y dx) / (x^2 + y^2).
    r2 = (t ** 2).sum(-1)
    w = np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(g, np.stack([-t[:, 1] / r2 * w, t[:, 0] / r2 * w], -1),
                               rtol=1e-12)


def test_check_grads_of_angle_on_complex_and_real_inputs() -> None:
    z = np.array([0.3 + 0.7j, -1.2 + 0.4j, 2.0 - 0.5j])
    check_grads(fnp.angle, (z,), order=2)
    check_grads(lambda z: fnp.angle(z, deg=True), (z,), order=1)
    x = np.array([0.5, -1.5, 2.0])  # a real input: the angle is constant (0 or pi)
    np.testing.assert_array_equal(fx.grad(lambda x: fnp.sum(fnp.angle(x)))(x), 0.0)


@pytest.mark.parametrize("x", [
    np.array([1.0, 2.0]), np.array([1 + 0j]), np.array([1, 2], np.int32),
    np.array([1j], np.complex64), 1.0, 1j, 3, True, [1, 2], [1, 2j], [[1.0], [2j]],
    np.float32(1), np.complex128(1), (1.0, 2.0), "a", None,
], ids=repr)
def test_iscomplexobj_isrealobj_match_numpy(x: Any) -> None:
    want = np.iscomplexobj(x) if x is not None else False  # JAX: None is not complex
    assert fnp.iscomplexobj(x) is want
    assert fnp.isrealobj(x) is (not want)


def test_iscomplexobj_of_tracers_looks_at_the_dtype() -> None:
    seen = []

    def f(z):
        seen.append((fnp.iscomplexobj(z), fnp.isrealobj(fnp.real(z)),
                     fnp.iscomplexobj([z, 1.0])))
        return fnp.real(z)

    fx.make_trace(f)(np.array([1 + 0j]))
    assert seen == [(True, True, True)]


@pytest.mark.parametrize("a, kw", [
    (np.array([2.1 + 4e-14j, 5.2 + 3e-15j]), {}),
    (np.array([2.1 + 4e-14j, 5.2 + 3e-15j]), {"tol": 1000}),
    (np.array([1 + 1e-5j]), {}),
    (np.array([1 + 1e-5j]), {"tol": 1e-3}),
    (np.array([1 + 1e-5j]), {"tol": 1e-6}),
    (np.array([1 + 1e-7j, 2 + 0j], np.complex64), {}),
    (np.array([1 + 1e-4j], np.complex64), {}),
    (np.array([1.0, 2.0]), {}),
    (np.array([1, 2], np.int16), {}),
    (np.array(3 + 0j), {}),
    ([1 + 0j, 2], {}),
])
def test_real_if_close_matches_numpy(a: Any, kw: dict) -> None:
    got, want = fnp.real_if_close(a, **kw), np.real_if_close(a, **kw)
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_real_if_close_needs_values() -> None:
    with pytest.raises(ConcretizationError, match="real_if_close.*fnp.real"):
        fx.make_trace(fnp.real_if_close)(np.array([1 + 0j]))
    # A real input needs no values: it is returned as it is.
    fx.make_trace(fnp.real_if_close)(np.array([1.0]))
