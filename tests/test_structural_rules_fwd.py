"""Forward-mode (JVP) and batching rules of the shape primitives (functx/primitives/shape.py).

Driven by the specs of ``tests/specs/structural.py`` whose primitive lives in shape.py. Each
drawn case is traced with ``make_trace`` to find the primitive's equation (its input values
and parameters); the rules are then called directly:

* the JVP rule against central finite differences (float64), with some tangents absent
  (None) for the primitives with several differentiable inputs;
* the JVP rule against the VJP: ``<J v, u> == <v, J^T u>`` (``functx.vjp``);
* the batching rule against a loop over the examples, with a batch axis drawn per argument
  (None = unbatched; batched start indices for dynamic_slice/dynamic_update_slice, and
  Python-int start indices where unbatched), batch sizes 0 to 3.

Both rules are also run under ``make_trace`` (they must be written with functx operations,
so they work on tracers), and the batching rule must record as many equations for a batch
of 2 as for a batch of 3 (no Python loop over the batch).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, strategies as st

import functx
from functx.ir import Literal
from functx.primitives import shape as sh
from tests.specs import PrimSpec
from tests.specs.structural import SPECS as STRUCTURAL_SPECS

SHAPE_PRIMS = {"reshape", "broadcast_in_dim", "transpose", "squeeze", "expand_dims", "slice",
               "dynamic_slice", "dynamic_update_slice", "concatenate", "pad", "rev"}
SPECS = [s for s in STRUCTURAL_SPECS if s.name in SHAPE_PRIMS]


def per_spec(test: Any) -> Any:
    return pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])(test)


def test_every_shape_primitive_is_covered() -> None:
    """The filter finds a spec for every primitive of shape.py, and each has both rules."""
    assert {s.name for s in SPECS} == SHAPE_PRIMS
    for name in SHAPE_PRIMS:
        prim = getattr(sh, f"{name}_p")
        assert prim.jvp is not None and prim.batch is not None, name


# -- helpers ---------------------------------------------------------------------------------

def equation(spec: PrimSpec, args: tuple) -> tuple:
    """``(prim, input values, params)`` of the spec's equation when traced on ``args``."""
    trace = functx.make_trace(spec.fn)(*args)
    env = dict(zip(trace.in_vars, args))
    env.update(zip(trace.const_vars, trace.const_values))
    for eqn in trace.eqns:
        ins = [a.value if type(a) is Literal else env[a] for a in eqn.inputs]
        if eqn.prim.name == spec.name:
            return eqn.prim, ins, dict(eqn.params)
        env.update(zip(eqn.outputs, [functx.bind(eqn.prim, *ins, **eqn.params)]))
    raise AssertionError(f"spec {spec.id} does not bind {spec.name}:\n{trace}")


def is_float(x: Any) -> bool:
    return np.asarray(x).dtype.kind == "f"


def inner(a: Any, b: Any) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def draw_tangents(data: Any, ins: list, rng: np.random.Generator) -> list:
    """A random tangent per float input (some None where there are several); None else."""
    floats = [i for i, x in enumerate(ins) if is_float(x)]
    present = set(floats)
    if len(floats) > 1:
        present = set(data.draw(st.sets(st.sampled_from(floats)), label="inputs with tangents"))
    return [rng.standard_normal(np.shape(x)) if i in present else None
            for i, x in enumerate(ins)]


def traced_rule_agrees(fn: Any, arrays: list, expected: Any, what: str) -> None:
    """``fn(*arrays)`` recorded by make_trace and replayed gives ``expected`` exactly."""
    trace = functx.make_trace(fn)(*arrays)
    np.testing.assert_array_equal(functx.eval_trace(trace, *arrays)[0], expected, err_msg=what)


# -- 1. the JVP rule against finite differences ------------------------------------------------

@per_spec
@given(data=st.data())
def test_jvp_rule_matches_finite_differences(spec: PrimSpec, data: Any) -> None:
    """prim.jvp(tangents, primals, out) == (f(x + eps t) - f(x - eps t)) / 2 eps."""
    prim, ins, params = equation(spec, data.draw(spec.args, label="args"))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    out = prim.bind(*ins, **params)
    tangents = draw_tangents(data, ins, rng)
    t_out = prim.jvp(tangents, ins, out, **params)
    if all(t is None for t in tangents):
        assert t_out is None or not np.any(t_out), f"{spec.id}: zero tangents gave {t_out!r}"
        return
    assert isinstance(t_out, np.ndarray), f"{spec.id}: tangent {t_out!r:.80}"
    assert (t_out.shape, t_out.dtype) == (out.shape, out.dtype), spec.id
    eps = spec.fd_eps
    moved = lambda s: [x if t is None else np.asarray(x + s * eps * t)
                       for x, t in zip(ins, tangents)]
    numeric = (prim.bind(*moved(1), **params) - prim.bind(*moved(-1), **params)) / (2 * eps)
    np.testing.assert_allclose(t_out, numeric, rtol=spec.fd_rtol, atol=spec.fd_atol,
                               err_msg=f"{spec.id}: JVP vs finite differences")

    present = [i for i, t in enumerate(tangents) if t is not None]
    def rule(*ts: Any) -> Any:
        full = list(tangents)
        for i, t in zip(present, ts):
            full[i] = t
        return prim.jvp(full, ins, out, **params)
    traced_rule_agrees(rule, [tangents[i] for i in present], t_out, f"{spec.id}: traced JVP")


