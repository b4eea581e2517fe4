"""Specs of the elementwise primitives (functx/primitives/elementwise/).

Arguments are drawn inside each function's smooth domain, so central finite differences
are valid: away from poles, kinks (0 for abs), ties (max/min), jumps (floor, round, rem)
and the ends of the domain (log, asin...). Tie and edge behaviour is tested explicitly in
tests/test_elementwise_numerics.py.
"""
from __future__ import annotations

import decimal
import math
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from functx.primitives import elementwise as ew
from tests.specs import PrimSpec
from tests.strategies import array, broadcast_pair, int_array, shapes

SEEDS = st.integers(0, 2**32 - 1)
INTEGERS = tuple(float(k) for k in range(-4, 5))
HALF_INTEGERS = tuple(k + 0.5 for k in range(-5, 5))


# -- argument strategies ---------------------------------------------------------------------

def one(lo: float = -2.0, hi: float = 2.0, **kw: Any) -> st.SearchStrategy:
    """A 1-tuple holding one float64 array with values in [lo, hi]."""
    return shapes().flatmap(lambda s: array(s, lo, hi, **kw).map(lambda a: (a,)))


def two(x: dict | None = None, y: dict | None = None) -> st.SearchStrategy:
    """A pair of float64 arrays of broadcasting shapes; ``x``/``y`` are array() options."""
    return broadcast_pair().flatmap(
        lambda s: st.tuples(array(s[0], **(x or {})), array(s[1], **(y or {}))))


def on_grid(strategy: st.SearchStrategy, step: float, offset: float) -> st.SearchStrategy:
    """Arrays moved onto the grid ``offset + step * k``: values on two grids with different
    offsets are never closer than the difference of the offsets."""
    return strategy.map(lambda a: np.floor(a / step) * step + offset)


def two_on_grids(step: float = 0.1) -> st.SearchStrategy:
    """A broadcasting pair whose entries are at least ``step / 2`` apart (no ties)."""
    return broadcast_pair().flatmap(lambda s: st.tuples(
        on_grid(array(s[0]), step, step / 4), on_grid(array(s[1]), step, 3 * step / 4)))


def three_shapes() -> st.SearchStrategy:
    """Three shapes that broadcast together (the third one of the pair's, their
    broadcast shape, or a scalar)."""
    return broadcast_pair().flatmap(lambda s: st.sampled_from(
        [s[0], s[1], np.broadcast_shapes(*s), ()]).map(lambda t: (s[0], s[1], t)))


def ints(lo: int = -20, hi: int = 20, nonzero: bool = False,
         dtype: type = np.int64) -> Callable[[tuple], st.SearchStrategy]:
    """A function of a shape giving integer arrays in [lo, hi) (zeros moved to 1)."""
    def make(shape: tuple) -> st.SearchStrategy:
        s = int_array(shape, lo, hi, dtype)
        return s.map(lambda a: np.where(a == 0, 1, a).astype(dtype)) if nonzero else s
    return make


def int_pair(y_nonzero: bool = False, **kw: Any) -> st.SearchStrategy:
    """A broadcasting pair of int64 arrays."""
    return broadcast_pair().flatmap(lambda s: st.tuples(
        ints(**kw)(s[0]), ints(nonzero=y_nonzero, **kw)(s[1])))


def bool_pair() -> st.SearchStrategy:
    """A broadcasting pair of bool arrays."""
    return broadcast_pair().flatmap(lambda s: st.tuples(
        int_array(s[0], 0, 2).map(lambda a: a.astype(bool)),
        int_array(s[1], 0, 2).map(lambda a: a.astype(bool))))


@st.composite
def rem_args(draw) -> tuple:
    """(x, y) with |y| = c the same for every entry and x / c away from integers, so
    rem(x, y) is smooth around every drawn point (whatever the signs and broadcasting)."""
    sx, sy = draw(broadcast_pair())
    c = draw(st.floats(0.5, 2.0))
    rng = np.random.default_rng(draw(SEEDS))
    x = c * (rng.integers(-3, 3, size=sx) + rng.uniform(0.1, 0.9, size=sx))
    y = c * rng.choice([-1.0, 1.0], size=sy)
    return x, y


@st.composite
def select_args(draw) -> tuple:
    """(pred, on_true, on_false) of three broadcasting shapes; pred random from a seed."""
    st_, sf, sp = draw(three_shapes())
    pred = np.random.default_rng(draw(SEEDS)).random(sp) < 0.5
    return pred, draw(array(st_)), draw(array(sf))


@st.composite
def clamp_args(draw) -> tuple:
    """(lo, x, hi) broadcasting, with lo < hi everywhere and x at least 0.05 from both."""
    slo, sx, shi = draw(three_shapes())
    lo = draw(on_grid(array(slo, -1.5, -0.3), 0.1, 0.0))
    hi = draw(on_grid(array(shi, 0.3, 1.5), 0.1, 0.0))
    x = draw(on_grid(array(sx, -2.0, 2.0), 0.1, 0.05))
    return lo, x, hi


