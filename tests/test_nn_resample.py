"""functx.nn resampling (interpolate, grid_sample) and deform_conv2d.

interpolate and grid_sample are checked against PyTorch (CPU, float64) as the oracle:
hypothesis draws shapes and options, the same call runs in both, and the forward values and
the gradients of every differentiable argument (functx.vjp against torch.autograd.grad
with one random cotangent) must agree. Grids reach beyond [-1, 1] and include the exact
values -1, 0 and 1 (where PyTorch's border conventions for gradients matter).

deform_conv2d is checked against torchvision.ops.deform_conv2d when torchvision is
importable, and always against a NumPy reference written here with explicit loops over
output pixels, channels and kernel taps (per-point bilinear sampling); its gradients are
checked numerically (finite differences and the JVP/VJP dot-product test), at offsets
whose sampling positions keep away from the integer grid where bilinear sampling has kinks.

interpolate's gradient is also checked against the transpose of PyTorch's forward map (its
Jacobian, from the forward of one-hot images), which is the only gradient oracle where
PyTorch's own backward disagrees with its forward (see _torch_backward_is_transpose).

The last tests check vmap (against a loop) and jvp through all three, the deprecated
upsample aliases, and that bad arguments fail before any computation with clear errors.
"""
from __future__ import annotations

import importlib.util
import warnings
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import functx as fx
import functx.nn as fnn
from functx.errors import DTypeError, ShapeError
from functx.nn import ArgumentError
from functx.test_util import check_grads

torch = pytest.importorskip("torch", reason="PyTorch (CPU) is the oracle of functx.nn's tests")
F = torch.nn.functional
torch.set_num_threads(1)

RTOL, ATOL = 1e-9, 1e-11
few = settings(max_examples=12)


def check_against_torch(fx_fn: Callable, torch_fn: Callable, args: tuple, seed: int) -> None:
    """Forward values and the gradients of all ``args`` agree with PyTorch's."""
    tensors = [torch.tensor(a, requires_grad=True) for a in args]
    want = torch_fn(*tensors)
    got = np.asarray(fx_fn(*args))
    assert got.shape == tuple(want.shape), (got.shape, tuple(want.shape))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=RTOL, atol=ATOL)
    ct = np.random.default_rng(seed).standard_normal(got.shape)
    _, f_vjp = fx.vjp(fx_fn, *args)
    grads_fx = f_vjp(ct)
    grads_t = torch.autograd.grad(want, tensors, torch.tensor(ct), allow_unused=True)
    for i, (a, b) in enumerate(zip(grads_fx, grads_t)):
        b = np.zeros_like(args[i]) if b is None else b.numpy()
        np.testing.assert_allclose(np.asarray(a), b, rtol=RTOL, atol=ATOL,
                                   err_msg=f"gradient of argument {i}")


def rng_of(draw: Callable) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


# -- interpolate ------------------------------------------------------------------------------

MODE_NDIM = {"nearest": None, "nearest-exact": None, "area": None, "linear": 3,
             "bilinear": 4, "bicubic": 4, "trilinear": 5}


