"""Forward-mode (JVP) and batching rules of the reductions, dot_general, the indexing
primitives and stop_gradient, checked table-driven over their specs.

The rules are called directly (``prim.jvp(tangents, primals, out, **params)`` and
``prim.batch(args, dims, **params)``); the primitive, its parameters and which spec
arguments are its inputs are read from the trace of ``spec.fn`` (:func:`locate`). Checks:

* the JVP rule against central finite differences (float64), with some tangents None;
* the JVP rule against the VJP: ``<J v, u> == <v, J^T u>`` (``functx.vjp``);
* the batching rule against a loop over examples, with a batch axis (or None) drawn per
  input, batch sizes 0 to 3, batched indices included; eagerly and traced;
* batching rules that need not move an axis record no transpose;
* chosen inputs: ties in max/min (the tangent is the mean over the tied positions) and
  zeros in products.
"""
from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import functx
from functx.ir import Literal
from functx.primitives import reduction as red
from functx.registry import Primitive
from tests.specs import PrimSpec
from tests.specs import misc as misc_specs
from tests.specs import structural as structural_specs
from tests.strategies import shapes

NAMES = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin", "cumsum",
         "dot_general", "gather", "scatter_add", "scatter", "stop_gradient")
SPECS: list[PrimSpec] = [s for s in structural_specs.SPECS + misc_specs.SPECS
                         if s.name in NAMES]
DIFF_SPECS = [s for s in SPECS if s.diff_argnums]

# Batching rules that never need to move an axis (gather too when its indices are unbatched).
NO_MOVE = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin",
           "cumsum", "dot_general", "stop_gradient"}

