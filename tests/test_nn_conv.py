"""functx.nn convolutions and pooling against PyTorch (CPU, float64) as the oracle.

Each test draws shapes and options with hypothesis, runs the same call in functx and in
torch.nn.functional, and compares the forward values and the gradients of every
differentiable argument (functx.vjp against torch.autograd.grad with one random
cotangent). Max-pooling inputs have distinct values (PyTorch and functx both send the
gradient to the first maximum; a separate test checks that on ties). Error-message tests
check that bad options fail before any computation, naming the argument and value. The
last tests check the primitive under ``jvp`` and ``vmap`` through the nn wrappers.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import functx as fx
import functx.nn as fnn
from functx.errors import DTypeError, ShapeError
from functx.nn import ArgumentError

torch = pytest.importorskip("torch", reason="PyTorch (CPU) is the oracle of functx.nn's tests")
F = torch.nn.functional
torch.set_num_threads(1)

RTOL, ATOL = 1e-9, 1e-11
few = settings(max_examples=15)


def _tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def check_against_torch(fx_fn: Callable, torch_fn: Callable, args: tuple, seed: int,
                        diff: tuple[int, ...] | None = None) -> None:
    """Forward outputs (all of them) and gradients of the first output agree.

    ``args`` are float64 arrays (None allowed: passed as None to both); ``diff`` the
    indices differentiated (default: every array argument).
    """
    diff = tuple(i for i, a in enumerate(args) if a is not None) if diff is None else diff
    try:
        note(f"shapes {[None if a is None else a.shape for a in args]}")
    except InvalidArgument:  # called outside a hypothesis test
        pass
    tensors = [None if a is None else torch.tensor(a, requires_grad=i in diff)
               for i, a in enumerate(args)]
    want = _tuple(torch_fn(*tensors))
    got = _tuple(fx_fn(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.detach().numpy()
        g = np.asarray(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    ct = np.random.default_rng(seed).standard_normal(tuple(want[0].shape))

    def first(*d: Any) -> Any:
        full = list(args)
        for i, v in zip(diff, d):
            full[i] = v
        return _tuple(fx_fn(*full))[0]

    _, f_vjp = fx.vjp(first, *[args[i] for i in diff])
    g_fx = f_vjp(ct)
    g_t = torch.autograd.grad(want[0], [tensors[i] for i in diff], torch.tensor(ct),
                              allow_unused=True)
    for i, a, b in zip(diff, g_fx, g_t):
        b = np.zeros_like(args[i]) if b is None else b.numpy()
        np.testing.assert_allclose(np.asarray(a), b, rtol=RTOL, atol=ATOL,
                                   err_msg=f"gradient of argument {i}")


def values(draw: Callable, shape: tuple, distinct: bool = False) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if distinct:
        n = int(np.prod(shape))
        return rng.permutation(np.linspace(-2, 2, max(n, 1))[:n]).reshape(shape)
    return rng.uniform(-2, 2, shape)


def per_axis(draw: Callable, nd: int, lo: int, hi: int, as_int: bool = True) -> Any:
    """An int (sometimes, as PyTorch allows) or a tuple of ``nd`` ints in [lo, hi]."""
    if as_int and draw(st.booleans()):
        return draw(st.integers(lo, hi))
    return tuple(draw(st.integers(lo, hi)) for _ in range(nd))


def expand(v: Any, nd: int) -> tuple:
    return (v,) * nd if isinstance(v, int) else tuple(v)


NDS = [1, 2, 3]


# -- convolutions ----------------------------------------------------------------------------

@pytest.mark.parametrize("nd", NDS)
@few
@given(data=st.data())
def test_conv_matches_torch(nd: int, data: Any) -> None:
    draw = data.draw
    groups = draw(st.integers(1, 3))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilation = per_axis(draw, nd, 1, 2)
    stride = per_axis(draw, nd, 1, 3)
    mode = draw(st.sampled_from(["int", "same", "valid"]))
    padding = per_axis(draw, nd, 0, 2) if mode == "int" else mode
    if mode == "same":
        stride = 1
    pads = expand(padding, nd) if mode == "int" else (0,) * nd
    dk = [(k - 1) * d + 1 for k, d in zip(kernel, expand(dilation, nd))]
    sizes = tuple(max(draw(st.integers(1, 6 if nd < 3 else 4)), k - 2 * p)
                  for k, p in zip(dk, pads))
    batch = () if draw(st.integers(0, 4)) == 0 else (draw(st.integers(1, 2)),)
    x = values(draw, batch + (cin,) + sizes)
    w = values(draw, (cout, cin // groups) + kernel)
    b = values(draw, (cout,)) if draw(st.booleans()) else None
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    name = f"conv{nd}d"
    note(f"{name} {kw}")
    check_against_torch(lambda x, w, b: getattr(fnn, name)(x, w, b, **kw),
                        lambda x, w, b: getattr(F, name)(x, w, b, **kw), (x, w, b),
                        draw(st.integers(0, 99)))


@pytest.mark.parametrize("nd", NDS)
@few
@given(data=st.data())
def test_conv_transpose_matches_torch(nd: int, data: Any) -> None:
    draw = data.draw
    groups = draw(st.integers(1, 3))
    cin, cout_g = groups * draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = expand(per_axis(draw, nd, 1, 3), nd)
    dilation = expand(per_axis(draw, nd, 1, 2), nd)
    padding = tuple(draw(st.integers(0, 3)) for _ in range(nd))
    output_padding = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    sizes = []
    for k, s, d, p, op in zip(kernel, stride, dilation, padding, output_padding):
        low = 1  # smallest input with a positive output size
        while (low - 1) * s - 2 * p + d * (k - 1) + op + 1 < 1:
            low += 1
        sizes.append(draw(st.integers(low, low + (3 if nd < 3 else 1))))
    batch = () if draw(st.integers(0, 4)) == 0 else (draw(st.integers(1, 2)),)
    x = values(draw, batch + (cin,) + tuple(sizes))
    w = values(draw, (cin, cout_g) + kernel)
    b = values(draw, (groups * cout_g,)) if draw(st.booleans()) else None
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
              dilation=dilation)
    name = f"conv_transpose{nd}d"
    note(f"{name} {kw}")
    check_against_torch(lambda x, w, b: getattr(fnn, name)(x, w, b, **kw),
                        lambda x, w, b: getattr(F, name)(x, w, b, **kw), (x, w, b),
                        draw(st.integers(0, 99)))


@few
@given(data=st.data())
def test_unfold_and_fold_match_torch(data: Any) -> None:
    draw = data.draw
    kernel = per_axis(draw, 2, 1, 3)
    dilation = per_axis(draw, 2, 1, 2)
    padding = per_axis(draw, 2, 0, 2)
    stride = per_axis(draw, 2, 1, 3)
    dk = [(k - 1) * d + 1 for k, d in zip(expand(kernel, 2), expand(dilation, 2))]
    sizes = tuple(max(draw(st.integers(1, 6)), k - 2 * p)
                  for k, p in zip(dk, expand(padding, 2)))
    batch = () if draw(st.integers(0, 3)) == 0 else (draw(st.integers(1, 2)),)
    c = draw(st.integers(1, 3))
    kw = dict(kernel_size=kernel, dilation=dilation, padding=padding, stride=stride)
    x = values(draw, batch + (c,) + sizes)
    note(f"unfold/fold {kw}")
    seed = draw(st.integers(0, 99))
    check_against_torch(lambda x: fnn.unfold(x, **kw), lambda x: F.unfold(x, **kw), (x,), seed)
    cols = np.asarray(F.unfold(torch.tensor(x), **kw))
    cols = values(draw, cols.shape)
    check_against_torch(lambda c: fnn.fold(c, sizes, **kw), lambda c: F.fold(c, sizes, **kw),
                        (cols,), seed)


# -- pooling ---------------------------------------------------------------------------------

def _pool_setup(draw: Callable, nd: int, with_dilation: bool, min_kernel: bool = False) -> tuple:
    """Options and an input shape; ``min_kernel``: the unpadded input at least as large as
    the kernel (PyTorch's avg_pool3d requires it; functx does not)."""
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = None if draw(st.integers(0, 3)) == 0 else per_axis(draw, nd, 1, 3)
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd)) if with_dilation else (1,) * nd
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    sizes = tuple(max(draw(st.integers(1, 7 if nd < 3 else 4)), e - 2 * p, k if min_kernel else 1)
                  for e, p, k in zip(eff, padding, kernel))
    batch = () if draw(st.integers(0, 4)) == 0 else (draw(st.integers(1, 2)),)
    shape = batch + (draw(st.integers(1, 3)),) + sizes
    return kernel, stride, padding, dilation, draw(st.booleans()), shape


