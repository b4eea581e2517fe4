"""functx.numpy.fft against numpy.fft, and its derivatives and batching.

* Values, shapes and dtypes of every transform against numpy.fft for every norm, over
  hypothesis shapes with odd and prime lengths, ``n``/``s`` shorter and longer than the axis
  (crop and zero-pad), negative and permuted axes, real input to complex transforms.
* Gradients of real losses (power spectra through ``real``/``conj``, linear terms through
  ``real``/``imag``) against central finite differences; the gradient with respect to a
  complex input is ``dL/dx - i dL/dy`` (JAX's convention); torch.fft as a second oracle.
* ``check_grads`` (JVP against finite differences, VJP against JVP, order 2) on real
  functions (the stacked real and imaginary parts of a transform).
* ``vmap`` against a loop over examples, for values and gradients.
* Errors, dtype conversions, the helpers (fftfreq, rfftfreq, fftshift, ifftshift) and the
  complex parts (functx.numpy.real, imag, conj).

The primitives' own rule checks are table-driven (tests/specs/fft.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import functx as fx
import functx.numpy as fnp
from functx.errors import DTypeError, FunctxError, ShapeError
from functx.primitives import complex as cx
from functx.primitives import fft as fp
from functx.test_util import check_grads

ONE_AXIS = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_AXES = ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]
ALL = ONE_AXIS + N_AXES
REAL_INPUT = {"rfft", "ihfft", "rfft2", "rfftn"}       # complex input is an error
HALF_INPUT = {"irfft", "hfft", "irfft2", "irfftn"}      # default length 2 * (m - 1)
REAL_OUTPUT = {"irfft", "hfft", "irfft2", "irfftn"}
NORMS = [None, "backward", "ortho", "forward"]
SIDES = [1, 2, 3, 4, 5, 6, 7]   # odd, even and prime lengths
LENGTHS = SIDES + [8, 9, 11]

small = settings(max_examples=max(5, settings.default.max_examples // 3))


# ----------------------------------------------------------------------------------------
# cases: an input shape and NumPy's keyword arguments


@st.composite
def one_axis_case(draw, name: str) -> tuple[tuple, dict]:
    shape = draw(st.lists(st.sampled_from(SIDES), min_size=1, max_size=3))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    n = draw(st.none() | st.sampled_from(LENGTHS))
    if name in HALF_INPUT and n is None and shape[axis] < 2:
        shape[axis] = draw(st.sampled_from(SIDES[1:]))
    kw = {"n": n, "axis": axis, "norm": draw(st.sampled_from(NORMS))}
    return tuple(shape), kw


@st.composite
def n_axes_case(draw, name: str) -> tuple[tuple, dict]:
    two = name.endswith("2")
    shape = draw(st.lists(st.sampled_from(SIDES), min_size=2 if two else 1, max_size=3))
    ndim = len(shape)
    kw: dict = {"norm": draw(st.sampled_from(NORMS))}
    axes = None
    if two:
        if draw(st.booleans()):
            axes = list(draw(st.permutations(range(ndim)))[:2])
    elif draw(st.booleans()):
        k = draw(st.integers(1, ndim))
        axes = list(draw(st.permutations(range(ndim)))[:k])
    if axes is not None:
        axes = [a - ndim if draw(st.booleans()) else a for a in axes]
        kw["axes"] = axes
    used = axes if axes is not None else ([-2, -1] if two else list(range(ndim)))
    # s only with explicit axes (NumPy 2 deprecates s without axes), or the default axes of
    # the 2-d functions.
    if (axes is not None or two) and draw(st.booleans()):
        kw["s"] = [draw(st.sampled_from(LENGTHS + [-1])) for _ in used]
    last = used[-1]
    if name in HALF_INPUT and ("s" not in kw or kw["s"][-1] == -1) and shape[last] < 2:
        shape[last] = 2
    return tuple(shape), kw


def case_for(name: str) -> st.SearchStrategy:
    return one_axis_case(name) if name in ONE_AXIS else n_axes_case(name)


def make_input(rng: np.random.Generator, shape: tuple, name: str, real: bool) -> np.ndarray:
    x = rng.standard_normal(shape)
    if name in REAL_INPUT or real:
        return x
    return x + 1j * rng.standard_normal(shape)


def seeded(data: Any) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


# ----------------------------------------------------------------------------------------
# values against numpy.fft


@pytest.mark.parametrize("name", ALL)
@given(data=st.data())
def test_values_match_numpy(name: str, data: Any) -> None:
    """Every transform, norm, length and axis choice gives numpy.fft's values and dtype."""
    shape, kw = data.draw(case_for(name), label="case")
    x = make_input(seeded(data), shape, name, real=data.draw(st.booleans(), label="real"))
    got = getattr(fnp.fft, name)(x, **kw)
    want = getattr(np.fft, name)(x, **kw)
    assert type(got) is np.ndarray and not got.flags.writeable
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                  want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * max(1.0, np.abs(want).max(
        initial=0.0)))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64,
                                   np.complex128, np.int32, np.bool_])
