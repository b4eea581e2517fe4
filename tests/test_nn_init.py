"""Tests of functx.nn.init (jax.nn.initializers' initializers).

* Fans: dense and convolution kernels (HWIO and OIHW), several and batch axes, against
  hand-computed values; errors for 1-d kernels and axes out of range.
* Shapes and dtypes of every initializer (float64 by default; float16/32, bfloat16,
  complex), on the key's device (the fake device of tests/test_backends.py).
* Statistics of large draws (fixed keys, so deterministic): means and variances against
  ``scale / n`` for every distribution and mode on convolution kernels, bounds of the
  uniform and truncated draws, and the complex draws.
* Orthogonality of ``orthogonal`` (tall, wide, with column_axis, complex, float16) and the
  structure of ``delta_orthogonal``.
* Determinism per key, under jit and vmap over keys.
* JAX (skipped where it is not installed): the fans, and the values for the same key.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import functx as fx
import functx.nn as fnn
import functx.random as fxr
from functx.errors import ArgumentError, DTypeError, ShapeError
from functx.nn import init

KEY = fxr.key(0)
# The standard deviation of a standard normal truncated to (-2, 2): sqrt(1 - 4 phi(2) /
# (Phi(2) - Phi(-2))), from the tabulated phi(2) = 0.053990966513188, Phi(2) - Phi(-2) =
# 0.954499736103642.
TRUNC_STD = math.sqrt(1 - 4 * 0.053990966513188 / 0.954499736103642)

SCALED = {  # builder -> (scale, mode, distribution), from JAX's documentation
    "glorot_uniform": (1.0, "fan_avg", "uniform"),
    "glorot_normal": (1.0, "fan_avg", "truncated_normal"),
    "xavier_uniform": (1.0, "fan_avg", "uniform"),
    "xavier_normal": (1.0, "fan_avg", "truncated_normal"),
    "lecun_uniform": (1.0, "fan_in", "uniform"),
    "lecun_normal": (1.0, "fan_in", "truncated_normal"),
    "he_uniform": (2.0, "fan_in", "uniform"),
    "he_normal": (2.0, "fan_in", "truncated_normal"),
    "kaiming_uniform": (2.0, "fan_in", "uniform"),
    "kaiming_normal": (2.0, "fan_in", "truncated_normal"),
}

ALL_INITS = {
    "zeros": init.zeros, "ones": init.ones, "constant": init.constant(0.5),
    "uniform": init.uniform(), "normal": init.normal(), "truncated_normal":
    init.truncated_normal(), "variance_scaling": init.variance_scaling(1.0, "fan_in", "normal"),
    "orthogonal": init.orthogonal(), "delta_orthogonal": init.delta_orthogonal(),
    **{name: getattr(init, name)() for name in SCALED},
}


def shape_for(name: str) -> tuple[int, ...]:
    return (3, 3, 4, 5) if name == "delta_orthogonal" else (3, 4, 5)


# -- fans ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, kwargs, expected", [
    ((20, 30), {}, (20.0, 30.0)),                                      # dense (in, out)
    ((3, 3, 16, 32), {}, (144.0, 288.0)),                              # conv HWIO: 3*3*16
    ((5, 16, 32), {}, (80.0, 160.0)),                                  # conv1d WIO
    ((2, 3, 3, 16, 32), {}, (288.0, 576.0)),                           # conv3d DHWIO
    ((64, 16, 3, 3), {"in_axis": 1, "out_axis": 0}, (144.0, 576.0)),  # PyTorch OIHW
    ((8, 5, 6), {"batch_axis": 0}, (5.0, 6.0)),                        # a stack of 8 kernels
    ((8, 5, 6), {"batch_axis": (0,)}, (5.0, 6.0)),
    ((2, 3, 4, 5), {"in_axis": (0, 1), "out_axis": -1}, (24.0, 20.0)),  # 6 in, receptive 4
    ((7, 3), {"in_axis": 0, "out_axis": 1}, (7.0, 3.0)),
])
def test_fans_of_dense_and_conv_kernels(shape: tuple, kwargs: dict, expected: tuple) -> None:
    assert init.compute_fans(shape, **kwargs) == expected


def test_fans_errors() -> None:
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        init.compute_fans((5,))
    with pytest.raises(ArgumentError, match="out_axis=3 is out of range"):
        init.compute_fans((4, 5), out_axis=3)
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        init.he_normal()(KEY, (5,))


# -- shapes, dtypes, devices -----------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ALL_INITS))
@pytest.mark.parametrize("dtype", [None, np.float32, np.float16, np.complex64])
def test_shapes_and_dtypes(name: str, dtype: Any) -> None:
    shape = shape_for(name)
    if dtype == np.complex64 and name in ("truncated_normal", "uniform"):
        with pytest.raises(DTypeError, match=f"init.{name} draws real floating-point"):
            ALL_INITS[name](KEY, shape, dtype)  # real only, as in JAX
        return
    out = ALL_INITS[name](KEY, shape) if dtype is None else ALL_INITS[name](KEY, shape, dtype)
    assert out.shape == shape
    assert out.dtype == np.dtype(np.float64 if dtype is None else dtype)
    assert np.all(np.isfinite(np.asarray(out)))


def test_builder_dtype_is_the_default_and_int_shapes_work() -> None:
    assert init.he_normal(dtype=np.float32)(KEY, (4, 5)).dtype == np.float32
    assert init.normal(dtype=np.float32)(KEY, 7).shape == (7,)
    assert init.constant(3, dtype=np.int32)(KEY, (2,)).dtype == np.int32
    np.testing.assert_array_equal(init.constant(-7.0)(KEY, (2, 3)), np.full((2, 3), -7.0))
    np.testing.assert_array_equal(init.ones(KEY, (2,), np.int8), np.ones(2, np.int8))
    np.testing.assert_array_equal(init.zeros(KEY, (2, 3)), np.zeros((2, 3)))


@pytest.mark.parametrize("name", ["he_normal", "glorot_uniform", "normal", "orthogonal"])
def test_bfloat16(name: str) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    out = ALL_INITS[name](KEY, (64, 32), ml_dtypes.bfloat16)
    assert out.dtype == ml_dtypes.bfloat16
    ref = ALL_INITS[name](KEY, (64, 32), np.float32)  # bfloat16 rounds the float32 draws
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=1e-2, atol=1e-6)


def test_empty_shapes() -> None:
    for f in (init.he_normal(), init.orthogonal(), init.normal()):
        out = f(KEY, (0, 5))
        assert out.shape == (0, 5) and out.dtype == np.float64
    assert init.delta_orthogonal()(KEY, (0, 3, 2, 2)).shape == (0, 3, 2, 2)


def test_argument_errors() -> None:
    with pytest.raises(ArgumentError, match="mode must be one of"):
        init.variance_scaling(1.0, "fan_sum", "normal")
    with pytest.raises(ArgumentError, match="distribution must be one of"):
        init.variance_scaling(1.0, "fan_in", "gaussian")
    with pytest.raises(DTypeError, match="he_normal|variance_scaling.*int32 is not"):
        init.he_normal()(KEY, (3, 4), np.int32)
    with pytest.raises(DTypeError, match="needs a key"):
        init.he_normal()(np.zeros(2, np.int64), (3, 4))
    with pytest.raises(ArgumentError, match="shape must be"):
        init.normal()(KEY, "abc")
    with pytest.raises(ArgumentError, match="column_axis=2 is out of range"):
        init.orthogonal(column_axis=2)(KEY, (3, 4))
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        init.orthogonal()(KEY, (3,))
    with pytest.raises(ShapeError, match="3-, 4- or 5-d"):
        init.delta_orthogonal()(KEY, (3, 4))
    with pytest.raises(ShapeError, match="in <= out"):
        init.delta_orthogonal()(KEY, (3, 3, 5, 4))


def test_result_lives_on_the_keys_device() -> None:
    from test_backends import FAKE, FakeArray  # the fake device (NumPy underneath)
    import functx.backends as B

    registered = B._BACKENDS.get("fakegpu") is FAKE
    B.register_backend(FAKE)
    try:
        k = fx.device_put(KEY, "fakegpu")
        for f in (init.he_normal(), init.zeros, init.orthogonal(), init.delta_orthogonal()):
            out = f(k, (3, 3, 4, 4), np.float32)
            assert type(out) is FakeArray, f
            np.testing.assert_allclose(np.asarray(out), f(KEY, (3, 3, 4, 4), np.float32),
                                       rtol=1e-6, atol=1e-7)
    finally:
        if not registered:
            B._BACKENDS.pop("fakegpu", None)
            B.BY_TYPE.pop(FakeArray, None)


# -- statistics ------------------------------------------------------------------------------------

CONV = (3, 3, 64, 96)  # HWIO: fan_in = 9 * 64 = 576, fan_out = 9 * 96 = 864
FANS = {"fan_in": 576.0, "fan_out": 864.0, "fan_avg": 720.0,
        "fan_geo_avg": math.sqrt(576.0 * 864.0)}


@pytest.mark.parametrize("mode", sorted(FANS))
@pytest.mark.parametrize("distribution", ["normal", "truncated_normal", "uniform"])
def test_variance_scaling_statistics(mode: str, distribution: str) -> None:
    scale = 1.7
    target = scale / FANS[mode]
    x = np.asarray(init.variance_scaling(scale, mode, distribution)(fxr.key(5), CONV))
    n = x.size  # 55296 draws: the variance's relative standard error is below 1 %
    assert abs(x.mean()) < 5 * math.sqrt(target / n)
    assert abs(x.var() / target - 1) < 0.04
    if distribution == "uniform":
        bound = math.sqrt(3 * target)
        assert np.abs(x).max() <= bound and np.abs(x).max() > 0.99 * bound
    if distribution == "truncated_normal":
        bound = 2 * math.sqrt(target) / TRUNC_STD  # two stddevs of the untruncated normal
        assert np.abs(x).max() < bound and np.abs(x).max() > 0.99 * bound


@pytest.mark.parametrize("name", sorted(SCALED))
def test_named_initializers_statistics(name: str) -> None:
    scale, mode, distribution = SCALED[name]
    x = np.asarray(getattr(init, name)()(fxr.key(1), CONV))
    assert abs(x.var() / (scale / FANS[mode]) - 1) < 0.04
    same = np.asarray(init.variance_scaling(scale, mode, distribution)(fxr.key(1), CONV))
    np.testing.assert_array_equal(x, same)


def test_oihw_axes_change_the_variance() -> None:
    shape = (96, 64, 3, 3)  # OIHW: fan_in = 64 * 9
    x = np.asarray(init.he_normal(in_axis=1, out_axis=0)(fxr.key(2), shape))
    assert abs(x.var() / (2.0 / 576.0) - 1) < 0.04


@pytest.mark.parametrize("distribution", ["normal", "uniform", "truncated_normal"])
def test_complex_variance_scaling_statistics(distribution: str) -> None:
    target = 1.0 / FANS["fan_in"]
    x = np.asarray(init.variance_scaling(1.0, "fan_in", distribution)(fxr.key(3), CONV,
                                                                       np.complex128))
    second = np.mean(np.abs(x) ** 2)
    if distribution == "truncated_normal":
        # |z|^2 / s^2 is an exponential variable truncated to 4 (s^2 the untruncated E|z|^2),
        # with mean 1 - 4 e^-4 / (1 - e^-4); JAX divides s by 0.95311164380491208.
        e = math.exp(-4.0)
        target *= (1 - 4 * e / (1 - e)) / 0.95311164380491208 ** 2
        assert np.abs(x).max() < 2 * math.sqrt(1.0 / 576.0) / 0.95311164380491208
    if distribution == "uniform":  # a disk of radius sqrt(2) s
        assert np.abs(x).max() <= math.sqrt(2.0 / 576.0) * (1 + 1e-12)
    assert abs(second / target - 1) < 0.03
    assert abs(np.mean(x.real ** 2) / np.mean(x.imag ** 2) - 1) < 0.05  # circular
    assert abs(x.mean()) < 5 * math.sqrt(target / x.size)


def test_plain_distributions() -> None:
    x = np.asarray(init.normal(0.3)(fxr.key(4), (400, 300)))
    assert abs(x.std() / 0.3 - 1) < 0.02 and abs(x.mean()) < 0.01
    u = np.asarray(init.uniform(2.5)(fxr.key(4), (400, 300)))
    assert u.min() >= 0 and u.max() < 2.5 and abs(u.mean() / 1.25 - 1) < 0.01
    t = np.asarray(init.truncated_normal(0.5, lower=-1.0, upper=3.0)(fxr.key(4), (400, 300)))
    assert t.min() > -0.5 and t.max() < 1.5 and t.min() < -0.49 and t.max() > 1.2
    t = np.asarray(init.truncated_normal(0.02)(fxr.key(4), (400, 300)))
    assert np.abs(t).max() < 0.04
    assert abs(t.std() / (0.02 * TRUNC_STD) - 1) < 0.02  # not corrected for the truncation


# -- orthogonality ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, column_axis", [
    ((50, 30), -1), ((30, 50), -1), ((64, 64), -1), ((3, 3, 8, 16), -1), ((6, 4, 5), 1),
    ((6, 4, 5), 0), ((200, 100), -1),
])
def test_orthogonal_is_orthogonal(shape: tuple, column_axis: int) -> None:
    scale = 1.3
    w = np.asarray(init.orthogonal(scale, column_axis)(fxr.key(7), shape))
    m = np.moveaxis(w, column_axis, -1).reshape(-1, shape[column_axis])
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, scale ** 2 * np.eye(gram.shape[0]), atol=1e-12)


def test_orthogonal_other_dtypes() -> None:
    w = np.asarray(init.orthogonal()(KEY, (40, 24), np.complex128))
    np.testing.assert_allclose(w.conj().T @ w, np.eye(24), atol=1e-12)
    w = np.asarray(init.orthogonal()(KEY, (128, 96), np.float32), np.float64)
    np.testing.assert_allclose(w.T @ w, np.eye(96), atol=2e-6)
    w = np.asarray(init.orthogonal()(KEY, (32, 16), np.float16), np.float64)
    np.testing.assert_allclose(w.T @ w, np.eye(16), atol=3e-3)


def test_orthogonal_is_the_positive_diagonal_qr_of_the_normal_draw() -> None:
    # JAX's recipe, with NumPy's QR: Q times the signs of R's diagonal.
    z = np.asarray(fxr.normal(fxr.key(8), (60, 20)))
    q, r = np.linalg.qr(z)
    expected = q * np.sign(np.diag(r))
    np.testing.assert_allclose(init.orthogonal()(fxr.key(8), (60, 20)), expected, atol=1e-12)
    np.testing.assert_allclose(init.orthogonal()(fxr.key(8), (20, 60)), expected.T, atol=1e-12)


def test_orthogonal_is_uniform_in_sign() -> None:
    # Haar-distributed: the first entry is positive half the time over many keys.
    keys = fxr.split(fxr.key(9), 400)
    firsts = np.array([float(init.orthogonal()(k, (3, 3))[0, 0]) for k in keys])
    assert 160 < np.sum(firsts > 0) < 240


def test_delta_orthogonal() -> None:
    w = np.array(init.delta_orthogonal(2.0)(fxr.key(10), (3, 4, 8, 16)))
    centre = w[1, 1]
    np.testing.assert_allclose(centre @ centre.T, 4.0 * np.eye(8), atol=1e-12)
    w[1, 1] = 0
    assert not w.any()  # everything else is zero
    w1 = np.asarray(init.delta_orthogonal()(fxr.key(10), (5, 6, 6)))
    assert w1[2].any() and not np.delete(w1, 2, axis=0).any()
    w3 = np.asarray(init.delta_orthogonal()(fxr.key(10), (2, 3, 4, 5, 5)))
    assert w3[0, 1, 1].any() and np.count_nonzero(w3) == np.count_nonzero(w3[0, 1, 1])
    np.testing.assert_allclose(w1[2], init.orthogonal()(fxr.key(10), (6, 6)))


# -- determinism, transforms ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(set(ALL_INITS) - {"zeros", "ones", "constant"}))
def test_same_key_same_values_other_key_other_values(name: str) -> None:
    f, shape = ALL_INITS[name], shape_for(name)
    a, b = np.asarray(f(fxr.key(11), shape)), np.asarray(f(fxr.key(11), shape))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, np.asarray(f(fxr.key(12), shape)))


def test_jit_and_vmap_over_keys() -> None:
    keys = fxr.split(fxr.key(13), 3)
    for f in (init.he_normal(), init.glorot_uniform(), init.orthogonal()):
        loop = np.stack([np.asarray(f(k, (6, 4))) for k in keys])
        np.testing.assert_allclose(fx.vmap(lambda k: f(k, (6, 4)))(keys), loop, rtol=1e-12,
                                   atol=1e-14)
        np.testing.assert_allclose(fx.jit(lambda k: f(k, (6, 4)))(keys[0]), loop[0],
                                   rtol=1e-12, atol=1e-14)
    zs = fx.vmap(lambda k: init.zeros(k, (2,)))(keys)
    np.testing.assert_array_equal(zs, np.zeros((3, 2)))


def test_exposed_in_functx_nn() -> None:
    assert fnn.init is init
    assert init.xavier_normal is init.glorot_normal and init.kaiming_uniform is init.he_uniform


# -- against JAX -----------------------------------------------------------------------------------

FAN_CASES = [((20, 30), {}), ((3, 3, 16, 32), {}), ((64, 16, 3, 3), {"in_axis": 1, "out_axis": 0}),
             ((8, 5, 6), {"batch_axis": 0}), ((2, 3, 4, 5), {"in_axis": (0, 1), "out_axis": -1}),
             ((2, 3, 4, 5, 6), {"in_axis": -2, "out_axis": (0, -1), "batch_axis": (1,)})]


@pytest.mark.parametrize("shape, kwargs", FAN_CASES)
def test_fans_equal_jaxs(shape: tuple, kwargs: dict) -> None:
    pytest.importorskip("jax")
    from jax._src.nn.initializers import _compute_fans

    assert init.compute_fans(shape, **kwargs) == tuple(_compute_fans(shape, **kwargs))


@pytest.mark.parametrize("name", ["glorot_uniform", "glorot_normal", "lecun_uniform",
                                  "lecun_normal", "he_uniform", "he_normal"])
@pytest.mark.parametrize("shape", [(20, 30), (3, 3, 16, 32)])
def test_values_equal_jaxs(name: str, shape: tuple) -> None:
    jax = pytest.importorskip("jax")
    k = fxr.key(21)
    ours = np.asarray(getattr(init, name)()(k, shape, np.float32))
    theirs = np.asarray(getattr(jax.nn.initializers, name)()(jax.random.PRNGKey(21), shape,
                                                             np.float32))
    assert theirs.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6 * np.abs(theirs).max())


@pytest.mark.parametrize("mode", ["fan_in", "fan_out", "fan_avg", "fan_geo_avg"])
@pytest.mark.parametrize("distribution", ["normal", "uniform", "truncated_normal"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_variance_scaling_equals_jaxs(mode: str, distribution: str, dtype: Any) -> None:
    jax = pytest.importorskip("jax")
    if mode == "fan_geo_avg" and "fan_geo_avg" not in (jax.nn.initializers.variance_scaling
                                                       .__doc__ or ""):
        pytest.skip("this JAX has no fan_geo_avg")
    kw = {"in_axis": (0, 1), "out_axis": -1, "batch_axis": 2}
    shape = (4, 5, 6, 7)
    ours = np.asarray(init.variance_scaling(1.3, mode, distribution, **kw)(fxr.key(22), shape,
                                                                          dtype))
    theirs = np.asarray(jax.nn.initializers.variance_scaling(1.3, mode, distribution, **kw)(
        jax.random.PRNGKey(22), shape, dtype))
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6 * np.abs(theirs).max())


@pytest.mark.parametrize("shape, column_axis", [((20, 12), -1), ((12, 20), -1), ((4, 5, 6), 1)])
def test_orthogonal_equals_jaxs(shape: tuple, column_axis: int) -> None:
    jax = pytest.importorskip("jax")
    ours = np.asarray(init.orthogonal(1.5, column_axis)(fxr.key(23), shape, np.float32))
    theirs = np.asarray(jax.nn.initializers.orthogonal(1.5, column_axis)(
        jax.random.PRNGKey(23), shape, np.float32))
    np.testing.assert_allclose(ours, theirs, atol=2e-5)
    ours = np.asarray(init.delta_orthogonal(0.7)(fxr.key(23), (3, 4, 5, 6), np.float32))
    theirs = np.asarray(jax.nn.initializers.delta_orthogonal(0.7)(
        jax.random.PRNGKey(23), (3, 4, 5, 6), np.float32))
    np.testing.assert_allclose(ours, theirs, atol=2e-5)


def test_plain_initializers_equal_jaxs() -> None:
    jax = pytest.importorskip("jax")
    J, jk = jax.nn.initializers, jax.random.PRNGKey(24)
    for ours, theirs in [(init.normal(0.3), J.normal(0.3)), (init.uniform(2.0), J.uniform(2.0)),
                         (init.truncated_normal(0.5, lower=-1.0, upper=3.0),
                          J.truncated_normal(0.5, lower=-1.0, upper=3.0)),
                         (init.constant(-7), J.constant(-7))]:
        a = np.asarray(ours(fxr.key(24), (10, 11), np.float32))
        b = np.asarray(theirs(jk, (10, 11), np.float32))
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_truncation_constant_is_jaxs_and_the_true_stddev() -> None:
    assert init.TRUNCATED_NORMAL_STDDEV == pytest.approx(TRUNC_STD, rel=1e-12)
    # Through the draws: JAX's he_normal stddev is sqrt(2 / fan_in) / 0.8796...
    jax = pytest.importorskip("jax")
    w = np.asarray(jax.nn.initializers.he_normal()(jax.random.PRNGKey(0), (3, 3, 64, 96),
                                                   np.float32), np.float64)
    ours = np.asarray(init.he_normal()(fxr.key(0), (3, 3, 64, 96), np.float32), np.float64)
    assert ours.var() == pytest.approx(w.var(), rel=1e-4)
