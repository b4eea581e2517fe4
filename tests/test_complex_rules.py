"""Complex numbers: every primitive that accepts complex input, driven by the spec table.

The convention (JAX's; docs/complex.md). The cotangent (and ``grad``) of a complex value
``z = x + iy`` is ``dL/dx - i dL/dy``: for real-valued ``f``, ``grad(f)(z) = df/dx - i df/dy``
(so ``grad(|z|**2)(3+4j) == 6-8j``), and a VJP rule of a holomorphic primitive is
``ct * f'(z)``, with no conjugation. A cotangent ``c`` acts on a tangent ``v`` through the
real part of the *bilinear* product, ``dL = Re(c * v)``, so the adjointness identity of a
VJP with its JVP (check c below) is

    Re sum(u * jvp(v)) == Re sum_i sum(vjp(u)_i * v_i)          (no conjugation anywhere)

for every cotangent ``u`` of the output and every tangent ``v`` of the inputs (``u`` real for
a real output, ``v_i`` real for a real input). With a conjugating (Hermitian) product the
identity would describe another convention (PyTorch's, whose gradient is the conjugate).

Which specs run: every float64 argument ``x`` drawn by a spec's strategy (which keeps it in
the smooth domain) becomes ``x + i y`` with ``y`` drawn uniformly from [-0.5, 0.5] (small
enough to stay off every branch cut: ``atan``'s starts at ``|Im z| = 1``, the others lie on
the real axis outside the domains the specs draw from). The spec's function is traced on
those arguments, which asks every shape rule about complex128 operands: where one raises
DTypeError (a real-only primitive), or the spec has no float operand, the spec is skipped
with that reason. For the others:

a. the eager implementation matches the spec's NumPy reference on those complex arguments
   (where the reference takes complex input: one that raises TypeError or would discard an
   imaginary part, NumPy's ComplexWarning, is not asked);
b. the JVP matches central finite differences, in a real direction ``v`` and in an imaginary
   direction ``i v``; a real output has a real tangent;
c. the VJP is the adjoint of the JVP (the identity above); cotangents have the inputs' dtypes;
d. ``vmap`` matches a loop over examples;
e. ``jit`` matches eager, for the function, its VJP and its JVP;
f. (smooth specs) the VJP rules differentiate again: reverse over reverse against finite
   differences, in a real and an imaginary direction.

Then direct checks of the convention (ground truths written down by hand, and JAX as an
oracle where it is installed).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functx
import functx.numpy as fnp
import functx.tracing
from functx import tree
from functx.errors import DTypeError
from functx.named_axes import is_collective
from functx.registry import REGISTRY
from tests.specs import PrimSpec
from tests.test_primitive_rules import SMOOTH_SPECS, SPECS, Call, draw_rng, per_spec
from tests.test_primitive_transforms import assert_tree_close, batched_case, stack_outputs

C128 = np.dtype(np.complex128)
F64 = np.dtype(np.float64)

# Primitives that must take complex input (a guard: if the acceptance check below broke, every
# test here would skip and pass). Holomorphic functions, complex-linear maps, the complex
# parts, and abs (complex -> real).
MUST_ACCEPT = {
    "abs", "neg", "add", "sub", "mul", "div", "integer_pow", "pow", "exp", "expm1", "log",
    "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "tanh", "real", "imag", "conj", "fft", "dot_general", "reduce_sum", "reduce_prod",
    "cumsum", "select", "convert_element_type", "reshape", "transpose", "broadcast_in_dim",
    "concatenate", "pad", "slice", "gather", "scatter_add",
}


# -- which specs run, and their complex arguments -----------------------------------------------

def _is_f64(a: Any) -> bool:
    return isinstance(a, (np.ndarray, np.generic)) and np.asarray(a).dtype == F64


def complexify(args: tuple, rng: np.random.Generator) -> tuple:
    """Every float64 argument ``x`` as ``x + i y``, ``y`` uniform in [-0.5, 0.5]."""
    return tuple(np.asarray(a + 1j * rng.uniform(-0.5, 0.5, np.shape(a))) if _is_f64(a)
                 else a for a in args)


def complex_rejection(spec: PrimSpec, call: Call) -> str | None:
    """None if the spec's primitive takes the complex arguments of ``call``; else why not.

    The shape rules answer: the spec's function is traced on its complex arguments (which
    runs every abstract-eval rule on complex128 operands, and re-traces the bodies of
    higher-order primitives); a DTypeError, or a trace whose equations of the spec's
    primitive have no complex operand, is a refusal.
    """
    try:
        trace = functx.make_trace(call.fn)(*call.dyn_args)
    except DTypeError as err:
        return f"{spec.id}: a shape rule rejects complex operands ({err})"
    eqns = [e for e in trace.eqns if e.prim.name == spec.name]
    if not eqns and is_collective(REGISTRY[spec.name]):
        eqns = list(trace.eqns)  # carried out by the vmap naming its axis (specs/collectives)
    assert eqns, f"spec {spec.id} does not bind {spec.name} on complex arguments:\n{trace}"
    if not any(np.dtype(a.aval.dtype).kind == "c" for e in eqns for a in e.inputs):
        return f"{spec.id}: no floating-point operand to make complex"
    return None


def complex_call(spec: PrimSpec, data: Any) -> tuple[Call, np.random.Generator]:
    """The spec on complex arguments, or a skip if its primitive rejects them."""
    args = data.draw(spec.args, label="args")
    rng = draw_rng(data)
    call = Call(spec, complexify(args, rng))
    reason = complex_rejection(spec, call)
    if reason is not None:
        pytest.skip(reason)
    return call, rng


def random_of(like: Any, rng: np.random.Generator) -> np.ndarray:
    """Standard normal values of ``like``'s shape and dtype (complex: both parts)."""
    like = np.asarray(like)
    v = rng.standard_normal(like.shape)
    if like.dtype.kind == "c":
        v = v + 1j * rng.standard_normal(like.shape)
    return v.astype(like.dtype)