def test_result_dtype_matches_numpy(name: str, dtype: Any) -> None:
    """NumPy 2's dtype rules: single precision stays single; integers compute in double."""
    x = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    if name in REAL_INPUT and np.dtype(dtype).kind == "c":
        with pytest.raises(TypeError):
            np.fft.__dict__[name](x)
        with pytest.raises(DTypeError, match=name):
            getattr(fnp.fft, name)(x)
        return
    got = getattr(fnp.fft, name)(x)
    want = getattr(np.fft, name)(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-3 if want.dtype in (np.complex64, np.float32) else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_repeated_axes_transform_repeatedly() -> None:
    """fftn over a repeated axis applies the transform again, as NumPy's loop does."""
    x = np.random.default_rng(0).standard_normal((3, 4)) + 0j
    for name in ("fftn", "ifftn"):
        got = getattr(fnp.fft, name)(x, s=(5, 3), axes=(0, 0))
        np.testing.assert_allclose(got, getattr(np.fft, name)(x, s=(5, 3), axes=(0, 0)),
                                   atol=1e-12)
    xr = x.real
    np.testing.assert_allclose(fnp.fft.rfftn(xr, axes=(1, 0, 1)),
                               np.fft.rfftn(xr, axes=(1, 0, 1)), atol=1e-12)
    np.testing.assert_allclose(fnp.fft.irfftn(x, axes=(0, 1, 0)),
                               np.fft.irfftn(x, axes=(0, 1, 0)), atol=1e-12)


def test_s_without_axes_uses_last_axes() -> None:
    """s without axes transforms the last len(s) axes (NumPy's behaviour, no warning)."""
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    with pytest.warns(DeprecationWarning):
        want = np.fft.fftn(x, s=(5, 2))
    np.testing.assert_allclose(fnp.fft.fftn(x, s=(5, 2)), want, atol=1e-12)


def test_empty_axes() -> None:
    """fftn with axes=() returns the input as NumPy does; the real variants raise."""
    x = np.arange(6.0).reshape(2, 3)
    got = fnp.fft.fftn(x, axes=())
    want = np.fft.fftn(x, axes=())
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    for name in ("rfftn", "irfftn"):
        with pytest.raises(ValueError, match=name):
            getattr(fnp.fft, name)(x, axes=())


def test_zero_size_leading_axes() -> None:
    """Batches of no signals transform to batches of no spectra."""
    x = np.zeros((0, 3, 4))
    for name in ALL:
        kw = {"axes": (1, 2)} if name.endswith("n") else {}
        got = getattr(fnp.fft, name)(x, **kw)
        want = getattr(np.fft, name)(x, **kw)
        assert got.shape == want.shape and got.dtype == want.dtype, name


# ----------------------------------------------------------------------------------------
# gradients of real losses


def _loss_fn(name: str, kw: dict, shape_out: tuple, rng: np.random.Generator,
             complex_in: bool):
    """A real loss of the transform (quadratic: the power spectrum; and linear terms), as a
    function of the real and imaginary parts of the input (or of the real input)."""
    w1, w2, w3 = (rng.standard_normal(shape_out) for _ in range(3))
    f = getattr(fnp.fft, name)

    def of_output(y):
        if name in REAL_OUTPUT:
            return fnp.sum(w1 * y * y) + fnp.sum(w2 * y)
        power = fnp.real(y * fnp.conj(y))
        return fnp.sum(w1 * power) + fnp.sum(w2 * fnp.real(y)) + fnp.sum(w3 * fnp.imag(y))

    if complex_in:
        def loss(xr, xi):
            return of_output(f(xr + 1j * xi, **kw))
    else:
        def loss(xr):
            return of_output(f(xr, **kw))
    return loss, of_output


@pytest.mark.parametrize("name", ALL)
@small
@given(data=st.data())
def test_grad_of_real_loss_matches_finite_differences(name: str, data: Any) -> None:
    """grad of a real loss matches central differences; for complex input the gradient
    with respect to z is dL/dx - i dL/dy (JAX's convention)."""
    shape, kw = data.draw(case_for(name), label="case")
    rng = seeded(data)
    complex_in = name not in REAL_INPUT
    out_shape = getattr(np.fft, name)(np.zeros(shape), **kw).shape
    loss, of_output = _loss_fn(name, kw, out_shape, rng, complex_in)
    args = [rng.standard_normal(shape) for _ in range(2 if complex_in else 1)]
    grads = fx.grad(loss, argnums=tuple(range(len(args))))(*args)
    vs = [rng.standard_normal(shape) for _ in args]
    eps = 1e-5
    plus = loss(*[a + eps * v for a, v in zip(args, vs)])
    minus = loss(*[a - eps * v for a, v in zip(args, vs)])
    numeric = (float(plus) - float(minus)) / (2 * eps)
    analytic = sum(float(np.sum(g * v)) for g, v in zip(grads, vs))
    assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric)), (analytic, numeric)
    if complex_in:
        f = getattr(fnp.fft, name)
        gz = fx.grad(lambda z: of_output(f(z, **kw)))(args[0] + 1j * args[1])
        np.testing.assert_allclose(gz, grads[0] - 1j * grads[1], rtol=1e-10, atol=1e-10)


