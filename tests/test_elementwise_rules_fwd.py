"""Forward-mode (JVP) and batching rules of the elementwise primitives, table-driven over
``tests.specs.elementwise.SPECS``.

The rules are called directly, through two small interpreters of the spec's trace (so a spec
that binds several primitives, such as a conversion to float32 and back, is covered too):

* the JVP rules against central finite differences, with each differentiable argument's
  tangent given or None (zero) at random, so every combination of missing tangents is run;
  the output tangent must have the output's shape and dtype, and be None for integer and
  bool outputs; the same rules recorded by ``make_trace`` and replayed give the same values;
* JVP against VJP: ``<J v, u> == <v, J^T u>`` with ``functx.vjp``;
* the batching rules against a loop: each argument batched at a random axis or unbatched,
  compared with ``np.stack`` of the spec's function over the examples;
* complex arguments for the holomorphic primitives: the JVP is ``t * f'(z)`` (against
  complex finite differences) and the transpose of the VJP without conjugation.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functx
import functx.numpy
from functx.ir import Literal, Trace
from functx.primitives import elementwise as ew
from tests.specs import PrimSpec
from tests.specs.elementwise import SPECS
from tests.strategies import array, broadcast_pair, shapes

DIFF_SPECS = [s for s in SPECS if s.diff_argnums]

# Three checks per spec: each gets half the profile's examples, to keep the file fast.
fwd_settings = settings(max_examples=max(5, settings.default.max_examples // 2))


def per_spec(specs: list[PrimSpec]) -> Any:
    """Parametrize a test over ``specs`` with the spec ids as test ids."""
    return pytest.mark.parametrize("spec", specs, ids=[s.id for s in specs])


# -- helpers -----------------------------------------------------------------------------------

def is_inexact(x: Any) -> bool:
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype  # tracers have a dtype
    return np.dtype(dtype).kind in "fc"


def read(env: dict, atom: Any) -> Any:
    return atom.value if type(atom) is Literal else env[atom]


def trace_of(fn: Callable, args: Sequence[Any]) -> Trace:
    return functx.make_trace(fn)(*args)


def jvp_by_rules(trace: Trace, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple:
    """Forward mode over ``trace`` calling each primitive's JVP rule: (out, out tangent).

    Checks every rule's result: the output's shape and dtype, None for non-float outputs.
    A primitive without a JVP rule must have the zero VJP (its tangent is None).
    """
    env = dict(zip(trace.in_vars, primals))
    env.update(zip(trace.const_vars, trace.const_values))
    tenv = dict(zip(trace.in_vars, tangents))
    for eqn in trace.eqns:
        prim = eqn.prim
        ins = [read(env, a) for a in eqn.inputs]
        tins = [None if type(a) is Literal else tenv.get(a) for a in eqn.inputs]
        out = prim.bind(*ins, **eqn.params)
        if prim.jvp is None:
            assert prim.has_zero_vjp, f"{prim.name} has a non-zero VJP but no JVP rule"
            t = None
        else:
            t = prim.jvp(tins, ins, out, **eqn.params)
        if t is not None:
            assert is_inexact(out), f"{prim.name}: a tangent for an integer output {out.dtype}"
            assert (tuple(t.shape), t.dtype) == (tuple(out.shape), out.dtype), (
                f"{prim.name}: tangent {t.dtype}{tuple(t.shape)} for the output "
                f"{out.dtype}{tuple(out.shape)} (tangents in: "
                f"{[None if x is None else tuple(x.shape) for x in tins]})")
        env[eqn.outputs[0]], tenv[eqn.outputs[0]] = out, t
    (o,) = trace.outputs
    return read(env, o), (None if type(o) is Literal else tenv.get(o))


def vmap_by_rules(trace: Trace, args: Sequence[Any], dims: Sequence[int | None]) -> tuple:
    """Batching over ``trace`` calling each primitive's batching rule: (out, out_dim)."""
    env = dict(zip(trace.in_vars, zip(args, dims)))
    env.update((v, (c, None)) for v, c in zip(trace.const_vars, trace.const_values))
    for eqn in trace.eqns:
        ins, ds = zip(*[(a.value, None) if type(a) is Literal else env[a] for a in eqn.inputs])
        if all(d is None for d in ds):
            env[eqn.outputs[0]] = (eqn.prim.bind(*ins, **eqn.params), None)
            continue
        assert eqn.prim.batch is not None, f"{eqn.prim.name} has no batching rule"
        out, d = eqn.prim.batch(list(ins), list(ds), **eqn.params)
        assert d is None or 0 <= d < out.ndim, f"{eqn.prim.name}: out_dim {d}, rank {out.ndim}"
        env[eqn.outputs[0]] = (out, d)
    (o,) = trace.outputs
    return (o.value, None) if type(o) is Literal else env[o]


