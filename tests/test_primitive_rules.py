"""Rule checks for every primitive, driven by the spec table (``tests.specs.all_specs()``).

For each :class:`tests.specs.PrimSpec` one parametrized test per check:

* the eager implementation against the NumPy reference (values, shape, dtype, read-only);
* abstract evaluation against the implementation (``eval_shape``, ``make_trace`` + ``typecheck``);
* the VJP against central finite differences (the dot-product test ``<u, J v> == <J^T u, v>``);
* inputs are never mutated (eager, ``vjp`` and the VJP function);
* the VJP rule is itself differentiable (second order, smooth specs only);

and a coverage test: every registered primitive has a spec and all its required rules.

Arguments that are not arrays (nor pytrees of arrays), such as the ``SimpleNamespace`` of
static parameters the structural specs pass last, are held static: the transforms see a
function of the array arguments only (:class:`Call`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functx
from functx import tree
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red
from functx.named_axes import is_collective
from functx.registry import REGISTRY
from tests.specs import PrimSpec, all_specs

SPECS: list[PrimSpec] = all_specs()
IDS = [s.id for s in SPECS]
DIFF_SPECS = [s for s in SPECS if s.diff_argnums and s.reverse]
# forward-mode-only primitives (while) leave out the VJP checks
VJP_SPECS = [s for s in SPECS if s.reverse]
SMOOTH_SPECS = [s for s in DIFF_SPECS if s.smooth]

# Primitives that may be registered without a spec. Every entry needs a comment saying why
# it cannot be tested through the table; keep this empty.
UNSPECCED_ALLOWED: dict[str, str] = {}

# The second-order check traces the VJP rule under grad and runs finite differences of a
# VJP: it is the slowest check, so it gets a third of the profile's examples.
second_order_settings = settings(max_examples=max(5, settings.default.max_examples // 3))


def per_spec(specs: list[PrimSpec]) -> Any:
    """Parametrize a test over ``specs`` with the spec ids as test ids."""
    return pytest.mark.parametrize("spec", specs, ids=[s.id for s in specs])


# -- helpers ---------------------------------------------------------------------------------

def draw_rng(data: Any) -> np.random.Generator:
    """A NumPy generator seeded by hypothesis (so failures replay)."""
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def random_like(x: Any, rng: np.random.Generator) -> np.ndarray:
    """Standard-normal values with ``x``'s shape and (float) dtype."""
    x = np.asarray(x)
    return rng.standard_normal(x.shape).astype(x.dtype)


def cotangent_like(out: Any, rng: np.random.Generator) -> Any:
    """A random cotangent for each float leaf of ``out``; ones for integer/bool leaves."""
    def one(leaf: Any) -> np.ndarray:
        leaf = np.asarray(leaf)
        if leaf.dtype.kind == "f":
            return random_like(leaf, rng)
        return np.ones(leaf.shape, leaf.dtype)
    return tree.map(one, out)


def inner(a: Any, b: Any) -> float:
    """The Euclidean inner product of two pytrees of arrays (accumulated in float64)."""
    return math.fsum(float(np.sum(np.asarray(x, np.float64) * np.asarray(y, np.float64)))
                     for x, y in zip(tree.leaves(a), tree.leaves(b)))


def norm(*xs: Any) -> float:
    """The Euclidean norm of all leaves of ``xs`` together."""
    return math.sqrt(sum(inner(x, x) for x in xs))


def with_args(args: tuple, argnums: tuple[int, ...], values: Any) -> tuple:
    """``args`` with ``args[i]`` replaced by ``values[k]`` for the k-th i of ``argnums``."""
    new = list(args)
    for i, v in zip(argnums, values):
        new[i] = v
    return tuple(new)


def shifted(args: tuple, argnums: tuple[int, ...], directions: list, step: float) -> tuple:
    """``args`` moved by ``step * direction`` along the differentiable arguments."""
    return with_args(args, argnums, [np.asarray(args[i] + step * d)
                                     for i, d in zip(argnums, directions)])