@pytest.mark.parametrize("mode", list(MODE_NDIM))
@few
@given(data=st.data())
def test_interpolate_matches_torch(mode: str, data: Any) -> None:
    draw = data.draw
    ndim = MODE_NDIM[mode] or draw(st.sampled_from([3, 4, 5]))
    d = ndim - 2
    spatial = tuple(draw(st.integers(1, 7 if d < 3 else 4)) for _ in range(d))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) + spatial
    kw: dict[str, Any] = {}
    if draw(st.booleans()):
        sizes = tuple(draw(st.integers(1, 9 if d < 3 else 5)) for _ in range(d))
        kw["size"] = sizes[0] if draw(st.booleans()) else sizes
    else:
        factor = st.sampled_from([0.5, 0.37, 1.0, 1.1, 1.5, 2.0, 2.1, 2.5, 3.0])
        factors = [draw(factor) for _ in range(d)]
        factors = tuple(f if int(n * f) >= 1 else 1.0 for n, f in zip(spatial, factors))
        one = len(set(factors)) == 1 and draw(st.booleans())
        kw["scale_factor"] = factors[0] if one else factors
        if draw(st.booleans()):
            kw["recompute_scale_factor"] = draw(st.booleans())
    if MODE_NDIM[mode] is not None:
        kw["align_corners"] = draw(st.sampled_from([None, False, True]))
    if mode in ("bilinear", "bicubic"):
        kw["antialias"] = draw(st.booleans())
        if kw["antialias"] and _output_sizes(spatial, kw)[1] == 1:
            kw["antialias"] = False  # PyTorch bug: see test_interpolate_antialias_width_one
    note(f"shape {shape}, mode {mode}, {kw}")
    x = rng_of(draw).uniform(-2, 2, shape)
    check_interpolate(mode, kw, x, draw(st.integers(0, 2**31)))


@pytest.mark.parametrize("mode", ["bicubic", "bilinear", "linear"])
@pytest.mark.parametrize("align_corners", [None, False, True])
def test_interpolate_scale_factor_keeping_the_size(mode: str, align_corners: Any) -> None:
    """A scale factor (not 1) that leaves an axis's size unchanged still resamples it: the
    forward applies the factor, and so does the gradient (PyTorch's bicubic backward copies
    the axis instead; hypothesis found shape (1, 1, 1, 2) with factors (1.0, 1.1))."""
    shape = (1, 1, 1, 2) if mode != "linear" else (1, 1, 2)
    kw = {"scale_factor": (1.0, 1.1) if mode != "linear" else 1.1,
          "align_corners": align_corners}
    check_interpolate(mode, kw, np.array([0.3, -0.7]).reshape(shape), 0)


def check_interpolate(mode: str, kw: dict, x: np.ndarray, seed: int) -> None:
    """interpolate(x, mode, **kw): values and gradient against PyTorch's, or (where PyTorch's
    backward is not the transpose of its forward) the gradient against that transpose."""
    shape = x.shape
    spatial = shape[2:]
    fx_fn = lambda a: fnn.interpolate(a, mode=mode, **kw)  # noqa: E731
    torch_fn = lambda a: F.interpolate(a, mode=mode, **kw)  # noqa: E731
    if _torch_backward_is_transpose(mode, spatial, kw):
        check_against_torch(fx_fn, torch_fn, (x,), seed)
    # Always: the gradient is the transpose of PyTorch's forward map (interpolate is linear
    # and acts on each channel alike: its Jacobian is the forward of the one-hot images).
    one_hots = np.eye(int(np.prod(spatial))).reshape((-1, 1) + spatial)
    jac = torch_fn(torch.tensor(one_hots)).numpy().reshape(len(one_hots), -1)
    ct = np.random.default_rng(seed).standard_normal(np.shape(fx_fn(x)))
    want = (ct.reshape(shape[:2] + (1, -1)) * jac).sum(-1).reshape(shape)
    _, f_vjp = fx.vjp(fx_fn, x)
    np.testing.assert_allclose(f_vjp(ct)[0], want, rtol=RTOL, atol=ATOL)


