"""The names ported into functx.nn from torch.nn.functional and jax.nn, against the originals.

* CASES (PyTorch, CPU, float64, as in tests/test_nn_functional.py): a builder draws shapes,
  values and options with hypothesis and returns the same call written for functx and for
  PyTorch; ``run_example`` checks the values and the VJP against ``torch.autograd.grad``
  with the same random cotangent, for every differentiable argument.
* JAX_CASES (jax.nn, float64 under ``jax.enable_x64``): the same for the names that come
  from jax.nn, the VJP against ``jax.vjp``.
* The random functions (dropout and its variants, alpha_dropout, rrelu in training,
  gumbel_softmax) are checked by statistics, by determinism per key, against PyTorch's
  formula applied with the same mask or noise, and by ``check_grads`` (finite differences)
  with a fixed key.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import attrs
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import functx as fx
import functx.nn as fnn
import functx.random as fxr
from functx.errors import DTypeError, ShapeError
from functx.test_util import check_grads
from tests.strategies import array, int_array, shapes
from tests.test_nn_functional import Example, T, run_example

torch = pytest.importorskip("torch", reason="PyTorch (CPU) is the oracle of functx.nn's tests")
F = torch.nn.functional
torch.set_num_threads(1)

REDUCTIONS = st.sampled_from(["none", "mean", "sum"])


def _floats(lo: float, hi: float) -> st.SearchStrategy:
    return st.floats(lo, hi, allow_nan=False).map(lambda v: round(v, 3))


def _signs(draw: Callable, shape: tuple) -> np.ndarray:
    seed = draw(st.integers(0, 2**32 - 1))
    return np.where(np.random.default_rng(seed).random(shape) < 0.5, -1.0, 1.0)


# ----------------------------------------------------------------------------------------
# builders against PyTorch

def build_pixel_shuffle(draw: Callable) -> Example:
    r = draw(st.integers(1, 3))
    batch = draw(shapes(max_rank=2, min_side=1, max_side=2))
    c, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    x = draw(array(batch + (c * r * r, h, w)))
    return Example(lambda x: fnn.pixel_shuffle(x, r), lambda x: F.pixel_shuffle(x, r), (x,))


def build_pixel_unshuffle(draw: Callable) -> Example:
    r = draw(st.integers(1, 3))
    batch = draw(shapes(max_rank=2, min_side=1, max_side=2))
    c, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    x = draw(array(batch + (c, h * r, w * r)))
    return Example(lambda x: fnn.pixel_unshuffle(x, r), lambda x: F.pixel_unshuffle(x, r),
                   (x,))


P_NORMS = [2.0, 1.0, 3.0, math.inf, 0.5]


def build_normalize(draw: Callable) -> Example:
    shape = draw(shapes(min_rank=1, max_rank=3, min_side=1, max_side=4))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    p = draw(st.sampled_from(P_NORMS))
    eps = draw(st.sampled_from([1e-12, 1e-12, 0.05]))
    x = draw(array(shape, away_from=(0.0,)))
    return Example(lambda x: fnn.normalize(x, p, dim, eps), lambda x: F.normalize(x, p, dim, eps),
                   (x,))


def build_pairwise_distance(draw: Callable) -> Example:
    shape = draw(shapes(min_rank=1, max_rank=3, min_side=1, max_side=4))
    s2 = tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in shape)
    if len(s2) > 1 and draw(st.booleans()):
        s2 = s2[1:]
    p = draw(st.sampled_from([2.0, 1.0, 3.0, math.inf]))
    eps = draw(st.sampled_from([1e-6, 0.1]))
    keepdim = draw(st.booleans())
    a, b = draw(array(shape)), draw(array(s2))
    return Example(lambda a, b: fnn.pairwise_distance(a, b, p, eps, keepdim),
                   lambda a, b: F.pairwise_distance(a, b, p, eps, keepdim), (a, b))


def build_pdist(draw: Callable) -> Example:
    n, m = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    p = draw(st.sampled_from([2.0, 1.0, 3.0, 0.0, math.inf, 0.5]))
    x = draw(array((n, m)))
    return Example(lambda x: fnn.pdist(x, p), lambda x: F.pdist(x, p), (x,))


def build_cdist(draw: Callable) -> Example:
    batch = draw(shapes(max_rank=2, min_side=1, max_side=2))
    b2 = tuple(1 if draw(st.booleans()) else d for d in batch)
    P, R = draw(st.sampled_from([1, 2, 4, 27])), draw(st.integers(1, 4))
    m = draw(st.integers(1, 3))
    p = draw(st.sampled_from([2.0, 2.0, 1.0, 3.0, 0.0, math.inf]))
    mode = draw(st.sampled_from(["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                 "donot_use_mm_for_euclid_dist"]))
    a, b = draw(array(batch + (P, m))), draw(array(b2 + (R, m)))
    mm = p == 2.0 and (mode == "use_mm_for_euclid_dist" or (
        mode == "use_mm_for_euclid_dist_if_necessary" and P > 25))
    if mm:  # |a|^2 + |b|^2 - 2 a.b: at coincident points both libraries return the square
        # root of their rounding noise (PyTorch 3e-8 where functx gave 1e-15), and its
        # derivative: no reference there
        gap = np.abs(a[..., :, None, :] - b[..., None, :, :]).max(axis=-1)
        assume(float(gap.min()) > 1e-3)
    return Example(lambda a, b: fnn.cdist(a, b, p, mode), lambda a, b: torch.cdist(a, b, p, mode),
                   (a, b), 1e-7 if mm else 1e-9)


def build_prelu(draw: Callable) -> Example:
    shape = draw(shapes(max_rank=4, min_side=1, max_side=3))
    c = shape[1] if len(shape) >= 2 else 1
    w = draw(array((c,) if c > 1 and draw(st.booleans()) else (1,), -1.0, 1.0))
    x = draw(array(shape, away_from=(0.0,)))
    return Example(fnn.prelu, F.prelu, (x, w))


def build_rrelu_eval(draw: Callable) -> Example:
    lower = draw(_floats(0.0, 0.5))
    upper = lower + draw(_floats(0.0, 0.5))
    x = draw(array(draw(shapes(max_rank=3)), away_from=(0.0,)))
    return Example(lambda x: fnn.rrelu(x, lower, upper), lambda x: F.rrelu(x, lower, upper),
                   (x,))


def build_softmin(draw: Callable) -> Example:
    shape = draw(shapes(min_rank=1, max_rank=3))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    x = draw(array(shape, -5.0, 5.0))
    return Example(lambda x: fnn.softmin(x, dim), lambda x: F.softmin(x, dim), (x,))


def build_tanh(draw: Callable) -> Example:
    x = draw(array(draw(shapes(max_rank=3)), -4.0, 4.0))
    return Example(fnn.tanh, F.tanh, (x,))


def build_threshold(draw: Callable) -> Example:
    th, value = draw(_floats(-1.0, 1.0)), draw(_floats(-3.0, 3.0))
    x = draw(array(draw(shapes(max_rank=3)), away_from=(th,)))
    return Example(lambda x: fnn.threshold(x, th, value), lambda x: F.threshold(x, th, value),
                   (x,))


def build_embedding_bag(draw: Callable) -> Example:
    n, d = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    mode = draw(st.sampled_from(["sum", "mean", "max"]))
    kw: dict = {"mode": mode}
    offsets = None
    if draw(st.booleans()):
        idx = draw(int_array((draw(st.integers(1, 3)), draw(st.integers(1, 4))), 0, n))
    else:
        length = draw(st.integers(0, 7))
        idx = draw(int_array((length,), 0, n))
        bags = draw(st.integers(1, 4))
        cuts = sorted(draw(st.lists(st.integers(0, length), min_size=bags - 1,
                                    max_size=bags - 1)))
        offsets = np.array([0] + cuts, np.int64)
        if draw(st.booleans()):
            kw["include_last_offset"] = True
            offsets = np.append(offsets, length)  # CSR style (see embedding_bag's doc)
    if draw(st.booleans()):
        kw["padding_idx"] = draw(st.integers(-n, n - 1))
    # (scale_grad_by_freq: see test_embedding_bag_scale_grad_by_freq_counts_each_index)
    if draw(st.booleans()):
        kw["max_norm"] = draw(_floats(0.3, 2.0))
    w = draw(array((n, d)))
    psw = draw(array(idx.shape)) if mode == "sum" and draw(st.booleans()) else None

    def fx_side(w: Any, *ps: Any) -> Any:
        return fnn.embedding_bag(idx, w, offsets, per_sample_weights=ps[0] if ps else None,
                                 **kw)

    def torch_side(w: Any, *ps: Any) -> Any:
        w = w.clone() if "max_norm" in kw else w  # PyTorch renormalises weight in place
        return F.embedding_bag(T(idx), w, T(offsets), per_sample_weights=ps[0] if ps else None,
                               **kw)
    return Example(fx_side, torch_side, (w,) if psw is None else (w, psw))


def _lp_pool(nd: int) -> Callable:
    def build(draw: Callable) -> Example:
        k = tuple(draw(st.integers(1, 3)) for _ in range(nd))
        s = None if draw(st.booleans()) else tuple(draw(st.integers(1, 3)) for _ in range(nd))
        sizes = tuple(kk + draw(st.integers(0, 3)) for kk in k)
        lead = draw(st.sampled_from([(), (2,)])) + (draw(st.integers(1, 2)),)
        x = draw(array(lead + sizes, 0.1, 2.0))
        p = draw(st.sampled_from([1.0, 2.0, 3.0, 1.5, math.inf]))
        ceil = draw(st.booleans())
        ks = k[0] if nd == 1 else k  # lp_pool1d multiplies by an int kernel_size
        name = f"lp_pool{nd}d"
        if p == math.inf:  # max pooling of |x|, the p -> inf limit (some PyTorch builds return 1 there)
            return Example(lambda x: getattr(fnn, name)(x, p, ks, s, ceil),
                           lambda x: getattr(F, f"max_pool{nd}d")(x.abs(), ks, s,
                                                                  ceil_mode=ceil), (x,))
        return Example(lambda x: getattr(fnn, name)(x, p, ks, s, ceil),
                       lambda x: getattr(F, name)(x, p, ks, s, ceil), (x,))
    return build


def build_local_response_norm(draw: Callable) -> Example:
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 5))) + draw(
        shapes(min_rank=1, max_rank=3, min_side=1, max_side=3))
    size = draw(st.integers(1, 4))
    kw = {"alpha": draw(st.sampled_from([1e-4, 0.5])), "beta": draw(st.sampled_from([0.75, 2.0])),
          "k": draw(st.sampled_from([1.0, 2.0]))}
    x = draw(array(shape))
    return Example(lambda x: fnn.local_response_norm(x, size, **kw),
                   lambda x: F.local_response_norm(x, size, **kw), (x,))


def _max_unpool(nd: int) -> Callable:
    def build(draw: Callable) -> Example:
        k = tuple(draw(st.integers(1, 3)) for _ in range(nd))
        s = tuple(draw(st.integers(1, 3)) for _ in range(nd))
        pad = tuple(draw(st.integers(0, kk // 2)) for kk in k)
        sizes = tuple(kk + draw(st.integers(0, 3)) for kk in k)
        lead = draw(st.sampled_from([(), (2,)])) + (draw(st.integers(1, 2)),)
        x = draw(array(lead + sizes))
        pool = getattr(F, f"max_pool{nd}d")
        pooled, ind = pool(T(x), k, s, pad, return_indices=True)
        ind = ind.numpy()
        default = tuple((o - 1) * ss + kk - 2 * pp
                        for o, ss, kk, pp in zip(pooled.shape[-nd:], s, k, pad))
        out_size = sizes if draw(st.booleans()) else None
        if out_size is not None and any(not d - ss < o < d + ss
                                        for o, d, ss in zip(out_size, default, s)):
            out_size = None
        # the indices must fit the output (PyTorch raises otherwise, and so does functx)
        assume(ind.max() < math.prod(default if out_size is None else out_size))
        y = draw(array(tuple(pooled.shape)))
        name = f"max_unpool{nd}d"
        return Example(lambda y: getattr(fnn, name)(y, ind, k, s, pad, out_size),
                       lambda y: getattr(F, name)(y, T(ind), k, s, pad, out_size), (y,))
    return build


def build_affine_grid(draw: Callable) -> Example:
    nd = draw(st.sampled_from([2, 3]))
    n = draw(st.integers(1, 2))
    size = (n, draw(st.integers(1, 2))) + tuple(draw(st.integers(2, 4)) for _ in range(nd))
    align = draw(st.booleans())
    theta = draw(array((n, nd, nd + 1)))
    return Example(lambda t: fnn.affine_grid(t, size, align),
                   lambda t: F.affine_grid(t, list(size), align), (theta,))


def build_bilinear(draw: Callable) -> Example:
    batch = draw(shapes(min_rank=1, max_rank=2, max_side=3))
    i1, i2, o = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    a, b, w = draw(array(batch + (i1,))), draw(array(batch + (i2,))), draw(array((o, i1, i2)))
    if draw(st.booleans()):
        return Example(fnn.bilinear, F.bilinear, (a, b, w, draw(array((o,)))))
    return Example(fnn.bilinear, F.bilinear, (a, b, w))


# -- losses --

def build_margin_ranking_loss(draw: Callable) -> Example:
    shape = draw(shapes(max_rank=2, min_side=1))
    a, b, y = draw(array(shape)), draw(array(shape)), _signs(draw, shape)
    kw = {"margin": draw(st.sampled_from([0.0, 0.5])), "reduction": draw(REDUCTIONS)}
    return Example(lambda a, b, y: fnn.margin_ranking_loss(a, b, y, **kw),
                   lambda a, b, y: F.margin_ranking_loss(a, b, y, **kw), (a, b, y))


def build_hinge_embedding_loss(draw: Callable) -> Example:
    shape = draw(shapes(max_rank=3))
    x, y = draw(array(shape, 0.0, 3.0)), _signs(draw, shape)
    kw = {"margin": draw(st.sampled_from([1.0, 0.5, 2.0])), "reduction": draw(REDUCTIONS)}
    return Example(lambda x: fnn.hinge_embedding_loss(x, y, **kw),
                   lambda x: F.hinge_embedding_loss(x, T(y), **kw), (x,))


def build_soft_margin_loss(draw: Callable) -> Example:
    shape = draw(shapes(max_rank=3))
    x, y = draw(array(shape, -30.0, 30.0)), _signs(draw, shape)
    kw = {"reduction": draw(REDUCTIONS)}
    return Example(lambda x: fnn.soft_margin_loss(x, y, **kw),
                   lambda x: F.soft_margin_loss(x, T(y), **kw), (x,))


def build_multilabel_margin_loss(draw: Callable) -> Example:
    c = draw(st.integers(1, 5))
    batched = draw(st.booleans())
    n = draw(st.integers(1, 3)) if batched else 1
    rows = []
    for _ in range(n):
        k = draw(st.integers(0, c))
        row = list(draw(st.permutations(range(c))))[:k]
        if k < c:
            row += [-1] + [draw(st.integers(-1, c - 1)) for _ in range(c - k - 1)]
        rows.append(row)
    t = np.array(rows, np.int64) if batched else np.array(rows[0], np.int64)
    x = draw(array(t.shape))
    kw = {"reduction": draw(REDUCTIONS)}
    return Example(lambda x: fnn.multilabel_margin_loss(x, t, **kw),
                   lambda x: F.multilabel_margin_loss(x, T(t), **kw), (x,))


def build_multilabel_soft_margin_loss(draw: Callable) -> Example:
    shape = draw(st.sampled_from([(3,), (2, 4), (1, 2)]))
    x, y = draw(array(shape, -5.0, 5.0)), draw(array(shape, 0.0, 1.0))
    w = draw(array(shape[-1:], 0.1, 2.0)) if draw(st.booleans()) else None
    kw = {"reduction": draw(REDUCTIONS)}
    return Example(lambda x, y: fnn.multilabel_soft_margin_loss(x, y, w, **kw),
                   lambda x, y: F.multilabel_soft_margin_loss(x, y, T(w), **kw), (x, y))


def build_multi_margin_loss(draw: Callable) -> Example:
    c = draw(st.integers(1, 4))
    batched = draw(st.booleans())
    n = draw(st.integers(1, 3))
    x = draw(array((n, c) if batched else (c,)))
    t = draw(int_array((n,) if batched else (), 0, c))
    w = draw(array((c,), 0.1, 2.0)) if draw(st.booleans()) else None
    kw = {"p": draw(st.sampled_from([1, 2])), "margin": draw(st.sampled_from([1.0, 0.3])),
          "reduction": draw(REDUCTIONS)}
    return Example(lambda x: fnn.multi_margin_loss(x, t, weight=w, **kw),
                   lambda x: F.multi_margin_loss(x, T(t), weight=T(w), **kw), (x,))


def build_cosine_embedding_loss(draw: Callable) -> Example:
    d = draw(st.integers(1, 4))
    batched = draw(st.booleans())
    n = draw(st.integers(1, 3))
    shape = (n, d) if batched else (d,)
    a, b = draw(array(shape)), draw(array(shape))
    y = _signs(draw, (n,) if batched else ())
    kw = {"margin": draw(st.sampled_from([0.0, 0.3, -0.2])), "reduction": draw(REDUCTIONS)}
    return Example(lambda a, b: fnn.cosine_embedding_loss(a, b, y, **kw),
                   lambda a, b: F.cosine_embedding_loss(a, b, T(y), **kw), (a, b))


def _triplet_inputs(draw: Callable) -> tuple:
    d = draw(st.integers(1, 4))
    shape = (draw(st.integers(1, 3)), d) if draw(st.booleans()) else (d,)
    return draw(array(shape)), draw(array(shape)), draw(array(shape))


def build_triplet_margin_loss(draw: Callable) -> Example:
    a, p, n = _triplet_inputs(draw)
    kw = {"margin": draw(st.sampled_from([1.0, 0.3])), "p": draw(st.sampled_from([2.0, 1.0, 3.0])),
          "eps": draw(st.sampled_from([1e-6, 0.1])), "swap": draw(st.booleans()),
          "reduction": draw(REDUCTIONS)}
    return Example(lambda a, p, n: fnn.triplet_margin_loss(a, p, n, **kw),
                   lambda a, p, n: F.triplet_margin_loss(a, p, n, **kw), (a, p, n))


def build_triplet_margin_with_distance_loss(draw: Callable) -> Example:
    a, p, n = _triplet_inputs(draw)
    cosine = draw(st.booleans())
    kw = {"margin": draw(st.sampled_from([1.0, 0.3])), "swap": draw(st.booleans()),
          "reduction": draw(REDUCTIONS)}
    fd = (lambda u, v: 1.0 - fnn.cosine_similarity(u, v, -1)) if cosine else None
    td = (lambda u, v: 1.0 - F.cosine_similarity(u, v, -1)) if cosine else None
    return Example(
        lambda a, p, n: fnn.triplet_margin_with_distance_loss(a, p, n, distance_function=fd, **kw),
        lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, distance_function=td, **kw),
        (a, p, n))


def build_gaussian_nll_loss(draw: Callable) -> Example:
    shape = draw(shapes(min_rank=1, max_rank=3, min_side=1, max_side=3))
    x, t = draw(array(shape)), draw(array(shape))
    kind = draw(st.sampled_from(["same", "short", "one", "float"]))
    kw = {"full": draw(st.booleans()), "eps": draw(st.sampled_from([1e-6, 0.2])),
          "reduction": draw(REDUCTIONS)}
    if kind == "float":
        v = draw(_floats(0.1, 2.0))
        return Example(lambda x, t: fnn.gaussian_nll_loss(x, t, v, **kw),
                       lambda x, t: F.gaussian_nll_loss(x, t, v, **kw), (x, t))
    vshape = {"same": shape, "short": shape[:-1]}.get(kind)
    if vshape is None:
        i = draw(st.integers(0, len(shape) - 1))
        vshape = shape[:i] + (1,) + shape[i + 1:]
    v = draw(array(vshape, 0.0, 2.0))  # some below eps: clamped without gradient
    return Example(lambda x, t, v: fnn.gaussian_nll_loss(x, t, v, **kw),
                   lambda x, t, v: F.gaussian_nll_loss(x, t, v, **kw), (x, t, v))


def build_poisson_nll_loss(draw: Callable) -> Example:
    shape = draw(shapes(max_rank=3))
    log_input = draw(st.booleans())
    x = draw(array(shape, -2.0, 2.0)) if log_input else draw(array(shape, 0.1, 3.0))
    t = draw(array(shape, 0.0, 4.0, away_from=(1.0,)))
    kw = {"log_input": log_input, "full": draw(st.booleans()),
          "eps": draw(st.sampled_from([1e-8, 0.1])), "reduction": draw(REDUCTIONS)}
    return Example(lambda x, t: fnn.poisson_nll_loss(x, t, **kw),
                   lambda x, t: F.poisson_nll_loss(x, t, **kw), (x, t))


def _eval_identity(name: str) -> Callable:
    """A dropout variant outside training: the input itself, as in PyTorch."""
    def build(draw: Callable) -> Example:
        nd = {"dropout1d": 3, "dropout2d": 4, "dropout3d": 5}.get(name, 2)
        x = draw(array(draw(shapes(min_rank=nd, max_rank=nd, min_side=1, max_side=3))))
        p = draw(_floats(0.0, 1.0))
        return Example(lambda x: getattr(fnn, name)(x, p, training=False),
                       lambda x: getattr(F, name)(x, p, training=False), (x,))
    return build


CASES: dict[str, Callable] = {
    "pixel_shuffle": build_pixel_shuffle,
    "pixel_unshuffle": build_pixel_unshuffle,
    "normalize": build_normalize,
    "pairwise_distance": build_pairwise_distance,
    "pdist": build_pdist,
    "cdist": build_cdist,
    "prelu": build_prelu,
    "rrelu": build_rrelu_eval,
    "softmin": build_softmin,
    "tanh": build_tanh,
    "threshold": build_threshold,
    "embedding_bag": build_embedding_bag,
    "lp_pool1d": _lp_pool(1),
    "lp_pool2d": _lp_pool(2),
    "lp_pool3d": _lp_pool(3),
    "local_response_norm": build_local_response_norm,
    "max_unpool1d": _max_unpool(1),
    "max_unpool2d": _max_unpool(2),
    "max_unpool3d": _max_unpool(3),
    "affine_grid": build_affine_grid,
    "bilinear": build_bilinear,
    "margin_ranking_loss": build_margin_ranking_loss,
    "hinge_embedding_loss": build_hinge_embedding_loss,
    "soft_margin_loss": build_soft_margin_loss,
    "multilabel_margin_loss": build_multilabel_margin_loss,
    "multilabel_soft_margin_loss": build_multilabel_soft_margin_loss,
    "multi_margin_loss": build_multi_margin_loss,
    "cosine_embedding_loss": build_cosine_embedding_loss,
    "triplet_margin_loss": build_triplet_margin_loss,
    "triplet_margin_with_distance_loss": build_triplet_margin_with_distance_loss,
    "gaussian_nll_loss": build_gaussian_nll_loss,
    "poisson_nll_loss": build_poisson_nll_loss,
    "dropout": _eval_identity("dropout"),
    "dropout1d": _eval_identity("dropout1d"),
    "dropout2d": _eval_identity("dropout2d"),
    "dropout3d": _eval_identity("dropout3d"),
    "alpha_dropout": _eval_identity("alpha_dropout"),
    "feature_alpha_dropout": _eval_identity("feature_alpha_dropout"),
}

RICH = {"embedding_bag", "cdist", "gaussian_nll_loss", "max_unpool2d"}


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
# against jax.nn

@attrs.define
class JaxExample:
    """One call for functx and for JAX; ``diff`` holds the float64 arrays to differentiate."""

    fx: Callable
    jax: Callable
    diff: tuple
    rtol: float = 1e-10
    atol: float = 1e-12


def run_jax_example(ex: JaxExample, seed: int) -> None:
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        got = ex.fx(*ex.diff)
        want = ex.jax(*[jax.numpy.asarray(a) for a in ex.diff])
        g, w = np.asarray(got), np.asarray(want)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=ex.rtol, atol=ex.atol, equal_nan=True)
        if not ex.diff or w.dtype.kind != "f":
            return
        ct = np.random.default_rng(seed).normal(size=w.shape)
        _, j_vjp = jax.vjp(ex.jax, *[jax.numpy.asarray(a) for a in ex.diff])
        g_j = j_vjp(jax.numpy.asarray(ct))
    _, f_vjp = fx.vjp(ex.fx, *ex.diff)
    g_f = f_vjp(ct)
    for i, (a, b) in enumerate(zip(g_f, g_j)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=ex.rtol, atol=ex.atol,
                                   equal_nan=True, err_msg=f"gradient of argument {i}")


def _jnn() -> Any:
    return pytest.importorskip("jax").nn


def _axis_options(draw: Callable, ndim: int) -> Any:
    if ndim == 0 or draw(st.integers(0, 3)) == 0:
        return None
    axes = draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                         unique_by=lambda a: a % ndim))
    return axes[0] if len(axes) == 1 and draw(st.booleans()) else tuple(axes)


def build_standardize(draw: Callable) -> JaxExample:
    jnn = _jnn()
    shape = draw(shapes(min_rank=2, max_rank=3, min_side=2, max_side=4))
    axis = draw(st.sampled_from([-1, 0, None, (0, -1)]))
    algorithm = draw(st.sampled_from(["fast", "stable"]))
    eps = draw(st.sampled_from([1e-5, 0.1]))
    x = draw(array(shape))
    where = None
    if draw(st.booleans()):
        where = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random(shape) < 0.8
        where.reshape(-1)[0] = True
        if axis is not None:  # every standardised slice keeps some entries
            where[...] = True
    kw = {"axis": axis, "epsilon": eps, "where": where, "algorithm": algorithm}
    return JaxExample(lambda x: fnn.standardize(x, **kw), lambda x: jnn.standardize(x, **kw),
                      (x,), 1e-9, 1e-11)


def build_log1mexp(draw: Callable) -> JaxExample:
    jnn = _jnn()
    x = draw(array(draw(shapes(max_rank=2)), 0.01, 6.0))
    return JaxExample(fnn.log1mexp, jnn.log1mexp, (x,))


def build_logmeanexp(draw: Callable) -> JaxExample:
    jnn = _jnn()
    shape = draw(shapes(min_rank=1, max_rank=3, min_side=1, max_side=4))
    axis = _axis_options(draw, len(shape))
    keepdims = draw(st.booleans())
    x = draw(array(shape, -5.0, 5.0))
    where = None
    if draw(st.booleans()):
        where = np.ones(shape, bool)
        where.reshape(-1)[: draw(st.integers(0, x.size - 1))] = False
        where = where.reshape(-1)[np.random.default_rng(draw(st.integers(0, 99))).permutation(
            x.size)].reshape(shape)
        where[(0,) * len(shape)] = True
        if axis is not None:
            where[...] = True
    return JaxExample(lambda x: fnn.logmeanexp(x, axis, where, keepdims),
                      lambda x: jnn.logmeanexp(x, axis, where, keepdims), (x,))


def build_squareplus(draw: Callable) -> JaxExample:
    jnn = _jnn()
    b = draw(st.sampled_from([4, 0.5, 2.0]))
    x = draw(array(draw(shapes(max_rank=3)), -5.0, 5.0))
    return JaxExample(lambda x: fnn.squareplus(x, b), lambda x: jnn.squareplus(x, b), (x,))


def build_sparse_plus(draw: Callable) -> JaxExample:
    jnn = _jnn()
    x = draw(array(draw(shapes(max_rank=3)), -3.0, 3.0, away_from=(-1.0, 1.0)))
    return JaxExample(fnn.sparse_plus, jnn.sparse_plus, (x,))


def build_one_hot_jax(draw: Callable) -> JaxExample:
    jnn = _jnn()
    k = draw(st.integers(1, 5))
    idx = draw(int_array(draw(shapes(max_rank=2)), -1, k + 1))
    axis = draw(st.integers(-(idx.ndim + 1), idx.ndim))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32]))
    return JaxExample(lambda: fnn.one_hot(idx, k, dtype=dtype, axis=axis),
                      lambda: jnn.one_hot(idx, k, dtype=dtype, axis=axis), ())


def _attention_problem(draw: Callable, fully_masked_rows: bool) -> tuple:
    batched = draw(st.booleans())
    b = draw(st.integers(1, 2))
    t, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k_heads = draw(st.integers(1, 2))
    n_heads = k_heads * draw(st.integers(1, 2))
    h = draw(st.integers(1, 3))
    lead = (b,) if batched else ()
    q = draw(array(lead + (t, n_heads, h)))
    k = draw(array(lead + (s, k_heads, h)))
    v = draw(array(lead + (s, k_heads, h)))
    kw: dict = {"scale": draw(st.sampled_from([None, 0.7]))}
    kind = draw(st.sampled_from(["none", "mask", "causal", "window", "lengths"]))
    bias = draw(array(draw(st.sampled_from([(t, s), (n_heads, 1, s), lead + (1, t, s)]))))\
        if draw(st.booleans()) else None
    if kind == "mask":
        m = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random((t, s)) < 0.6
        if not fully_masked_rows:
            m[:, 0] = True
        kw["mask"] = m
    elif kind == "causal":
        kw["is_causal"] = True
    elif kind == "window":
        kw["local_window_size"] = draw(st.sampled_from([0, 1, (1, 0), (0, 2)]))
        if not fully_masked_rows:
            kw["local_window_size"] = (max(t, s), max(t, s))
    elif kind == "lengths" and batched:
        kw["query_seq_lengths"] = draw(int_array((b,), 0 if fully_masked_rows else t, t + 1)
                                       ).astype(np.int32)
        kw["key_value_seq_lengths"] = draw(int_array((b,), 0 if fully_masked_rows else 1, s + 1)
                                           ).astype(np.int32)
    return q, k, v, bias, kw


def build_dot_product_attention(draw: Callable) -> JaxExample:
    """Against JAX, whose softmax is float32 even for float64 operands (so the tolerance is
    float32's); rows with nothing to attend included."""
    jnn = _jnn()
    q, k, v, bias, kw = _attention_problem(draw, fully_masked_rows=True)
    residual = draw(st.booleans())
    if residual:
        return JaxExample(
            lambda q, k, v: fnn.dot_product_attention(q, k, v, bias, return_residual=True,
                                                      **kw)[1],
            lambda q, k, v: jnn.dot_product_attention(q, k, v, bias, return_residual=True,
                                                      **kw)[1], (q, k, v), 1e-5, 1e-6)
    return JaxExample(lambda q, k, v: fnn.dot_product_attention(q, k, v, bias, **kw),
                      lambda q, k, v: jnn.dot_product_attention(q, k, v, bias, **kw),
                      (q, k, v), 1e-5, 1e-6)


JAX_CASES: dict[str, Callable] = {
    "standardize": build_standardize,
    "log1mexp": build_log1mexp,
    "logmeanexp": build_logmeanexp,
    "squareplus": build_squareplus,
    "sparse_plus": build_sparse_plus,
    "one_hot": build_one_hot_jax,
    "dot_product_attention": build_dot_product_attention,
}


@pytest.mark.parametrize("name", sorted(JAX_CASES))
def test_against_jax(name: str) -> None:
    pytest.importorskip("jax")
    n = settings.default.max_examples
    @settings(max_examples=max(n // 2, 1))  # (JAX compiles every new shape: slow)
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        ex = JAX_CASES[name](data.draw)
        run_jax_example(ex, data.draw(st.integers(0, 2**32 - 1)))
    check()


@settings(max_examples=20)
@given(data=st.data())
def test_dot_product_attention_against_torch_in_float64(data: st.DataObject) -> None:
    """Exact float64 agreement with PyTorch's attention in its layout (no fully masked rows,
    where JAX's and PyTorch's conventions differ)."""
    q, k, v, bias, kw = _attention_problem(data.draw, fully_masked_rows=False)
    for name in ("query_seq_lengths", "key_value_seq_lengths", "local_window_size"):
        kw.pop(name, None)  # (JAX's conveniences: checked against JAX)
    gqa = q.shape[-2] != k.shape[-2]
    scale = kw["scale"]

    def torch_side(q: Any, k: Any, v: Any) -> Any:
        qt, kt, vt = (a.movedim(-2, -3) for a in (q, k, v))
        add = None
        if bias is not None:
            add = T(bias).reshape((1,) * (4 - bias.ndim) + bias.shape)
            if q.ndim == 3:
                add = add[0]
        if "mask" in kw:
            fill = torch.zeros(kw["mask"].shape, dtype=torch.float64).masked_fill(
                ~T(kw["mask"]), -math.inf)
            add = fill if add is None else add + fill
        causal = kw.get("is_causal", False)
        if causal and add is not None:
            add = add + torch.zeros(qt.shape[-2], kt.shape[-2], dtype=torch.float64).masked_fill(
                ~torch.ones(qt.shape[-2], kt.shape[-2], dtype=torch.bool).tril(), -math.inf)
            causal = False
        out = F.scaled_dot_product_attention(qt, kt, vt, add, is_causal=causal, scale=scale,
                                             enable_gqa=gqa)
        return out.movedim(-3, -2)
    run_example(Example(lambda q, k, v: fnn.dot_product_attention(q, k, v, bias, **kw),
                        torch_side, (q, k, v)), data.draw(st.integers(0, 2**32 - 1)))


# ----------------------------------------------------------------------------------------
# random functions: statistics, determinism per key, same-noise agreement, gradients

KEY = fxr.key(42)


def _stat_bound(p: float, n: int) -> float:
    return 5 * math.sqrt(p * (1 - p) / n)


RANDOM_CALLS: dict[str, Callable] = {
    "dropout": lambda x, k: fnn.dropout(x, 0.3, key=k),
    "dropout1d": lambda x, k: fnn.dropout1d(x, 0.3, key=k),
    "dropout2d": lambda x, k: fnn.dropout2d(x.reshape(2, 3, 4, -1), 0.3, key=k),
    "dropout3d": lambda x, k: fnn.dropout3d(x.reshape(2, 3, 2, 2, -1), 0.3, key=k),
    "alpha_dropout": lambda x, k: fnn.alpha_dropout(x, 0.3, training=True, key=k),
    "feature_alpha_dropout": lambda x, k: fnn.feature_alpha_dropout(x, 0.3, training=True,
                                                                    key=k),
    "rrelu": lambda x, k: fnn.rrelu(x, training=True, key=k),
    "gumbel_softmax": lambda x, k: fnn.gumbel_softmax(x, 0.7, key=k),
    "gumbel_softmax_hard": lambda x, k: fnn.gumbel_softmax(x, 0.7, hard=True, key=k),
}


@pytest.mark.parametrize("name", sorted(RANDOM_CALLS))
def test_random_functions_are_deterministic_per_key(name: str) -> None:
    x = np.random.default_rng(0).normal(size=(2, 3, 8))
    f = RANDOM_CALLS[name]
    a = np.asarray(f(x, KEY))
    np.testing.assert_array_equal(a, np.asarray(f(x, KEY)))
    assert not np.array_equal(a, np.asarray(f(x, fxr.key(43))))
    # the same values under jit and vmap (the key is an argument like any other)
    np.testing.assert_array_equal(a, np.asarray(fx.jit(f)(x, KEY)))
    keys = fxr.split(KEY, 2)
    batched = fx.vmap(f, in_axes=(None, 0))(x, keys)
    np.testing.assert_array_equal(np.asarray(batched), np.stack([f(x, k) for k in keys]))


@pytest.mark.parametrize("name", sorted(RANDOM_CALLS))
def test_random_functions_gradients_with_a_fixed_key(name: str) -> None:
    x = np.random.default_rng(1).normal(size=(2, 3, 8))
    x = np.where(np.abs(x) < 0.05, 0.1, x)  # away from rrelu's kink
    f = RANDOM_CALLS[name]
    if name == "gumbel_softmax_hard":  # straight through: the soft sample's gradient
        soft = RANDOM_CALLS["gumbel_softmax"]
        ct = np.random.default_rng(2).normal(size=x.shape)
        _, v_hard = fx.vjp(lambda x: f(x, KEY), x)
        _, v_soft = fx.vjp(lambda x: soft(x, KEY), x)
        np.testing.assert_allclose(v_hard(ct)[0], v_soft(ct)[0], rtol=1e-12, atol=1e-14)
        return
    check_grads(lambda x: f(x, KEY), (x,), order=1, modes=("fwd", "rev"))


def test_dropout_torch_form_matches_the_earlier_form_and_statistics() -> None:
    x = np.linspace(1.0, 2.0, 20_000).reshape(200, 100)
    k = fxr.key(5)
    y = np.asarray(fnn.dropout(x, 0.25, key=k))
    np.testing.assert_array_equal(y, np.asarray(fnn.dropout(k, x, 0.25)))
    keep = y != 0
    assert abs(keep.mean() - 0.75) < _stat_bound(0.75, x.size)
    np.testing.assert_allclose(y[keep], x[keep] / 0.75, rtol=1e-15)
    # PyTorch's keep fraction and scaling agree
    yt = F.dropout(T(x), 0.25).numpy()
    assert abs((yt != 0).mean() - 0.75) < _stat_bound(0.75, x.size)
    assert fnn.dropout(x, 0.25, training=False) is x
    assert fnn.dropout(x, 0.0, key=None) is x
    np.testing.assert_array_equal(fnn.dropout(x, 1.0, key=k), np.zeros_like(x))


@pytest.mark.parametrize("name, shape, mask_axes", [
    ("dropout1d", (40, 30, 5), (0, 1)), ("dropout1d", (30, 5), (0,)),
    ("dropout2d", (40, 30, 2, 3), (0, 1)), ("dropout3d", (40, 30, 2, 2, 2), (0, 1)),
    ("dropout3d", (30, 2, 2, 2), (0,)),
])
def test_channel_dropout_drops_whole_channels(name: str, shape: tuple, mask_axes: tuple) -> None:
    x = np.ones(shape)
    y = np.asarray(getattr(fnn, name)(x, 0.4, key=fxr.key(6)))
    channels = y.reshape(shape[:len(mask_axes)] + (-1,))
    assert np.all(channels == channels[..., :1])  # one draw per channel
    kept = channels[..., 0] != 0
    assert abs(kept.mean() - 0.6) < _stat_bound(0.6, kept.size)
    np.testing.assert_allclose(channels[..., 0][kept], 1 / 0.6)
    yt = getattr(F, name)(T(x), 0.4).numpy().reshape(channels.shape)  # PyTorch: the same
    assert np.all(yt == yt[..., :1])


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_statistics_and_formula(feature: bool) -> None:
    """A standard-normal input stays standard normal (the point of alpha dropout); with the
    same mask the values are PyTorch's formula."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(400, 300, 1)) if feature else rng.normal(size=(300, 400))
    p = 0.2
    name = "feature_alpha_dropout" if feature else "alpha_dropout"
    y = np.asarray(getattr(fnn, name)(x, p, training=True, key=fxr.key(8)))
    n = x.size
    assert abs(y.mean()) < 5 / math.sqrt(n) * 1.5 and abs(y.std() - 1) < 0.02
    yt = getattr(F, name)(T(x), p, training=True).numpy()
    assert abs(yt.mean() - y.mean()) < 0.02 and abs(yt.std() - y.std()) < 0.02
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha**2 * p + 1) * (1 - p))
    dropped_value = a * -alpha + alpha * a * p
    keep = ~np.isclose(y, dropped_value, rtol=0, atol=1e-12) | np.isclose(
        x * a + alpha * a * p, dropped_value, rtol=0, atol=1e-12)
    np.testing.assert_allclose(y, np.where(keep, x * a + alpha * a * p, dropped_value),
                               rtol=1e-13, atol=1e-13)
    assert abs(keep.mean() - (1 - p)) < _stat_bound(1 - p, keep.size if not feature else 400 * 300)
    assert getattr(fnn, name)(x, p) is x  # training=False by default, as in PyTorch


def test_rrelu_training_slopes() -> None:
    x = -np.linspace(0.5, 1.5, 50_000)
    lower, upper = 0.1, 0.4
    y = np.asarray(fnn.rrelu(x, lower, upper, training=True, key=fxr.key(9)))
    slopes = y / x
    assert slopes.min() >= lower and slopes.max() <= upper
    for s in (slopes, (F.rrelu(T(x), lower, upper, training=True) / T(x)).numpy()):
        assert abs(s.mean() - (lower + upper) / 2) < 0.005  # U(lower, upper), as PyTorch's
        assert abs(s.std() - (upper - lower) / math.sqrt(12)) < 0.005
    # the slopes are functx.random.uniform(key, shape, dtype, lower, upper)
    r = np.asarray(fxr.uniform(fxr.key(9), x.shape, np.float64, lower, upper))
    np.testing.assert_allclose(y, x * r, rtol=1e-15)
    pos = np.abs(x)
    np.testing.assert_array_equal(fnn.rrelu(pos, training=True, key=fxr.key(9)), pos)


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_against_torch_with_the_same_noise(hard: bool) -> None:
    rng = np.random.default_rng(10)
    logits = rng.normal(size=(3, 5))
    tau = 0.6
    k = fxr.key(11)
    g = np.asarray(fxr.gumbel(k, logits.shape, np.float64))

    def torch_side(lg: Any) -> Any:
        soft = torch.softmax((lg + T(g)) / tau, -1)
        if not hard:
            return soft
        one = torch.zeros_like(soft).scatter_(-1, soft.argmax(-1, keepdim=True), 1.0)
        return one - soft.detach() + soft
    run_example(Example(lambda lg: fnn.gumbel_softmax(lg, tau, hard, key=k), torch_side,
                        (logits,)), 12)


def test_gumbel_softmax_samples_the_categorical_distribution() -> None:
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    n = 20_000
    y = np.asarray(fnn.gumbel_softmax(np.broadcast_to(logits, (n, 4)), hard=True,
                                      key=fxr.key(13)))
    assert set(np.unique(y)) <= {0.0, 1.0} and np.all(y.sum(-1) == 1)
    freq = y.mean(0)
    probs = np.exp(logits)
    assert np.all(np.abs(freq - probs) < 5 * np.sqrt(probs * (1 - probs) / n))
    yt = F.gumbel_softmax(T(np.broadcast_to(logits, (n, 4)).copy()), hard=True).numpy()
    assert np.all(np.abs(yt.mean(0) - probs) < 5 * np.sqrt(probs * (1 - probs) / n))
    soft = np.asarray(fnn.gumbel_softmax(logits, tau=0.01, dim=0, key=fxr.key(14)))
    np.testing.assert_allclose(soft.sum(), 1.0)
    assert soft.max() > 0.99  # a small temperature gives nearly one-hot samples


# ----------------------------------------------------------------------------------------
# specific behaviour

def test_embedding_bag_traced_offsets_match_known_offsets() -> None:
    rng = np.random.default_rng(15)
    w = rng.normal(size=(6, 3))
    idx, off = np.array([0, 1, 5, 3, 4, 5, 1, 1]), np.array([0, 2, 2, 5])
    for mode in ("sum", "mean", "max"):
        want = fnn.embedding_bag(idx, w, off, mode=mode, padding_idx=1)
        got = fx.vmap(lambda o: fnn.embedding_bag(idx, w, o, mode=mode, padding_idx=1))(off[None])
        np.testing.assert_allclose(np.asarray(got)[0], want, rtol=1e-15)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq_counts_each_index(mode: str) -> None:
    """Each row's gradient is divided by how often its index occurs in the batch, as for
    embedding. (PyTorch's embedding_bag kernels miscount: with indices [[2, 1, 1]], index 2
    gets half its gradient. The oracle is therefore F.embedding's scaling, reduced per bag.)"""
    rng = np.random.default_rng(17)
    w = rng.normal(size=(4, 3))
    idx = np.array([[2, 1, 1], [0, 2, 3]])
    red = (lambda e: e.sum(1)) if mode == "sum" else (lambda e: e.mean(1))
    run_example(Example(
        lambda w: fnn.embedding_bag(idx, w, mode=mode, scale_grad_by_freq=True),
        lambda w: red(F.embedding(T(idx), w, scale_grad_by_freq=True)), (w,)), 18)
    flat, off = idx.reshape(-1), np.array([0, 3])
    run_example(Example(
        lambda w: fnn.embedding_bag(flat, w, off, mode=mode, scale_grad_by_freq=True),
        lambda w: red(F.embedding(T(idx), w, scale_grad_by_freq=True)), (w,)), 19)


def test_one_hot_keeps_torch_rules_without_dtype() -> None:
    np.testing.assert_array_equal(fnn.one_hot(np.array([2, 0])), [[0, 0, 1], [1, 0, 0]])
    assert fnn.one_hot(np.array([1]), 3).dtype == np.int64
    with pytest.raises(ValueError, match="out of range"):
        fnn.one_hot(np.array([-1, 1]), 3)
    np.testing.assert_array_equal(fnn.one_hot(np.array([-1, 1]), 3, dtype=np.float32),
                                  [[0, 0, 0], [0, 1, 0]])


def test_dot_product_attention_fully_masked_rows_are_jax_s_uniform_average() -> None:
    rng = np.random.default_rng(16)
    q, k, v = rng.normal(size=(1, 2, 1, 3)), rng.normal(size=(1, 4, 1, 3)), \
        rng.normal(size=(1, 4, 1, 2))
    mask = np.ones((2, 4), bool)
    mask[1] = False
    out = np.asarray(fnn.dot_product_attention(q, k, v, mask=mask))
    np.testing.assert_allclose(out[0, 1, 0], v[0, :, 0].mean(0), rtol=1e-14)
    g = fx.grad(lambda q: fnn.dot_product_attention(q, k, v, mask=mask)[0, 1].sum())(q)
    assert np.all(np.asarray(g) == 0)  # no gradient reaches the query of a masked row


def test_gaussian_nll_var_clamp_is_not_differentiated() -> None:
    x, t, v = np.array([0.5]), np.array([0.0]), np.array([1e-9])
    g = fx.grad(lambda v: fnn.gaussian_nll_loss(x, t, v), )(v)
    tv = T(v).requires_grad_()
    F.gaussian_nll_loss(T(x), T(t), tv).backward()
    np.testing.assert_allclose(g, tv.grad.numpy(), rtol=1e-12)
    assert g[0] != 0  # PyTorch's clamp under no_grad: the gradient is taken at eps


# ----------------------------------------------------------------------------------------
# error messages

ERRORS = [
    (lambda: fnn.dropout(np.ones(3), 0.5), ValueError, r"dropout: training with p=0.5 needs a "
     r"PRNG key: pass key="),
    (lambda: fnn.dropout(np.ones(3), 1.5, key=KEY), ValueError, r"p must be in \[0.0, 1.0\]"),
    (lambda: fnn.dropout(KEY, np.ones(3), 0.5, key=KEY), ValueError, r"got a key both"),
    (lambda: fnn.dropout1d(np.ones((2, 3, 4, 5)), 0.5, key=KEY), ShapeError,
     r"dropout1d: expected a 2-d \(C, L\) or 3-d"),
    (lambda: fnn.feature_alpha_dropout(np.ones(3), 0.5, True, key=KEY), ShapeError,
     r"at least 2 dimensions"),
    (lambda: fnn.rrelu(np.ones(3), training=True), ValueError, r"rrelu: training=True needs a "
     r"PRNG key"),
    (lambda: fnn.rrelu(np.ones(3), 0.5, 0.1), ValueError, r"lower \(0.5\) must not be greater"),
    (lambda: fnn.gumbel_softmax(np.ones(3)), ValueError, r"gumbel_softmax: sampling needs a PRNG"),
    (lambda: fnn.gumbel_softmax(np.ones(3), tau=0.0, key=KEY), ValueError, r"tau must be > 0.0"),
    (lambda: fnn.pixel_shuffle(np.ones((1, 3, 2, 2)), 2), ShapeError,
     r"must be divisible by upscale_factor\*\*2 = 4"),
    (lambda: fnn.pixel_unshuffle(np.ones((1, 1, 3, 2)), 2), ShapeError, r"divisible by "
     r"downscale_factor = 2"),
    (lambda: fnn.pdist(np.ones((2, 3, 4))), ShapeError, r"pdist: input must be 2-d"),
    (lambda: fnn.cdist(np.ones((2, 3)), np.ones((2, 4))), ShapeError, r"with the same M"),
    (lambda: fnn.cdist(np.ones((2, 3)), np.ones((2, 3)), p=-1.0), ValueError,
     r"p must be a non-negative number"),
    (lambda: fnn.normalize(np.ones((2, 3)), out=np.ones((2, 3))), ValueError, r"out= is not "
     r"supported"),
    (lambda: fnn.prelu(np.ones((2, 3)), np.ones(2)), ShapeError, r"weight must have 1 element "
     r"or one per channel \(input.shape\[1\] = 3"),
    (lambda: fnn.embedding_bag(np.array([0, 1]), np.ones((3, 2)), np.array([1])), ValueError,
     r"offsets\[0\] must be 0"),
    (lambda: fnn.embedding_bag(np.array([0, 1]), np.ones((3, 2))), ValueError,
     r"a 1-d input needs offsets"),
    (lambda: fnn.embedding_bag(np.array([[0, 1]]), np.ones((3, 2)), np.array([0])), ValueError,
     r"offsets must be None"),
    (lambda: fnn.embedding_bag(np.array([[0, 1]]), np.ones((3, 2)), mode="mean",
                               per_sample_weights=np.ones((1, 2))), ValueError,
     r"only supported for mode='sum'"),
    (lambda: fnn.max_unpool2d(np.ones((1, 1, 2, 2)), np.full((1, 1, 2, 2), 20), 2), ValueError,
     r"invalid index 20: indices must be in \[0, 16\)"),
    (lambda: fnn.max_unpool2d(np.ones((1, 1, 2, 2)), np.zeros((1, 1, 2, 2), int), 2,
                              output_size=(2, 2)), ValueError,
     r"invalid output_size \(2, 2\) \(dim 0 must be between 2 and 6"),
    (lambda: fnn.affine_grid(np.ones((1, 2, 3)), (1, 1, 4, 4, 4), False), ShapeError,
     r"theta must have shape \(1, 3, 4\)"),
    (lambda: fnn.local_response_norm(np.ones((2, 3)), 2), ShapeError, r"3 or more dimensions"),
    (lambda: fnn.lp_pool2d(np.ones((1, 1, 4, 4)), 0, 2), ValueError, r"norm_type must be "
     r"non-zero"),
    (lambda: fnn.multi_margin_loss(np.ones((2, 3)), np.array([0, 1]), p=3), ValueError,
     r"only p == 1 and p == 2"),
    (lambda: fnn.multi_margin_loss(np.ones((2, 3)), np.array([0, 3])), ValueError,
     r"class index 3, out of range for 3 classes"),
    (lambda: fnn.multilabel_margin_loss(np.ones((2, 3)), np.array([[0, 4, -1], [0, 1, 2]])),
     ValueError, r"target values must be in \[-1, 2\]"),
    (lambda: fnn.margin_ranking_loss(np.ones(3), np.ones(3), np.ones((1, 3))), ShapeError,
     r"the same number of dimensions"),
    (lambda: fnn.cosine_embedding_loss(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 1))),
     ShapeError, r"target must be 0-d or 1-d"),
    (lambda: fnn.triplet_margin_loss(np.ones(3), np.ones(3), np.ones(3), margin=0.0),
     ValueError, r"margin must be > 0.0"),
    (lambda: fnn.gaussian_nll_loss(np.ones((2, 3)), np.ones((2, 3)), np.ones((3, 3))),
     ShapeError, r"var of shape \(3, 3\) is of incorrect size"),
    (lambda: fnn.gaussian_nll_loss(np.ones(2), np.ones(2), np.array([1.0, -1.0])), ValueError,
     r"var has negative entry"),
    (lambda: fnn.bilinear(np.ones((2, 3)), np.ones((2, 4)), np.ones((5, 3, 3))), ShapeError,
     r"bilinear: expected input1"),
    (lambda: fnn.dot_product_attention(np.ones((1, 2, 3, 4)), np.ones((1, 2, 2, 4)),
                                       np.ones((1, 2, 2, 4))), ShapeError,
     r"query heads \(3\) must be a multiple of the number of key/value heads \(2\)"),
    (lambda: fnn.dot_product_attention(np.ones((2, 1, 4)), np.ones((2, 1, 4)),
                                       np.ones((2, 1, 4)), mask=np.ones((2, 2))), DTypeError,
     r"mask must be a bool array"),
    (lambda: fnn.one_hot(np.array([0]), 2, axis=3), ValueError, r"axis=3 is out of range"),
    (lambda: fnn.standardize(np.ones(3), algorithm="exact"), ValueError,
     r"algorithm must be one of 'fast', 'stable'"),
]


@pytest.mark.parametrize("call, exc, pattern", ERRORS)
def test_error_messages(call: Callable, exc: type, pattern: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=pattern) as info:
            call()
    assert isinstance(info.value, fx.FunctxError)
    assert "functx.nn." in str(info.value)


# ----------------------------------------------------------------------------------------
# coverage

PORTED = {
    # torch.nn.functional
    "pixel_shuffle", "pixel_unshuffle", "gumbel_softmax", "normalize", "pairwise_distance",
    "pdist", "cdist", "prelu", "rrelu", "softmin", "tanh", "threshold", "embedding_bag",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "local_response_norm", "max_unpool1d",
    "max_unpool2d", "max_unpool3d", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "alpha_dropout", "feature_alpha_dropout", "affine_grid", "bilinear", "margin_ranking_loss",
    "hinge_embedding_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
    "multi_margin_loss", "cosine_embedding_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss", "gaussian_nll_loss", "poisson_nll_loss",
    "soft_margin_loss",
    # jax.nn
    "standardize", "log1mexp", "logmeanexp", "squareplus", "sparse_plus", "one_hot",
    "dot_product_attention",
}


def test_every_ported_function_is_exported_and_checked() -> None:
    assert PORTED <= set(fnn.__all__)
    checked = set(CASES) | set(JAX_CASES) | {n.replace("_hard", "") for n in RANDOM_CALLS}
    assert PORTED - checked == set()