@pytest.mark.parametrize("nd", NDS)
@few
@given(data=st.data())
def test_max_pool_matches_torch(nd: int, data: Any) -> None:
    draw = data.draw
    kernel, stride, padding, dilation, ceil_mode, shape = _pool_setup(draw, nd, True)
    kw = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
              ceil_mode=ceil_mode, return_indices=draw(st.booleans()))
    # PyTorch writes out of bounds for windows that hold only padding (possible with
    # dilation); keep to windows that meet the input.
    for n, k, s, p, d in zip(shape[-nd:], kernel, expand(stride or kernel, nd), padding,
                             dilation):
        out = fnn.conv.pool_out_size(n, k, s, p, d, ceil_mode)
        pos = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
        assume(np.all(np.any((pos >= 0) & (pos < n), axis=1)))
    x = values(draw, shape, distinct=True)
    name = f"max_pool{nd}d"
    note(f"{name} {kw}")
    check_against_torch(lambda x: getattr(fnn, name)(x, **kw),
                        lambda x: getattr(F, name)(x, **kw), (x,), draw(st.integers(0, 99)))


@pytest.mark.parametrize("nd", NDS)
@few
@given(data=st.data())
def test_avg_pool_matches_torch(nd: int, data: Any) -> None:
    draw = data.draw
    kernel, stride, padding, _, ceil_mode, shape = _pool_setup(draw, nd, False, nd == 3)
    kw = dict(kernel_size=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode,
              count_include_pad=draw(st.booleans()))
    if nd > 1 and draw(st.integers(0, 3)) == 0:
        kw["divisor_override"] = draw(st.sampled_from([1, 3, -2]))
    x = values(draw, shape)
    name = f"avg_pool{nd}d"
    note(f"{name} {kw}")
    check_against_torch(lambda x: getattr(fnn, name)(x, **kw),
                        lambda x: getattr(F, name)(x, **kw), (x,), draw(st.integers(0, 99)))


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("nd", NDS)
@few
@given(data=st.data())
def test_adaptive_pool_matches_torch(kind: str, nd: int, data: Any) -> None:
    draw = data.draw
    sizes = tuple(draw(st.integers(1, 7 if nd < 3 else 5)) for _ in range(nd))
    out = tuple(draw(st.integers(1, n + 2)) for n in sizes)
    if nd > 1 and draw(st.booleans()):  # PyTorch takes None (keep the size) from 2-d on
        out = tuple(None if draw(st.integers(0, 3)) == 0 else o for o in out)
    if draw(st.booleans()):
        out = out[0] if out[0] is not None else 1
    batch = () if draw(st.integers(0, 4)) == 0 else (draw(st.integers(1, 2)),)
    x = values(draw, batch + (draw(st.integers(1, 3)),) + sizes, distinct=kind == "max")
    name = f"adaptive_{kind}_pool{nd}d"
    kw = {"return_indices": draw(st.booleans())} if kind == "max" else {}
    note(f"{name} output_size={out} {kw}")
    check_against_torch(lambda x: getattr(fnn, name)(x, out, **kw),
                        lambda x: getattr(F, name)(x, out, **kw), (x,), draw(st.integers(0, 99)))