def _torch_call(torch: Any, name: str, x: Any, kw: dict) -> Any:
    kw = dict(kw)
    if "axis" in kw:
        kw["dim"] = kw.pop("axis")
    if "axes" in kw:
        kw["dim"] = tuple(kw.pop("axes"))
    if "s" in kw and kw["s"] is not None:
        kw["s"] = tuple(kw["s"])
    return getattr(torch.fft, name)(x, **kw)


@pytest.mark.parametrize("name", ALL)
@small
@given(data=st.data())
def test_grad_matches_torch(name: str, data: Any) -> None:
    """torch.fft's gradient of the same real loss: equal for real input; for complex input
    torch returns dL/dx + i dL/dy, the conjugate of functx's (JAX's) convention."""
    torch = pytest.importorskip("torch")
    shape, kw = data.draw(case_for(name), label="case")
    if kw.get("s") is not None and -1 in kw["s"]:
        # NumPy's -1 is the input's length (torch's differs for the halved axis)
        kw["s"] = [d if d != -1 else shape[a] for d, a in zip(kw["s"], kw.get("axes", [-2, -1]))]
    rng = seeded(data)
    real_in = name in REAL_INPUT or data.draw(st.booleans(), label="real input")
    x = make_input(rng, shape, name, real=real_in)
    out_shape = getattr(np.fft, name)(x, **kw).shape
    w1, w2, w3 = (rng.standard_normal(out_shape) for _ in range(3))
    f = getattr(fnp.fft, name)

    def loss(z):
        y = f(z, **kw)
        if name in REAL_OUTPUT:
            return fnp.sum(w1 * y * y) + fnp.sum(w2 * y)
        return (fnp.sum(w1 * fnp.real(y * fnp.conj(y))) + fnp.sum(w2 * fnp.real(y))
                + fnp.sum(w3 * fnp.imag(y)))

    g = fx.grad(loss)(x)
    xt = torch.tensor(x, requires_grad=True)
    y = _torch_call(torch, name, xt, kw)
    tw = [torch.tensor(w) for w in (w1, w2, w3)]
    if name in REAL_OUTPUT:
        lt = (tw[0] * y * y).sum() + (tw[1] * y).sum()
    else:
        lt = ((tw[0] * (y.real ** 2 + y.imag ** 2)).sum() + (tw[1] * y.real).sum()
              + (tw[2] * y.imag).sum())
    lt.backward()
    np.testing.assert_allclose(float(loss(x)), lt.item(), rtol=1e-9)
    want = xt.grad.resolve_conj().numpy()
    np.testing.assert_allclose(g, want if real_in else np.conj(want), rtol=1e-8, atol=1e-8)