def _torch_backward_is_transpose(mode: str, spatial: tuple, kw: dict) -> bool:
    """False where PyTorch's backward is not the transpose of its own forward (torch 2.13).

    With a scale factor (not recomputed) that leaves an axis's size unchanged, or for
    "nearest" exactly doubles it, PyTorch's forward and backward kernels disagree: 1-d/3-d
    "nearest" forward applies the scale-factor formula while its backward copies the axis
    (or halves the indices); antialiased forward copies the unchanged axis while its
    backward applies the filter; "bicubic" (without align_corners) forward applies the
    scale factor while its backward copies the axis. (2-d "nearest" copies in both.) functx
    follows the forward; in those cases its gradient is checked against the transpose of
    PyTorch's forward only.
    """
    if "scale_factor" not in kw or kw.get("recompute_scale_factor"):
        return True
    sf = kw["scale_factor"]
    factors = sf if isinstance(sf, tuple) else (sf,) * len(spatial)
    if mode == "nearest" and len(spatial) != 2:
        return not any(int(n * f) in (n, 2 * n) and f not in (1.0, 2.0)
                       for n, f in zip(spatial, factors))
    if kw.get("antialias") or (mode == "bicubic" and not kw.get("align_corners")):
        return not any(int(n * f) == n and f != 1.0 for n, f in zip(spatial, factors))
    return True


def _output_sizes(spatial: tuple, kw: dict) -> tuple:
    if "size" in kw:
        size = kw["size"]
        return size if isinstance(size, tuple) else (size,) * len(spatial)
    sf = kw["scale_factor"]
    factors = sf if isinstance(sf, tuple) else (sf,) * len(spatial)
    return tuple(int(n * f) for n, f in zip(spatial, factors))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_antialias_width_one(mode: str) -> None:
    """Antialiased resizing to a width of 1 resamples the height like any other width.

    (torch 2.13's antialiased kernels repeat the first output row whenever the output width
    is 1 and its height is not, so PyTorch is the oracle only for a duplicated column.)
    """
    x = np.random.default_rng(7).standard_normal((2, 3, 5, 1))
    got = np.asarray(fnn.interpolate(x, size=(7, 1), mode=mode, antialias=True))
    wide = F.interpolate(torch.tensor(np.concatenate([x, x], -1)), size=(7, 2), mode=mode,
                         antialias=True).numpy()
    np.testing.assert_allclose(got[..., 0], wide[..., 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[..., 0], wide[..., 1], rtol=1e-12, atol=1e-12)


def test_interpolate_nearest_keeps_integer_dtype() -> None:
    x = np.arange(12, dtype=np.int32).reshape(1, 1, 3, 4)
    got = np.asarray(fnn.interpolate(x, scale_factor=2))
    want = F.interpolate(torch.tensor(x).double(), scale_factor=2).numpy()
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


# -- grid_sample ------------------------------------------------------------------------------

@pytest.mark.parametrize("d,mode", [(2, "bilinear"), (2, "nearest"), (2, "bicubic"),
                                    (3, "bilinear"), (3, "nearest")])
@few
@given(data=st.data())
def test_grid_sample_matches_torch(d: int, mode: str, data: Any) -> None:
    draw = data.draw
    rng = rng_of(draw)
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    spatial = tuple(draw(st.integers(1, 5 if d == 2 else 4)) for _ in range(d))
    points = tuple(draw(st.integers(1, 4 if d == 2 else 3)) for _ in range(d))
    padding_mode = draw(st.sampled_from(["zeros", "border", "reflection"]))
    align_corners = draw(st.booleans())
    x = rng.uniform(-2, 2, (n, c) + spatial)
    reach = draw(st.sampled_from([1.0, 1.5, 3.5]))
    grid = rng.uniform(-reach, reach, (n,) + points + (d,))
    if draw(st.booleans()):  # exact corners, centres and borders
        special = rng.random(grid.shape) < 0.3
        grid[special] = rng.choice([-1.0, 0.0, 1.0], size=int(special.sum()))
    note(f"x {x.shape}, grid {grid.shape}, {mode}, {padding_mode}, {align_corners}")
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    check_against_torch(lambda a, g: fnn.grid_sample(a, g, **kw),
                        lambda a, g: F.grid_sample(a, g, **kw), (x, grid),
                        draw(st.integers(0, 2**31)))


def test_grid_sample_float32_matches_torch() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, 4, 3, 2)).astype(np.float32)
    got = np.asarray(fnn.grid_sample(x, grid, mode="bicubic", align_corners=True))
    want = F.grid_sample(torch.tensor(x), torch.tensor(grid), mode="bicubic",
                         align_corners=True).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_grid_sample_default_align_corners_warns_and_is_false() -> None:
    rng = np.random.default_rng(1)
    x, grid = rng.standard_normal((1, 2, 4, 4)), rng.uniform(-1, 1, (1, 3, 3, 2))
    with pytest.warns(UserWarning, match="align_corners"):
        got = fnn.grid_sample(x, grid)
    np.testing.assert_array_equal(got, fnn.grid_sample(x, grid, align_corners=False))


