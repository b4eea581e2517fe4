"""functx.nn through functx's own transforms: finite differences, vmap, and CUDA vs CPU.

The torch-oracle tests (tests/test_nn_*.py) check values and reverse-mode gradients
against PyTorch. This file checks what PyTorch cannot: that every public function of
functx.nn is consistent under functx's transforms. CASES is one table; each row names the
functx.nn function it exercises (``op``), a function of float64 arrays built from it with
fixed options (``fn``; integer targets, indices, masks and keys are ``consts``, passed by
keyword and held fixed), and a maker of small random arguments (a few elements per axis).
For every row:

* ``test_grads``: ``check_grads(order=1, modes=("fwd", "rev"))``: the JVP and the VJP
  (dot-product test) each against central finite differences. Values are drawn away
  from kinks (relu at 0, max-pool ties, grid_sample at pixel boundaries...) by more than
  the finite-difference step, so the checks hold exactly where the function is smooth.
* ``test_vmap_matches_a_loop``: ``fx.vmap(f)`` over 3 stacked examples equals the stack of
  ``f`` applied to each.
* ``test_cuda_matches_cpu``: values and ``fx.grad`` of a scalar reduction on the CUDA
  device equal the CPU's to float64 rounding. Without a CUDA backend these skip with the
  reason; ``FUNCTX_TEST_DEVICE=fakegpu`` runs them on tests/test_backends.py's fake device
  (a local dry run of the logic; see tests/test_cuda.py).

``test_every_public_function_is_in_the_table`` keeps the table complete.
"""
from __future__ import annotations

import math
import os
import sys
import warnings
import zlib
from typing import Any, Callable

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp
import functx.random as fxr
from functx import tree
from functx.test_util import check_grads

B = sys.modules["functx.backends"]
DEVICE_NAME = os.environ.get("FUNCTX_TEST_DEVICE", "cuda")
if DEVICE_NAME == "fakegpu":
    import importlib

    _fake = sys.modules.get("test_backends") or importlib.import_module("tests.test_backends")
    B.register_backend(_fake.FAKE)
AVAILABLE = DEVICE_NAME in B.backends()
needs_device = pytest.mark.skipif(
    not AVAILABLE, reason=f"no CUDA backend on this machine ({B.cuda_status()})")
DEV = B.get_backend(DEVICE_NAME) if AVAILABLE else None

# Public names of functx.nn that are not functions of arrays.
NOT_FUNCTIONS = {"ArgumentError": "an exception class"}
# Functions without a derivative to check: their rows get the vmap and CUDA checks only.
NO_GRAD = {"one_hot": "integer indices in, an integer array out: nothing to differentiate"}

GRAD_EXAMPLES = 2  # random argument draws per row for check_grads
VMAP_BATCH = 3


# -- the table ---------------------------------------------------------------------------------

@attrs.frozen
class Case:
    """One row: ``fn(*make(rng), **consts)`` exercises ``functx.nn.<op>``."""

    op: str
    name: str
    fn: Callable[..., Any]
    make: Callable[[np.random.Generator], tuple]
    consts: dict = attrs.field(factory=dict)
    # check_grads' modes: empty only where the option documents a gradient that is PyTorch's
    # convention rather than the derivative (see the rows that do it); those rows check
    # only that the VJP agrees with the JVP.
    modes: tuple = ("fwd", "rev")
    # For tuple outputs whose other entries are documented to carry no gradient (running
    # statistics are buffers): the entry whose derivatives check_grads checks; the others'
    # tangents must be zero.
    grad_of: int | None = None

    @property
    def id(self) -> str:
        return f"{self.op}[{self.name}]" if self.name else self.op

    def bound(self, consts: dict | None = None) -> Callable[..., Any]:
        c = self.consts if consts is None else consts
        return lambda *args: self.fn(*args, **c)


def normal(*shape: int, scale: float = 1.0) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.standard_normal(shape) * scale


def away(rng: np.random.Generator, shape: tuple, kinks: tuple = (0.0,), scale: float = 1.0,
         margin: float = 0.05) -> np.ndarray:
    """Normal values times ``scale``, each at least ``margin`` away from every kink (far
    more than the finite-difference step, 1e-4)."""
    x = rng.standard_normal(shape) * scale
    for _ in range(1000):
        bad = np.zeros(x.shape, bool)
        for k in kinks:
            bad |= np.abs(x - k) < margin
        if not bad.any():
            return x
        x[bad] = rng.standard_normal(int(bad.sum())) * scale
    raise AssertionError(f"could not draw values away from the kinks {kinks}")


def distinct(rng: np.random.Generator, shape: tuple, gap: float = 0.1) -> np.ndarray:
    """Values pairwise at least ``gap`` apart (a shuffled ladder): max-pooling never ties."""
    n = math.prod(shape)
    ladder = (np.arange(n) - n / 2) * gap + rng.uniform(0, gap / 4)
    return rng.permutation(ladder).reshape(shape)


def fractional(rng: np.random.Generator, shape: tuple, lo: int, hi: int) -> np.ndarray:
    """Coordinates ``k + f`` with integer ``k`` in ``[lo, hi]`` and ``f`` in [0.1, 0.4] or
    [0.6, 0.9]: away from integers (bilinear and bicubic knots, clamping and reflection
    borders) and from half-integers (nearest rounding, reflection borders)."""
    k = rng.integers(lo, hi + 1, shape)
    f = rng.uniform(0.1, 0.4, shape)
    return k + np.where(rng.random(shape) < 0.5, f, 1.0 - f)