# ----------------------------------------------------------------------------------------
# forward mode, second order


def _parts_fn(name: str, kw: dict):
    """The transform as a real function: the input's parts in, the output's parts out."""
    f = getattr(fnp.fft, name)
    if name in REAL_INPUT:
        def g(xr):
            y = f(xr, **kw)
            return fnp.stack([fnp.real(y), fnp.imag(y)])
        return g

    def g(xr, xi):
        y = f(xr + 1j * xi, **kw)
        return y if name in REAL_OUTPUT else fnp.stack([fnp.real(y), fnp.imag(y)])
    return g


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=3)
@given(data=st.data())
def test_check_grads_order_2(name: str, data: Any) -> None:
    """JVP against finite differences and VJP against JVP, to second order."""
    shape, kw = data.draw(case_for(name), label="case")
    rng = seeded(data)
    args = tuple(rng.standard_normal(shape) for _ in range(1 if name in REAL_INPUT else 2))
    check_grads(_parts_fn(name, kw), args, order=2)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fftn", "irfft2"])
@small
@given(data=st.data())
def test_jvp_matches_vjp(name: str, data: Any) -> None:
    """<J v, u> == <v, J^T u> for random tangents and cotangents (real parts in and out)."""
    shape, kw = data.draw(case_for(name), label="case")
    rng = seeded(data)
    g = _parts_fn(name, kw)
    args = tuple(rng.standard_normal(shape) for _ in range(1 if name in REAL_INPUT else 2))
    vs = tuple(rng.standard_normal(shape) for _ in args)
    out, jv = fx.jvp(g, args, vs)
    u = rng.standard_normal(np.shape(out))
    cts = fx.vjp(g, *args)[1](u)
    lhs = float(np.sum(jv * u))
    rhs = sum(float(np.sum(c * v)) for c, v in zip(cts, vs))
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs)), (lhs, rhs)


# ----------------------------------------------------------------------------------------
# vmap


@pytest.mark.parametrize("name", ALL)
@small
@given(data=st.data())
def test_vmap_matches_loop(name: str, data: Any) -> None:
    """vmap over a batch axis anywhere gives the stacked per-example transforms, and the
    per-example gradients."""
    shape, kw = data.draw(case_for(name), label="case")
    rng = seeded(data)
    size = data.draw(st.integers(1, 3), label="size")
    b = data.draw(st.integers(0, len(shape)), label="in_axis")
    examples = [make_input(rng, shape, name, real=False) for _ in range(size)]
    batch = np.stack(examples, axis=b)
    f = getattr(fnp.fft, name)
    got = fx.vmap(lambda x: f(x, **kw), in_axes=b)(batch)
    want = np.stack([getattr(np.fft, name)(x, **kw) for x in examples])
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * max(1.0, np.abs(want).max(
        initial=0.0)))

    def loss(x):
        y = f(x, **kw)
        return fnp.sum(fnp.real(y * fnp.conj(y)) * fnp.cos(fnp.real(y)))

    g_batch = fx.vmap(fx.grad(loss), in_axes=b, out_axes=b)(batch)
    g_loop = np.stack([fx.grad(loss)(x) for x in examples], axis=b)
    np.testing.assert_allclose(g_batch, g_loop, rtol=1e-9, atol=1e-9)


def test_primitive_batch_rule_keeps_leading_batch_axis() -> None:
    """The batching rule leaves a batch axis among the untransformed axes where it is and
    moves one among the transformed axes to the front."""
    x = np.random.default_rng(7).standard_normal((3, 2, 4, 5)) + 0j
    out, d = fp.fft_p.batch([x], [1], fft_type="fft", fft_lengths=(4, 5))
    assert d == 1
    np.testing.assert_allclose(out, np.fft.fftn(x, axes=(2, 3)), atol=1e-12)
    x = np.moveaxis(x, 1, 2)  # the batch among the transformed axes of examples (3, 4, 5)
    out, d = fp.fft_p.batch([x], [2], fft_type="fft", fft_lengths=(4, 5))
    assert d == 0
    np.testing.assert_allclose(out, np.fft.fftn(np.moveaxis(x, 2, 0), axes=(2, 3)),
                               atol=1e-12)