def assert_close_fd(analytic: float, numeric: float, scale: float, spec: PrimSpec,
                    what: str) -> None:
    """``analytic`` matches the finite-difference ``numeric`` within the spec's tolerance.

    ``scale`` (a product of norms) bounds the size of the terms summed in the inner product,
    so the absolute tolerance is relative to it.
    """
    tol = spec.fd_atol * max(scale, 1.0) + spec.fd_rtol * abs(numeric)
    assert abs(analytic - numeric) <= tol, (
        f"{spec.id}: {what}: analytic {analytic!r} vs finite differences {numeric!r} "
        f"(difference {abs(analytic - numeric):.3g}, tolerance {tol:.3g})")


_ARRAY_LEAF = (np.ndarray, np.generic, bool, int, float, complex)


def is_static(arg: Any) -> bool:
    """Whether a spec argument is a parameter rather than an array (or pytree of arrays)."""
    return not all(isinstance(leaf, _ARRAY_LEAF) for leaf in tree.leaves(arg))


class Call:
    """A spec applied to drawn arguments, as a function of its array arguments only.

    ``fn(*dyn_args)`` calls ``spec.fn`` with the static arguments filled back in;
    ``diff`` holds the positions of ``spec.diff_argnums`` among ``dyn_args``.
    """

    def __init__(self, spec: PrimSpec, args: tuple) -> None:
        self.spec, self.args = spec, args
        self.dyn_idx = tuple(i for i, a in enumerate(args) if not is_static(a))
        self.dyn_args = tuple(args[i] for i in self.dyn_idx)
        missing = [i for i in spec.diff_argnums if i not in self.dyn_idx]
        assert not missing, f"spec {spec.id}: differentiable arguments {missing} are not arrays"
        self.diff = tuple(self.dyn_idx.index(i) for i in spec.diff_argnums)

    def fn(self, *dyn_args: Any) -> Any:
        return self.spec.fn(*with_args(self.args, self.dyn_idx, dyn_args))

    def fd(self, *dyn_args: Any) -> Any:
        """The function whose finite differences the derivatives must match (``fn`` unless
        the spec names another, see ``PrimSpec.fd_fn``)."""
        fn = self.spec.fd_fn or self.spec.fn
        return fn(*with_args(self.args, self.dyn_idx, dyn_args))


def snapshot(args: tuple) -> list:
    """What must not change about the arguments: bytes, dtype, shape, writeable flag."""
    snap = []
    for leaf in tree.leaves(args):
        if isinstance(leaf, np.ndarray):
            snap.append((type(leaf), leaf.dtype, leaf.shape, leaf.tobytes(),
                         leaf.flags.writeable))
        else:
            snap.append((type(leaf), repr(leaf)))
    return snap


# -- a. the implementation against NumPy ------------------------------------------------------

@per_spec(SPECS)
@given(data=st.data())
def test_impl_matches_numpy(spec: PrimSpec, data: Any) -> None:
    """Eager output equals the NumPy reference with the same shape and dtype; read-only."""
    args = data.draw(spec.args, label="args")
    out = spec.fn(*args)
    expected = np.asarray(spec.ref(*args))
    assert type(out) is np.ndarray, f"{spec.id} returned a {type(out).__name__}"
    assert not out.flags.writeable, f"{spec.id} returned a writeable array"
    assert out.shape == expected.shape, f"{spec.id}: shape {out.shape} != {expected.shape}"
    assert out.dtype == expected.dtype, f"{spec.id}: dtype {out.dtype} != {expected.dtype}"
    if out.dtype.kind in "fc":
        np.testing.assert_allclose(out, expected, rtol=spec.rtol, atol=spec.atol,
                                   equal_nan=True, err_msg=spec.id)
    else:
        np.testing.assert_array_equal(out, expected, err_msg=spec.id)


# -- b. abstract evaluation against the implementation ----------------------------------------