# -- deform_conv2d ----------------------------------------------------------------------------

def deform_conv2d_reference(x: np.ndarray, offset: np.ndarray, weight: np.ndarray,
                            bias: np.ndarray | None, stride: tuple, padding: tuple,
                            dilation: tuple, mask: np.ndarray | None) -> np.ndarray:
    """torchvision's deform_conv2d written out point by point (explicit loops)."""
    n_, cin, h, w = x.shape
    cout, cin_g, kh, kw = weight.shape
    taps = kh * kw
    ogroups, wgroups = offset.shape[1] // (2 * taps), cin // cin_g
    ho, wo = offset.shape[2:]

    def bilinear(img: np.ndarray, y: float, xx: float) -> float:
        if y <= -1 or y >= h or xx <= -1 or xx >= w:
            return 0.0
        y0, x0 = int(np.floor(y)), int(np.floor(xx))
        ly, lx = y - y0, xx - x0
        value = 0.0
        for yy, wy in ((y0, 1 - ly), (y0 + 1, ly)):
            for xc, wx in ((x0, 1 - lx), (x0 + 1, lx)):
                if 0 <= yy < h and 0 <= xc < w:
                    value += wy * wx * img[yy, xc]
        return value

    out = np.zeros((n_, cout, ho, wo))
    for n in range(n_):
        for o in range(cout):
            wg = o // (cout // wgroups)
            for i_out in range(ho):
                for j_out in range(wo):
                    acc = 0.0 if bias is None else bias[o]
                    for cl in range(cin_g):
                        c = wg * cin_g + cl
                        g = c // (cin // ogroups)
                        for i in range(kh):
                            for j in range(kw):
                                k = i * kw + j
                                y = (i_out * stride[0] - padding[0] + i * dilation[0]
                                     + offset[n, g * 2 * taps + 2 * k, i_out, j_out])
                                xx = (j_out * stride[1] - padding[1] + j * dilation[1]
                                      + offset[n, g * 2 * taps + 2 * k + 1, i_out, j_out])
                                v = bilinear(x[n, c], y, xx)
                                if mask is not None:
                                    v *= mask[n, g * taps + k, i_out, j_out]
                                acc += weight[o, cl, i, j] * v
                    out[n, o, i_out, j_out] = acc
    return out