def grid_for(p: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    """Pixel coordinates ``p`` along an axis of ``size`` as grid_sample's normalised ones."""
    return 2 * p / (size - 1) - 1 if align_corners else (2 * p + 1) / size - 1


def uniform(lo: float, hi: float, *shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.uniform(lo, hi, shape)


def args(*makers: Callable[[np.random.Generator], np.ndarray]) -> Callable:
    return lambda rng: tuple(m(rng) for m in makers)


def act(op: str, fn: Callable, kinks: tuple = (), scale: float = 2.0, name: str = "",
        shape: tuple = (2, 3)) -> Case:
    return Case(op, name, fn, lambda rng: (away(rng, shape, kinks, scale),))


_CONST_RNG = np.random.default_rng(1234)


def _grid_case(name: str, mode: str, padding_mode: str, align: bool) -> Case:
    h, w = 3, 4

    def make(rng: np.random.Generator) -> tuple:
        gx = grid_for(fractional(rng, (1, 2, 3), -1, w), w, align)
        gy = grid_for(fractional(rng, (1, 2, 3), -1, h), h, align)
        return rng.standard_normal((1, 2, h, w)), np.stack([gx, gy], -1)

    return Case("grid_sample", name, lambda x, g: fnn.grid_sample(
        x, g, mode=mode, padding_mode=padding_mode, align_corners=align), make)


def _grid_case_3d() -> Case:
    d, h, w = 2, 3, 3

    def make(rng: np.random.Generator) -> tuple:
        coords = [grid_for(fractional(rng, (1, 1, 2, 2), -1, n), n, False) for n in (w, h, d)]
        return rng.standard_normal((1, 1, d, h, w)), np.stack(coords, -1)

    return Case("grid_sample", "5d-trilinear-border", lambda x, g: fnn.grid_sample(
        x, g, padding_mode="border", align_corners=False), make)


def _deform_case(name: str, stride: int, padding: int, offset_groups: int, groups: int,
                 with_mask: bool) -> Case:
    c_in, k, h = 2, 2, 4
    h_out = (h + 2 * padding - (k - 1) - 1) // stride + 1

    def make(rng: np.random.Generator) -> tuple:
        x = rng.standard_normal((1, c_in, h, h))
        # Sampled positions are integers plus the offsets: keep those off the integers,
        # where bilinear interpolation has its kinks.
        off = fractional(rng, (1, 2 * offset_groups * k * k, h_out, h_out), -1, 0)
        wt = rng.standard_normal((2 * groups, c_in // groups, k, k))
        out = (x, off, wt, rng.standard_normal(2 * groups))
        if with_mask:
            out += (rng.uniform(0.2, 1.0, (1, offset_groups * k * k, h_out, h_out)),)
        return out

    def fn(x: Any, off: Any, wt: Any, b: Any, mask: Any = None) -> Any:
        return fnn.deform_conv2d(x, off, wt, b, stride=stride, padding=padding, mask=mask)

    return Case("deform_conv2d", name, fn, make)


def _embedding_weight(rng: np.random.Generator) -> np.ndarray:
    """5 rows of 3 whose 2-norms are in [0.3, 0.8] or [1.3, 2.0], away from max_norm=1."""
    w = rng.standard_normal((5, 3))
    norms = np.where(rng.random(5) < 0.5, rng.uniform(0.3, 0.8, 5), rng.uniform(1.3, 2.0, 5))
    return w / np.linalg.norm(w, axis=1, keepdims=True) * norms[:, None]


IDX = np.array([[0, 2, 1], [2, 4, 0]])  # embedding indices (0 and 2 repeat)
TARGET = np.array([0, 2, 1, 2])  # class targets of 4 samples, 3 classes
TARGET_K = np.array([[0, 2], [1, 1]])  # class targets of [N=2, d=2]
CLASS_W = np.array([0.3, 1.0, 2.0])
W23 = np.array([[0.5, 1.0, 2.0], [1.5, 0.2, 1.0]])  # elementwise loss weights
KEY = fxr.key(7)

# -- the names ported from torch.nn.functional and jax.nn (tests/test_nn_ported.py) ------------

def _ladder(gap: float) -> Callable[..., Callable[[np.random.Generator], np.ndarray]]:
    """``distinct`` values ``gap`` apart: differences are multiples of ``gap``, so margins
    that are not (0.95 for gap 0.1...) keep every hinge away from its kink."""
    return lambda *shape: (lambda rng: distinct(rng, shape, gap))


_UNPOOL_IDX = np.asarray(fnn.max_pool2d(distinct(_CONST_RNG, (1, 2, 4, 5)), 2,
                                        return_indices=True)[1])
_BAG_IDX, _BAG_OFF = np.array([0, 2, 1, 2, 4, 0, 3]), np.array([0, 3, 3, 5])
_MULTILABEL_T = np.array([[3, 0, -1, 1], [1, 2, 3, 0]])

PORTED_CASES: list[Case] = [
    act("softmin", lambda x: fnn.softmin(x, dim=1)),
    act("tanh", lambda x: fnn.tanh(x)),
    act("threshold", lambda x: fnn.threshold(x, 0.3, -1.0), (0.3,)),
    Case("prelu", "", lambda x, w: fnn.prelu(x, w),
         lambda rng: (away(rng, (2, 3, 2)), rng.standard_normal(3))),
    Case("prelu", "shared", lambda x, w: fnn.prelu(x, w),
         lambda rng: (away(rng, (4,)), rng.standard_normal(1))),
    act("rrelu", lambda x: fnn.rrelu(x), (0.0,), name="eval"),
    Case("rrelu", "training", lambda x, *, key: fnn.rrelu(x, 0.1, 0.4, training=True, key=key),
         lambda rng: (away(rng, (2, 3)),), dict(key=KEY)),
    act("squareplus", lambda x: fnn.squareplus(x, 0.5)),
    act("sparse_plus", lambda x: fnn.sparse_plus(x)),
    Case("log1mexp", "", lambda x: fnn.log1mexp(x), args(uniform(0.05, 3.0, 2, 3))),
    act("logmeanexp", lambda x: fnn.logmeanexp(x, axis=1), shape=(2, 3, 2)),
    Case("logmeanexp", "where-keepdims",
         lambda x, *, m: fnn.logmeanexp(x, axis=0, where=m, keepdims=True), args(normal(3, 2)),
         dict(m=np.array([[True, False], [True, True], [False, True]]))),
    Case("gumbel_softmax", "", lambda x, *, key: fnn.gumbel_softmax(x, 0.5, key=key),
         args(normal(2, 4)), dict(key=KEY)),
    # straight through: the gradient is the soft sample's, not the (zero) derivative of the
    # one-hot output, so finite differences cannot check it: VJP against JVP only
    Case("gumbel_softmax", "hard-dim0",
         lambda x, *, key: fnn.gumbel_softmax(x, hard=True, dim=0, key=key),
         args(normal(3, 2)), dict(key=KEY), modes=()),
    Case("bilinear", "", lambda a, b, w, c: fnn.bilinear(a, b, w, c),
         args(normal(2, 3), normal(2, 2), normal(4, 3, 2), normal(4))),
    Case("embedding_bag", "mean-offsets", lambda w, *, i, o: fnn.embedding_bag(i, w, o),
         args(normal(5, 3)), dict(i=_BAG_IDX, o=_BAG_OFF)),
    Case("embedding_bag", "sum-per_sample_weights-last_offset",
         lambda w, s, *, i, o: fnn.embedding_bag(i, w, o, mode="sum", per_sample_weights=s,
                                                 include_last_offset=True),
         args(normal(5, 3), normal(7)), dict(i=_BAG_IDX, o=np.append(_BAG_OFF, 7))),
    Case("embedding_bag", "max-2d-padding",
         lambda w, *, i: fnn.embedding_bag(i, w, mode="max", padding_idx=2),
         lambda rng: (distinct(rng, (5, 3)),), dict(i=IDX)),
    Case("one_hot", "jax-float-axis0", lambda t: fnn.one_hot(t, 4, dtype=np.float64, axis=0),
         lambda rng: (rng.integers(-1, 5, (2, 3)),)),
    Case("pixel_shuffle", "", lambda x: fnn.pixel_shuffle(x, 2), args(normal(1, 8, 2, 3))),
    Case("pixel_unshuffle", "", lambda x: fnn.pixel_unshuffle(x, 2), args(normal(2, 1, 4, 2))),
    Case("normalize", "", lambda x: fnn.normalize(x), args(normal(2, 3, 2))),
    Case("normalize", "p1-dim0", lambda x: fnn.normalize(x, 1.0, 0),
         lambda rng: (away(rng, (3, 2)),)),
    Case("normalize", "pinf", lambda x: fnn.normalize(x, math.inf, -1),
         lambda rng: (distinct(rng, (2, 3)),)),
    Case("standardize", "", lambda x: fnn.standardize(x), args(normal(2, 4))),
    Case("standardize", "stable-axes-where",
         lambda x, *, m: fnn.standardize(x, (0, 2), where=m, algorithm="stable"),
         args(normal(2, 2, 3)), dict(m=_CONST_RNG.random((2, 2, 3)) < 0.7)),
    Case("local_response_norm", "", lambda x: fnn.local_response_norm(x, 3, alpha=0.5),
         args(normal(2, 4, 3))),
    Case("pairwise_distance", "", lambda a, b: fnn.pairwise_distance(a, b),
         args(normal(3, 4), normal(3, 4))),
    Case("pairwise_distance", "p1-keepdim-broadcast",
         lambda a, b: fnn.pairwise_distance(a, b, 1.0, keepdim=True),
         lambda rng: (rng.standard_normal((3, 2)), away(rng, (2,), scale=3.0))),
    Case("pdist", "", lambda x: fnn.pdist(x), args(normal(4, 3))),
    Case("pdist", "p3", lambda x: fnn.pdist(x, 3.0), args(normal(3, 2))),
    Case("cdist", "", lambda a, b: fnn.cdist(a, b), args(normal(2, 3, 2), normal(1, 4, 2))),
    Case("cdist", "mm", lambda a, b: fnn.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
         args(normal(3, 2), normal(4, 2))),
    # b below a: every a_i - b_i is positive, so two coordinates' |a_i - b_i| can tie only
    # if 0.1 k = 0.37 m for small integers (never); with mixed signs the ladders' random
    # offsets could make |d1| = |d2| (a kink under the finite differences)
    Case("cdist", "pinf", lambda a, b: fnn.cdist(a, b, math.inf),
         lambda rng: (distinct(rng, (2, 3)), distinct(rng, (3, 3), 0.37) - 5.0)),
    Case("lp_pool1d", "", lambda x: fnn.lp_pool1d(x, 2, 2), args(uniform(0.2, 2.0, 2, 2, 5))),
    Case("lp_pool2d", "ceil", lambda x: fnn.lp_pool2d(x, 1.5, 2, 1, ceil_mode=True),
         args(uniform(0.2, 2.0, 1, 2, 3, 3))),
    Case("lp_pool3d", "", lambda x: fnn.lp_pool3d(x, 3, 2), args(uniform(0.2, 2.0, 1, 1, 2, 2, 2))),
    Case("max_unpool1d", "", lambda x, *, i: fnn.max_unpool1d(x, i, 2, output_size=[5]),
         args(normal(2, 2)), dict(i=np.array([[1, 2], [0, 3]]))),
    Case("max_unpool2d", "", lambda x, *, i: fnn.max_unpool2d(x, i, 2, output_size=(4, 5)),
         args(normal(1, 2, 2, 2)), dict(i=_UNPOOL_IDX)),
    Case("max_unpool3d", "", lambda x, *, i: fnn.max_unpool3d(x, i, 2),
         args(normal(1, 1, 1, 1, 2)), dict(i=np.array([[[[[1, 7]]]]]))),
    Case("affine_grid", "", lambda t: fnn.affine_grid(t, (2, 1, 3, 4), align_corners=False),
         args(normal(2, 2, 3))),
    Case("affine_grid", "3d-align", lambda t: fnn.affine_grid(t, (1, 1, 2, 3, 2), True),
         args(normal(1, 3, 4))),
    Case("dot_product_attention", "",
         lambda q, k, v: fnn.dot_product_attention(q, k, v),
         args(normal(2, 3, 2, 2), normal(2, 4, 2, 2), normal(2, 4, 2, 3))),
    Case("dot_product_attention", "gqa-bias-mask-unbatched",
         lambda q, k, v, b, *, m: fnn.dot_product_attention(q, k, v, b, m, scale=0.4),
         args(normal(3, 4, 2), normal(2, 2, 2), normal(2, 2, 2), normal(4, 3, 2)),
         # row 2 has nothing to attend: JAX's mean of the values
         dict(m=np.array([[1, 0], [0, 1], [0, 0]], bool))),
    Case("dot_product_attention", "causal-lengths-window",
         lambda q, k, v, *, lq, lkv: fnn.dot_product_attention(
             q, k, v, is_causal=True, query_seq_lengths=lq, key_value_seq_lengths=lkv,
             local_window_size=(1, 0)),
         args(normal(2, 3, 1, 2), normal(2, 3, 1, 2), normal(2, 3, 1, 2)),
         dict(lq=np.array([3, 2], np.int32), lkv=np.array([2, 3], np.int32))),
    # -- dropout variants (fixed keys) -----------------------------------------------------------
    Case("dropout", "torch-form", lambda x, *, key: fnn.dropout(x, 0.4, key=key),
         args(normal(3, 4)), dict(key=KEY)),
    Case("dropout1d", "", lambda x, *, key: fnn.dropout1d(x, 0.5, key=key),
         args(normal(2, 3, 4)), dict(key=KEY)),
    Case("dropout2d", "", lambda x, *, key: fnn.dropout2d(x, 0.5, key=key),
         args(normal(2, 3, 2, 2)), dict(key=KEY)),
    Case("dropout3d", "unbatched", lambda x, *, key: fnn.dropout3d(x, 0.5, key=key),
         args(normal(3, 2, 1, 2)), dict(key=KEY)),
    Case("alpha_dropout", "", lambda x, *, key: fnn.alpha_dropout(x, 0.3, True, key=key),
         args(normal(3, 4)), dict(key=KEY)),
    Case("feature_alpha_dropout", "",
         lambda x, *, key: fnn.feature_alpha_dropout(x, 0.3, True, key=key),
         args(normal(3, 4, 2)), dict(key=KEY)),
    # -- margin and likelihood losses (differences on ladders keep hinges off their kinks) ----
    Case("margin_ranking_loss", "", lambda a, d, *, y: fnn.margin_ranking_loss(a, a - d, y, 0.5),
         lambda rng: (rng.standard_normal(4), away(rng, (4,), (-0.5, 0.5))),
         dict(y=np.array([1.0, -1.0, 1.0, -1.0]))),
    Case("hinge_embedding_loss", "", lambda x, *, y: fnn.hinge_embedding_loss(
        x, y, reduction="sum"), lambda rng: (away(rng, (2, 3), (1.0,)),),
         dict(y=np.array([[1.0, -1.0, -1.0], [-1.0, 1.0, -1.0]]))),
    Case("soft_margin_loss", "", lambda x, *, y: fnn.soft_margin_loss(x, y), args(normal(2, 3)),
         dict(y=np.array([[1.0, -1.0, -1.0], [-1.0, 1.0, 1.0]]))),
    Case("multilabel_margin_loss", "", lambda x, *, t: fnn.multilabel_margin_loss(x, t),
         args(_ladder(0.3)(2, 4)), dict(t=_MULTILABEL_T)),
    Case("multilabel_soft_margin_loss", "weight-none",
         lambda x, y, *, w: fnn.multilabel_soft_margin_loss(x, y, w, reduction="none"),
         args(normal(2, 3), uniform(0.0, 1.0, 2, 3)), dict(w=np.array([0.5, 1.0, 2.0]))),
    Case("multi_margin_loss", "", lambda x, *, t: fnn.multi_margin_loss(x, t, margin=0.95),
         args(_ladder(0.1)(4, 3)), dict(t=TARGET)),
    Case("multi_margin_loss", "p2-weight-sum", lambda x, *, t, w: fnn.multi_margin_loss(
        x, t, p=2, margin=0.95, weight=w, reduction="sum"),
         args(_ladder(0.1)(4, 3)), dict(t=TARGET, w=CLASS_W)),
    Case("cosine_embedding_loss", "", lambda a, b, *, y: fnn.cosine_embedding_loss(a, b, y),
         args(normal(3, 4), normal(3, 4)), dict(y=np.array([1.0, -1.0, -1.0]))),
    Case("triplet_margin_loss", "", lambda a, p, n: fnn.triplet_margin_loss(a, p, n),
         args(normal(3, 4), normal(3, 4), normal(3, 4))),
    Case("triplet_margin_loss", "swap-p1-none", lambda a, p, n: fnn.triplet_margin_loss(
        a, p, n, margin=2.0, p=1, swap=True, reduction="none"),
         args(normal(3, 2), normal(3, 2), normal(3, 2))),
    Case("triplet_margin_with_distance_loss", "",
         lambda a, p, n: fnn.triplet_margin_with_distance_loss(a, p, n, margin=3.0),
         args(normal(3, 4), normal(3, 4), normal(3, 4))),
    Case("gaussian_nll_loss", "", lambda x, t, v: fnn.gaussian_nll_loss(x, t, v),
         args(normal(2, 3), normal(2, 3), uniform(0.2, 2.0, 2, 3))),
    Case("gaussian_nll_loss", "short-var-full-sum",
         lambda x, t, v: fnn.gaussian_nll_loss(x, t, v, full=True, reduction="sum"),
         args(normal(2, 3), normal(2, 3), uniform(0.2, 2.0, 2))),
    Case("poisson_nll_loss", "", lambda x, t: fnn.poisson_nll_loss(x, t),
         args(normal(2, 3), uniform(0.0, 4.0, 2, 3))),
    Case("poisson_nll_loss", "rates-full-none",
         lambda x, t: fnn.poisson_nll_loss(x, t, log_input=False, full=True, reduction="none"),
         lambda rng: (rng.uniform(0.2, 3.0, (2, 3)), away(rng, (2, 3), (1.0,)) ** 2)),
]


CASES: list[Case] = [
    # -- activations -------------------------------------------------------------------------
    act("relu", lambda x: fnn.relu(x), (0.0,)),
    act("hardtanh", lambda x: fnn.hardtanh(x), (-1.0, 1.0)),
    act("hardtanh", lambda x: fnn.hardtanh(x, -0.5, 2.0), (-0.5, 2.0), name="-0.5,2"),
    act("relu6", lambda x: fnn.relu6(x), (0.0, 6.0), scale=5.0),
    act("leaky_relu", lambda x: fnn.leaky_relu(x, 0.2), (0.0,)),
    act("elu", lambda x: fnn.elu(x, alpha=1.3), (0.0,)),
    act("selu", lambda x: fnn.selu(x), (0.0,)),
    act("celu", lambda x: fnn.celu(x, alpha=0.7), (0.0,)),
    act("gelu", lambda x: fnn.gelu(x)),
    act("gelu", lambda x: fnn.gelu(x, approximate="tanh"), name="tanh"),
    act("sigmoid", lambda x: fnn.sigmoid(x), scale=4.0),
    act("silu", lambda x: fnn.silu(x)),
    act("softplus", lambda x: fnn.softplus(x)),
    act("softplus", lambda x: fnn.softplus(x, beta=2.0, threshold=3.0), (1.5,),
        name="beta2-threshold3"),
    act("mish", lambda x: fnn.mish(x)),
    act("softsign", lambda x: fnn.softsign(x), (0.0,)),
    act("hardswish", lambda x: fnn.hardswish(x), (-3.0, 3.0), scale=4.0),
    act("hardsigmoid", lambda x: fnn.hardsigmoid(x), (-3.0, 3.0), scale=4.0),
    act("log_sigmoid", lambda x: fnn.log_sigmoid(x), scale=4.0),
    act("logsigmoid", lambda x: fnn.logsigmoid(x), scale=4.0),
    act("softmax", lambda x: fnn.softmax(x, dim=1)),
    act("softmax", lambda x: fnn.softmax(x, dim=0), name="dim0", shape=(3, 2, 2)),
    act("log_softmax", lambda x: fnn.log_softmax(x, dim=-1)),
    act("log_softmax", lambda x: fnn.log_softmax(x, dim=0), name="dim0", shape=(3, 2)),
    act("glu", lambda x: fnn.glu(x), shape=(2, 4)),
    act("glu", lambda x: fnn.glu(x, dim=0), name="dim0", shape=(4, 3)),
    # -- basic -------------------------------------------------------------------------------
    Case("linear", "", lambda x, w, b: fnn.linear(x, w, b), args(normal(2, 3), normal(4, 3),
                                                                  normal(4))),
    Case("linear", "no-bias-1d", lambda x, w: fnn.linear(x, w), args(normal(3), normal(2, 3))),
    Case("embedding", "", lambda w, *, i: fnn.embedding(i, w), args(normal(5, 3)),
         dict(i=IDX)),
    # padding_idx, max_norm and scale_grad_by_freq give PyTorch's gradient, which is not the
    # derivative of the output (the padding row's, the rescaling's and the frequency's
    # contributions are dropped or scaled): finite differences cannot check it (check_grads
    # checks each mode against them), so only the VJP's agreement with the JVP is checked
    # (the values are checked against PyTorch in tests/test_nn_functional.py).
    Case("embedding", "padding_idx", lambda w, *, i: fnn.embedding(i, w, padding_idx=2),
         args(normal(5, 3)), dict(i=IDX), modes=()),
    Case("embedding", "max_norm", lambda w, *, i: fnn.embedding(i, w, max_norm=1.0),
         lambda rng: (_embedding_weight(rng),), dict(i=IDX), modes=()),
    Case("embedding", "scale_grad_by_freq",
         lambda w, *, i: fnn.embedding(i, w, scale_grad_by_freq=True), args(normal(5, 3)),
         dict(i=IDX), modes=()),
    Case("one_hot", "", lambda t: fnn.one_hot(t, num_classes=4),
         lambda rng: (rng.integers(0, 4, (2, 3)),)),
    Case("pad", "constant", lambda x: fnn.pad(x, (1, 2), value=0.5), args(normal(2, 3))),
    Case("pad", "constant-crop", lambda x: fnn.pad(x, (-1, 2, 1, -1)), args(normal(2, 3, 4))),
    Case("pad", "reflect", lambda x: fnn.pad(x, (2, 1), mode="reflect"), args(normal(2, 4))),
    Case("pad", "reflect-2d", lambda x: fnn.pad(x, (1, 1, 2, 0), mode="reflect"),
         args(normal(1, 2, 3, 3))),
    Case("pad", "replicate", lambda x: fnn.pad(x, (1, 2, 0, 1), mode="replicate"),
         args(normal(2, 2, 3))),
    Case("pad", "circular", lambda x: fnn.pad(x, (2, 1), mode="circular"), args(normal(2, 3))),
    Case("pad", "circular-3d", lambda x: fnn.pad(x, (1, 0, 0, 1, 1, 1), mode="circular"),
         args(normal(1, 1, 2, 2, 3))),
    # -- convolution -------------------------------------------------------------------------
    Case("conv1d", "", lambda x, w, b: fnn.conv1d(x, w, b, stride=2, padding=1),
         args(normal(2, 2, 5), normal(3, 2, 3), normal(3))),
    Case("conv1d", "groups-dilation", lambda x, w: fnn.conv1d(x, w, dilation=2, groups=2),
         args(normal(1, 4, 6), normal(2, 2, 2))),
    Case("conv2d", "", lambda x, w, b: fnn.conv2d(x, w, b, padding=1),
         args(normal(1, 2, 3, 4), normal(3, 2, 2, 3), normal(3))),
    Case("conv2d", "stride-groups-unbatched",
         lambda x, w: fnn.conv2d(x, w, stride=(2, 1), padding="valid", groups=2),
         args(normal(2, 4, 3), normal(4, 1, 2, 2))),
    Case("conv2d", "same", lambda x, w: fnn.conv2d(x, w, padding="same", dilation=(1, 2)),
         args(normal(1, 1, 3, 4), normal(2, 1, 2, 2))),
    Case("conv3d", "", lambda x, w, b: fnn.conv3d(x, w, b, padding=(1, 0, 0)),
         args(normal(1, 2, 2, 3, 3), normal(2, 2, 2, 2, 2), normal(2))),
    Case("conv_transpose1d", "",
         lambda x, w, b: fnn.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1),
         args(normal(2, 2, 3), normal(2, 3, 3), normal(3))),
    Case("conv_transpose1d", "groups-dilation",
         lambda x, w: fnn.conv_transpose1d(x, w, groups=2, dilation=2),
         args(normal(1, 2, 3), normal(2, 1, 2))),
    Case("conv_transpose2d", "",
         lambda x, w, b: fnn.conv_transpose2d(x, w, b, stride=(2, 1), padding=(0, 1)),
         args(normal(1, 2, 2, 3), normal(2, 2, 2, 3), normal(2))),
    Case("conv_transpose3d", "", lambda x, w: fnn.conv_transpose3d(x, w, stride=2),
         args(normal(1, 1, 2, 2, 1), normal(1, 2, 2, 1, 2))),
    Case("unfold", "", lambda x: fnn.unfold(x, 2, padding=1, stride=(1, 2)),
         args(normal(1, 2, 3, 3))),
    Case("unfold", "dilation-unbatched", lambda x: fnn.unfold(x, (2, 1), dilation=(2, 1)),
         args(normal(2, 3, 3))),
    Case("fold", "", lambda x: fnn.fold(x, (3, 3), 2), args(normal(1, 8, 4))),
    Case("fold", "stride-padding", lambda x: fnn.fold(x, (4, 3), (2, 2), padding=1, stride=2),
         args(normal(4, 6))),
    # -- pooling (max: pairwise distinct values, so no window ever ties) ---------------------
    Case("max_pool1d", "", lambda x: fnn.max_pool1d(x, 2),
         lambda rng: (distinct(rng, (2, 2, 5)),)),
    Case("max_pool1d", "padding-dilation-ceil",
         lambda x: fnn.max_pool1d(x, 2, stride=2, padding=1, dilation=2, ceil_mode=True),
         lambda rng: (distinct(rng, (1, 2, 6)),)),
    Case("max_pool2d", "", lambda x: fnn.max_pool2d(x, 2, stride=1),
         lambda rng: (distinct(rng, (1, 2, 3, 3)),)),
    Case("max_pool2d", "indices",
         lambda x: fnn.max_pool2d(x, (2, 3), stride=2, padding=1, return_indices=True),
         lambda rng: (distinct(rng, (1, 1, 3, 4)),)),
    Case("max_pool3d", "", lambda x: fnn.max_pool3d(x, 2, ceil_mode=True),
         lambda rng: (distinct(rng, (1, 1, 3, 2, 3)),)),
    Case("avg_pool1d", "", lambda x: fnn.avg_pool1d(x, 3, stride=2, padding=1),
         args(normal(2, 2, 5))),
    Case("avg_pool1d", "ceil-exclude-pad",
         lambda x: fnn.avg_pool1d(x, 2, padding=1, ceil_mode=True, count_include_pad=False),
         args(normal(1, 2, 4))),
    Case("avg_pool2d", "", lambda x: fnn.avg_pool2d(x, 2, stride=1, padding=1),
         args(normal(1, 2, 3, 3))),
    Case("avg_pool2d", "divisor", lambda x: fnn.avg_pool2d(x, (2, 3), divisor_override=4),
         args(normal(1, 1, 4, 3))),
    Case("avg_pool3d", "", lambda x: fnn.avg_pool3d(x, 2, padding=(1, 0, 0),
                                                    count_include_pad=False),
         args(normal(1, 1, 2, 3, 2))),
    Case("adaptive_avg_pool1d", "", lambda x: fnn.adaptive_avg_pool1d(x, 3),
         args(normal(2, 2, 5))),
    Case("adaptive_avg_pool2d", "", lambda x: fnn.adaptive_avg_pool2d(x, (2, None)),
         args(normal(1, 2, 3, 3))),
    Case("adaptive_avg_pool3d", "", lambda x: fnn.adaptive_avg_pool3d(x, (2, 1, 2)),
         args(normal(1, 1, 3, 2, 3))),
    Case("adaptive_max_pool1d", "", lambda x: fnn.adaptive_max_pool1d(x, 3),
         lambda rng: (distinct(rng, (2, 2, 5)),)),
    Case("adaptive_max_pool2d", "indices",
         lambda x: fnn.adaptive_max_pool2d(x, (2, 3), return_indices=True),
         lambda rng: (distinct(rng, (1, 2, 3, 4)),)),
    Case("adaptive_max_pool3d", "", lambda x: fnn.adaptive_max_pool3d(x, 2),
         lambda rng: (distinct(rng, (1, 1, 3, 3, 2)),)),
    # -- resampling --------------------------------------------------------------------------
    Case("interpolate", "nearest", lambda x: fnn.interpolate(x, scale_factor=2.0),
         args(normal(1, 2, 3))),
    Case("interpolate", "nearest-2d-size", lambda x: fnn.interpolate(x, size=(3, 5)),
         args(normal(1, 1, 2, 3))),
    Case("interpolate", "nearest-exact",
         lambda x: fnn.interpolate(x, scale_factor=1.5, mode="nearest-exact"),
         args(normal(1, 1, 3, 2))),
    Case("interpolate", "linear", lambda x: fnn.interpolate(x, size=5, mode="linear"),
         args(normal(1, 2, 3))),
    Case("interpolate", "linear-align",
         lambda x: fnn.interpolate(x, size=4, mode="linear", align_corners=True),
         args(normal(2, 1, 3))),
    Case("interpolate", "bilinear",
         lambda x: fnn.interpolate(x, size=(4, 3), mode="bilinear", align_corners=False),
         args(normal(1, 2, 2, 3))),
    Case("interpolate", "bilinear-align",
         lambda x: fnn.interpolate(x, scale_factor=(2.0, 1.5), mode="bilinear",
                                   align_corners=True), args(normal(1, 1, 2, 2))),
    Case("interpolate", "bilinear-antialias",
         lambda x: fnn.interpolate(x, size=(2, 3), mode="bilinear", antialias=True),
         args(normal(1, 1, 4, 5))),
    Case("interpolate", "bicubic",
         lambda x: fnn.interpolate(x, size=(3, 4), mode="bicubic", align_corners=False),
         args(normal(1, 1, 3, 3))),
    Case("interpolate", "bicubic-antialias-align",
         lambda x: fnn.interpolate(x, size=(2, 2), mode="bicubic", align_corners=True,
                                   antialias=True), args(normal(1, 1, 4, 3))),
    Case("interpolate", "trilinear",
         lambda x: fnn.interpolate(x, size=(3, 2, 3), mode="trilinear"),
         args(normal(1, 1, 2, 2, 2))),
    Case("interpolate", "area", lambda x: fnn.interpolate(x, size=3, mode="area"),
         args(normal(1, 2, 5))),
    Case("interpolate", "area-2d", lambda x: fnn.interpolate(x, size=(2, 3), mode="area"),
         args(normal(1, 1, 3, 4))),
    Case("upsample", "", lambda x: fnn.upsample(x, scale_factor=2, mode="bilinear",
                                                align_corners=False), args(normal(1, 1, 2, 2))),
    Case("upsample_nearest", "", lambda x: fnn.upsample_nearest(x, scale_factor=2),
         args(normal(1, 2, 2, 2))),
    Case("upsample_bilinear", "", lambda x: fnn.upsample_bilinear(x, size=(3, 4)),
         args(normal(1, 1, 2, 3))),
    _grid_case("bilinear-zeros", "bilinear", "zeros", False),
    _grid_case("bilinear-border-align", "bilinear", "border", True),
    _grid_case("bilinear-reflection", "bilinear", "reflection", False),
    _grid_case("bilinear-reflection-align", "bilinear", "reflection", True),
    _grid_case("nearest-zeros", "nearest", "zeros", False),
    _grid_case("nearest-reflection-align", "nearest", "reflection", True),
    _grid_case("bicubic-zeros", "bicubic", "zeros", False),
    _grid_case("bicubic-border", "bicubic", "border", False),
    _grid_case("bicubic-reflection-align", "bicubic", "reflection", True),
    _grid_case_3d(),
    _deform_case("", 1, 0, 1, 1, False),
    _deform_case("mask-stride-padding-groups", 2, 1, 2, 2, True),
    # -- attention ---------------------------------------------------------------------------
    Case("scaled_dot_product_attention", "",
         lambda q, k, v: fnn.scaled_dot_product_attention(q, k, v),
         args(normal(2, 3, 2), normal(2, 4, 2), normal(2, 4, 3))),
    Case("scaled_dot_product_attention", "bool-mask",
         lambda q, k, v, *, m: fnn.scaled_dot_product_attention(q, k, v, attn_mask=m),
         args(normal(3, 2), normal(4, 2), normal(4, 2)),
         # row 2 fully masked: PyTorch's zero output (and zero gradient)
         dict(m=np.array([[1, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]], bool))),
    Case("scaled_dot_product_attention", "float-mask-scale",
         lambda q, k, v, *, m: fnn.scaled_dot_product_attention(q, k, v, attn_mask=m,
                                                                scale=0.3),
         args(normal(1, 3, 2), normal(1, 3, 2), normal(1, 3, 2)),
         dict(m=_CONST_RNG.standard_normal((3, 3)))),
    Case("scaled_dot_product_attention", "causal",
         lambda q, k, v: fnn.scaled_dot_product_attention(q, k, v, is_causal=True),
         args(normal(2, 3, 2), normal(2, 3, 2), normal(2, 3, 2))),
    Case("scaled_dot_product_attention", "bias-softcap",
         lambda q, k, v, b: fnn.scaled_dot_product_attention(q, k, v, bias=b, softcap=1.5),
         args(normal(2, 3, 2, scale=2.0), normal(2, 4, 2), normal(2, 4, 2), normal(3, 4))),
    Case("scaled_dot_product_attention", "gqa-causal-recompute",
         lambda q, k, v: fnn.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                          enable_gqa=True, recompute=True),
         args(normal(4, 3, 2), normal(2, 3, 2), normal(2, 3, 2))),
    Case("scaled_dot_product_attention", "dropout",
         lambda q, k, v, *, key: fnn.scaled_dot_product_attention(
             q, k, v, dropout_p=0.4, dropout_key=key),
         args(normal(2, 3, 2), normal(2, 3, 2), normal(2, 3, 2)), dict(key=KEY)),
    # -- dropout -----------------------------------------------------------------------------
    Case("dropout", "", lambda x, *, key: fnn.dropout(key, x, 0.5), args(normal(3, 4)),
         dict(key=KEY)),
    Case("dropout", "broadcast_dims",
         lambda x, *, key: fnn.dropout(key, x, 0.3, broadcast_dims=(0,)), args(normal(3, 4)),
         dict(key=KEY)),
    # -- normalisation -----------------------------------------------------------------------
    Case("layer_norm", "", lambda x: fnn.layer_norm(x, (2, 3)), args(normal(2, 2, 3))),
    Case("layer_norm", "affine", lambda x, w, b: fnn.layer_norm(x, 3, w, b, eps=1e-3),
         args(normal(2, 3), normal(3), normal(3))),
    Case("rms_norm", "", lambda x: fnn.rms_norm(x, (3,)), args(normal(2, 3))),
    Case("rms_norm", "weight-eps", lambda x, w: fnn.rms_norm(x, (2, 2), w, eps=1e-3),
         args(normal(3, 2, 2), normal(2, 2))),
    Case("group_norm", "", lambda x: fnn.group_norm(x, 2), args(normal(2, 4, 3))),
    Case("group_norm", "affine", lambda x, w, b: fnn.group_norm(x, 1, w, b),
         args(normal(2, 3, 2), normal(3), normal(3))),
    Case("batch_norm", "eval",
         lambda x, w, b, *, rm, rv: fnn.batch_norm(x, rm, rv, w, b),
         args(normal(3, 2, 2), normal(2), normal(2)),
         dict(rm=np.array([0.2, -0.5]), rv=np.array([0.5, 2.0]))),
    Case("batch_norm", "training", lambda x: fnn.batch_norm(x, None, None, training=True),
         args(normal(3, 2, 2))),
    Case("batch_norm", "training-running-affine",
         lambda x, w, b, *, rm, rv: fnn.batch_norm(x, rm, rv, w, b, training=True,
                                                   momentum=0.3),
         args(normal(3, 2), normal(2), normal(2)),
         dict(rm=np.array([0.2, -0.5]), rv=np.array([0.5, 2.0])), grad_of=0),
    Case("instance_norm", "", lambda x: fnn.instance_norm(x), args(normal(2, 2, 3))),
    Case("instance_norm", "running-affine",
         lambda x, w, b, *, rm, rv: fnn.instance_norm(x, rm, rv, w, b),
         args(normal(2, 2, 2, 2), normal(2), normal(2)),
         dict(rm=np.array([0.2, -0.5]), rv=np.array([0.5, 2.0])), grad_of=0),
    Case("instance_norm", "running-stats",
         lambda x, *, rm, rv: fnn.instance_norm(x, rm, rv, use_input_stats=False),
         args(normal(1, 2, 3)), dict(rm=np.array([0.2, -0.5]), rv=np.array([0.5, 2.0]))),
    # -- losses ------------------------------------------------------------------------------
    Case("nll_loss", "", lambda x, *, t: fnn.nll_loss(x, t), args(normal(4, 3)),
         dict(t=TARGET)),
    Case("nll_loss", "weight-sum", lambda x, *, t, w: fnn.nll_loss(x, t, w, reduction="sum"),
         args(normal(4, 3)), dict(t=TARGET, w=CLASS_W)),
    Case("nll_loss", "ignore-weight-mean",
         lambda x, *, t, w: fnn.nll_loss(x, t, w, ignore_index=1), args(normal(4, 3)),
         dict(t=TARGET, w=CLASS_W)),
    Case("nll_loss", "kdim-none", lambda x, *, t: fnn.nll_loss(x, t, reduction="none"),
         args(normal(2, 3, 2)), dict(t=TARGET_K)),
    Case("cross_entropy", "", lambda x, *, t: fnn.cross_entropy(x, t), args(normal(4, 3)),
         dict(t=TARGET)),
    Case("cross_entropy", "smoothing-weight-sum",
         lambda x, *, t, w: fnn.cross_entropy(x, t, w, reduction="sum", label_smoothing=0.2),
         args(normal(4, 3)), dict(t=TARGET, w=CLASS_W)),
    Case("cross_entropy", "kdim-ignore-smoothing",
         lambda x, *, t: fnn.cross_entropy(x, t, ignore_index=2, label_smoothing=0.1),
         args(normal(2, 3, 2)), dict(t=TARGET_K)),
    Case("cross_entropy", "probabilities-none",
         lambda x, p: fnn.cross_entropy(x, p, reduction="none", label_smoothing=0.3),
         args(normal(4, 3), uniform(0.1, 1.0, 4, 3))),
    Case("binary_cross_entropy", "", lambda x, y: fnn.binary_cross_entropy(x, y),
         args(uniform(0.1, 0.9, 2, 3), uniform(0.0, 1.0, 2, 3))),
    Case("binary_cross_entropy", "weight-sum",
         lambda x, y, *, w: fnn.binary_cross_entropy(x, y, w, reduction="sum"),
         args(uniform(0.1, 0.9, 2, 3), uniform(0.0, 1.0, 2, 3)),
         dict(w=np.array([0.5, 1.0, 2.0]))),
    Case("binary_cross_entropy", "none",
         lambda x, y: fnn.binary_cross_entropy(x, y, reduction="none"),
         args(uniform(0.1, 0.9, 4), uniform(0.0, 1.0, 4))),
    Case("binary_cross_entropy_with_logits", "",
         lambda x, y: fnn.binary_cross_entropy_with_logits(x, y),
         args(normal(2, 3, scale=2.0), uniform(0.0, 1.0, 2, 3))),
    Case("binary_cross_entropy_with_logits", "pos_weight-weight-sum",
         lambda x, y, *, w, pw: fnn.binary_cross_entropy_with_logits(
             x, y, w, reduction="sum", pos_weight=pw),
         args(normal(2, 3, scale=2.0), uniform(0.0, 1.0, 2, 3)),
         dict(w=np.array([[0.5], [2.0]]), pw=np.array([0.5, 2.0, 1.0]))),
    Case("binary_cross_entropy_with_logits", "none",
         lambda x, y: fnn.binary_cross_entropy_with_logits(x, y, reduction="none"),
         args(normal(4), uniform(0.0, 1.0, 4))),
    Case("kl_div", "batchmean", lambda x, y: fnn.kl_div(x, y, reduction="batchmean"),
         args(normal(2, 3), uniform(0.1, 1.0, 2, 3))),
    Case("kl_div", "log_target-sum",
         lambda x, y: fnn.kl_div(x, y, reduction="sum", log_target=True),
         args(normal(2, 3), normal(2, 3))),
    Case("kl_div", "none", lambda x, y: fnn.kl_div(x, y, reduction="none"),
         args(normal(4), uniform(0.1, 1.0, 4))),
    Case("mse_loss", "", lambda x, y: fnn.mse_loss(x, y), args(normal(2, 3), normal(2, 3))),
    Case("mse_loss", "sum", lambda x, y: fnn.mse_loss(x, y, reduction="sum"),
         args(normal(2, 3), normal(2, 3))),
    Case("mse_loss", "weight-none",
         lambda x, y, *, w: fnn.mse_loss(x, y, reduction="none", weight=w),
         args(normal(2, 3), normal(2, 3)), dict(w=W23)),
    # The regression losses' kinks are in d = input - target: draw d away from them.
    Case("l1_loss", "", lambda x, d: fnn.l1_loss(x, x - d),
         lambda rng: (rng.standard_normal((2, 3)), away(rng, (2, 3), (0.0,)))),
    Case("l1_loss", "weight-sum",
         lambda x, d, *, w: fnn.l1_loss(x, x - d, reduction="sum", weight=w),
         lambda rng: (rng.standard_normal((2, 3)), away(rng, (2, 3), (0.0,))),
         dict(w=W23)),
    Case("smooth_l1_loss", "", lambda x, d: fnn.smooth_l1_loss(x, x - d),
         lambda rng: (rng.standard_normal((2, 3)), away(rng, (2, 3), (-1.0, 1.0), 2.0))),
    Case("smooth_l1_loss", "beta-sum",
         lambda x, d: fnn.smooth_l1_loss(x, x - d, reduction="sum", beta=0.5),
         lambda rng: (rng.standard_normal((2, 3)), away(rng, (2, 3), (-0.5, 0.0, 0.5)))),
    Case("huber_loss", "", lambda x, d: fnn.huber_loss(x, x - d),
         lambda rng: (rng.standard_normal((2, 3)), away(rng, (2, 3), (-1.0, 1.0), 2.0))),
    Case("huber_loss", "delta-weight-none",
         lambda x, d, *, w: fnn.huber_loss(x, x - d, reduction="none", delta=0.7, weight=w),
         lambda rng: (rng.standard_normal((2, 3)), away(rng, (2, 3), (-0.7, 0.7))),
         dict(w=W23)),
    Case("cosine_similarity", "", lambda a, b: fnn.cosine_similarity(a, b),
         args(normal(3, 4), normal(3, 4))),
    Case("cosine_similarity", "dim0-broadcast",
         lambda a, b: fnn.cosine_similarity(a, b, dim=0, eps=1e-6),
         args(normal(3, 2, 2), normal(3, 1, 2))),
    Case("ctc_loss", "", lambda lp, *, t, il, tl: fnn.ctc_loss(lp, t, il, tl),
         args(normal(6, 2, 4)), dict(t=np.array([[1, 2, 2], [3, 1, 0]]), il=np.array([6, 5]),
                                     tl=np.array([3, 2]))),
    Case("ctc_loss", "concatenated-sum-log_softmax-lists",  # lengths as Python lists
         lambda z, *, t: fnn.ctc_loss(fnn.log_softmax(z, 2), t, [6, 5], [3, 2],
                                      reduction="sum"),
         args(normal(6, 2, 4)), dict(t=np.array([1, 2, 2, 3, 1]))),
    Case("ctc_loss", "blank3-none",
         lambda lp, *, t, il, tl: fnn.ctc_loss(lp, t, il, tl, blank=3, reduction="none"),
         args(normal(6, 2, 4)), dict(t=np.array([[1, 2, 2], [0, 1, 0]]), il=np.array([6, 4]),
                                     tl=np.array([3, 2]))),
    Case("ctc_loss", "zero_infinity-unbatched-scalars",  # lengths: a Python and a NumPy int
         lambda lp, *, t: fnn.ctc_loss(lp, t, 4, np.int64(2), zero_infinity=True),
         args(normal(4, 3)), dict(t=np.array([1, 2]))),
    *PORTED_CASES,
]

GRAD_CASES = [c for c in CASES if c.op not in NO_GRAD]


def per_case(cases: list[Case]) -> Any:
    return pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])