# ----------------------------------------------------------------------------------------
# precision


def test_float32_gradients_stay_float32() -> None:
    """Single-precision signals get single-precision spectra and gradients."""
    x = np.random.default_rng(2).standard_normal((3, 6)).astype(np.float32)

    def loss(x):
        y = fnp.fft.rfft2(x, norm="ortho")
        return fnp.sum(fnp.real(y * fnp.conj(y)))

    assert fnp.fft.rfft2(x).dtype == np.complex64
    g = fx.grad(loss)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, fx.grad(loss)(x.astype(np.float64)), rtol=1e-4, atol=1e-4)


def test_parseval_gradient() -> None:
    """With norm="ortho" the FFT is unitary: grad of sum |fft(z)|^2 is 2 conj(z)."""
    rng = np.random.default_rng(3)
    z = rng.standard_normal((4, 7)) + 1j * rng.standard_normal((4, 7))
    g = fx.grad(lambda z: fnp.sum(fnp.real(fnp.fft.fftn(z, norm="ortho")
                                           * fnp.conj(fnp.fft.fftn(z, norm="ortho")))))(z)
    np.testing.assert_allclose(g, 2 * np.conj(z), rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("call, err, words", [
    (lambda: fnp.fft.fft(np.ones(3), n=0), ValueError, "fft.*at least 1"),
    (lambda: fnp.fft.fft(np.ones((2, 0))), ValueError, "fft.*at least 1"),
    (lambda: fnp.fft.irfft(np.ones(1)), ValueError, "irfft.*at least 1"),
    (lambda: fnp.fft.fft(np.ones(3), norm="bad"), ValueError, "norm"),
    (lambda: fnp.fft.rfft(np.ones(3, np.complex128)), TypeError, "rfft needs real"),
    (lambda: fnp.fft.ihfft(np.ones(3, np.complex128)), TypeError, "real"),
    (lambda: fnp.fft.fft(np.ones(3), out=np.ones(3, complex)), TypeError, "out="),
    (lambda: fnp.fft.fftn(np.ones((2, 3)), s=(2, 3), axes=(0,)), ValueError, "s has 2"),
    (lambda: fnp.fft.fft(np.ones(3), axis=1), ValueError, "axis 1 is out of range"),
    (lambda: fnp.fft.fft2(np.ones(3)), ValueError, "out of range"),
    (lambda: fnp.fft.fftfreq(2.5), ValueError, "integer"),
    (lambda: fp.fft(np.ones(4), "fft", (4,)), DTypeError, "complex64 or complex128"),
    (lambda: fp.fft(np.ones(4, complex), "rfft", (4,)), DTypeError, "float32 or float64"),
    (lambda: fp.fft(np.ones((2, 4), complex), "fft", (3,)), ShapeError, r"\(3,\)"),
    (lambda: fp.fft(np.ones(4, complex), "irfft", (4,)), ShapeError, r"\(3,\)"),
    (lambda: fp.fft(np.ones(4, complex), "fft", (4, 1)), ShapeError, "1 to 1 lengths"),
    (lambda: fp.fft(np.ones(4, complex), "dct", (4,)), FunctxError, "fft_type"),
    (lambda: cx.real_p.bind(np.ones(3)), DTypeError, "real needs a complex"),
])
def test_errors(call: Any, err: type, words: str) -> None:
    """Bad arguments raise the documented error types with messages naming the cause."""
    with pytest.raises(err, match=words):
        call()


def test_primitive_errors_at_trace_time() -> None:
    """The shape rule rejects a mismatched operand while tracing, before any computation."""
    with pytest.raises(ShapeError, match="fft"):
        fx.make_trace(lambda v: fp.fft(v, "fft", (5,)))(np.ones(4, complex))


# ----------------------------------------------------------------------------------------
# helpers


@pytest.mark.parametrize("n", [1, 2, 5, 8, 11])
@pytest.mark.parametrize("d", [1.0, 0.25, 3])
def test_fftfreq_rfftfreq(n: int, d: float) -> None:
    for name in ("fftfreq", "rfftfreq"):
        got, want = getattr(fnp.fft, name)(n, d), getattr(np.fft, name)(n, d)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-15)