def draw_rng(data: Any) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def random_like(x: Any, rng: np.random.Generator) -> np.ndarray:
    x = np.asarray(x)
    v = rng.standard_normal(x.shape)
    if x.dtype.kind == "c":
        v = v + 1j * rng.standard_normal(x.shape)
    return v.astype(x.dtype)


def inner(a: Any, b: Any) -> complex:
    """The bilinear (unconjugated) inner product, accumulated in complex128."""
    return complex(np.sum(np.asarray(a, np.complex128) * np.asarray(b, np.complex128)))


def abs_inner(a: Any, b: Any) -> float:
    return float(np.sum(np.abs(np.asarray(a)) * np.abs(np.asarray(b))))


def dense(t: Any, like: Any) -> np.ndarray:
    """A tangent as an array (zeros of ``like``'s shape for None)."""
    return np.zeros(np.shape(like)) if t is None else np.asarray(t)


def tangent_patterns(argnums: Sequence[int], args: tuple, rng: np.random.Generator) -> list:
    """One tangent list per subset of ``argnums``: a random tangent for the arguments in the
    subset, None (a zero) elsewhere; every combination, the empty one first."""
    full = [random_like(a, rng) if i in argnums else None for i, a in enumerate(args)]
    return [[full[i] if i in argnums and mask >> list(argnums).index(i) & 1 else None
             for i in range(len(args))] for mask in range(2 ** len(argnums))]


# -- 1. JVP against finite differences --------------------------------------------------------

@per_spec(SPECS)
@fwd_settings
@given(data=st.data())
def test_jvp_matches_finite_differences(spec: PrimSpec, data: Any) -> None:
    """J v from the rules equals (f(x + eps v) - f(x - eps v)) / (2 eps) entry by entry; the
    rules recorded under make_trace give the same values; non-differentiable specs give None
    (or a zero) even where their float arguments have tangents."""
    args = data.draw(spec.args, label="args")
    rng = draw_rng(data)
    trace = trace_of(spec.fn, args)
    if not spec.diff_argnums:
        tangents = [random_like(a, rng) if is_inexact(a) else None for a in args]
        out, t = jvp_by_rules(trace, args, tangents)
        assert t is None or not np.any(np.asarray(t)), f"{spec.id}: non-zero tangent {t!r}"
        return
    for tangents in tangent_patterns(spec.diff_argnums, args, rng):
        check_jvp_against_fd(spec, trace, args, tangents)