def float_leaves(x: Any) -> list:
    return [v for v in tree.leaves(x) if np.dtype(v.dtype).kind == "f"]


@pytest.fixture(autouse=True)
def _no_warnings() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*deprecated.*")
        yield


# -- coverage ----------------------------------------------------------------------------------

def test_every_public_function_is_in_the_table() -> None:
    public = set(fnn.__all__) - set(NOT_FUNCTIONS)
    missing = sorted(public - {c.op for c in CASES})
    assert not missing, f"functx.nn functions without a row in CASES: {missing}"
    unknown = sorted({c.op for c in CASES} - public)
    assert not unknown, f"rows naming no public functx.nn function: {unknown}"
    assert set(NO_GRAD) <= public and set(NOT_FUNCTIONS) <= set(fnn.__all__)
    assert public - set(NO_GRAD) == {c.op for c in GRAD_CASES}
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), "row ids must be unique"


@per_case(CASES)
def test_each_row_calls_its_function(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row's ``fn`` really goes through ``functx.nn.<op>`` (coverage is not just a
    label)."""
    calls = []
    original = getattr(fnn, case.op)

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return original(*a, **k)

    monkeypatch.setattr(fnn, case.op, counted)
    case.bound()(*case.make(np.random.default_rng(0)))
    assert calls, f"{case.id}: fn never calls functx.nn.{case.op}"


# -- derivatives: JVP against finite differences, VJP against JVP --------------------------------

@per_case(GRAD_CASES)
@settings(max_examples=GRAD_EXAMPLES, database=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_grads(case: Case, seed: int) -> None:
    xs = case.make(np.random.default_rng(seed))
    assert all(np.asarray(x).dtype == np.float64 for x in xs)
    f = case.bound()
    if case.grad_of is not None:
        rng = np.random.default_rng(seed)
        _, tangents = fx.jvp(f, xs, tuple(rng.standard_normal(np.shape(x)) for x in xs))
        for i, t in enumerate(tangents):
            if i != case.grad_of:
                assert not np.any(np.asarray(t)), f"{case.id}: output {i} has a tangent"
        f = (lambda g, k: lambda *a: g(*a)[k])(f, case.grad_of)
    if not case.modes:  # PyTorch's gradient convention: <J v, u> == <v, VJP(u)> only
        rng = np.random.default_rng(seed)
        v = tuple(rng.standard_normal(np.shape(x)) for x in xs)
        out, jv = fx.jvp(f, xs, v)
        u = rng.standard_normal(np.shape(out))
        vjp_u = fx.vjp(f, *xs)[1](u)
        lhs = float(np.sum(np.asarray(jv) * u))
        rhs = float(sum(np.sum(a * np.asarray(b)) for a, b in zip(v, vjp_u)))
        assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-12), case.id
        return
    check_grads(f, xs, order=1, modes=case.modes)  # float64's default tolerances


# -- vmap against a loop -----------------------------------------------------------------------

@per_case(CASES)
def test_vmap_matches_a_loop(case: Case) -> None:
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    f = case.bound()
    examples = [case.make(rng) for _ in range(VMAP_BATCH)]
    stacked = tuple(np.stack(xs) for xs in zip(*examples))
    want = tree.map(lambda *outs: np.stack(outs), *[f(*ex) for ex in examples])
    got = fx.vmap(f)(*stacked)
    got_leaves, got_tree = tree.flatten(got)
    want_leaves, want_tree = tree.flatten(want)
    assert got_tree == want_tree, f"{case.id}: vmap gives {got_tree}, the loop {want_tree}"
    for g, w in zip(got_leaves, want_leaves):
        g = np.asarray(g)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), case.id
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13, err_msg=case.id)
        else:
            np.testing.assert_array_equal(g, w, err_msg=case.id)


# -- CUDA against the CPU ----------------------------------------------------------------------

def _scalar_of(f: Callable, weights: list) -> Callable:
    """``sum_i <out_i, weights_i>`` over the float outputs of ``f``: every output element
    contributes a distinct amount to the gradient."""
    def loss(*xs: Any) -> Any:
        outs = float_leaves(f(*xs))
        return sum(fnp.sum(fnp.multiply(o, c)) for o, c in zip(outs, weights))
    return loss


def _assert_on_device_and_close(got: Any, want: Any, what: str) -> None:
    got_leaves, got_tree = tree.flatten(got)
    want_leaves, want_tree = tree.flatten(want)
    assert got_tree == want_tree, f"{what}: structure {got_tree} != {want_tree}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        assert isinstance(g, DEV.array_types), (
            f"{what}: leaf {i} is a {type(g).__name__}, not a {DEVICE_NAME} array")
        h, w = DEV.to_host(g), np.asarray(w)
        assert (h.shape, h.dtype) == (w.shape, w.dtype), (
            f"{what}: leaf {i} is {h.dtype}{list(h.shape)}, the CPU's {w.dtype}{list(w.shape)}")
        if w.dtype.kind == "f":
            # float64 rounding: CUDA's libm and summation orders differ in the last bits.
            scale = float(np.max(np.abs(w), initial=0.0))
            np.testing.assert_allclose(h, w, rtol=1e-10, atol=1e-12 * (1.0 + scale),
                                       err_msg=f"{what}: leaf {i}")
        else:
            np.testing.assert_array_equal(h, w, err_msg=f"{what}: leaf {i}")


@needs_device
@per_case(CASES)
def test_cuda_matches_cpu(case: Case) -> None:
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    xs = case.make(rng)
    f_cpu = case.bound()
    f_dev = case.bound(fx.device_put(case.consts, DEVICE_NAME))
    xs_dev = fx.device_put(xs, DEVICE_NAME)
    want = f_cpu(*xs)
    _assert_on_device_and_close(f_dev(*xs_dev), want, f"{case.id}: values")
    if case.op in NO_GRAD:
        return
    weights = [rng.standard_normal(np.shape(o)) for o in float_leaves(want)]
    argnums = tuple(range(len(xs)))
    g_want = fx.grad(_scalar_of(f_cpu, weights), argnums=argnums)(*xs)
    g_got = fx.grad(_scalar_of(f_dev, fx.device_put(weights, DEVICE_NAME)),
                    argnums=argnums)(*xs_dev)
    _assert_on_device_and_close(g_got, g_want, f"{case.id}: gradients")