@st.composite
def deform_cases(draw: Callable) -> dict:
    rng = rng_of(draw)
    wgroups, ogroups = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    cin = wgroups * ogroups * draw(st.integers(1, 2))
    cout = wgroups * draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, dilation[0] * (kh - 1) + 1 - 2 * padding[0]), 5))
    w = draw(st.integers(max(1, dilation[1] * (kw - 1) + 1 - 2 * padding[1]), 5))
    ho = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    n = draw(st.integers(1, 2))
    # Offsets = integer + fraction in [0.15, 0.85]: positions keep off the bilinear kinks.
    whole = rng.integers(-3, 3, (n, 2 * ogroups * kh * kw, ho, wo))
    offset = whole + rng.uniform(0.15, 0.85, whole.shape) * rng.choice([-1, 1], whole.shape)
    return dict(
        input=rng.uniform(-2, 2, (n, cin, h, w)), offset=offset,
        weight=rng.uniform(-1, 1, (cout, cin // wgroups, kh, kw)),
        bias=rng.uniform(-1, 1, (cout,)) if draw(st.booleans()) else None,
        mask=rng.uniform(0, 1.5, (n, ogroups * kh * kw, ho, wo)) if draw(st.booleans())
        else None,
        stride=stride, padding=padding, dilation=dilation)


@settings(max_examples=10)
@given(case=deform_cases())
def test_deform_conv2d_matches_loop_reference(case: dict) -> None:
    note({k: getattr(v, "shape", v) for k, v in case.items()})
    got = np.asarray(fnn.deform_conv2d(**case))
    want = deform_conv2d_reference(case["input"], case["offset"], case["weight"],
                                   case["bias"], case["stride"], case["padding"],
                                   case["dilation"], case["mask"])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=6)
@given(case=deform_cases())
def test_deform_conv2d_gradients(case: dict) -> None:
    """Every differentiable argument: JVP against central finite differences, VJP against
    JVP (check_grads), to second order."""
    names = [k for k in ("input", "offset", "weight", "bias", "mask") if case[k] is not None]
    static = {k: v for k, v in case.items() if k not in names}

    def f(*arrays: Any) -> Any:
        return fnn.deform_conv2d(**dict(zip(names, arrays)), **static)
    check_grads(f, tuple(case[k] for k in names), order=2, eps=1e-5)


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                    reason="torchvision is an optional oracle; the loop reference always runs")
@settings(max_examples=10)
@given(case=deform_cases())
def test_deform_conv2d_matches_torchvision(case: dict) -> None:
    from torchvision.ops import deform_conv2d as tv_deform_conv2d

    names = [k for k in ("input", "offset", "weight", "bias", "mask") if case[k] is not None]
    static = {k: v for k, v in case.items() if k not in names}
    check_against_torch(
        lambda *a: fnn.deform_conv2d(**dict(zip(names, a)), **static),
        lambda *a: tv_deform_conv2d(**dict(zip(names, a)), **static),
        tuple(case[k] for k in names), 0)


def test_deform_conv2d_with_zero_offsets_is_conv2d() -> None:
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((2, 4, 6, 5)), rng.standard_normal((6, 2, 3, 2)), \
        rng.standard_normal(6)
    offset = np.zeros((2, 2 * 2 * 3 * 2, 3, 5))  # two offset groups
    got = fnn.deform_conv2d(x, offset, w, b, stride=(2, 1), padding=1, dilation=(1, 2))
    want = F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), stride=(2, 1),
                    padding=1, dilation=(1, 2), groups=2).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# -- transforms: vmap against a loop, jvp against finite differences ----------------------------

def _vmap_matches_loop(f: Callable, *batched: np.ndarray) -> None:
    got = np.asarray(fx.vmap(f)(*batched))
    want = np.stack([np.asarray(f(*ex)) for ex in zip(*batched)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_transforms_through_interpolate() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 1, 2, 4, 5))

    def bicubic(a: Any) -> Any:
        return fnn.interpolate(a, size=(6, 3), mode="bicubic", align_corners=False)

    def trilinear(a: Any) -> Any:
        return fnn.interpolate(a[:, :, None], scale_factor=(1.0, 1.5, 0.6),
                               mode="trilinear")
    for f in (bicubic, trilinear):
        _vmap_matches_loop(f, x)
        check_grads(f, (x[0],), order=2)


def test_transforms_through_grid_sample() -> None:
    rng = np.random.default_rng(4)
    x, grid = rng.standard_normal((3, 1, 2, 5, 4)), rng.uniform(-1.4, 1.4, (3, 1, 3, 2, 2))
    for mode, padding_mode in (("bilinear", "zeros"), ("bicubic", "reflection"),
                               ("bilinear", "border")):
        def f(a: Any, g: Any) -> Any:
            return fnn.grid_sample(a, g, mode=mode, padding_mode=padding_mode,
                                   align_corners=False)
        _vmap_matches_loop(f, x, grid)
        check_grads(f, (x[0], grid[0]), order=1, eps=1e-6)
        # vmap of the VJP: per-example gradients equal a loop of gradients
        per_example = fx.vmap(fx.grad(lambda a, g: fx.numpy.sum(f(a, g) ** 2), argnums=1))
        got = np.asarray(per_example(x, grid))
        for i in range(3):
            want = fx.grad(lambda a, g: fx.numpy.sum(f(a, g) ** 2), argnums=1)(x[i], grid[i])
            np.testing.assert_allclose(got[i], want, rtol=1e-12, atol=1e-12)