def test_fftfreq_traced_spacing_is_differentiable() -> None:
    """With a traced d the frequencies k / (n d) are differentiable: d/dd = -k / (n d^2)."""
    w = np.random.default_rng(4).standard_normal(6)
    d = 0.3
    g = fx.grad(lambda d: fnp.sum(w * fnp.fft.fftfreq(6, d)))(d)
    ks = np.fft.fftfreq(6) * 6
    np.testing.assert_allclose(g, -np.sum(w * ks) / (6 * d * d), rtol=1e-12)
    g = fx.grad(lambda d: fnp.sum(fnp.fft.rfftfreq(5, d)))(d)
    np.testing.assert_allclose(g, -np.sum(np.arange(3)) / (5 * d * d), rtol=1e-12)


@pytest.mark.parametrize("axes", [None, 0, 1, -1, (0, 2), (2, 0, 1)])
def test_shifts_match_numpy(axes: Any) -> None:
    x = np.arange(3 * 4 * 5.0).reshape(3, 4, 5)
    np.testing.assert_array_equal(fnp.fft.fftshift(x, axes), np.fft.fftshift(x, axes))
    np.testing.assert_array_equal(fnp.fft.ifftshift(x, axes), np.fft.ifftshift(x, axes))
    np.testing.assert_array_equal(fnp.fft.ifftshift(fnp.fft.fftshift(x, axes), axes), x)


def test_submodule_exports() -> None:
    """functx.numpy.fft is importable and holds NumPy's FFT names."""
    import functx.numpy.fft as fft_module

    assert fnp.fft is fft_module
    assert set(fft_module.__all__) <= set(dir(np.fft))
    for name in fft_module.__all__:
        assert callable(getattr(fft_module, name))


# ----------------------------------------------------------------------------------------
# complex parts


@pytest.mark.parametrize("value", [
    np.array([1 + 2j, -3.5 - 0.5j]), np.array([[1.0, -2.0]]), np.array(3, np.int32),
    np.array([1 + 1j], np.complex64), [1 + 2j, 3.0], 2.5 - 1j,
])
def test_complex_parts_match_numpy(value: Any) -> None:
    for name, ref in (("real", np.real), ("imag", np.imag), ("conj", np.conj),
                      ("conjugate", np.conjugate)):
        got, want = getattr(fnp, name)(value), np.asarray(ref(value))
        assert got.shape == want.shape and got.dtype == want.dtype, (name, got, want)
        np.testing.assert_array_equal(got, want)


def test_complex_parts_gradients_follow_jax() -> None:
    """grad of |z|^2 = re^2 + im^2 is 2 conj(z); of re(z), 1; of im(z), -i (JAX's rules)."""
    rng = np.random.default_rng(5)
    z = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    np.testing.assert_allclose(
        fx.grad(lambda z: fnp.sum(fnp.real(z) ** 2 + fnp.imag(z) ** 2))(z), 2 * np.conj(z))
    np.testing.assert_allclose(fx.grad(lambda z: fnp.sum(fnp.real(z * fnp.conj(z))))(z),
                               2 * np.conj(z))
    np.testing.assert_array_equal(fx.grad(lambda z: fnp.sum(fnp.real(z)))(z), np.ones(4))
    np.testing.assert_array_equal(fx.grad(lambda z: fnp.sum(fnp.imag(z)))(z), -1j * np.ones(4))


def test_complex_gradient_matches_jax() -> None:
    """JAX as the oracle of the complex convention, on an FFT loss of a complex input."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    rng = np.random.default_rng(6)
    z = rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))
    w = rng.standard_normal((3, 8))

    def ours(z):
        y = fnp.fft.fft2(z, s=(3, 8), norm="ortho")
        return fnp.sum(w * fnp.real(y * fnp.conj(y))) + fnp.sum(fnp.imag(y))

    def theirs(z):
        y = jnp.fft.fft2(z, s=(3, 8), norm="ortho")
        return jnp.sum(w * jnp.real(y * jnp.conj(y))) + jnp.sum(jnp.imag(y))

    np.testing.assert_allclose(fx.grad(ours)(z), np.asarray(jax.grad(theirs)(z)),
                               rtol=1e-10, atol=1e-10)