@pytest.mark.parametrize("fn", ["max_pool2d", "adaptive_max_pool2d"])
def test_max_pool_ties_send_gradient_to_first_maximum(fn: str) -> None:
    x = np.zeros((1, 2, 5, 5))
    x[0, 1, 1:3, 1:4] = 1.0  # a plateau of ties, and all-zero windows
    args = (3,) if fn == "adaptive_max_pool2d" else (3, 2, 1)
    check_against_torch(lambda x: getattr(fnn, fn)(x, *args, return_indices=True),
                        lambda x: getattr(F, fn)(x, *args, return_indices=True), (x,), 0)


def test_float32_results_keep_their_dtype() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    for got, want in [
        (fnn.conv2d(x, w, stride=2, padding=1), F.conv2d(torch.tensor(x), torch.tensor(w),
                                                         stride=2, padding=1)),
        (fnn.max_pool2d(x, 3, 2), F.max_pool2d(torch.tensor(x), 3, 2)),
        (fnn.avg_pool2d(x, 2, ceil_mode=True), F.avg_pool2d(torch.tensor(x), 2, ceil_mode=True)),
    ]:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


# -- errors ----------------------------------------------------------------------------------

X4, W4 = np.ones((2, 4, 5, 5)), np.ones((6, 2, 3, 3))
ERRORS = [
    (lambda: fnn.conv2d(X4, W4, stride=0, groups=2), ArgumentError, r"conv2d: stride must be "
     r"positive, but got stride=0"),
    (lambda: fnn.conv2d(X4, W4, dilation=(1, -1), groups=2), ArgumentError,
     r"dilation must be positive, but got dilation=\(1, -1\)"),
    (lambda: fnn.conv2d(X4, W4, groups=0), ArgumentError, r"groups must be a positive int, but "
     r"got groups=0"),
    (lambda: fnn.conv2d(X4, np.ones((5, 2, 3, 3)), groups=2), ShapeError,
     r"out_channels \(weight.shape\[0\] = 5\) must be divisible by groups=2"),
    (lambda: fnn.conv2d(np.ones((2, 5, 5, 5)), np.ones((6, 1, 3, 3)), groups=2), ShapeError,
     r"5 channels must be divisible by groups=2"),
    (lambda: fnn.conv2d(X4, W4), ShapeError, r"expects input to have 2 channels.*has 4"),
    (lambda: fnn.conv2d(np.ones((1, 2, 2, 2)), W4), ShapeError,
     r"padded input size per channel \(2 x 2\) is smaller than the \(dilated\) kernel size "
     r"\(3 x 3\)"),
    (lambda: fnn.conv2d(X4, W4, padding=-1, groups=2), ArgumentError,
     r"padding must be >= 0, but got padding=-1"),
    (lambda: fnn.conv2d(X4, W4, padding="full", groups=2), ArgumentError,
     r"padding must be 'valid', 'same'.*'full'"),
    (lambda: fnn.conv2d(X4, W4, stride=2, padding="same", groups=2), ArgumentError,
     r"padding='same' is not supported for strided convolutions"),
    (lambda: fnn.conv2d(X4, W4, stride=(1, 2, 3), groups=2), ArgumentError,
     r"stride must be an int or a tuple of 2 ints"),
    (lambda: fnn.conv2d(X4.astype(np.float32), W4, groups=2), DTypeError,
     r"share one dtype.*input float32, weight float64"),
    (lambda: fnn.conv2d(X4.astype(int), W4, groups=2), DTypeError,
     r"input must be a real floating-point array"),
    (lambda: fnn.conv1d(X4, W4), ShapeError, r"conv1d: input must be 2-d .* or 3-d"),
    (lambda: fnn.conv2d(X4, W4, np.ones(5), groups=2), ShapeError, r"bias must have shape \(6,\)"),
    (lambda: fnn.conv_transpose2d(X4, np.ones((4, 2, 3, 3)), stride=2, output_padding=2),
     ArgumentError, r"output_padding must be smaller than either stride or dilation"),
    (lambda: fnn.conv_transpose2d(X4, np.ones((3, 2, 3, 3))), ShapeError,
     r"expects 3 input channels .* has 4"),
    (lambda: fnn.conv_transpose2d(X4, np.ones((4, 2, 1, 1)), padding=3), ShapeError,
     r"output size \(-1 x -1\) .* is not positive"),
    (lambda: fnn.max_pool2d(X4, 3, padding=2), ArgumentError,
     r"padding should be at most half of the kernel size, but got padding=\(2, 2\)"),
    (lambda: fnn.max_pool2d(X4, 0), ArgumentError, r"kernel_size must be positive, but got "
     r"kernel_size=0"),
    (lambda: fnn.max_pool2d(X4, 2, stride=-1), ArgumentError, r"stride must be positive"),
    (lambda: fnn.max_pool2d(X4, 7), ShapeError, r"output size \(0 x 0\) is too small"),
    (lambda: fnn.avg_pool2d(X4, 2, padding=2), ArgumentError,
     r"padding should be at most half of the kernel size"),
    (lambda: fnn.avg_pool2d(X4, 2, divisor_override=0), ArgumentError,
     r"divisor_override must be None or a non-zero int"),
    (lambda: fnn.max_pool2d(X4, 2, ceil_mode=None), ArgumentError,
     r"ceil_mode must be True or False"),
    (lambda: fnn.adaptive_avg_pool2d(X4, (0, 2)), ArgumentError,
     r"output_size must be a positive int"),
    (lambda: fnn.adaptive_max_pool2d(np.ones((2, 0, 3, 3)), 2), ShapeError,
     r"non-zero channel and spatial sizes"),
    (lambda: fnn.unfold(X4, 7), ShapeError, r"no block fits"),
    (lambda: fnn.fold(np.ones((1, 8, 8)), (4, 4), 2), ShapeError,
     r"needs 3 \* 3 = 9 blocks along its last axis, but it has 8"),
    (lambda: fnn.fold(np.ones((1, 7, 9)), (4, 4), 2), ShapeError,
     r"= 7 must be divisible by the product of kernel_size"),
]