def check_jvp_against_fd(spec: PrimSpec, trace: Trace, args: tuple, tangents: list) -> None:
    """One tangent pattern of test_jvp_matches_finite_differences."""
    out, t = jvp_by_rules(trace, args, tangents)
    if all(x is None for x in tangents):
        assert t is None, f"{spec.id}: a tangent {t!r:.60} from zero tangents"
        return
    jv = dense(t, out)
    eps = spec.fd_eps
    plus = [a if v is None else a + eps * v for a, v in zip(args, tangents)]
    minus = [a if v is None else a - eps * v for a, v in zip(args, tangents)]
    fd = (np.asarray(spec.fn(*plus)) - np.asarray(spec.fn(*minus))) / (2 * eps)
    vmax = max([1.0] + [float(np.max(np.abs(v), initial=0)) for v in tangents if v is not None])
    given_t = [i for i, v in enumerate(tangents) if v is not None]
    np.testing.assert_array_less(
        np.abs(jv - fd), spec.fd_atol * vmax + spec.fd_rtol * np.abs(fd) + 1e-300,
        err_msg=f"{spec.id}: J v vs finite differences (tangents for arguments {given_t})")

    # The rules are functx operations: recorded abstractly and replayed, they agree.

    def traced(*xs: Any) -> Any:
        tan = list(tangents)
        for i, x in zip(given_t, xs[len(args):]):
            tan[i] = x
        return jvp_by_rules(trace, xs[:len(args)], tan)[1]

    if t is not None:
        replay = functx.eval_trace(
            trace_of(traced, [*args, *(tangents[i] for i in given_t)]),
            *args, *(tangents[i] for i in given_t))[0]
        np.testing.assert_allclose(replay, jv, rtol=1e-14, atol=0, err_msg=spec.id)


# -- 2. JVP against VJP -----------------------------------------------------------------------

@per_spec(DIFF_SPECS)
@fwd_settings
@given(data=st.data())
def test_jvp_is_transpose_of_vjp(spec: PrimSpec, data: Any) -> None:
    """<J v, u> == sum_i <v_i, (J^T u)_i> for the rules' J v and functx.vjp's J^T u, for
    tangents of every subset of the float arguments."""
    args = data.draw(spec.args, label="args")
    rng = draw_rng(data)
    trace = trace_of(spec.fn, args)
    out, f_vjp = functx.vjp(spec.fn, *args)
    u = random_like(out, rng)
    cts = f_vjp(u)
    # Both sides round tangents and cotangents alike, up to the narrowest dtype traced.
    eps = max(float(np.finfo(v.aval.dtype).eps) for e in trace.eqns for v in e.outputs
              if v.aval.dtype.kind == "f")
    # Every float argument gets a tangent here (no finite differences: any point will do).
    float_args = [i for i, a in enumerate(args) if is_inexact(a)]
    for tangents in tangent_patterns(float_args, args, rng)[1:]:
        jv = dense(jvp_by_rules(trace, args, tangents)[1], out)
        lhs = inner(jv, u)
        rhs = sum(inner(v, ct) for v, ct in zip(tangents, cts) if v is not None)
        scale = abs_inner(jv, u) + sum(abs_inner(v, ct) for v, ct in zip(tangents, cts)
                                       if v is not None)
        assert abs(lhs - rhs) <= 16 * eps * scale + 1e-300, (
            f"{spec.id}: <J v, u> = {lhs!r} but <v, J^T u> = {rhs!r} (tangents for arguments "
            f"{[i for i, v in enumerate(tangents) if v is not None]})")


# -- 3. batching against a loop ---------------------------------------------------------------

