"""The CPU convolution's layouts and chunks against the generic implementation.

The CPU rule (``_conv_cpu.conv_cpu``) picks among several layouts (im2col by kernel or by output
positions, col2im, and "flat" variants of each) and takes large batches in chunks. Every
choice is checked here against the generic rule (``conv._conv_impl``: one plain im2col or
col2im per image) in float64, as configured and with every batch forced into one-row
chunks.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functx.primitives import _conv_cpu, conv


@pytest.fixture(params=["as configured", "one-row chunks"])
def chunking(request: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run as configured, or with every batch taken one row at a time."""
    if request.param == "one-row chunks":
        monkeypatch.setattr(_conv_cpu, "_COLS_BYTES", 1)
    return request.param


@st.composite
def conv_configs(draw: Any) -> dict:
    nd = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    n = draw(st.integers(1, 5))
    kernel = draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd))
    in_sizes = draw(st.lists(st.integers(1, 9 if nd < 3 else 5), min_size=nd, max_size=nd))
    strides = draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd))
    lhs_dil = draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd))
    rhs_dil = draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd))
    padding = [tuple(draw(st.lists(st.integers(-1, 3), min_size=2, max_size=2)))
               for _ in range(nd)]
    return dict(lhs_shape=(n, groups * cg) + tuple(in_sizes),
                rhs_shape=(groups * og, cg) + tuple(kernel),
                window_strides=tuple(strides), padding=tuple(padding),
                lhs_dilation=tuple(lhs_dil), rhs_dilation=tuple(rhs_dil),
                feature_group_count=groups)


def _check(cfg: dict, seed: int = 0, fill: Any = None) -> None:
    rng = np.random.default_rng(seed)
    lhs = rng.standard_normal(cfg["lhs_shape"])
    rhs = rng.standard_normal(cfg["rhs_shape"])
    if fill is not None:
        fill(lhs)
    params = {k: v for k, v in cfg.items() if not k.endswith("_shape")}
    want = conv._conv_impl(np, lhs, rhs, **params)
    got = _conv_cpu.conv_cpu(np, lhs, rhs, **params)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# (the fixture only sets the chunk size, which holds for every example)
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cfg=conv_configs())
def test_every_layout_matches_the_generic_rule(cfg: dict, chunking: str) -> None:
    _check(cfg)


# One case per CPU layout, at sizes where it is the one chosen: the function, then (lhs, rhs,
# padding, lhs_dilation).
LAYOUTS = {
    "im2col, flat rows": ("_gather_flat", (4, 3, 12, 12), (5, 3, 3, 3), ((1, 1), (1, 1)), (1, 1)),
    # the last kernel axis gathered (few input channels per output channel) or not
    "col2im, flat rows": ("_scatter_flat", (4, 12, 10, 10), (2, 12, 3, 3), ((1, 1), (1, 1)),
                          (1, 1)),
    "col2im, flat rows, last axis gathered": ("_scatter_flat", (4, 6, 10, 10), (2, 6, 3, 3),
                                              ((1, 1), (2, 0)), (1, 1)),
    "col2im, dilated input": ("_scatter_cpu", (4, 6, 5, 5), (2, 6, 3, 3), ((2, 2), (2, 2)),
                              (2, 2)),
    "im2col by kernel positions": ("_gather_cpu", (4, 3, 4, 4), (8, 3, 3, 3), ((2, 2), (2, 2)),
                                   (1, 1)),
    "im2col by output positions": ("_gather_cpu", (3, 4, 14, 30), (5, 4, 12, 12),
                                   ((0, 0), (0, 0)), (1, 1)),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_layout_is_taken_and_correct(layout: str, chunking: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    name, lhs_shape, rhs_shape, padding, lhs_dilation = LAYOUTS[layout]
    calls = []
    original = getattr(_conv_cpu, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(_conv_cpu, name, counted)
    _check(dict(lhs_shape=lhs_shape, rhs_shape=rhs_shape, window_strides=(1, 1),
                padding=padding, lhs_dilation=lhs_dilation, rhs_dilation=(1, 1),
                feature_group_count=1))
    assert calls == [name]