def is_inexact(x: Any) -> bool:
    return np.asarray(x).dtype.kind in "fc"


def cotangent_of(out: Any, rng: np.random.Generator) -> Any:
    """Random cotangents for float and complex leaves; ones (ignored) for the others."""
    return tree.map(lambda o: random_of(o, rng) if is_inexact(o)
                    else np.ones(np.shape(o), np.asarray(o).dtype), out)


def tangents_of(call: Call, vs: list) -> tuple:
    """Tangents ``vs`` for the differentiable arguments, zeros for the others."""
    ts = [np.zeros(np.shape(a), np.asarray(a).dtype) for a in call.dyn_args]
    for i, v in zip(call.diff, vs):
        ts[i] = v
    return tuple(ts)


def bilinear(a: Any, b: Any) -> float:
    """``Re sum(a * b)`` over the float and complex leaves of two pytrees (no conjugation):
    the action of cotangents ``a`` on tangents ``b`` in JAX's convention."""
    return math.fsum(float(np.real(np.sum(np.asarray(x, C128) * np.asarray(y, C128))))
                     for x, y in zip(tree.leaves(a), tree.leaves(b)) if is_inexact(x))


def euclid(a: Any, b: Any) -> float:
    """The real Euclidean inner product of C^n as R^2n: ``Re sum(conj(a) * b)``."""
    return math.fsum(float(np.real(np.vdot(np.asarray(x, C128), np.asarray(y, C128))))
                     for x, y in zip(tree.leaves(a), tree.leaves(b)) if is_inexact(x))


def size(*xs: Any) -> float:
    return math.sqrt(sum(euclid(x, x) for x in xs))


# -- a. the implementation against NumPy -----------------------------------------------------------

@per_spec(SPECS)
@given(data=st.data())
def test_complex_impl_matches_numpy(spec: PrimSpec, data: Any) -> None:
    """Eager output on complex arguments equals the NumPy reference (shape, dtype, values)."""
    call, _ = complex_call(spec, data)
    out = spec.fn(*call.args)
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        try:
            expected = np.asarray(spec.ref(*call.args))
        except (TypeError, np.exceptions.ComplexWarning):
            return  # the reference is real-only
    out = np.asarray(out)
    assert (out.shape, out.dtype) == (expected.shape, expected.dtype), (
        f"{spec.id}: {out.dtype}{list(out.shape)}, NumPy gives "
        f"{expected.dtype}{list(expected.shape)}")
    if out.dtype.kind in "fc":
        np.testing.assert_allclose(out, expected, rtol=spec.rtol, atol=spec.atol,
                                   equal_nan=True, err_msg=spec.id)
    else:
        np.testing.assert_array_equal(out, expected, err_msg=spec.id)


