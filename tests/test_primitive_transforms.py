"""Forward-mode and batching checks for every primitive, driven by the spec table.

For each :class:`tests.specs.PrimSpec` (see tests/test_primitive_rules.py for the reverse-mode
checks and the helpers used here):

* the JVP against central finite differences (``<u, J v>`` both ways);
* JVP–VJP consistency: ``<J v, u> == <v, J^T u>`` to rounding error;
* second order with ``functx.test_util.check_grads(order=2)`` (smooth specs);
* ``vmap`` against a Python loop over examples, with the batch axis of every array argument
  drawn at random (None = unbatched), nested ``vmap``, and ``vmap`` composed with ``vjp``
  both ways;

and a coverage test: every primitive has a JVP rule (or the zero VJP) and a batching rule.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functx
from functx import tree
from functx.registry import REGISTRY
from functx.test_util import check_grads
from tests.specs import PrimSpec
from tests.test_primitive_rules import (DIFF_SPECS, SMOOTH_SPECS, SPECS, Call, assert_close_fd,
                                        cotangent_like, draw_rng, inner, norm, per_spec,
                                        random_like, shifted)

second_order_settings = settings(max_examples=max(3, settings.default.max_examples // 4))


def tangents_for(call: Call, rng: np.random.Generator) -> tuple[list, list]:
    """Random tangents for the differentiable arguments, zeros for the other arguments."""
    vs = [random_like(call.dyn_args[i], rng) for i in call.diff]
    ts = [np.zeros(np.shape(a), np.asarray(a).dtype) for a in call.dyn_args]
    for i, v in zip(call.diff, vs):
        ts[i] = v
    return vs, ts


# -- g. the JVP against finite differences -----------------------------------------------------

@per_spec(SPECS)
@given(data=st.data())
def test_jvp_matches_finite_differences(spec: PrimSpec, data: Any) -> None:
    """<u, jvp(f)(v)> == <u, (f(x + eps v) - f(x - eps v)) / 2 eps>; zero for specs with no
    differentiable argument. The tangent has the output's shape and dtype."""
    call = Call(spec, data.draw(spec.args, label="args"))
    args, diff = call.dyn_args, call.diff
    rng = draw_rng(data)
    vs, ts = tangents_for(call, rng)
    out, t_out = functx.jvp(call.fn, args, tuple(ts))
    for o, t in zip(tree.leaves(out), tree.leaves(t_out)):
        assert np.shape(t) == np.shape(o), f"{spec.id}: tangent shape {np.shape(t)}"
        assert np.asarray(t).dtype == np.asarray(o).dtype, f"{spec.id}: tangent dtype"
    np.testing.assert_array_equal(np.asarray(out), np.asarray(call.fn(*args)), err_msg=spec.id)
    if not diff:
        assert not any(np.any(np.asarray(t)) for t in tree.leaves(t_out)), (
            f"{spec.id}: non-zero tangent from a non-differentiable primitive")
        return
    u = cotangent_like(out, rng)
    eps = spec.fd_eps
    f_plus = call.fd(*shifted(args, diff, vs, eps))
    f_minus = call.fd(*shifted(args, diff, vs, -eps))
    jv = tree.map(lambda p, m: (np.asarray(p) - np.asarray(m)) / (2 * eps), f_plus, f_minus)
    assert_close_fd(inner(u, t_out), inner(u, jv), norm(u) * norm(*vs), spec,
                    "<u, J v> (jvp) vs finite differences")


# -- h. JVP and VJP agree -----------------------------------------------------------------------

@per_spec(DIFF_SPECS)
@given(data=st.data())
def test_jvp_consistent_with_vjp(spec: PrimSpec, data: Any) -> None:
    """<J v, u> == <v, J^T u> to rounding error (no finite differences involved)."""
    call = Call(spec, data.draw(spec.args, label="args"))
    rng = draw_rng(data)
    vs, ts = tangents_for(call, rng)
    out, t_out = functx.jvp(call.fn, call.dyn_args, tuple(ts))
    u = cotangent_like(out, rng)
    cts = functx.vjp(call.fn, *call.dyn_args)[1](u)
    lhs = inner(t_out, u)
    rhs = math.fsum(inner(cts[i], v) for i, v in zip(call.diff, vs))
    scale = norm(u) * norm(*vs) * max(1.0, max((float(np.max(np.abs(c)))
                                                for c in tree.leaves(out) if np.size(c)),
                                               default=1.0))
    tol = max(1e-9, spec.rtol)  # a spec through float32 rounds at its rtol
    assert abs(lhs - rhs) <= tol * max(scale, 1.0) + tol * abs(rhs), (
        f"{spec.id}: <J v, u> = {lhs!r} but <v, J^T u> = {rhs!r}")


