"""functx.nn against PyTorch's torch.nn.functional (CPU, float64) as the oracle.

Every function is one or more rows of CASES: a builder draws shapes, values and options with
hypothesis and returns the same call written for functx and for PyTorch. The runner checks
the forward values (shape, dtype kind, value) and the gradients: functx.vjp against
torch.autograd.grad with the same random cotangent, for every differentiable argument.
Values are drawn away from the kinks of piecewise functions, where finite precision would
make the two sides pick different branches. A few tests check error messages.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import functx as fx
import functx.nn as fnn
from functx.errors import DTypeError, ShapeError
from tests.strategies import array, int_array, shapes

torch = pytest.importorskip("torch", reason="PyTorch (CPU) is the oracle of functx.nn's tests")
F = torch.nn.functional
torch.set_num_threads(1)

RTOL, ATOL = 1e-9, 1e-11


@attrs.define
class Example:
    """One call, for both libraries: ``fx(*diff)`` and ``torch(*diff_tensors)``.

    ``diff`` holds the float64 arrays to differentiate; everything else is closed over.
    Outputs may be tuples (batch_norm's running statistics); the gradient is checked for
    the first output.
    """

    fx: Callable
    torch: Callable
    diff: tuple = ()
    grad_rtol: float = RTOL


def _tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _to_numpy(t: Any) -> Any:
    return None if t is None else t.detach().numpy()


def run_example(ex: Example, seed: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _tuple(ex.fx(*ex.diff))
        tensors = [torch.tensor(a, requires_grad=True) for a in ex.diff]
        want = _tuple(ex.torch(*tensors))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        w = _to_numpy(w)
        g = np.asarray(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype.kind == w.dtype.kind, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True)
    out = want[0]
    if not ex.diff or not out.requires_grad:
        return
    ct = np.random.default_rng(seed).normal(size=tuple(out.shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, f_vjp = fx.vjp(lambda *a: _tuple(ex.fx(*a))[0], *ex.diff)
        g_fx = f_vjp(ct)
    g_t = torch.autograd.grad(out, tensors, torch.tensor(ct), allow_unused=True)
    for i, (a, b) in enumerate(zip(g_fx, g_t)):
        b = np.zeros_like(ex.diff[i]) if b is None else _to_numpy(b)
        np.testing.assert_allclose(np.asarray(a), b, rtol=ex.grad_rtol, atol=ATOL, equal_nan=True,
                                   err_msg=f"gradient of differentiable argument {i}")


def T(a: Any) -> Any:
    """A constant (non-differentiated) tensor for the torch side."""
    return None if a is None else torch.tensor(np.asarray(a))


# ----------------------------------------------------------------------------------------
# builders: each takes hypothesis' draw and returns an Example

def _elementwise(name: str, torch_name: str | None = None, lo: float = -4.0, hi: float = 4.0,
                 away: tuple = (), options: Callable | None = None,
                 grad_rtol: float = RTOL) -> Callable:
    def build(draw: Callable) -> Example:
        shape = draw(shapes(max_rank=3))
        kw = options(draw) if options else {}
        extra_away = kw.pop("_away", ())
        x = draw(array(shape, lo, hi, away_from=away + extra_away))
        tf = getattr(F, torch_name or name)
        return Example(lambda x: getattr(fnn, name)(x, **kw), lambda x: tf(x, **kw), (x,),
                       grad_rtol)
    return build


def _floats(lo: float, hi: float) -> st.SearchStrategy:
    return st.floats(lo, hi, allow_nan=False).map(lambda v: round(v, 3))


def _softplus_options(draw: Callable) -> dict:
    beta = draw(st.sampled_from([1.0, 0.5, 2.0, -1.5]))
    threshold = draw(st.sampled_from([20.0, 1.0, 3.0]))
    return {"beta": beta, "threshold": threshold, "_away": (threshold / beta,)}


def _hardtanh_options(draw: Callable) -> dict:
    lo = draw(_floats(-3.0, 0.0))
    hi = lo + draw(_floats(0.5, 4.0))
    return {"min_val": lo, "max_val": hi, "_away": (lo, hi)}


def _with_dim(name: str, even: bool = False) -> Callable:
    def build(draw: Callable) -> Example:
        shape = list(draw(shapes(min_rank=1, max_rank=3)))
        dim = draw(st.integers(-len(shape), len(shape) - 1))
        if even:
            shape[dim] = 2 * draw(st.integers(0, 2))
        x = draw(array(tuple(shape), -5.0, 5.0))
        kw = {"dim": dim}
        return Example(lambda x: getattr(fnn, name)(x, **kw), lambda x: getattr(F, name)(x, **kw),
                       (x,))
    return build


def build_linear(draw: Callable) -> Example:
    batch = draw(shapes(max_rank=2))
    n_in, n_out = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    x = draw(array(batch + (n_in,)))
    w = draw(array((n_out, n_in) if draw(st.booleans()) else (n_in,)))
    # (PyTorch's addmm path rejects a 1-d weight with a bias for 2-d inputs)
    with_bias = draw(st.booleans()) and (w.ndim == 2 or x.ndim != 2)
    bias = draw(array(w.shape[:1] if w.ndim == 2 else ())) if with_bias else None
    if bias is None:
        return Example(fnn.linear, F.linear, (x, w))
    return Example(fnn.linear, F.linear, (x, w, bias))


def build_embedding(draw: Callable) -> Example:
    n, d = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    idx = draw(int_array(draw(shapes(max_rank=2, max_side=5)), 0, n))
    w = draw(array((n, d)))
    kw = {}
    if draw(st.booleans()):
        kw["padding_idx"] = draw(st.integers(-n, n - 1))
    if draw(st.booleans()):
        kw["scale_grad_by_freq"] = True
    if draw(st.booleans()):
        kw["max_norm"] = draw(_floats(0.3, 2.0))
        kw["norm_type"] = draw(st.sampled_from([2.0, 1.0, 3.0]))

    def torch_side(w: Any) -> Any:
        # PyTorch renormalises weight in place (under no_grad) when max_norm is given: give
        # it a copy, as the functx call leaves weight alone.
        return F.embedding(T(idx), w.clone() if "max_norm" in kw else w, **kw)
    return Example(lambda w: fnn.embedding(idx, w, **kw), torch_side, (w,))


def build_one_hot(draw: Callable) -> Example:
    k = draw(st.integers(1, 5))
    idx = draw(int_array(draw(shapes(max_rank=2)), 0, k))
    num = draw(st.sampled_from([-1, k, k + 2])) if idx.size else draw(st.sampled_from([k, k + 2]))
    return Example(lambda: fnn.one_hot(idx, num), lambda: F.one_hot(T(idx), num))


def build_pad(draw: Callable) -> Example:
    mode = draw(st.sampled_from(["constant", "reflect", "replicate", "circular"]))
    if mode == "constant":
        shape = draw(shapes(min_rank=1, max_rank=4, max_side=4))
        n_pairs = draw(st.integers(1, len(shape)))
    else:
        n_pairs = draw(st.integers(1, 3))
        rank = n_pairs + draw(st.integers(1, 2))
        shape = draw(shapes(min_rank=rank, max_rank=rank, min_side=1, max_side=4))
    pad = []
    for i in range(n_pairs):
        n = shape[len(shape) - 1 - i]
        if mode == "constant":
            lo = draw(st.integers(-(n // 2), 3))
            hi = draw(st.integers(-(n - max(-lo, 0)), 3))
        elif mode == "reflect":
            lo, hi = draw(st.integers(-1, n - 1)), draw(st.integers(-1, n - 1))
            lo, hi = (lo, hi) if -min(lo, 0) - min(hi, 0) < n else (max(lo, 0), max(hi, 0))
        elif mode == "replicate":
            lo, hi = draw(st.integers(-1, 3)), draw(st.integers(-1, 3))
            lo, hi = (lo, hi) if -min(lo, 0) - min(hi, 0) < n else (max(lo, 0), max(hi, 0))
        else:
            lo, hi = draw(st.integers(0, n)), draw(st.integers(0, n))
        pad += [lo, hi]
    x = draw(array(shape))
    kw = {"mode": mode}
    if mode == "constant" and draw(st.booleans()):
        kw["value"] = draw(_floats(-2.0, 2.0))
    return Example(lambda x: fnn.pad(x, tuple(pad), **kw), lambda x: F.pad(x, tuple(pad), **kw),
                   (x,))


def _optional(draw: Callable, shape: tuple, lo: float = -2.0, hi: float = 2.0) -> Any:
    return draw(array(shape, lo, hi)) if draw(st.booleans()) else None


def _affine_example(fx_fn: Callable, t_fn: Callable, x: Any, params: list) -> Example:
    """An Example differentiating ``x`` and the parameters that are not None."""
    present = [p is not None for p in params]

    def fill(given: tuple) -> list:
        it = iter(given)
        return [next(it) if here else None for here in present]
    diff = (x,) + tuple(p for p in params if p is not None)
    return Example(lambda x, *ps: fx_fn(x, *fill(ps)), lambda x, *ps: t_fn(x, *fill(ps)), diff)


def build_layer_norm(draw: Callable) -> Example:
    norm = draw(shapes(min_rank=1, max_rank=2, min_side=1, max_side=4))
    x = draw(array(draw(shapes(max_rank=2)) + norm))
    eps = draw(st.sampled_from([1e-5, 0.1]))
    ns = norm[0] if len(norm) == 1 and draw(st.booleans()) else norm
    return _affine_example(lambda x, w, b: fnn.layer_norm(x, ns, w, b, eps),
                           lambda x, w, b: F.layer_norm(x, norm, w, b, eps),
                           x, [_optional(draw, norm), _optional(draw, norm)])


def build_rms_norm(draw: Callable) -> Example:
    norm = draw(shapes(min_rank=1, max_rank=2, min_side=1, max_side=4))
    x = draw(array(draw(shapes(max_rank=2)) + norm))
    eps = draw(st.sampled_from([None, 1e-5, 0.1]))
    return _affine_example(lambda x, w: fnn.rms_norm(x, norm, w, eps),
                           lambda x, w: F.rms_norm(x, norm, w, eps),
                           x, [_optional(draw, norm)])


def build_group_norm(draw: Callable) -> Example:
    g, per = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    c = g * per
    spatial = draw(shapes(max_rank=2, min_side=1, max_side=3))
    if per * math.prod(spatial) == 1:
        spatial = (2,)  # more than one value per group, so the variance is not 0
    x = draw(array((draw(st.integers(1, 3)), c) + spatial))
    def torch_side(x: Any, w: Any, b: Any) -> Any:
        if w is None and b is not None:  # PyTorch's backward fails for a bias without weight
            w = torch.ones(c, dtype=torch.float64)
        return F.group_norm(x, g, w, b)
    return _affine_example(lambda x, w, b: fnn.group_norm(x, g, w, b), torch_side,
                           x, [_optional(draw, (c,)), _optional(draw, (c,))])


def _running_stats(draw: Callable, c: int, required: bool) -> tuple:
    if not required and draw(st.booleans()):
        return None, None
    return draw(array((c,), -1.0, 1.0)), draw(array((c,), 0.5, 2.0))


def build_batch_norm(draw: Callable) -> Example:
    n, c = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    spatial = draw(shapes(max_rank=2, min_side=1, max_side=3))
    if n * math.prod(spatial) == 1:
        n = 2
    x = draw(array((n, c) + spatial))
    training = draw(st.booleans())
    rm, rv = _running_stats(draw, c, required=not training)
    momentum = draw(st.sampled_from([0.1, 0.5]))
    w, b = _optional(draw, (c,)), _optional(draw, (c,))

    def torch_side(x: Any, w: Any, b: Any) -> Any:
        trm = None if rm is None else T(rm).clone()
        trv = None if rv is None else T(rv).clone()
        y = F.batch_norm(x, trm, trv, w, b, training, momentum)
        return (y, trm, trv) if training and rm is not None else y
    return _affine_example(lambda x, w, b: fnn.batch_norm(x, rm, rv, w, b, training, momentum),
                           torch_side, x, [w, b])


def build_instance_norm(draw: Callable) -> Example:
    n, c = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    spatial = draw(shapes(min_rank=1, max_rank=2, min_side=1, max_side=3))
    if math.prod(spatial) == 1:
        spatial = (2,) + spatial[1:]
    x = draw(array((n, c) + spatial))
    use_input_stats = draw(st.booleans())
    rm, rv = _running_stats(draw, c, required=not use_input_stats)
    w, b = _optional(draw, (c,)), _optional(draw, (c,))

    def torch_side(x: Any, w: Any, b: Any) -> Any:
        trm = None if rm is None else T(rm).clone()
        trv = None if rv is None else T(rv).clone()
        y = F.instance_norm(x, trm, trv, w, b, use_input_stats, 0.2)
        return (y, trm, trv) if use_input_stats and rm is not None else y
    return _affine_example(
        lambda x, w, b: fnn.instance_norm(x, rm, rv, w, b, use_input_stats, 0.2),
        torch_side, x, [w, b])


def build_attention(draw: Callable) -> Example:
    batch = draw(shapes(max_rank=2, min_side=1, max_side=2))
    L, S = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    E, Ev = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    gqa = len(batch) >= 1 and draw(st.booleans())
    kv_batch = batch
    if gqa:
        groups = draw(st.integers(1, 2))
        batch = batch[:-1] + (batch[-1] * groups,)
    q = draw(array(batch + (L, E)))
    k = draw(array(kv_batch + (S, E)))
    v = draw(array(kv_batch + (S, Ev)))
    scores = batch + (L, S)
    kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    softcap = draw(st.sampled_from([None, None, 2.0]))
    bias = draw(array(scores[-draw(st.integers(0, len(scores))):] if scores else ())) \
        if draw(st.booleans()) else None
    mask = None
    if kind == "bool":
        mask_shape = scores[len(scores) - draw(st.integers(2, len(scores))):]
        mask = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random(mask_shape) < 0.7
        if softcap is not None:  # the manual torch reference has no safe softmax
            mask[..., 0] = True
    elif kind == "float":
        mask = draw(array(scores[-2:], -3.0, 0.0))
    scale = draw(st.sampled_from([None, 0.7]))
    kw = {"is_causal": kind == "causal", "scale": scale}
    extra = {"enable_gqa": gqa}

    def fx_side(q: Any, k: Any, v: Any, *b: Any) -> Any:
        return fnn.scaled_dot_product_attention(q, k, v, mask, 0.0, bias=b[0] if b else None,
                                                softcap=softcap, **kw, **extra)

    def torch_side(q: Any, k: Any, v: Any, *b: Any) -> Any:
        tm = T(mask)
        if b:  # fold the bias into an additive mask
            add = torch.zeros(scores, dtype=torch.float64) + b[0]
            if tm is not None and tm.dtype == torch.bool:
                add = add.masked_fill(~tm, -math.inf)
            elif tm is not None:
                add = add + tm
            if kind == "causal":
                add = add.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), -math.inf)
            tm = add
        if softcap is None:
            causal = kw["is_causal"] and not b
            return F.scaled_dot_product_attention(q, k, v, tm, 0.0, is_causal=causal,
                                                  scale=scale, **extra)
        if gqa:
            k = k.repeat_interleave(q.shape[-3] // k.shape[-3], -3)
            v = v.repeat_interleave(q.shape[-3] // v.shape[-3], -3)
        s = q @ k.transpose(-2, -1) * (1 / math.sqrt(E) if scale is None else scale)
        s = softcap * torch.tanh(s / softcap)
        if tm is not None:
            s = s.masked_fill(~tm, -math.inf) if tm.dtype == torch.bool else s + tm
        if kind == "causal" and not b:
            s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), -math.inf)
        p = torch.softmax(s, -1)
        return torch.nan_to_num(p, 0.0) @ v  # causal rows are never empty (j = 0 <= i)
    return Example(fx_side, torch_side, (q, k, v) + (() if bias is None else (bias,)))


# -- losses --

REDUCTIONS = st.sampled_from(["none", "mean", "sum"])


def _class_problem(draw: Callable) -> tuple:
    """(input shape, class dim size, target shape) for (C,), (N, C) and (N, C, d) inputs."""
    c = draw(st.integers(1, 4))
    layout = draw(st.sampled_from(["1d", "2d", "3d"]))
    n = draw(st.integers(1, 3))
    if layout == "1d":
        return (c,), c, ()
    if layout == "2d":
        return (n, c), c, (n,)
    d = draw(st.integers(1, 3))
    return (n, c, d), c, (n, d)


def _class_targets(draw: Callable, tshape: tuple, c: int, ignore_index: int) -> np.ndarray:
    t = draw(int_array(tshape, 0, c))
    if draw(st.booleans()) and t.size:
        t = t.copy()
        t.ravel()[draw(st.integers(0, t.size - 1))] = ignore_index
    return t


def build_nll_loss(draw: Callable) -> Example:
    xshape, c, tshape = _class_problem(draw)
    ii = draw(st.sampled_from([-100, 0, 1]))
    t = _class_targets(draw, tshape, c, ii)
    x = draw(array(xshape, -3.0, 0.0))
    kw = {"ignore_index": ii, "reduction": draw(REDUCTIONS)}
    w = _optional(draw, (c,), 0.2, 2.0)
    return Example(lambda x: fnn.nll_loss(x, t, w, **kw),
                   lambda x: F.nll_loss(x, T(t), T(w), **kw), (x,))


def build_cross_entropy(draw: Callable) -> Example:
    xshape, c, tshape = _class_problem(draw)
    x = draw(array(xshape, -4.0, 4.0))
    kw = {"reduction": draw(REDUCTIONS),
          "label_smoothing": draw(st.sampled_from([0.0, 0.0, 0.1, 0.35]))}
    w = _optional(draw, (c,), 0.2, 2.0)
    if draw(st.booleans()):  # class probabilities
        logits = draw(array(xshape, -2.0, 2.0))
        cd = 1 if len(xshape) >= 2 else 0
        p = np.exp(logits) / np.exp(logits).sum(axis=cd, keepdims=True)
        return Example(lambda x, p: fnn.cross_entropy(x, p, w, **kw),
                       lambda x, p: F.cross_entropy(x, p, T(w), **kw), (x, p))
    kw["ignore_index"] = draw(st.sampled_from([-100, 0]))
    t = _class_targets(draw, tshape, c, kw["ignore_index"])
    return Example(lambda x: fnn.cross_entropy(x, t, w, **kw),
                   lambda x: F.cross_entropy(x, T(t), T(w), **kw), (x,))


def _regression_pair(draw: Callable) -> tuple:
    shape = draw(shapes(max_rank=3))
    tshape = shape
    if shape and draw(st.integers(0, 3)) == 0:  # a broadcasting target (both libraries warn)
        tshape = shape[1:]
    return draw(array(shape, -3.0, 3.0)), draw(array(tshape, -3.0, 3.0))


def _regression(name: str, weighted: bool, option: str | None = None,
                values: tuple = ()) -> Callable:
    def build(draw: Callable) -> Example:
        x, t = _regression_pair(draw)
        kw = {"reduction": draw(REDUCTIONS)}
        if option:
            kw[option] = draw(st.sampled_from(values))
        w = None
        if weighted and draw(st.booleans()):
            w = draw(array(x.shape, 0.1, 2.0))
            kw["weight"] = w
        fx_kw = dict(kw)
        t_kw = {**kw, "weight": T(w)} if w is not None else kw
        return Example(lambda x, t: getattr(fnn, name)(x, t, **fx_kw),
                       lambda x, t: getattr(F, name)(x, t, **t_kw), (x, t))
    return build


def build_bce(draw: Callable) -> Example:
    shape = draw(shapes(max_rank=3))
    x = draw(array(shape, 0.02, 0.98))
    t = draw(array(shape, 0.0, 1.0))
    w = draw(array(shape[-draw(st.integers(0, len(shape))):] if shape else (), 0.1, 2.0)) \
        if draw(st.booleans()) else None
    kw = {"reduction": draw(REDUCTIONS)}
    return Example(lambda x, t: fnn.binary_cross_entropy(x, t, w, **kw),
                   lambda x, t: F.binary_cross_entropy(x, t, T(w), **kw), (x, t))


def build_bce_logits(draw: Callable) -> Example:
    shape = draw(shapes(max_rank=3))
    x = draw(array(shape, -30.0, 30.0))
    t = draw(array(shape, 0.0, 1.0))
    w = _optional(draw, shape, 0.1, 2.0)
    pw = draw(array(shape[-1:], 0.2, 3.0)) if draw(st.booleans()) else None
    kw = {"reduction": draw(REDUCTIONS)}
    return Example(
        lambda x, t: fnn.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw, **kw),
        lambda x, t: F.binary_cross_entropy_with_logits(x, t, T(w), pos_weight=T(pw), **kw),
        (x, t))


def build_kl_div(draw: Callable) -> Example:
    shape = draw(shapes(max_rank=3))
    log_target = draw(st.booleans())
    x = draw(array(shape, -4.0, 0.0))
    t = draw(array(shape, -4.0, 0.0)) if log_target else draw(array(shape, 0.05, 1.0))
    kw = {"reduction": draw(st.sampled_from(["none", "mean", "sum", "batchmean"])),
          "log_target": log_target}
    return Example(lambda x, t: fnn.kl_div(x, t, **kw), lambda x, t: F.kl_div(x, t, **kw),
                   (x, t))


def build_cosine_similarity(draw: Callable) -> Example:
    shape = draw(shapes(min_rank=1, max_rank=3, min_side=1))
    s2 = tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in shape)
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    eps = draw(st.sampled_from([1e-8, 0.5]))
    a, b = draw(array(shape)), draw(array(s2))
    return Example(lambda a, b: fnn.cosine_similarity(a, b, dim, eps),
                   lambda a, b: F.cosine_similarity(a, b, dim, eps), (a, b))


CASES: dict[str, Callable] = {
    "relu": _elementwise("relu", away=(0.0,)),
    "relu6": _elementwise("relu6", lo=-3.0, hi=9.0, away=(0.0, 6.0)),
    "leaky_relu": _elementwise("leaky_relu", away=(0.0,), options=lambda d: {
        "negative_slope": d(st.sampled_from([0.01, 0.2, -0.5]))}),
    "elu": _elementwise("elu", away=(0.0,), options=lambda d: {
        "alpha": d(st.sampled_from([1.0, 0.5, 2.0]))}),
    "selu": _elementwise("selu", away=(0.0,)),
    "celu": _elementwise("celu", away=(0.0,), options=lambda d: {
        "alpha": d(st.sampled_from([1.0, 0.5, 3.0]))}),
    "gelu": _elementwise("gelu", options=lambda d: {
        "approximate": d(st.sampled_from(["none", "tanh"]))}),
    "silu": _elementwise("silu", lo=-30.0, hi=30.0),
    "mish": _elementwise("mish", lo=-30.0, hi=30.0),
    "softplus": _elementwise("softplus", lo=-30.0, hi=30.0, options=_softplus_options),
    "softsign": _elementwise("softsign"),
    "sigmoid": _elementwise("sigmoid", lo=-40.0, hi=40.0),
    "hardtanh": _elementwise("hardtanh", options=_hardtanh_options),
    "hardswish": _elementwise("hardswish", lo=-5.0, hi=5.0, away=(-3.0, 3.0)),
    # PyTorch's hardsigmoid backward multiplies by the float32 constant 1.0f / 6.0f
    "hardsigmoid": _elementwise("hardsigmoid", lo=-5.0, hi=5.0, away=(-3.0, 3.0),
                                grad_rtol=1e-7),
    "log_sigmoid": _elementwise("log_sigmoid", "logsigmoid", lo=-40.0, hi=40.0),
    "softmax": _with_dim("softmax"),
    "log_softmax": _with_dim("log_softmax"),
    "glu": _with_dim("glu", even=True),
    "linear": build_linear,
    "embedding": build_embedding,
    "one_hot": build_one_hot,
    "pad": build_pad,
    "layer_norm": build_layer_norm,
    "rms_norm": build_rms_norm,
    "group_norm": build_group_norm,
    "batch_norm": build_batch_norm,
    "instance_norm": build_instance_norm,
    "scaled_dot_product_attention": build_attention,
    "nll_loss": build_nll_loss,
    "cross_entropy": build_cross_entropy,
    "mse_loss": _regression("mse_loss", True),
    "l1_loss": _regression("l1_loss", True),
    "smooth_l1_loss": _regression("smooth_l1_loss", False, "beta", (1.0, 0.5, 0.0, 2.0)),
    "huber_loss": _regression("huber_loss", True, "delta", (1.0, 0.5, 2.0)),
    "binary_cross_entropy": build_bce,
    "binary_cross_entropy_with_logits": build_bce_logits,
    "kl_div": build_kl_div,
    "cosine_similarity": build_cosine_similarity,
}


def test_every_public_function_has_a_case() -> None:
    from functx.nn import (activations, attention, basic, distance, losses, normalization,
                           padding, regression_losses)
    modules = (activations, attention, basic, distance, losses, normalization, padding,
               regression_losses)
    public = {name for m in modules for name in m.__all__}
    assert public <= set(fnn.__all__)
    from tests.test_nn_ported import PORTED  # the ported names are checked there
    assert public - set(CASES) - PORTED == {"logsigmoid"}  # log_sigmoid's PyTorch name


# Cases with many option combinations get more examples (30 in the default "ci" profile),
# the others fewer (12); both scale with the profile (FUNCTX_HYPOTHESIS_PROFILE=thorough).
RICH = {"cross_entropy", "nll_loss", "scaled_dot_product_attention", "pad", "batch_norm",
        "instance_norm", "embedding"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch(name: str) -> None:
    n = settings.default.max_examples
    @settings(max_examples=n + 5 if name in RICH else max(n // 2, 1))
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        ex = CASES[name](data.draw)
        run_example(ex, data.draw(st.integers(0, 2**32 - 1)))
    check()


# ----------------------------------------------------------------------------------------
# specific behaviour


def test_fully_masked_attention_rows_are_zero_like_torch() -> None:
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = np.ones((3, 5), bool)
    mask[1] = False
    run_example(Example(lambda q, k, v: fnn.scaled_dot_product_attention(q, k, v, mask),
                        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, T(mask)),
                        (q, k, v)), 1)
    out = fnn.scaled_dot_product_attention(q, k, v, mask)
    assert np.all(out[1] == 0)


def test_stable_forms_at_extreme_inputs() -> None:
    x = np.array([-1e4, -50.0, 0.0, 50.0, 1e4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or log(0) warnings either
        for name in ["sigmoid", "log_sigmoid", "softplus", "mish", "silu", "elu"]:
            got = getattr(fnn, name)(x)
            want = getattr(F, "logsigmoid" if name == "log_sigmoid" else name)(T(x))
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, err_msg=name)
            g = fx.grad(lambda x: getattr(fnn, name)(x).sum())(x)
            assert np.all(np.isfinite(g)), name
        y = np.array([[1e4, 0.0, -1e4]])
        np.testing.assert_allclose(fnn.log_softmax(y, dim=1), [[0.0, -1e4, -2e4]])
        np.testing.assert_allclose(fnn.cross_entropy(y, np.array([2])), 2e4)
        np.testing.assert_allclose(
            fnn.binary_cross_entropy_with_logits(np.array([1e4, -1e4]), np.array([0.0, 1.0]),
                                                 reduction="sum"), 2e4)


def test_legacy_size_average_and_reduce_follow_torch() -> None:
    rng = np.random.default_rng(1)
    x, t = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    for sa, rd in [(False, None), (None, False), (True, True)]:
        with pytest.warns(UserWarning, match="deprecated"):
            got = fnn.mse_loss(x, t, sa, rd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = F.mse_loss(T(x), T(t), sa, rd)
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-12)


def test_batch_norm_returns_running_stats_and_mutates_nothing() -> None:
    rng = np.random.default_rng(2)
    x, rm, rv = rng.normal(size=(4, 3, 2)), np.zeros(3), np.ones(3)
    before = rm.copy(), rv.copy()
    out = fnn.batch_norm(x, rm, rv, training=True)
    assert isinstance(out, tuple) and len(out) == 3
    assert isinstance(fnn.batch_norm(x, None, None, training=True), np.ndarray)
    assert isinstance(fnn.batch_norm(x, rm, rv), np.ndarray)
    np.testing.assert_array_equal(rm, before[0])
    np.testing.assert_array_equal(rv, before[1])
    # no gradient flows into the running statistics (they are buffers, as in PyTorch)
    g = fx.grad(lambda rm: fnn.batch_norm(x, rm, rv, training=True)[1].sum())(rm)
    np.testing.assert_array_equal(g, np.zeros(3))


def test_dropout_in_attention_needs_a_key() -> None:
    q = np.ones((2, 3))
    with pytest.raises(ValueError, match="dropout_p=0.5 needs a PRNG key.*dropout_key"):
        fnn.scaled_dot_product_attention(q, q, q, dropout_p=0.5)


@pytest.mark.parametrize("p", [0.3, 0.8, 1.0])
def test_attention_dropout_against_torch_with_the_same_mask(p: float) -> None:
    """The mask is functx.random.bernoulli(key, 1 - p, scores shape); PyTorch applies the
    same mask (as a constant) to its probabilities: values and gradients agree."""
    import functx.random as fxr

    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    key = fxr.key(7)
    keep = np.asarray(fxr.bernoulli(key, 1.0 - p, (2, 3, 5)))
    assert 0 < keep.sum() < keep.size or p == 1.0

    def torch_side(q: Any, k: Any, v: Any) -> Any:
        probs = torch.softmax(q @ k.transpose(-2, -1) / 2.0, -1)
        kept = probs * T(keep) / (1 - p) if p < 1 else probs * 0.0
        return kept @ v
    run_example(Example(lambda q, k, v: fnn.scaled_dot_product_attention(
        q, k, v, dropout_p=p, dropout_key=key), torch_side, (q, k, v)), 4)
    again = fnn.scaled_dot_product_attention(q, k, v, dropout_p=p, dropout_key=key)
    np.testing.assert_array_equal(again, fnn.scaled_dot_product_attention(
        q, k, v, dropout_p=p, dropout_key=key))


# ----------------------------------------------------------------------------------------
# error messages

ERRORS = [
    (lambda: fnn.mse_loss(np.ones(2), np.ones(2), reduction="avg"), ValueError,
     r"mse_loss: reduction must be one of 'none', 'mean', 'sum', not 'avg'"),
    (lambda: fnn.gelu(np.ones(2), approximate="erf"), ValueError,
     r"gelu: approximate must be one of 'none', 'tanh', not 'erf'"),
    (lambda: fnn.pad(np.ones((1, 3)), (3, 0), mode="reflect"), ValueError,
     r"reflect padding sizes must be smaller than the dimension.*size 3.*\(3, 0\)"),
    (lambda: fnn.pad(np.ones((1, 3)), (1, 1), mode="wrap"), ValueError,
     r"pad: mode must be one of 'constant', 'reflect', 'replicate', 'circular', not 'wrap'"),
    (lambda: fnn.pad(np.ones((1, 3)), (1, 1), mode="reflect", value=1.0), ValueError,
     r"mode 'reflect' does not take a value"),
    (lambda: fnn.pad(np.ones(3), (1, 1, 1)), ValueError, r"even length"),
    (lambda: fnn.pad(np.ones((1, 2)), (4, 0), mode="circular"), ValueError,
     r"wrap around at most once"),
    (lambda: fnn.scaled_dot_product_attention(np.ones((2, 3)), np.ones((4, 5)), np.ones((4, 2))),
     ShapeError, r"query and key must have the same last dimension.*query has shape \(2, 3\) "
     r"and key \(4, 5\)"),
    (lambda: fnn.scaled_dot_product_attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((5, 2))),
     ShapeError, r"key and value must have the same source length"),
    (lambda: fnn.scaled_dot_product_attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)),
                                              attn_mask=np.ones((3, 4), bool)),
     ShapeError, r"attn_mask of shape \(3, 4\) does not broadcast to the attention scores' "
     r"shape \(2, 4\)"),
    (lambda: fnn.scaled_dot_product_attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)),
                                              attn_mask=np.ones((2, 4), int)),
     DTypeError, r"attn_mask must be a bool array"),
    (lambda: fnn.scaled_dot_product_attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)),
                                              attn_mask=np.ones((2, 4), bool), is_causal=True),
     ValueError, r"either attn_mask or is_causal"),
    (lambda: fnn.scaled_dot_product_attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)),
                                              softcap=0.0),
     ValueError, r"softcap must be > 0.0, but got 0.0"),
    (lambda: fnn.cross_entropy(np.ones((2, 3)), np.array([0, 3])), ValueError,
     r"class index 3, out of range for 3 classes"),
    (lambda: fnn.cross_entropy(np.ones((2, 3)), np.array([0, 1]), label_smoothing=1.5),
     ValueError, r"label_smoothing must be in \[0.0, 1.0\], but got 1.5"),
    (lambda: fnn.nll_loss(np.ones((2, 3)), np.array([0.0, 1.0])), DTypeError,
     r"target must hold integer class indices"),
    (lambda: fnn.nll_loss(np.ones((2, 3)), np.array([0, 1, 2])), ShapeError,
     r"target must have shape \(2,\)"),
    (lambda: fnn.binary_cross_entropy(np.array([1.5]), np.array([1.0])), ValueError,
     r"all elements of input should be between 0 and 1"),
    (lambda: fnn.binary_cross_entropy_with_logits(np.ones(3), np.ones(2)), ShapeError,
     r"target shape \(2,\) must be the same as input shape \(3,\)"),
    (lambda: fnn.batch_norm(np.ones((2, 3)), None, None), ValueError,
     r"running_mean and running_var must be given when training=False"),
    (lambda: fnn.batch_norm(np.ones((1, 3)), None, None, training=True), ValueError,
     r"more than 1 value per channel"),
    (lambda: fnn.group_norm(np.ones((2, 6, 3)), 4), ValueError,
     r"num_groups=4 must divide the number of channels C=6"),
    (lambda: fnn.layer_norm(np.ones((2, 3)), (2,)), ShapeError,
     r"does not end with normalized_shape \(2,\)"),
    (lambda: fnn.linear(np.ones((2, 3)), np.ones((4, 5))), ShapeError,
     r"in_features = weight.shape\[-1\] = 5"),
    (lambda: fnn.embedding(np.array([0, 3]), np.ones((3, 2))), ValueError,
     r"index 3, out of range for 3 embeddings"),
    (lambda: fnn.one_hot(np.array([0.0])), DTypeError, r"integer class indices"),
    (lambda: fnn.softmax(np.ones((2, 3)), dim=2), ValueError, r"dim=2 is out of range"),
    (lambda: fnn.glu(np.ones((2, 3))), ValueError, r"must be even"),
    (lambda: fnn.hardtanh(np.ones(2), 1.0, -1.0), ValueError,
     r"min_val \(1.0\) must not be greater than max_val \(-1.0\)"),
    (lambda: fnn.softplus(np.ones(2), beta=0), ValueError, r"beta must be non-zero"),
    (lambda: fnn.huber_loss(np.ones(2), np.ones(2), delta=0.0), ValueError,
     r"delta must be > 0.0"),
    (lambda: fnn.kl_div(np.ones(2), np.ones(2), reduction="batch"), ValueError,
     r"'batchmean'"),
]


@pytest.mark.parametrize("call, exc, pattern", ERRORS)
def test_error_messages(call: Callable, exc: type, pattern: str) -> None:
    with pytest.raises(exc, match=pattern) as info:
        call()
    assert isinstance(info.value, fx.FunctxError)
    assert "functx.nn." in str(info.value)


def test_one_hot_needs_num_classes_when_traced() -> None:
    with pytest.raises(fx.ConcretizationError, match="Pass num_classes explicitly"):
        fx.make_trace(lambda t: fnn.one_hot(t))(np.array([0, 1]))
    out = fx.eval_shape(lambda t: fnn.one_hot(t, 3), np.array([0, 1]))
    assert out.shape == (2, 3) and out.dtype == np.int64