fast = settings(max_examples=max(5, settings.default.max_examples * 3 // 5))


def per_spec(specs: list[PrimSpec]) -> Any:
    return pytest.mark.parametrize("spec", specs, ids=[s.id for s in specs])


def test_table_covers_every_primitive() -> None:
    """Each primitive of this file has a spec, a JVP rule and a batching rule."""
    assert sorted({s.name for s in SPECS}) == sorted(NAMES)
    for name in NAMES:
        prim = functx.registry[name]
        assert prim.jvp is not None and prim.batch is not None, name


# -- locating the primitive in a spec ----------------------------------------------------------

@attrs.frozen
class Site:
    """The primitive a spec binds, its parameters, and where its inputs come from: the
    position of a spec argument, or ``("value", v)`` for a literal or constant."""

    prim: Primitive
    params: dict
    sources: tuple

    def primals(self, args: tuple) -> list:
        return [args[s] if isinstance(s, int) else s[1] for s in self.sources]


def locate(spec: PrimSpec, args: tuple) -> Site:
    """Trace ``spec.fn`` and find its one equation of ``spec.name``."""
    trace = functx.make_trace(spec.fn)(*args)
    eqns = [e for e in trace.eqns if e.prim.name == spec.name]
    assert len(eqns) == 1, f"{spec.id} binds {spec.name} {len(eqns)} times:\n{trace}"
    consts = dict(zip(trace.const_vars, trace.const_values))
    sources = []
    for atom in eqns[0].inputs:
        if isinstance(atom, Literal):
            sources.append(("value", atom.value))
        elif atom in consts:
            sources.append(("value", consts[atom]))
        else:
            sources.append(trace.in_vars.index(atom))
    return Site(eqns[0].prim, dict(eqns[0].params), tuple(sources))


def is_float(x: Any) -> bool:
    return np.asarray(x).dtype.kind == "f"


def draw_rng(data: Any) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def inner(a: Any, b: Any) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def jvp_rule(site: Site, tangents: list, primals: list) -> tuple[Any, Any]:
    """The primal output and the rule's output tangent (checked for shape and dtype)."""
    out = site.prim.bind(*primals, **site.params)
    t_out = site.prim.jvp(tangents, primals, out, **site.params)
    if t_out is not None:
        assert np.shape(t_out) == out.shape and np.asarray(t_out).dtype == out.dtype, (
            f"{site.prim}: tangent {np.shape(t_out)} {np.asarray(t_out).dtype} for an output "
            f"{out.shape} {out.dtype}")
    return out, t_out


# -- 1. the JVP rule against finite differences ----------------------------------------------

@per_spec(SPECS)
@fast
@given(data=st.data())
def test_jvp_rule_matches_finite_differences(spec: PrimSpec, data: Any) -> None:
    """(f(x + eps t) - f(x - eps t)) / 2 eps == the rule's tangent, entry by entry.

    Every float input gets a random tangent or, drawn at random, None; integer inputs None.
    Integer outputs and primitives with no differentiable input (stop_gradient) must give
    a zero tangent.
    """
    args = data.draw(spec.args, label="args")
    site = locate(spec, args)
    rng = draw_rng(data)
    primals = site.primals(args)
    tangents = [rng.standard_normal(np.shape(p)) if is_float(p) and data.draw(
        st.booleans(), label=f"tangent {k} given") else None for k, p in enumerate(primals)]
    out, t_out = jvp_rule(site, tangents, primals)
    if not is_float(out) or not spec.diff_argnums:
        assert t_out is None or not np.any(t_out), f"{spec.id}: non-zero tangent {t_out!r}"
        return
    if t_out is None:
        t_out = np.zeros(out.shape)
    eps = spec.fd_eps
    moved = lambda s: [p if t is None else p + s * t for p, t in zip(primals, tangents)]
    fd = (site.prim.bind(*moved(eps), **site.params)
          - site.prim.bind(*moved(-eps), **site.params)) / (2 * eps)
    scale = max(1.0, float(np.max(np.abs(fd), initial=0.0)))
    np.testing.assert_allclose(t_out, fd, rtol=spec.fd_rtol, atol=spec.fd_atol * scale,
                               err_msg=f"{spec.id}: JVP rule vs finite differences")


# -- 2. the JVP rule against the VJP ---------------------------------------------------------

@per_spec(DIFF_SPECS)
@fast
@given(data=st.data())
def test_jvp_rule_is_the_transpose_of_the_vjp(spec: PrimSpec, data: Any) -> None:
    """<J v, u> (JVP rule) == sum_i <v_i, (J^T u)_i> (functx.vjp), to rounding."""
    args = data.draw(spec.args, label="args")
    site = locate(spec, args)
    rng = draw_rng(data)
    vs = {i: rng.standard_normal(np.shape(args[i])) for i in spec.diff_argnums}
    primals = site.primals(args)
    tangents = [vs.get(s) if isinstance(s, int) else None for s in site.sources]
    out, t_out = jvp_rule(site, tangents, primals)
    u = rng.standard_normal(out.shape)
    _, f_vjp = functx.vjp(spec.fn, *args)
    cts = f_vjp(u)
    forward = 0.0 if t_out is None else inner(t_out, u)
    backward = math.fsum(inner(cts[i], v) for i, v in vs.items())
    size = math.sqrt(inner(u, u) * sum(inner(v, v) for v in vs.values()))
    scale = size * max(1.0, float(np.max(np.abs(out), initial=0.0)))
    assert abs(forward - backward) <= 1e-10 * max(scale, 1.0), (
        f"{spec.id}: <J v, u> = {forward!r} but <v, J^T u> = {backward!r}")


# -- 3. the batching rule against a loop -------------------------------------------------------

def another_example(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """An array like ``x`` with fresh values: floats in [-2, 2]; integers a little outside
    ``x``'s range (indices then also get clamped); bools at random."""
    if x.dtype == np.bool_:
        return rng.random(x.shape) < 0.5
    if x.dtype.kind in "iu":
        lo, hi = (int(x.min()), int(x.max())) if x.size else (0, 3)
        return rng.integers(max(lo - 2, np.iinfo(x.dtype).min), hi + 3,
                            size=x.shape).astype(x.dtype)
    return rng.uniform(-2.0, 2.0, x.shape).astype(x.dtype)


@st.composite
def batched_inputs(draw, primals: list) -> tuple[list, int]:
    """A batch axis (or None) per input, at least one batched, and the batch size."""
    dims = [draw(st.one_of(st.none(), st.integers(0, np.ndim(p))), label=f"dim {k}")
            for k, p in enumerate(primals)]
    if all(d is None for d in dims):
        k = draw(st.integers(0, len(primals) - 1), label="forced batched input")
        dims[k] = draw(st.integers(0, np.ndim(primals[k])), label=f"dim {k}")
    size = draw(st.integers(0, 3), label="batch size")
    return dims, size


def stack_examples(examples: list, d: int, template: np.ndarray) -> np.ndarray:
    if examples:
        return np.stack(examples, axis=d)
    shape = np.shape(template)
    return np.zeros(shape[:d] + (0,) + shape[d:], np.asarray(template).dtype)


@per_spec(SPECS)
@fast
@given(data=st.data())
def test_batch_rule_matches_a_loop(spec: PrimSpec, data: Any) -> None:
    """The rule's output, batch axis moved first, equals the stacked per-example outputs.

    Run eagerly and traced (``make_trace``: the rule works on tracers and its result has
    the shape and dtype abstract evaluation predicts).
    """
    args = data.draw(spec.args, label="args")
    site = locate(spec, args)
    rng = draw_rng(data)
    primals = [np.asarray(p) for p in site.primals(args)]
    dims, size = data.draw(batched_inputs(primals), label="batching")
    examples = [[p] + [another_example(p, rng) for _ in range(size - 1)] if d is not None
                else None for p, d in zip(primals, dims)]
    if size == 0:
        examples = [[] if d is not None else None for d in dims]
    batched = [p if d is None else stack_examples(ex, d, p)
               for p, d, ex in zip(primals, dims, examples)]

    template = site.prim.bind(*primals, **site.params)
    expected = [site.prim.bind(*[p if ex is None else ex[b] for p, ex in zip(primals, examples)],
                               **site.params) for b in range(size)]
    expected = (np.stack(expected) if expected
                else np.zeros((0,) + template.shape, template.dtype))

    def check(out: Any, out_dim: Any, how: str) -> None:
        out = np.asarray(out)
        assert out_dim is not None and 0 <= out_dim < out.ndim, (
            f"{spec.id} ({how}): out_dim {out_dim} for an output of shape {out.shape}")
        got = np.moveaxis(out, out_dim, 0)
        assert (got.shape, got.dtype) == (expected.shape, expected.dtype), (
            f"{spec.id} ({how}): batched {got.shape} {got.dtype} vs loop {expected.shape} "
            f"{expected.dtype} (dims {dims})")
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{spec.id} ({how}), dims {dims}")
        else:
            np.testing.assert_array_equal(got, expected, err_msg=f"{spec.id} ({how})")

    out, out_dim = site.prim.batch(batched, dims, **site.params)
    check(out, out_dim, "eager")

    traced_dim = []

    def rule(*xs: Any) -> Any:
        o, od = site.prim.batch(list(xs), dims, **site.params)
        traced_dim.append(od)
        return o

    trace = functx.make_trace(rule)(*batched)
    functx.typecheck(trace)
    check(functx.eval_trace(trace, *batched)[0], traced_dim[0], "traced")

    if spec.name in NO_MOVE or (spec.name == "gather" and dims[1] is None):
        moved = [e for e in trace.eqns if e.prim.name == "transpose"]
        assert not moved, f"{spec.id}: the batching rule moved an axis (dims {dims}):\n{trace}"


# -- chosen inputs: ties in max/min, zeros in products -----------------------------------------

@st.composite
def reduce_case(draw, values: list[float]):
    shape = draw(shapes(min_rank=0, max_rank=3, min_side=1, max_side=4), label="shape")
    axes = draw(st.lists(st.sampled_from(range(len(shape))), unique=True).map(
        lambda a: tuple(sorted(a))) if shape else st.just(()), label="axes")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    x = rng.choice(np.asarray(values, np.float64), size=shape)
    return x, axes, rng


def group_view(a: np.ndarray, axes: tuple) -> np.ndarray:
    """``a`` with the kept axes first and the reduced ones flattened last."""
    kept = [i for i in range(a.ndim) if i not in axes]
    moved = np.transpose(a, kept + list(axes))
    return moved.reshape(moved.shape[:len(kept)] + (-1,))


@pytest.mark.parametrize("prim, pick", [(red.reduce_max_p, np.max), (red.reduce_min_p, np.min)])
@fast
@given(data=st.data())
def test_extremum_tangent_is_the_mean_over_ties(prim: Primitive, pick: Any, data: Any) -> None:
    """With many ties: the tangent is the mean of the tangents at the tied extrema, and the
    rule stays the transpose of the VJP (which splits the cotangent over the ties)."""
    x, axes, rng = data.draw(reduce_case([-1.0, 0.0, 1.0]), label="case")
    t = rng.standard_normal(x.shape)
    out, t_out = jvp_rule(Site(prim, {"axes": axes}, (0,)), [t], [x])
    gx, gt = group_view(x, axes), group_view(t, axes)
    hit = gx == pick(gx, axis=-1, keepdims=True)
    np.testing.assert_allclose(t_out, np.sum(gt * hit, -1) / np.sum(hit, -1), rtol=1e-13)
    u = rng.standard_normal(out.shape)
    (ct,) = functx.vjp(lambda x: prim.bind(x, axes=axes), x)[1](u)
    assert abs(inner(t_out, u) - inner(ct, t)) <= 1e-12 * (1 + np.sum(np.abs(u))) * (
        1 + np.sum(np.abs(t)))


@fast
@given(data=st.data())
def test_product_tangent_with_zeros(data: Any) -> None:
    """With zeros in x: sum_i t_i * prod_{j != i} x_j per group (no 0/0), matching the VJP."""
    x, axes, rng = data.draw(reduce_case([-1.5, 0.0, 0.0, 0.5, 2.0]), label="case")
    t = rng.standard_normal(x.shape)
    site = Site(red.reduce_prod_p, {"axes": axes}, (0,))
    out, t_out = jvp_rule(site, [t], [x])
    gx, gt = group_view(x, axes), group_view(t, axes)
    others = np.stack([np.prod(np.delete(gx, i, axis=-1), axis=-1)
                       for i in range(gx.shape[-1])], axis=-1)
    np.testing.assert_allclose(t_out, np.sum(gt * others, -1), rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(t_out))
    u = rng.standard_normal(out.shape)
    (ct,) = functx.vjp(lambda x: red.reduce_prod(x, axes), x)[1](u)
    assert abs(inner(t_out, u) - inner(ct, t)) <= 1e-10 * (1 + np.sum(np.abs(u))) * (
        1 + np.sum(np.abs(t)))