@per_spec(SPECS)
@given(data=st.data())
def test_abstract_eval_matches_impl(spec: PrimSpec, data: Any) -> None:
    """eval_shape and make_trace give the eager output's type; the trace typechecks."""
    call = Call(spec, data.draw(spec.args, label="args"))
    out = call.fn(*call.dyn_args)
    shape = functx.eval_shape(call.fn, *call.dyn_args)
    assert (tuple(shape.shape), shape.dtype) == (out.shape, out.dtype), spec.id
    trace = functx.make_trace(call.fn)(*call.dyn_args)
    functx.typecheck(trace)
    assert [(tuple(a.shape), a.dtype) for a in trace.out_avals] == [(out.shape, out.dtype)]
    # (A collective is carried out by the vmap that names its axis: its spec's trace holds
    # the primitives its batching rule binds, not the collective itself.)
    assert spec.name in {e.prim.name for e in trace.eqns} or is_collective(
        REGISTRY[spec.name]), (
        f"spec {spec.id} does not bind primitive {spec.name}:\n{trace}")


# -- c. the VJP against finite differences ----------------------------------------------------

@per_spec(VJP_SPECS)
@given(data=st.data())
def test_vjp_matches_finite_differences(spec: PrimSpec, data: Any) -> None:
    """<u, (f(x + eps v) - f(x - eps v)) / 2 eps> == sum_i <f_vjp(u)_i, v_i>.

    A spec with no differentiable argument must have the zero VJP rule or pull every
    cotangent back to zeros.
    """
    call = Call(spec, data.draw(spec.args, label="args"))
    args, diff = call.dyn_args, call.diff
    rng = draw_rng(data)
    out, f_vjp = functx.vjp(call.fn, *args)
    u = cotangent_like(out, rng)
    cts = f_vjp(u)
    assert len(cts) == len(args)
    for i, (ct, a) in enumerate(zip(cts, args)):
        a = np.asarray(a)
        assert isinstance(ct, np.ndarray) and ct.shape == a.shape and ct.dtype == a.dtype, (
            f"{spec.id}: cotangent {i} is {ct!r:.80}, expected shape {a.shape} {a.dtype}")

    if not diff:
        if not REGISTRY[spec.name].has_zero_vjp:
            for i, ct in enumerate(cts):
                assert not np.any(ct), f"{spec.id}: non-zero cotangent for argument {i}"
        return

    for i in diff:
        assert np.asarray(args[i]).dtype == np.float64, (
            f"spec {spec.id}: differentiable argument {i} must be float64 for the "
            "finite-difference check")
    assert all(np.asarray(o).dtype == np.float64 for o in tree.leaves(out)), spec.id
    vs = [random_like(args[i], rng) for i in diff]
    eps = spec.fd_eps
    f_plus = call.fd(*shifted(args, diff, vs, eps))
    f_minus = call.fd(*shifted(args, diff, vs, -eps))
    jv = tree.map(lambda p, m: (np.asarray(p) - np.asarray(m)) / (2 * eps), f_plus, f_minus)
    numeric = inner(u, jv)
    analytic = math.fsum(inner(cts[i], v) for i, v in zip(diff, vs))
    assert_close_fd(analytic, numeric, norm(u) * norm(*vs), spec, "<J^T u, v> vs <u, J v>")


# -- d. inputs are never mutated ---------------------------------------------------------------