@pytest.mark.parametrize("call,exc,pattern", ERRORS, ids=[p[2][:40] for p in ERRORS])
def test_error_messages(call: Callable, exc: type, pattern: str) -> None:
    with pytest.raises(exc, match=pattern):
        call()


def test_errors_come_before_any_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad option raises without binding a single primitive."""
    import functx.tracing

    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a primitive was bound before the arguments were checked")

    monkeypatch.setattr(functx.tracing, "bind", fail)
    monkeypatch.setattr(fx.Primitive, "bind", fail)
    for call, exc, _ in ERRORS:
        with pytest.raises(exc):
            call()


def test_primitive_checks_parameters_eagerly() -> None:
    from functx.primitives.conv import conv_general_dilated

    x, w = np.ones((1, 2, 5)), np.ones((3, 2, 2))
    with pytest.raises(ShapeError, match="window_strides must be positive integers"):
        conv_general_dilated(x, w, (0,), ((0, 0),))
    with pytest.raises(ShapeError, match=r"lhs_dilation=\(1, 1\) needs one entry per spatial"):
        conv_general_dilated(x, w, (1,), ((0, 0),), (1, 1))
    with pytest.raises(ShapeError, match="padding .* crops more than"):
        conv_general_dilated(x, w, (1,), ((-4, -3),))
    with pytest.raises(DTypeError, match="real floating-point operands"):
        conv_general_dilated(x.astype(int), w.astype(int), (1,), ((0, 0),))


# -- other transforms through the wrappers ---------------------------------------------------

def test_conv_under_jvp_and_vmap() -> None:
    """jvp matches finite differences; vmap over input, weight or both matches a loop and
    never falls back to the looping batch rule."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 4, 7, 6))  # vmapped axis 0
    w = rng.standard_normal((3, 6, 2, 3, 2))

    def f(x, w):
        return fnn.conv2d(x, w, stride=(2, 1), padding=1, dilation=(1, 2), groups=2)

    tx, tw = rng.standard_normal(x[0].shape), rng.standard_normal(w[0].shape)
    _, t = fx.jvp(f, (x[0], w[0]), (tx, tw))
    eps = 1e-6
    fd = (f(x[0] + eps * tx, w[0] + eps * tw) - f(x[0] - eps * tx, w[0] - eps * tw)) / (2 * eps)
    np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for in_axes in [(0, None), (None, 0), (0, 0)]:
            got = fx.vmap(f, in_axes=in_axes)(x if in_axes[0] == 0 else x[0],
                                              w if in_axes[1] == 0 else w[0])
            want = np.stack([f(x[i] if in_axes[0] == 0 else x[0],
                               w[i] if in_axes[1] == 0 else w[0]) for i in range(3)])
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_pooling_under_vmap_and_conv_second_order() -> None:
    rng = np.random.default_rng(4)
    x = rng.permutation(np.linspace(-1, 1, 2 * 3 * 6 * 6)).reshape(2, 3, 6, 6)
    f = lambda x: fnn.max_pool2d(x, 3, 2, 1) + fnn.avg_pool2d(x, 2, 2, 1)[..., :3, :3]
    np.testing.assert_allclose(fx.vmap(f)(x), np.stack([f(v) for v in x]), rtol=1e-12)

    w = rng.standard_normal((4, 3, 3, 3))

    def h(w):  # a function of the input gradient: differentiating it goes through the VJP
        gx = fx.grad(lambda x: fnn.conv2d(x, w, stride=2, padding=1).__pow__(3).sum())(x)
        return (gx * gx).sum()

    v = rng.standard_normal(w.shape)
    eps = 1e-6
    fd = (h(w + eps * v) - h(w - eps * v)) / (2 * eps)
    np.testing.assert_allclose(np.sum(fx.grad(h)(w) * v), fd, rtol=1e-6)