def test_transforms_through_deform_conv2d() -> None:
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 1, 2, 5, 5)), rng.standard_normal((3, 2, 2, 2))
    offset = rng.integers(-2, 2, (2, 1, 8, 4, 4)) + rng.uniform(0.2, 0.8, (2, 1, 8, 4, 4))
    mask = rng.uniform(0, 1, (2, 1, 4, 4, 4))

    def f(a: Any, off: Any, m: Any) -> Any:
        return fnn.deform_conv2d(a, off, w, mask=m)
    _vmap_matches_loop(f, x, offset, mask)
    primal, tangent = fx.jvp(f, (x[0], offset[0], mask[0]),
                             (np.ones_like(x[0]), np.ones_like(offset[0]), mask[0]))
    eps = 1e-6
    numeric = (np.asarray(f(x[0] + eps, offset[0] + eps, mask[0] * (1 + eps)))
               - np.asarray(f(x[0] - eps, offset[0] - eps, mask[0] * (1 - eps)))) / (2 * eps)
    np.testing.assert_allclose(primal, f(x[0], offset[0], mask[0]), rtol=1e-12)
    np.testing.assert_allclose(tangent, numeric, rtol=1e-6, atol=1e-7)


# -- deprecated aliases -----------------------------------------------------------------------

@pytest.mark.parametrize("alias,kwargs", [
    ("upsample", dict(scale_factor=2, mode="bilinear", align_corners=False)),
    ("upsample_nearest", dict(size=(5, 3))),
    ("upsample_bilinear", dict(scale_factor=1.5)),
])
def test_upsample_aliases(alias: str, kwargs: dict) -> None:
    x = np.random.default_rng(6).standard_normal((1, 2, 3, 4))
    with pytest.warns(UserWarning, match="deprecated.*interpolate"):
        got = getattr(fnn, alias)(x, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(F, alias)(torch.tensor(x), **kwargs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# -- errors -----------------------------------------------------------------------------------

X3, X4, X5 = np.ones((1, 2, 4)), np.ones((1, 2, 4, 4)), np.ones((1, 2, 3, 3, 3))
G4 = np.zeros((1, 2, 2, 2))
W33 = np.ones((2, 2, 3, 3))
OFF = np.zeros((1, 18, 2, 2))

ERRORS = [
    (lambda: fnn.interpolate(X4, size=3, scale_factor=2), ArgumentError,
     r"only one of size or scale_factor.*size=3.*scale_factor=2"),
    (lambda: fnn.interpolate(X4), ArgumentError, "either size or scale_factor"),
    (lambda: fnn.interpolate(X4, size=3, mode="cubic"), ArgumentError, "mode.*'cubic'"),
    (lambda: fnn.interpolate(X3, size=3, mode="bilinear"), ArgumentError,
     r"mode 'bilinear' needs a 4-d input.*\(1, 2, 4\).*'linear'"),
    (lambda: fnn.interpolate(X5, size=3, mode="bicubic"), ArgumentError,
     "mode 'bicubic' needs a 4-d"),
    (lambda: fnn.interpolate(X4, size=3, mode="linear"), ArgumentError,
     "mode 'linear' needs a 3-d"),
    (lambda: fnn.interpolate(X4, size=3, align_corners=True), ArgumentError,
     "align_corners.*mode='nearest'"),
    (lambda: fnn.interpolate(X4, size=(3, 3, 3)), ArgumentError,
     r"spatial dimensions.*size=\(3, 3, 3\)"),
    (lambda: fnn.interpolate(X4, size=2.5), ArgumentError, "size must be an int"),
    (lambda: fnn.interpolate(X4, scale_factor=-1), ArgumentError,
     "scale_factor must be positive"),
    (lambda: fnn.interpolate(X4, scale_factor=0.1), ShapeError, r"output sizes \[0, 0\]"),
    (lambda: fnn.interpolate(X4, size=3, recompute_scale_factor=True), ArgumentError,
     "recompute_scale_factor"),
    (lambda: fnn.interpolate(X3, size=3, mode="linear", antialias=True), ArgumentError,
     "antialias"),
    (lambda: fnn.interpolate(np.ones((2, 4)), size=3), ShapeError, r"3-d, 4-d or 5-d"),
    (lambda: fnn.interpolate(np.ones((1, 1, 4), np.int64), size=3, mode="linear"),
     DTypeError, "int64"),
    (lambda: fnn.grid_sample(X4, G4, mode="cubic", align_corners=False), ArgumentError,
     "mode.*'cubic'"),
    (lambda: fnn.grid_sample(X4, G4, padding_mode="wrap", align_corners=False),
     ArgumentError, "padding_mode.*'wrap'"),
    (lambda: fnn.grid_sample(X4, np.zeros((1, 2, 2, 3)), align_corners=False), ShapeError,
     r"size 2 in its last dimension.*\(1, 2, 2, 3\)"),
    (lambda: fnn.grid_sample(X4, np.zeros((2, 2, 2, 2)), align_corners=False), ShapeError,
     "same batch size"),
    (lambda: fnn.grid_sample(X4, np.zeros((1, 2, 2, 2, 2)), align_corners=False), ShapeError,
     "same number of dimensions"),
    (lambda: fnn.grid_sample(X5, np.zeros((1, 2, 2, 2, 3)), mode="bicubic",
                             align_corners=False), ArgumentError, "bicubic.*4-d"),
    (lambda: fnn.grid_sample(X4, G4.astype(np.float32), align_corners=False), DTypeError,
     "float32"),
    (lambda: fnn.grid_sample(X4, G4, align_corners="yes"), ArgumentError, "align_corners"),
    (lambda: fnn.deform_conv2d(X4, np.zeros((1, 10, 2, 2)), W33), ShapeError,
     r"offset.shape\[1\] must be a positive multiple of 2 \* kh \* kw = 18"),
    (lambda: fnn.deform_conv2d(X4, np.zeros((1, 18, 3, 3)), W33), ShapeError,
     r"offset must have shape \(1, 18, 2, 2\)"),
    (lambda: fnn.deform_conv2d(X4, OFF, W33, mask=np.ones((1, 18, 2, 2))), ShapeError,
     r"mask must have shape \(1, 9, 2, 2\)"),
    (lambda: fnn.deform_conv2d(X4, OFF, np.ones((2, 3, 3, 3))), ShapeError,
     r"multiple of weight.shape\[1\] = 3"),
    (lambda: fnn.deform_conv2d(X4, np.zeros((1, 54, 2, 2)), W33), ShapeError,
     "divisible by the 3 offset groups"),
    (lambda: fnn.deform_conv2d(X4, OFF, W33, bias=np.ones(3)), ShapeError,
     r"bias must have shape \(2,\)"),
    (lambda: fnn.deform_conv2d(X4, OFF, W33, stride=0), ArgumentError, "stride"),
    (lambda: fnn.deform_conv2d(X4, np.zeros((1, 50, 1, 1)), np.ones((2, 2, 5, 5))), ShapeError,
     "output size"),
    (lambda: fnn.deform_conv2d(X3, OFF, W33), ShapeError, "input must be 4-d"),
]


@pytest.mark.parametrize("call,error,pattern", ERRORS)
def test_errors(call: Callable, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        call()