@per_spec(SPECS)
@fwd_settings
@given(data=st.data())
def test_batch_matches_loop(spec: PrimSpec, data: Any) -> None:
    """Each argument batched at a random axis (or not at all); the rules' result, with its
    batch axis moved first, equals the spec's function applied to each example."""
    args = data.draw(spec.args, label="args")
    rng = draw_rng(data)
    size = int(rng.integers(0, 4))

    def axis(a: Any) -> int:
        return int(rng.integers(0, np.ndim(a) + 1))

    dims = [None if rng.random() < 0.3 else axis(a) for a in args]
    if all(d is None for d in dims):
        i = int(rng.integers(0, len(args)))
        dims[i] = axis(args[i])
    # Examples take their entries from the drawn argument's own (so stay in the domain).
    examples = [[a if d is None else
                 rng.choice(np.ravel(a), size=np.shape(a)) if np.size(a) else np.asarray(a)
                 for _ in range(size)] for a, d in zip(args, dims)]
    batched = [a if d is None else np.stack(ex, axis=d) if size else
               np.empty(np.shape(a)[:d] + (0,) + np.shape(a)[d:], np.asarray(a).dtype)
               for a, d, ex in zip(args, dims, examples)]

    out, d = vmap_by_rules(trace_of(spec.fn, args), batched, dims)
    one = np.asarray(spec.fn(*args))
    out = np.asarray(out)
    got = (np.broadcast_to(out, (size,) + out.shape) if d is None
           else np.moveaxis(out, d, 0))
    expected = (np.stack([np.asarray(spec.fn(*[ex[b] for ex in examples]))
                          for b in range(size)]) if size
                else np.empty((0,) + one.shape, one.dtype))
    assert (got.shape, got.dtype) == (expected.shape, expected.dtype), (
        f"{spec.id}: batched result {got.dtype}{got.shape} (out_dim {d}), expected "
        f"{expected.dtype}{expected.shape}; dims {dims}")
    if got.dtype.kind in "fc":
        # NumPy's strided and contiguous loops may differ in the last bit.
        np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0, equal_nan=True,
                                   err_msg=f"{spec.id}: dims {dims}")
    else:
        np.testing.assert_array_equal(got, expected, err_msg=f"{spec.id}: dims {dims}")


def test_every_elementwise_primitive_has_forward_and_batch_rules() -> None:
    """A JVP rule (or the zero VJP) and a batching rule for every primitive of the family."""
    prims = [v for v in vars(ew).values() if isinstance(v, functx.Primitive)]
    assert len(prims) > 40
    missing = [f"{p.name}: jvp" for p in prims if p.jvp is None and not p.has_zero_vjp]
    missing += [f"{p.name}: batch" for p in prims if p.batch is None]
    assert missing == []
    assert {p.name for p in prims} <= {s.name for s in SPECS}


# -- 4. edges: ties, NaN, zeros, tails ----------------------------------------------------------

def _arr(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float64)


_ERF_X = np.concatenate([np.linspace(-6, 6, 121), [5.9999, 26.0, 1e10, np.inf, -np.inf]])

EDGE_CASES: list[tuple[str, Callable, tuple]] = [
    ("max", ew.max, (_arr(1, -2, 3, np.nan, 1, np.inf, 0), _arr(1, 0, 5, 1, np.nan, np.inf, -0.))),
    ("min", ew.min, (_arr(1, -2, 3, np.nan, 1, np.inf, 0), _arr(1, 0, 5, 1, np.nan, np.inf, -0.))),
    ("clamp", ew.clamp, (_arr(-1, -1, -1, -1, 0, 1), _arr(-1, 1, 0, -2, 0.5, 0),
                         _arr(1, 1, 1, 1, 0, -1))),
    ("abs", ew.abs, (_arr(-2, -0.0, 0.0, 3),)),
    ("pow", ew.pow, (_arr(0, 0, 0, 2, 0), _arr(0.5, 2, -1, 0, 0))),
    ("erf", ew.erf, (_ERF_X,)),
    ("logistic", ew.logistic, (_arr(-1000, -30, 0, 30, 1000),)),
    ("tanh", ew.tanh, (_arr(-30, -1e-300, 0, 20, 400),)),
    ("select", ew.select, (np.array([True, False, True]), _arr(1, 2, 3), _arr(4, 5, 6))),
]