# -- i. second order ----------------------------------------------------------------------------

@per_spec(SMOOTH_SPECS)
@second_order_settings
@given(data=st.data())
def test_check_grads_order_2(spec: PrimSpec, data: Any) -> None:
    """functx.test_util.check_grads(order=2) in both modes, on the differentiable arguments."""
    call = Call(spec, data.draw(spec.args, label="args"))
    args, diff = call.dyn_args, call.diff

    def f(*xs: Any) -> Any:
        new = list(args)
        for i, x in zip(diff, xs):
            new[i] = x
        return call.fn(*new)

    tol = max(spec.fd_rtol, 1e-5)
    check_grads(f, tuple(args[i] for i in diff), order=2, eps=spec.fd_eps,
                atol=max(spec.fd_atol, 1e-5) * 10, rtol=tol * 10)


# -- j. vmap against a loop -----------------------------------------------------------------------

def example_variants(x: Any, n: int, rng: np.random.Generator) -> list:
    """``n`` different examples shaped like ``x`` that stay in the spec's domain: floats
    scaled towards zero (signs kept), integers (indices) permuted, booleans re-drawn."""
    x = np.asarray(x)
    out = []
    for k in range(n):
        if x.dtype.kind in "fc":
            out.append((x * (1.0 - 0.1 * k)).astype(x.dtype))
        elif x.dtype.kind in "iu" and x.size:
            out.append(rng.permutation(x.ravel()).reshape(x.shape).astype(x.dtype))
        elif x.dtype == np.bool_:
            out.append(rng.random(x.shape) < 0.5)
        else:
            out.append(x.copy())
    return out


def batched_case(call: Call, data: Any, rng: np.random.Generator, size: int) -> tuple:
    """(batched args, in_axes, per-example args) for a random choice of batch axes."""
    examples = [example_variants(a, size, rng) for a in call.dyn_args]
    axes, batched = [], []
    for a, ex in zip(call.dyn_args, examples):
        ax = data.draw(st.one_of(st.none(), st.integers(0, np.ndim(a))), label="in_axis")
        axes.append(ax)
        batched.append(np.asarray(a) if ax is None else np.stack(ex, axis=ax))
    per_example = [[np.asarray(a) if ax is None else ex[k]
                    for a, ax, ex in zip(call.dyn_args, axes, examples)] for k in range(size)]
    return batched, axes, per_example


def assert_tree_close(got: Any, want: Any, what: str) -> None:
    for g, w in zip(tree.leaves(got), tree.leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{what}: got {g.shape} {g.dtype}, expected {w.shape} {w.dtype}")
        if g.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, equal_nan=True,
                                       err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


def stack_outputs(outs: list, axis: int = 0) -> Any:
    return tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs], axis=axis), *outs)


@per_spec(SPECS)
@given(data=st.data())
def test_vmap_matches_loop(spec: PrimSpec, data: Any) -> None:
    """vmap(f, in_axes)(stacked) == np.stack([f(example) for example in batch])."""
    call = Call(spec, data.draw(spec.args, label="args"))
    rng = draw_rng(data)
    size = data.draw(st.integers(1, 3), label="batch size")
    batched, axes, per_example = batched_case(call, data, rng, size)
    out_axis = data.draw(st.sampled_from([0, -1]), label="out_axes")
    expected = stack_outputs([call.fn(*ex) for ex in per_example], axis=out_axis)
    got = functx.vmap(call.fn, in_axes=tuple(axes), out_axes=out_axis,
                      axis_size=size)(*batched)
    assert_tree_close(got, expected, f"{spec.id}: vmap with in_axes={axes}")