@per_spec(SPECS)
@given(data=st.data())
def test_inputs_not_mutated(spec: PrimSpec, data: Any) -> None:
    """Eager, vjp and the VJP function leave every argument's bytes and flags alone."""
    call = Call(spec, data.draw(spec.args, label="args"))
    args = call.dyn_args
    # Some arguments read-only (as functx's own outputs are), some writeable.
    for leaf in tree.leaves(args):
        if isinstance(leaf, np.ndarray) and data.draw(st.booleans(), label="read-only"):
            leaf.flags.writeable = False
    before = snapshot(args)
    rng = draw_rng(data)
    call.fn(*args)
    assert snapshot(args) == before, f"{spec.id}: eager call mutated its arguments"
    if not spec.reverse:
        return
    out, f_vjp = functx.vjp(call.fn, *args)
    assert snapshot(args) == before, f"{spec.id}: vjp mutated its arguments"
    u = cotangent_like(out, rng)
    u_before = snapshot((u,))
    f_vjp(u)
    assert snapshot(args) == before, f"{spec.id}: the VJP function mutated the primals"
    assert snapshot((u,)) == u_before, f"{spec.id}: the VJP function mutated the cotangent"


# -- e. second order: the VJP rule is differentiable -------------------------------------------

@per_spec(SMOOTH_SPECS)
@second_order_settings
@given(data=st.data())
def test_vjp_rule_is_differentiable(spec: PrimSpec, data: Any) -> None:
    """grad of g(x) = sum_i <f_vjp(u)_i, w_i> matches finite differences of g.

    ``g`` runs ``vjp`` of the spec inside ``grad``, so the VJP rule is recorded and
    differentiated: this fails if a rule uses raw NumPy on values or has a wrong derivative.
    """
    call = Call(spec, data.draw(spec.args, label="args"))
    args, diff = call.dyn_args, call.diff
    rng = draw_rng(data)
    out = call.fn(*args)
    u = cotangent_like(out, rng)
    ws = [random_like(args[i], rng) for i in diff]

    def g(*xs: Any) -> Any:
        cts = functx.vjp(call.fn, *with_args(args, diff, xs))[1](u)
        total = None
        for i, w in zip(diff, ws):
            term = _red.reduce_sum(_ew.mul(cts[i], w), tuple(range(w.ndim)))
            total = term if total is None else _ew.add(total, term)
        return total

    primals = [args[i] for i in diff]
    grads = functx.grad(g, argnums=tuple(range(len(diff))))(*primals)
    for gr, p in zip(grads, primals):
        assert gr.shape == np.shape(p) and gr.dtype == np.float64, spec.id
    ds = [random_like(p, rng) for p in primals]
    eps = spec.fd_eps
    g_plus = g(*[np.asarray(p + eps * d) for p, d in zip(primals, ds)])
    g_minus = g(*[np.asarray(p - eps * d) for p, d in zip(primals, ds)])
    numeric = (float(g_plus) - float(g_minus)) / (2 * eps)
    analytic = math.fsum(inner(gr, d) for gr, d in zip(grads, ds))
    assert_close_fd(analytic, numeric, norm(u) * norm(*ws) * norm(*ds), spec,
                    "second-order directional derivative")


# -- f. coverage -------------------------------------------------------------------------------

def test_every_registered_primitive_has_a_spec() -> None:
    """Each primitive in the global registry is exercised by at least one spec."""
    specced = {s.name for s in SPECS}
    unspecced = sorted(p.name for p in REGISTRY
                       if p.name not in specced and p.name not in UNSPECCED_ALLOWED)
    assert unspecced == [], f"primitives without a spec in tests/specs: {unspecced}"
    stale = sorted(set(UNSPECCED_ALLOWED) & specced)
    assert stale == [], f"allow-listed primitives that now have specs: {stale}"


def test_every_spec_names_a_registered_primitive() -> None:
    """No spec refers to a primitive that does not exist (a typo would hide a gap)."""
    unknown = sorted({s.name for s in SPECS} - set(REGISTRY.primitives))
    assert unknown == []


def test_spec_ids_are_unique() -> None:
    """Spec ids name the failing case in test output, so they must be distinct."""
    seen: set[str] = set()
    dups = sorted({i for i in IDS if i in seen or seen.add(i)})
    assert dups == [], f"duplicate spec ids (give them labels): {dups}"


def test_registry_has_every_required_rule() -> None:
    """abstract_eval, a CPU implementation and a VJP for every registered primitive."""
    assert REGISTRY.missing() == []