@pytest.mark.parametrize("case", EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_jvp_equals_vjp_at_the_edges(case: tuple) -> None:
    """Where the derivative is a convention (ties, NaN, 0 ** y, |0|) or only accurate with
    care (erf's and logistic's tails), J v entry by entry is what the VJP gives: for these
    elementwise functions of same-shaped arguments, J t_i is grad_i * t_i exactly."""
    name, fn, args = case
    floats = [i for i, a in enumerate(args) if a.dtype.kind == "f"]
    rng = np.random.default_rng(0)
    trace = trace_of(fn, args)
    with np.errstate(divide="ignore", invalid="ignore"):  # pow: 0 ** -1 = inf warns
        grads = functx.grad(lambda *a: functx.numpy.sum(fn(*a)), argnums=tuple(floats))(*args)
        for i, g in zip(floats, grads):
            v = rng.uniform(0.5, 2.0, args[i].shape)
            tangents = [v if j == i else None for j in range(len(args))]
            t = jvp_by_rules(trace, args, tangents)[1]
            np.testing.assert_array_equal(np.asarray(t), np.asarray(g) * v,
                                          err_msg=f"{name}: tangent of argument {i}")


# -- 5. complex arguments (holomorphic primitives) --------------------------------------------

def _disc(shape: tuple) -> st.SearchStrategy:
    """complex128 values with real part in [0.2, 0.9] and imaginary part in [-0.4, 0.4]:
    inside |z| < 1 and the right half-plane, away from every branch cut and pole."""
    return st.tuples(array(shape, 0.2, 0.9), array(shape, -0.4, 0.4)).map(
        lambda ri: ri[0] + 1j * ri[1])


def _c_one() -> st.SearchStrategy:
    return shapes().flatmap(lambda s: _disc(s).map(lambda z: (z,)))


def _c_two() -> st.SearchStrategy:
    return broadcast_pair().flatmap(lambda s: st.tuples(_disc(s[0]), _disc(s[1])))


@st.composite
def _c_select(draw) -> tuple:
    st_, sf = draw(broadcast_pair())
    sp = draw(st.sampled_from([st_, sf, ()]))
    pred = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random(sp) < 0.5
    return pred, draw(_disc(st_)), draw(_disc(sf))


COMPLEX_CASES: list[tuple[str, Callable, st.SearchStrategy, tuple[int, ...]]] = [
    *[(n, getattr(ew, n), _c_one(), (0,)) for n in (
        "neg", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
        "acos", "atan", "sinh", "cosh", "tanh")],
    *[(n, getattr(ew, n), _c_two(), (0, 1)) for n in ("add", "sub", "mul", "div", "pow")],
    ("integer_pow[y=3]", lambda z: ew.integer_pow(z, y=3), _c_one(), (0,)),
    ("integer_pow[y=-2]", lambda z: ew.integer_pow(z, y=-2), _c_one(), (0,)),
    ("select", ew.select, _c_select(), (1, 2)),
]


@pytest.mark.parametrize("case", COMPLEX_CASES, ids=[c[0] for c in COMPLEX_CASES])
@settings(max_examples=max(5, settings.default.max_examples // 3))
@given(data=st.data())
def test_complex_jvp_is_holomorphic_derivative(case: tuple, data: Any) -> None:
    """With complex tangents, J v is f'(z) v (complex finite differences), and it is the
    transpose of the VJP under the bilinear product (no conjugation, as JAX)."""
    name, fn, strategy, diff = case
    args = data.draw(strategy, label="args")
    rng = draw_rng(data)
    tangents = [random_like(a, rng) if i in diff else None for i, a in enumerate(args)]
    out, t = jvp_by_rules(trace_of(fn, args), args, tangents)
    jv = dense(t, out)
    eps = 1e-6
    plus = [a if v is None else a + eps * v for a, v in zip(args, tangents)]
    minus = [a if v is None else a - eps * v for a, v in zip(args, tangents)]
    fd = (np.asarray(fn(*plus)) - np.asarray(fn(*minus))) / (2 * eps)
    np.testing.assert_allclose(jv, fd, rtol=1e-6, atol=1e-6, err_msg=name)
    u = random_like(out, rng)
    cts = functx.vjp(fn, *args)[1](u)
    lhs = inner(jv, u)
    rhs = sum(inner(v, ct) for v, ct in zip(tangents, cts) if v is not None)
    assert abs(lhs - rhs) <= 1e-12 * (abs_inner(jv, u) + math.fsum(
        abs_inner(v, ct) for v, ct in zip(tangents, cts) if v is not None)) + 1e-300, name