@per_spec(SPECS)
@settings(max_examples=max(3, settings.default.max_examples // 3))
@given(data=st.data())
def test_nested_vmap_matches_loop(spec: PrimSpec, data: Any) -> None:
    """vmap(vmap(f)) over two batch axes equals the double loop."""
    call = Call(spec, data.draw(spec.args, label="args"))
    rng = draw_rng(data)
    outer, inner_n = 2, 2
    grid = [[example_variants(a, outer * inner_n, rng)[i * inner_n:(i + 1) * inner_n]
             for i in range(outer)] for a in call.dyn_args]
    batched = [np.stack([np.stack(row) for row in g]) for g in grid]
    expected = stack_outputs([stack_outputs([call.fn(*[g[i][j] for g in grid])
                                             for j in range(inner_n)]) for i in range(outer)])
    got = functx.vmap(functx.vmap(call.fn))(*batched)
    assert_tree_close(got, expected, f"{spec.id}: vmap(vmap(f))")


@per_spec(DIFF_SPECS)
@settings(max_examples=max(3, settings.default.max_examples // 3))
@given(data=st.data())
def test_vmap_composes_with_vjp(spec: PrimSpec, data: Any) -> None:
    """vmap of a VJP equals the per-example VJPs; the VJP of vmap(f) equals them too."""
    call = Call(spec, data.draw(spec.args, label="args"))
    rng = draw_rng(data)
    size = data.draw(st.integers(1, 3), label="batch size")
    batched, axes, per_example = batched_case(call, data, rng, size)
    outs = [call.fn(*ex) for ex in per_example]
    us = [cotangent_like(o, rng) for o in outs]
    loop = [functx.vjp(call.fn, *ex)[1](u) for ex, u in zip(per_example, us)]
    u_b = stack_outputs(us)

    def example_vjp(u: Any, *xs: Any) -> Any:
        return functx.vjp(call.fn, *xs)[1](u)

    got = functx.vmap(example_vjp, in_axes=(0, *axes), axis_size=size)(u_b, *batched)
    for i in call.diff:
        want = stack_outputs([c[i] for c in loop])
        assert_tree_close(got[i], want, f"{spec.id}: vmap(vjp) argument {i}")
    check_vjp_of_vmap(spec, call, batched, axes, loop, u_b, size)


def check_vjp_of_vmap(spec: PrimSpec, call: Call, batched: list, axes: list, loop: list,
                      u_b: Any, size: int) -> None:
    """The VJP of ``vmap(f)`` against the per-example VJPs ``loop`` (cotangents ``u_b``).

    The cotangent of a batched argument is the stack of the per-example ones; an unbatched
    argument's is their sum. The sum may be formed before the VJP's last rounding instead
    of after it (f64 -> f32 -> f64 rounds the summed cotangent once, the loop rounds each
    term), so the error is relative to the sum of the terms' magnitudes, not to the
    (possibly cancelling) sum.
    """
    _, pull = functx.vjp(functx.vmap(call.fn, in_axes=tuple(axes), axis_size=size), *batched)
    cts = pull(u_b)
    rtol = max(1e-9, 100 * spec.rtol)
    for i in call.diff:
        per = [np.asarray(c[i]) for c in loop]
        if axes[i] is None:
            want, mag = np.sum(per, axis=0), np.sum(np.abs(per), axis=0)
        else:
            want = np.stack(per, axis=axes[i])
            mag = np.abs(want)
        got = np.asarray(cts[i])
        assert got.shape == want.shape, f"{spec.id}: vjp(vmap) argument {i}: {got.shape}"
        err = np.abs(got - want)
        # (NaN where the per-example VJPs are NaN too: e.g. CTC's infeasible alignments
        # without zero_infinity, which permuted lengths can produce)
        same_nan = np.isnan(got) & np.isnan(want)
        assert np.all((err <= rtol * mag + 1e-10) | same_nan), (
            f"{spec.id}: vjp(vmap) argument {i}: worst error {err.max(initial=0):.3g} "
            f"(tolerance {rtol:.3g} x the terms' magnitudes)")


def test_vjp_of_vmap_sums_rounded_cotangents_within_tolerance() -> None:
    """A float32 round trip whose unbatched cotangent is a cancelling sum: once the rounding
    of the sum (1e-5 of it, here) is compared with the sum's size, it failed at random."""
    spec = next(s for s in SPECS if s.id == "convert_element_type[f64->f32->f64]")
    call = Call(spec, (np.array([0.3]),))
    us = [np.array([1.0000001]), np.array([-1.0]), np.array([1e-3])]
    loop = [functx.vjp(call.fn, *call.dyn_args)[1](u) for u in us]
    check_vjp_of_vmap(spec, call, [np.array([0.3])], [None], loop, np.stack(us), 3)


# -- k. coverage ----------------------------------------------------------------------------------

def test_every_primitive_has_jvp_and_batch_rules() -> None:
    """No built-in primitive relies on the transpose-of-VJP or loop fallbacks."""
    table = REGISTRY.coverage()
    missing = sorted(f"{name}: {kind}" for name, row in table.items()
                     for kind in ("jvp", "batch") if not row[kind])
    assert missing == [], f"primitives relying on a fallback: {missing}"


@pytest.mark.parametrize("name", sorted(REGISTRY.primitives))
def test_registry_rules_are_callable(name: str) -> None:
    """Every registered rule is a callable (a typo'd registration would be a value)."""
    p = REGISTRY[name]
    for rule in (p.abstract_eval, p.vjp, p.jvp, p.batch):
        assert rule is None or callable(rule), f"{name}: {rule!r}"