# -- b. the JVP against finite differences -------------------------------------------------------

@per_spec(SPECS)
@given(data=st.data())
def test_complex_jvp_matches_finite_differences(spec: PrimSpec, data: Any) -> None:
    """In a real direction ``v`` and an imaginary direction ``i v``: the tangent has the
    output's dtype (real for a real output) and ``<u, jvp(v)> == <u, (f(z + eps v) -
    f(z - eps v)) / 2 eps>`` in the Euclidean product of C^n as R^2n."""
    call, rng = complex_call(spec, data)
    args, diff = call.dyn_args, call.diff
    out = call.fn(*args)
    if not diff:
        return
    u = cotangent_of(out, rng)
    for direction in ("real", "imaginary"):
        scale = 1.0 if direction == "real" else 1j
        vs = [(rng.standard_normal(np.shape(args[i])) * scale).astype(np.asarray(args[i]).dtype)
              for i in diff]
        p, t_out = functx.jvp(call.fn, args, tangents_of(call, vs))
        for o, t in zip(tree.leaves(p), tree.leaves(t_out)):
            assert np.shape(t) == np.shape(o), f"{spec.id}: tangent shape {np.shape(t)}"
            assert np.asarray(t).dtype == np.asarray(o).dtype, (
                f"{spec.id}: a {np.asarray(t).dtype} tangent for a {np.asarray(o).dtype} "
                f"output ({direction} direction)")
        eps = spec.fd_eps
        moved = lambda s: call.fn(*[np.asarray(a + s * eps * vs[call.diff.index(k)])
                                    if k in call.diff else a for k, a in enumerate(args)])
        f_plus, f_minus = moved(1.0), moved(-1.0)
        jv = tree.map(lambda a, b: (np.asarray(a) - np.asarray(b)) / (2 * eps),
                      f_plus, f_minus)
        analytic, numeric = euclid(u, t_out), euclid(u, jv)
        tol = spec.fd_atol * max(size(u) * size(*vs), 1.0) + spec.fd_rtol * abs(numeric)
        assert abs(analytic - numeric) <= tol, (
            f"{spec.id}: {direction} direction: jvp gives {analytic!r}, finite differences "
            f"{numeric!r} (difference {abs(analytic - numeric):.3g}, tolerance {tol:.3g})")


# -- c. the VJP is the adjoint of the JVP -----------------------------------------------------------

@per_spec(SPECS)
@given(data=st.data())
def test_complex_vjp_is_adjoint_of_jvp(spec: PrimSpec, data: Any) -> None:
    """Re sum(u * jvp(v)) == Re sum_i sum(vjp(u)_i * v_i), bilinear (no conjugation): JAX's
    convention. Each cotangent has its argument's shape and dtype."""
    call, rng = complex_call(spec, data)
    args, diff = call.dyn_args, call.diff
    if not diff or not spec.reverse:  # (while: forward mode only)
        return
    vs = [random_of(args[i], rng) for i in diff]
    out, t_out = functx.jvp(call.fn, args, tangents_of(call, vs))
    u = cotangent_of(out, rng)
    cts = functx.vjp(call.fn, *args)[1](u)
    for i in diff:
        a = np.asarray(args[i])
        assert (np.shape(cts[i]), np.asarray(cts[i]).dtype) == (a.shape, a.dtype), (
            f"{spec.id}: cotangent {i} is {np.asarray(cts[i]).dtype}{list(np.shape(cts[i]))} "
            f"for a {a.dtype}{list(a.shape)} argument")
    lhs = bilinear(u, t_out)
    rhs = math.fsum(bilinear(cts[i], v) for i, v in zip(diff, vs))
    peak = max((float(np.max(np.abs(o))) for o in tree.leaves(out)
                if is_inexact(o) and np.size(o)), default=1.0)
    tol = max(1e-9, spec.rtol) * (max(size(u) * size(*vs) * max(1.0, peak), 1.0) + abs(rhs))
    assert abs(lhs - rhs) <= tol, (
        f"{spec.id}: Re sum(u * J v) = {lhs!r} but Re sum(J^T u * v) = {rhs!r}")


# -- d. vmap against a loop ---------------------------------------------------------------------