# -- 2. the JVP rule against the VJP -----------------------------------------------------------

@per_spec
@given(data=st.data())
def test_jvp_rule_is_the_transpose_of_the_vjp(spec: PrimSpec, data: Any) -> None:
    """<J v, u> == <v, J^T u> with J v from the JVP rule and J^T u from functx.vjp."""
    prim, ins, params = equation(spec, data.draw(spec.args, label="args"))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    floats = [i for i, x in enumerate(ins) if is_float(x)]

    def f(*xs: Any) -> Any:
        full = list(ins)
        for i, x in zip(floats, xs):
            full[i] = x
        return prim.bind(*full, **params)

    out, f_vjp = functx.vjp(f, *[ins[i] for i in floats])
    u = rng.standard_normal(out.shape)
    cts = f_vjp(u)
    tangents = draw_tangents(data, ins, rng)
    t_out = prim.jvp(tangents, ins, out, **params)
    lhs = 0.0 if t_out is None else inner(t_out, u)
    rhs = math.fsum(inner(tangents[i], ct) for i, ct in zip(floats, cts)
                    if tangents[i] is not None)
    scale = math.sqrt(inner(u, u)) * math.sqrt(sum(inner(t, t) for t in tangents
                                                   if t is not None))
    assert abs(lhs - rhs) <= 1e-12 * max(scale, 1.0), (
        f"{spec.id}: <J v, u> = {lhs!r} but <v, J^T u> = {rhs!r}")


# -- 3. the batching rule against a loop -------------------------------------------------------

def batched_value(x: Any, d: int | None, size: int, rng: np.random.Generator,
                  as_int: bool) -> tuple:
    """``(batched value, examples)``: ``size`` random examples like ``x`` stacked at ``d``,
    or where unbatched (``d`` None) one shared value (an integer scalar as a Python int if
    ``as_int``). Start indices are drawn out of range on both sides (they are clamped)."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        stacked = rng.standard_normal((1 if d is None else size,) + x.shape)
    else:
        stacked = rng.integers(-2, 8, size=(1 if d is None else size,) + x.shape).astype(x.dtype)
    if d is None:
        shared = int(stacked[0]) if as_int else stacked[0]
        return shared, [shared] * size
    return np.moveaxis(stacked, 0, d), list(stacked)


@per_spec
@given(data=st.data())
def test_batch_rule_matches_a_loop(spec: PrimSpec, data: Any) -> None:
    """Example b of prim.batch(args, dims) is prim applied to the b-th examples."""
    prim, ins, params = equation(spec, data.draw(spec.args, label="args"))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    size = data.draw(st.integers(0, 3), label="batch size")
    dims = [data.draw(st.none() | st.integers(0, np.ndim(x)), label=f"batch axis {i}")
            for i, x in enumerate(ins)]
    if all(d is None for d in dims):
        i = data.draw(st.integers(0, len(ins) - 1), label="batched input")
        dims[i] = data.draw(st.integers(0, np.ndim(ins[i])), label=f"batch axis {i}")
    as_int = [d is None and np.asarray(x).dtype.kind in "iu"
              and data.draw(st.booleans(), label=f"input {i} as a Python int")
              for i, (x, d) in enumerate(zip(ins, dims))]
    args, examples = zip(*[batched_value(x, d, size, rng, a)
                           for x, d, a in zip(ins, dims, as_int)])

    out, out_dim = prim.batch(list(args), list(dims), **params)
    one = prim.bind(*ins, **params)  # the type of one example's result
    assert isinstance(out_dim, int) and 0 <= out_dim <= one.ndim, f"{spec.id}: {out_dim!r}"
    expected_shape = one.shape[:out_dim] + (size,) + one.shape[out_dim:]
    assert (out.shape, out.dtype) == (expected_shape, one.dtype), (
        f"{spec.id}: batched {out.shape} {out.dtype} at axis {out_dim}, expected "
        f"{expected_shape} {one.dtype}")
    for b in range(size):
        want = prim.bind(*[ex[b] for ex in examples], **params)
        np.testing.assert_array_equal(np.moveaxis(out, out_dim, 0)[b], want,
                                      err_msg=f"{spec.id}: example {b} of {size}, dims {dims}")

    # The rule works on tracers (functx operations only) and has no loop over the batch.
    arrays = [i for i, a in enumerate(args) if not isinstance(a, int)]
    def rule(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(arrays, xs):
            full[i] = x
        return prim.batch(full, list(dims), **params)[0]
    traced_rule_agrees(rule, [args[i] for i in arrays], out, f"{spec.id}: traced batch rule")
    lengths = []
    for n in (2, 3):
        resized = [batched_value(x, d, n, rng, a)[0] for x, d, a in zip(ins, dims, as_int)]
        fn = lambda *xs, r=resized: prim.batch([xs[arrays.index(i)] if i in arrays else a
                                                for i, a in enumerate(r)], list(dims),
                                               **params)[0]
        lengths.append(len(functx.make_trace(fn)(*[resized[i] for i in arrays]).eqns))
    assert lengths[0] == lengths[1], f"{spec.id}: the batch rule records more for a larger batch"