@st.composite
def with_specials(draw) -> tuple:
    """A 1-tuple of a float64 array with some entries replaced by inf, -inf or NaN."""
    x = draw(array(draw(shapes())))
    rng = np.random.default_rng(draw(SEEDS))
    special = rng.choice([np.inf, -np.inf, np.nan], size=x.shape)
    return (np.where(rng.random(x.shape) < 0.3, special, x),)


# -- references ------------------------------------------------------------------------------

def _half_away_from_zero(v: float) -> float:
    return float(decimal.Decimal(v).to_integral_value(rounding=decimal.ROUND_HALF_UP))


ref_erf = np.vectorize(math.erf, otypes=[np.float64])
ref_round_away = np.vectorize(_half_away_from_zero, otypes=[np.float64])


def ref_logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# -- the table -------------------------------------------------------------------------------

def _integer_pow_specs() -> list[PrimSpec]:
    out = []
    for y in (-3, -1, 0, 1, 2, 3, 7):
        args = one(-2.0, 2.0, away_from=(0.0,), margin=0.2) if y < 0 else one(-1.5, 1.5)
        out.append(PrimSpec("integer_pow", lambda x, y=y: ew.integer_pow(x, y=y),
                            lambda x, y=y: 1.0 / np.prod([x] * -y, axis=0) if y < 0
                            else np.prod([np.ones_like(x)] + [x] * y, axis=0),
                            args, label=f"y={y}"))
    out.append(PrimSpec("integer_pow", lambda x: ew.integer_pow(x, y=3),
                        lambda x: x * x * x, shapes().flatmap(
                            lambda s: ints(-30, 30)(s).map(lambda a: (a,))),
                        diff_argnums=(), label="int64"))
    return out


def _comparison_specs() -> list[PrimSpec]:
    out = []
    for name, ref in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                      ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
        fn = getattr(ew, name)
        out.append(PrimSpec(name, fn, ref, int_pair(lo=-2, hi=3), diff_argnums=(),
                            smooth=False, label="int"))
        out.append(PrimSpec(name, fn, ref, two(), diff_argnums=(), smooth=False,
                            label="float"))
    return out


def _logical_specs() -> list[PrimSpec]:
    out = []
    for name, fn, ref in (("and", ew.and_, np.bitwise_and), ("or", ew.or_, np.bitwise_or),
                          ("xor", ew.xor, np.bitwise_xor)):
        out.append(PrimSpec(name, fn, ref, bool_pair(), diff_argnums=(), smooth=False,
                            label="bool"))
        out.append(PrimSpec(name, fn, ref, int_pair(lo=-100, hi=100), diff_argnums=(),
                            smooth=False, label="int"))
    one_bool = shapes().flatmap(lambda s: int_array(s, 0, 2).map(lambda a: (a.astype(bool),)))
    one_int = shapes().flatmap(lambda s: int_array(s, -100, 100).map(lambda a: (a,)))
    out.append(PrimSpec("not", ew.not_, np.logical_not, one_bool, diff_argnums=(),
                        smooth=False, label="bool"))
    out.append(PrimSpec("not", ew.not_, np.invert, one_int, diff_argnums=(), smooth=False,
                        label="int"))
    return out


def _convert_specs() -> list[PrimSpec]:
    def conv(dt: Any) -> Callable:
        return lambda x: ew.convert_element_type(x, new_dtype=dt)

    def astype(dt: Any) -> Callable:
        return lambda x: x.astype(dt)

    int_args = shapes().flatmap(lambda s: int_array(s, -50, 50).map(lambda a: (a,)))
    bool_args = shapes().flatmap(lambda s: int_array(s, 0, 2).map(lambda a: (a.astype(bool),)))
    return [
        PrimSpec("convert_element_type", conv(np.float64), astype(np.float64), one(),
                 label="f64->f64"),
        # Through float32 and back: the finite differences see float32 rounding (6e-8),
        # hence the large step and absolute tolerance.
        PrimSpec("convert_element_type", lambda x: conv(np.float64)(conv(np.float32)(x)),
                 lambda x: x.astype(np.float32).astype(np.float64), one(), rtol=1e-7,
                 fd_eps=1e-2, fd_atol=1e-4, label="f64->f32->f64"),
        PrimSpec("convert_element_type", conv(np.int32), astype(np.int32), one(-50, 50),
                 diff_argnums=(), smooth=False, label="f64->i32"),
        PrimSpec("convert_element_type", conv(np.bool_), astype(np.bool_), one(),
                 diff_argnums=(), smooth=False, label="f64->bool"),
        PrimSpec("convert_element_type", conv(np.float64), astype(np.float64), int_args,
                 diff_argnums=(), label="i64->f64"),
        PrimSpec("convert_element_type", conv(np.float32), astype(np.float32), bool_args,
                 diff_argnums=(), label="bool->f32"),
    ]