@per_spec(SPECS)
@given(data=st.data())
def test_complex_vmap_matches_loop(spec: PrimSpec, data: Any) -> None:
    """vmap(f, in_axes)(stacked complex examples) == the stack of f on each example."""
    call, rng = complex_call(spec, data)
    n = data.draw(st.integers(1, 3), label="batch size")
    with np.errstate(invalid="ignore"):  # complex infinities scaled (is_finite's specials)
        batched, axes, per_example = batched_case(call, data, rng, n)
    expected = stack_outputs([call.fn(*ex) for ex in per_example])
    got = functx.vmap(call.fn, in_axes=tuple(axes), axis_size=n)(*batched)
    assert_tree_close(got, expected, f"{spec.id}: vmap with in_axes={axes}")


# -- e. jit against eager ------------------------------------------------------------------------

@per_spec(SPECS)
@settings(max_examples=max(5, settings.default.max_examples // 3))
@given(data=st.data())
def test_complex_jit_matches_eager(spec: PrimSpec, data: Any) -> None:
    """jit of the function, of its VJP and of its JVP equal the eager results (their traces
    are type-checked: a rule whose result disagrees with a shape rule fails here)."""
    call, rng = complex_call(spec, data)
    args = call.dyn_args
    assert_tree_close(functx.jit(call.fn)(*args), call.fn(*args), f"{spec.id}: jit")
    if not call.diff:
        return
    out = call.fn(*args)
    u = cotangent_of(out, rng)
    ts = tangents_of(call, [random_of(args[i], rng) for i in call.diff])

    def pull(u: Any, *xs: Any) -> Any:
        cts = functx.vjp(call.fn, *xs)[1](u)
        return tuple(cts[i] for i in call.diff)

    def push(ts: Any, *xs: Any) -> Any:
        return functx.jvp(call.fn, xs, ts)[1]

    if spec.reverse:  # (while: forward mode only)
        assert_tree_close(functx.jit(pull)(u, *args), pull(u, *args), f"{spec.id}: jit(vjp)")
    assert_tree_close(functx.jit(push)(ts, *args), push(ts, *args), f"{spec.id}: jit(jvp)")


# -- f. second order: the VJP rules differentiate again on complex input -------------------------

@per_spec(SMOOTH_SPECS)
@settings(max_examples=max(3, settings.default.max_examples // 5))
@given(data=st.data())
def test_complex_vjp_rule_is_differentiable(spec: PrimSpec, data: Any) -> None:
    """g(z) = Re sum_i sum(vjp(u)(z)_i * w_i) is a real function of complex z: grad(g)
    (reverse over reverse) acts on a direction v as finite differences of g say, in a real
    and an imaginary direction: Re sum(grad(g) * v) == (g(z + eps v) - g(z - eps v)) / 2 eps.
    """
    call, rng = complex_call(spec, data)
    args, diff = call.dyn_args, call.diff
    u = cotangent_of(call.fn(*args), rng)
    ws = [random_of(args[i], rng) for i in diff]

    def g(*xs: Any) -> Any:
        new = list(args)
        for i, x in zip(diff, xs):
            new[i] = x
        cts = functx.vjp(call.fn, *new)[1](u)
        return sum(fnp.real(fnp.sum(cts[i] * w)) for i, w in zip(diff, ws))

    primals = [args[i] for i in diff]
    grads = functx.grad(g, argnums=tuple(range(len(diff))))(*primals)
    eps = spec.fd_eps
    for direction in (1.0, 1j):
        vs = [(rng.standard_normal(np.shape(p)) * direction).astype(np.asarray(p).dtype)
              for p in primals]
        g_plus = float(g(*[np.asarray(p + eps * v) for p, v in zip(primals, vs)]))
        g_minus = float(g(*[np.asarray(p - eps * v) for p, v in zip(primals, vs)]))
        numeric = (g_plus - g_minus) / (2 * eps)
        analytic = math.fsum(bilinear(gr, v) for gr, v in zip(grads, vs))
        tol = (10 * spec.fd_atol * max(size(u) * size(*ws) * size(*vs), 1.0)
               + 10 * spec.fd_rtol * abs(numeric))
        assert abs(analytic - numeric) <= tol, (
            f"{spec.id}: direction {direction}: grad of the VJP gives {analytic!r}, finite "
            f"differences {numeric!r}")


# -- the guard ----------------------------------------------------------------------------------

@settings(max_examples=1)
@given(data=st.data())
def test_complex_capable_primitives_are_found(data: Any) -> None:
    """The acceptance check finds every primitive known to take complex input (so the
    table above is not skipped wholesale) and refuses the real-only ones."""
    accepted, rejected = set(), set()
    rng = np.random.default_rng(0)
    for spec in SPECS:
        call = Call(spec, complexify(data.draw(spec.args, label=spec.id), rng))
        (rejected if complex_rejection(spec, call) else accepted).add(spec.name)
    assert MUST_ACCEPT <= accepted, f"not accepted: {sorted(MUST_ACCEPT - accepted)}"
    real_only = {"max", "min", "atan2", "erf", "logistic", "floor", "ceil", "round", "sign",
                 "rem", "clamp"}
    assert real_only <= rejected - accepted, f"{sorted(real_only - (rejected - accepted))}"


# -- the convention, directly ---------------------------------------------------------------------

def partials(f: Any, z: complex, eps: float = 1e-6) -> tuple[float, float]:
    """(df/dx, df/dy) of real-valued ``f`` at ``z`` by central differences."""
    fx_ = (float(f(np.asarray(z + eps))) - float(f(np.asarray(z - eps)))) / (2 * eps)
    fy_ = (float(f(np.asarray(z + 1j * eps))) - float(f(np.asarray(z - 1j * eps)))) / (2 * eps)
    return fx_, fy_


@pytest.fixture(params=[True, False], ids=["checked", "unchecked"])
def eager_checks(request: Any, monkeypatch: Any) -> bool:
    """Run with CHECK_EAGER on (the suite's default: eager results against shape rules) and
    off (as users run: eager binds skip the shape rules)."""
    monkeypatch.setattr(functx.tracing, "CHECK_EAGER", request.param)
    return request.param


def test_grad_of_squared_abs(eager_checks: bool) -> None:
    """|z|**2 = x**2 + y**2: grad = 2x - 2iy = 6 - 8j at 3 + 4j."""
    g = functx.grad(lambda z: fnp.abs(z) ** 2)(np.asarray(3 + 4j))
    assert np.asarray(g).dtype == C128
    np.testing.assert_allclose(g, 6 - 8j, rtol=1e-14)


@pytest.mark.parametrize("name,f", [
    ("abs", lambda z: fnp.abs(z)),
    ("abs**3", lambda z: fnp.abs(z) ** 3),
    ("real(exp(z))", lambda z: fnp.real(fnp.exp(z))),
    ("imag(z**3)", lambda z: fnp.imag(z ** 3)),
    ("abs(sin(z))", lambda z: fnp.abs(fnp.sin(z))),
    ("real(z * conj(z))", lambda z: fnp.real(z * fnp.conj(z))),
    ("abs(log(z) / z)", lambda z: fnp.abs(fnp.log(z) / z)),
    ("real(sqrt(z)) * imag(z)", lambda z: fnp.real(fnp.sqrt(z)) * fnp.imag(z)),
    ("angle(z)", lambda z: fnp.angle(z)),
])
@pytest.mark.parametrize("z", [3 + 4j, -0.7 + 0.2j, 0.5 - 1.5j])
def test_grad_is_df_dx_minus_i_df_dy(name: str, f: Any, z: complex) -> None:
    """For real-valued f: grad(f)(z) == df/dx - i df/dy (finite differences)."""
    dx, dy = partials(f, z)
    g = functx.grad(f)(np.asarray(z))
    np.testing.assert_allclose(g, dx - 1j * dy, rtol=1e-7, atol=1e-8, err_msg=name)


def _rfft_abs(x: Any) -> Any:
    return fnp.sum(fnp.abs(fnp.fft.rfft(x)))


def test_grad_through_abs_of_rfft_matches_finite_differences(eager_checks: bool) -> None:
    """A real loss of a complex intermediate: grad matches central differences on real x,
    also under jit, vmap and the Hessian (jacfwd of jacrev)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(9)
    eps = 1e-6
    eye = np.eye(x.size)
    fd = np.array([(float(_rfft_abs(x + eps * e)) - float(_rfft_abs(x - eps * e))) / (2 * eps)
                   for e in eye])
    g = functx.grad(_rfft_abs)(x)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(functx.jit(functx.grad(_rfft_abs))(x), g, rtol=1e-12)
    xs = np.stack([x, 2 * x, -x])
    np.testing.assert_allclose(functx.vmap(functx.grad(_rfft_abs))(xs)[0], g, rtol=1e-12)
    np.testing.assert_allclose(functx.vmap(_rfft_abs)(xs), [_rfft_abs(v) for v in xs],
                               rtol=1e-12)
    h = functx.hessian(_rfft_abs)(x)
    fd_h = np.array([(functx.grad(_rfft_abs)(x + eps * e) - functx.grad(_rfft_abs)(x - eps * e))
                     / (2 * eps) for e in eye])
    np.testing.assert_allclose(h, fd_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, h.T, atol=1e-8)


def test_jvp_of_abs_is_real(eager_checks: bool) -> None:
    """abs: complex -> real, so its tangent is real: d|z| = Re(conj(z) dz) / |z|."""
    z = np.asarray(3 + 4j)
    for dz, want in ((1.0 + 0j, 0.6), (1j, 0.8), (2 - 1j, 0.4)):
        out, t = functx.jvp(fnp.abs, (z,), (np.asarray(dz),))
        assert np.asarray(out).dtype == F64 and np.asarray(t).dtype == F64
        np.testing.assert_allclose(t, want, rtol=1e-14)
    # under jit the shape rule is asked: complex128 -> float64
    np.testing.assert_allclose(functx.jit(fnp.abs)(z), 5.0)
    assert functx.eval_shape(fnp.abs, z).dtype == F64


def test_abs_gradient_at_zero_is_zero() -> None:
    """As for real input (and in JAX), abs has the gradient 0 at 0, not NaN."""
    g = functx.grad(lambda z: fnp.sum(fnp.abs(z)))(np.array([0j, 3 + 4j]))
    np.testing.assert_allclose(g, [0, 0.6 - 0.8j], rtol=1e-14)
    _, t = functx.jvp(fnp.abs, (np.asarray(0j),), (np.asarray(1 + 1j),))
    assert float(t) == 0.0


def test_convert_complex_to_bool_is_nonzero() -> None:
    """complex -> bool is ``z != 0`` (NumPy, JAX), not the truth of the real part."""
    z = np.array([1j, 0j, 2 + 0j, 0.5 - 3j])
    np.testing.assert_array_equal(fnp.asarray(z).astype(bool), z.astype(bool))
    np.testing.assert_array_equal(functx.jit(lambda a: a.astype(bool))(z), z.astype(bool))


# -- JAX as an oracle (where it is installed) -----------------------------------------------------

ORACLE = [
    ("abs", lambda np_: lambda z: np_.sum(np_.abs(z))),
    ("abs**2", lambda np_: lambda z: np_.sum(np_.abs(z) ** 2)),
    ("real(exp*log)", lambda np_: lambda z: np_.sum(np_.real(np_.exp(z) * np_.log(z)))),
    ("abs(tanh)", lambda np_: lambda z: np_.sum(np_.abs(np_.tanh(z)))),
    ("imag(z**y)", lambda np_: lambda z: np_.sum(np_.imag(z ** (0.3 + 0.2j)))),
    ("abs(z @ z.T)", lambda np_: lambda z: np_.sum(np_.abs(np_.reshape(z, (2, 2))
                                                           @ np_.reshape(z, (2, 2)).T))),
    ("abs(fft)", lambda np_: lambda z: np_.sum(np_.abs(np_.fft.fft(z)))),
    ("real(prod)", lambda np_: lambda z: np_.real(np_.prod(z))),
    ("abs(cumsum)/abs", lambda np_: lambda z: np_.sum(np_.abs(np_.cumsum(z)) / np_.abs(z))),
    ("abs(asin+acos*atan)", lambda np_: lambda z: np_.sum(
        np_.abs(np_.arcsin(z) + np_.arccos(z) * np_.arctan(z)))),
]


@pytest.mark.parametrize("name,make", ORACLE, ids=[o[0] for o in ORACLE])
def test_grad_matches_jax(name: str, make: Any) -> None:
    """functx's grad of a real function of complex input equals JAX's."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    # float64 for this computation only (the global flag would change other tests' JAX)
    x64 = jax.enable_x64(True) if hasattr(jax, "enable_x64") else \
        pytest.importorskip("jax.experimental").enable_x64()
    z = np.array([0.3 + 0.4j, -0.5 + 0.2j, 0.6 - 0.1j, 0.2 + 0.7j])
    with x64:
        want = np.asarray(jax.grad(make(jnp))(jnp.asarray(z)))
    assert want.dtype == C128
    got = functx.grad(make(fnp))(z)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=name)