SPECS: list[PrimSpec] = [
    # arithmetic
    PrimSpec("neg", ew.neg, np.negative, one()),
    PrimSpec("abs", ew.abs, np.abs, one(away_from=(0.0,), margin=0.05)),
    PrimSpec("sign", ew.sign, np.sign, one(away_from=(0.0,), margin=0.05), smooth=False),
    PrimSpec("add", ew.add, np.add, two(), diff_argnums=(0, 1)),
    PrimSpec("sub", ew.sub, np.subtract, two(), diff_argnums=(0, 1)),
    PrimSpec("mul", ew.mul, np.multiply, two(), diff_argnums=(0, 1)),
    PrimSpec("div", ew.div, np.true_divide, two(y=dict(away_from=(0.0,), margin=0.25)),
             diff_argnums=(0, 1)),
    PrimSpec("div", ew.div, np.floor_divide, int_pair(y_nonzero=True), diff_argnums=(),
             smooth=False, label="int"),
    PrimSpec("rem", ew.rem, np.remainder, rem_args(), diff_argnums=(0, 1)),
    PrimSpec("rem", ew.rem, np.remainder, int_pair(y_nonzero=True), diff_argnums=(),
             smooth=False, label="int"),
    PrimSpec("pow", ew.pow, np.power, two(x=dict(lo=0.2, hi=2.0)), diff_argnums=(0, 1)),
    *_integer_pow_specs(),
    PrimSpec("max", ew.max, np.maximum, two_on_grids(), diff_argnums=(0, 1)),
    PrimSpec("min", ew.min, np.minimum, two_on_grids(), diff_argnums=(0, 1)),
    # exponentials, logarithms, roots
    PrimSpec("exp", ew.exp, np.exp, one()),
    PrimSpec("expm1", ew.expm1, np.expm1, one()),
    PrimSpec("log", ew.log, np.log, one(0.1, 3.0)),
    PrimSpec("log1p", ew.log1p, np.log1p, one(-0.9, 3.0)),
    PrimSpec("sqrt", ew.sqrt, np.sqrt, one(0.1, 3.0)),
    PrimSpec("rsqrt", ew.rsqrt, lambda x: 1.0 / np.sqrt(x), one(0.1, 3.0)),
    # trigonometric and hyperbolic
    PrimSpec("sin", ew.sin, np.sin, one(-4.0, 4.0)),
    PrimSpec("cos", ew.cos, np.cos, one(-4.0, 4.0)),
    PrimSpec("tan", ew.tan, np.tan, one(-1.2, 1.2)),
    PrimSpec("asin", ew.asin, np.arcsin, one(-0.9, 0.9)),
    PrimSpec("acos", ew.acos, np.arccos, one(-0.9, 0.9)),
    PrimSpec("atan", ew.atan, np.arctan, one(-3.0, 3.0)),
    PrimSpec("atan2", ew.atan2, np.arctan2,
             two(x=dict(away_from=(0.0,), margin=0.25), y=dict(away_from=(0.0,), margin=0.25)),
             diff_argnums=(0, 1)),
    PrimSpec("sinh", ew.sinh, np.sinh, one(-3.0, 3.0)),
    PrimSpec("cosh", ew.cosh, np.cosh, one(-3.0, 3.0)),
    PrimSpec("tanh", ew.tanh, np.tanh, one(-3.0, 3.0)),
    PrimSpec("logistic", ew.logistic, ref_logistic, one(-8.0, 8.0)),
    PrimSpec("erf", ew.erf, ref_erf, one(-3.0, 3.0)),
    # rounding (piecewise constant: finite differences are 0 away from the jumps)
    PrimSpec("floor", ew.floor, np.floor, one(-3.0, 3.0, away_from=INTEGERS), smooth=False),
    PrimSpec("ceil", ew.ceil, np.ceil, one(-3.0, 3.0, away_from=INTEGERS), smooth=False),
    PrimSpec("round", lambda x: ew.round(x, rounding_method="half_to_even"), np.round,
             one(-4.0, 4.0, away_from=HALF_INTEGERS), smooth=False,
             label="half_to_even"),
    PrimSpec("round", lambda x: ew.round(x, rounding_method="half_away_from_zero"),
             ref_round_away, one(-4.0, 4.0, away_from=HALF_INTEGERS),
             smooth=False, label="half_away_from_zero"),
    PrimSpec("is_finite", ew.is_finite, np.isfinite, with_specials(), diff_argnums=(),
             smooth=False),
    # comparisons and logical operations
    *_comparison_specs(),
    *_logical_specs(),
    # select, clamp, convert_element_type
    PrimSpec("select", ew.select, np.where, select_args(), diff_argnums=(1, 2)),
    PrimSpec("clamp", ew.clamp, lambda lo, x, hi: np.clip(x, lo, hi), clamp_args(),
             diff_argnums=(0, 1, 2)),
    *_convert_specs(),
]
