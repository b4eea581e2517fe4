"""The jit compiler (functx.compiler): optimisation passes, clustering decisions, generated
Numba kernels against eager functx, and jit with the compiler forced on over a sample of
the spec table (every spec with ``FUNCTX_TEST_COMPILER_SPECS=all``).

Every pass's result is type-checked; kernels are compared with the eager (NumPy) path at
a tolerance of a few ulps per operation (transcendental functions come from LLVM/libm).
"""
from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functx as fx
import functx.compiler as compiler
import functx.numpy as fnp
from functx import typecheck
from functx.compiler import cpu, lowering, partition as part, passes
from functx.primitives import elementwise as ew
from functx.primitives import reduction as red
from functx.primitives import shape as sh

numba = pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def compiler_on():
    old = compiler.set_jit_compiler("numba")
    yield
    compiler.set_jit_compiler(old)


def prims(trace: Any) -> list[str]:
    return [e.prim.name for e in trace.eqns]


def checked(trace: Any) -> Any:
    typecheck(trace)
    return trace


# -- passes --------------------------------------------------------------------------------

def test_cse_merges_repeated_computations() -> None:
    t = fx.make_trace(lambda x: ew.add(ew.sin(x), ew.sin(x)))(np.ones(3))
    assert prims(t).count("sin") == 2
    out = checked(passes.cse(t))
    assert prims(out) == ["sin", "add"]
    e = out.eqns[1]
    assert e.inputs[0] is e.inputs[1]


def test_cse_keeps_different_parameters_and_literals_apart() -> None:
    f = lambda x: ew.add(ew.mul(x, 2.0), ew.mul(x, 3.0))  # noqa: E731
    out = checked(passes.cse(fx.make_trace(f)(np.ones(3))))
    assert prims(out).count("mul") == 2
    g = lambda x: ew.add(red.reduce_sum(x, (0,)), red.reduce_sum(x, (1,)))  # noqa: E731
    out = checked(passes.cse(fx.make_trace(g)(np.ones((3, 3)))))
    assert prims(out).count("reduce_sum") == 2


def const_trace(n: int) -> Any:
    """{ lambda c ; x. let s = sin c; t = add s 1.0; y = mul x t in (y,) } by hand (tracing
    computes constant-only equations eagerly, so only other passes leave such equations)."""
    from functx.ir import AbstractArray, Eqn, Literal, Trace, Var
    aval = AbstractArray((n,), np.float64)
    c, x, s, t, y = (Var(aval) for _ in range(5))
    one = Literal(np.asarray(1.0), AbstractArray((), np.float64))
    eqns = (Eqn(ew.sin_p, (c,), {}, (s,)), Eqn(ew.add_p, (s, one), {}, (t,)),
            Eqn(ew.mul_p, (x, t), {}, (y,)))
    return Trace((x,), (c,), (np.arange(float(n)),), eqns, (y,))


def test_fold_constants_computes_known_values_once() -> None:
    from functx.transforms.interpret import eval_trace
    out = checked(passes.fold_constants(const_trace(3)))
    assert prims(out) == ["mul"]
    np.testing.assert_allclose(eval_trace(out, np.ones(3))[0], np.sin(np.arange(3.0)) + 1.0)


def test_fold_constants_leaves_big_results_alone() -> None:
    out = checked(passes.fold_constants(const_trace(passes.FOLD_LIMIT + 1)))
    assert prims(out) == ["sin", "add", "mul"]


@pytest.mark.parametrize("f, shape, left", [
    (lambda x: ew.mul(x, 1.0), (3,), []),
    (lambda x: ew.mul(1.0, x), (3,), []),
    (lambda x: ew.add(x, 0.0), (3,), []),
    (lambda x: ew.sub(x, 0.0), (3,), []),
    (lambda x: ew.sub(0.0, x), (3,), ["sub"]),  # 0 - x is not x
    (lambda x: ew.div(x, 1.0), (3,), []),
    (lambda x: ew.div(1.0, x), (3,), ["div"]),
    (lambda x: ew.mul(x, 0.0), (3,), ["mul"]),  # inf * 0 is nan: kept
    (lambda x: ew.neg(ew.neg(x)), (3,), []),
    (lambda x: sh.transpose(sh.transpose(x, (1, 0)), (1, 0)), (2, 3), []),
    (lambda x: sh.transpose(sh.transpose(x, (1, 2, 0)), (1, 2, 0)), (2, 3, 4), ["transpose"]),
    (lambda x: sh.transpose(sh.concatenate([x, ew.sin(x)], 0), (1, 0)), (2, 3),
     ["sin", "transpose", "transpose", "concatenate"]),  # the pieces transposed instead
    (lambda x: sh.reshape(sh.reshape(sh.reshape(x, (6,)), (3, 2)), (1, 6)), (2, 3), ["reshape"]),
    (lambda x: sh.reshape(sh.reshape(x, (6,)), (2, 3)), (2, 3), []),
    (lambda x: sh.broadcast_in_dim(sh.broadcast_in_dim(x, (4, 3), (1,)), (2, 4, 3), (1, 2)),
     (3,), ["broadcast_in_dim"]),
    (lambda x: red.reduce_sum(sh.broadcast_in_dim(x, (4, 3), (1,)), (0,)), (3,), ["mul"]),
    (lambda x: red.reduce_sum(sh.broadcast_in_dim(x, (3, 3), (1,)), (0,)), (3,),
     ["broadcast_in_dim", "reduce_sum"]),  # x * 3 may round differently from x + x + x
    (lambda x: ew.convert_element_type(x, new_dtype=np.dtype(np.float64)), (3,), []),
])
def test_simplify(f, shape, left) -> None:
    x = np.random.default_rng(0).standard_normal(shape)
    t = fx.make_trace(f)(x)
    out = checked(passes.simplify(t))
    assert prims(out) == left, str(out)
    from functx.transforms.interpret import eval_trace
    np.testing.assert_allclose(eval_trace(out, x)[0], f(x), rtol=1e-15)


def test_simplify_of_gradient_plumbing() -> None:
    """grad of sum(x * w) over broadcast w: the ones cotangent and x*1 vanish."""
    w = np.arange(3.0)
    t = fx.make_trace(fx.grad(lambda x: fnp.sum(x * w)))(np.ones((4, 3)))
    out = checked(passes.optimize(t))
    assert len(out.eqns) < len(t.eqns), f"{t}\n{out}"


def test_dce_removes_unused_equations_only() -> None:
    def f(x):
        ew.sin(x)
        return ew.cos(x)

    out = checked(passes.dce(fx.make_trace(f)(np.ones(3))))
    assert prims(out) == ["cos"]


def test_inline_writes_custom_derivative_calls_as_their_traces() -> None:
    runs = {"fwd": 0, "fun": 0}

    @fx.custom_vjp
    def f(x):
        return fnp.sin(x) * 3

    def fwd(x):
        runs["fwd"] += 1
        return fnp.sin(x) * 3, fnp.cos(x)

    f.defvjp(fwd, lambda c, g: (3 * g * c,))

    @fx.custom_jvp
    def h(x):
        runs["fun"] += 1
        return fnp.tanh(x)

    h.defjvp(lambda p, t: (fnp.tanh(p[0]), t[0] * (1 - fnp.tanh(p[0]) ** 2)))

    x = np.linspace(-1.0, 1.0, 7)
    loss = lambda x: fnp.sum(f(x) * h(x))  # noqa: E731
    t = fx.make_trace(fx.grad(loss))(x)
    names = prims(t)
    assert "custom_vjp_call" in names
    out = checked(passes.inline(t))
    assert "custom_vjp_call" not in prims(out) and "custom_jvp_call" not in prims(out)
    assert "sin" in prims(out) and "cos" in prims(out)
    step = fx.jit(fx.grad(loss))
    want = 3 * np.cos(x) * np.tanh(x) + 3 * np.sin(x) * (1 - np.tanh(x) ** 2)
    for _ in range(3):
        np.testing.assert_allclose(step(x), want, rtol=1e-12)
    traced = dict(runs)
    step(x + 1)  # the jitted step runs no user Python: it was traced once
    assert runs == traced
    # the plain function under jit is inlined too
    assert "custom_jvp_call" not in prims(checked(passes.inline(fx.make_trace(h)(x))))


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-13), (np.float32, 2e-6)])
def test_expanded_layer_norms_compute_what_the_primitives_do(dtype: Any, rtol: float) -> None:
    # prim.expand: layer_norm and layer_norm_grad as their formulas, one row reduction and
    # a broadcast per mean; expanded together their statistics are computed once (CSE)
    import functx.nn as fnn
    from functx.transforms.interpret import eval_trace
    rng = np.random.default_rng(3)
    x, w, b, g = (rng.standard_normal(s).astype(dtype) for s in [(5, 40), 40, 40, (5, 40)])
    loss = lambda x, w, b, g: fnp.sum(fnp.tanh(fnn.layer_norm(x, 40, w, b)) * g)  # noqa: E731
    t = fx.make_trace(fx.value_and_grad(loss))(x, w, b, g)
    assert {"layer_norm", "layer_norm_grad"} <= set(prims(t))
    out = checked(passes.cse(checked(passes.expand(t, lambda e: True))))
    assert not {"layer_norm", "layer_norm_grad"} & set(prims(out))
    assert prims(out).count("reduce_sum") == 5  # mean, variance, two of the gradient, loss
    for a, want in zip(eval_trace(out, x, w, b, g), eval_trace(t, x, w, b, g)):
        np.testing.assert_allclose(a, want, rtol=rtol, atol=rtol)
    kept = checked(passes.expand(t, lambda e: e.prim.name != "layer_norm"))
    assert "layer_norm" in prims(kept) and "layer_norm_grad" not in prims(kept)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_expanded_softmaxes_compute_what_the_primitives_do(name: str) -> None:
    # prim.expand over the last axis only; a row of -inf gives what the primitive gives
    import functx.nn as fnn
    from functx.transforms.interpret import eval_trace
    x = np.random.default_rng(4).standard_normal((6, 40))
    x[2] = -np.inf
    x[3, :5] = np.inf
    f = lambda a: getattr(fnn, name)(a * 2.0, dim=-1)  # noqa: E731
    t = fx.make_trace(f)(x)
    out = checked(passes.expand(t, lambda e: True))
    assert name not in prims(out) and "reduce_max" in prims(out)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(eval_trace(out, x)[0], eval_trace(t, x)[0])
    other = fx.make_trace(lambda a: getattr(fnn, name)(a * 2.0, dim=0))(x)
    assert name in prims(passes.expand(other, lambda e: True))  # another axis: kept


# -- clustering decisions -------------------------------------------------------------------

def clusters(f: Any, *args: Any) -> list:
    t = passes.optimize(fx.make_trace(f)(*args))
    return [s for s in part.partition(t) if isinstance(s, part.Cluster)]


@pytest.mark.parametrize("new,fuses", [((6, 1), True), ((1, 6, 1), True), ((2, 3), False)])
def test_a_reshape_fuses_only_where_it_inserts_or_removes_unit_axes(new: tuple,
                                                                   fuses: bool) -> None:
    # reshape's scalar rule: an index map for unit axes only (operand_axes declines a
    # reshape that regroups axes); fused or not, jit computes what eager does
    def f(x):
        return ew.mul(ew.exp(sh.reshape(ew.sin(x), new)), 2.0)

    x = np.linspace(-1.0, 1.0, 6)
    cs = clusters(f, x)
    assert any("reshape" in [e.prim.name for e in c.eqns] for c in cs) == fuses
    np.testing.assert_allclose(fx.jit(f)(x), f(x), rtol=1e-15)


def test_elementwise_chain_is_one_cluster() -> None:
    def f(x):
        for _ in range(10):
            x = ew.tanh(ew.add(ew.sin(x), 0.5))
        return x

    cs = clusters(f, np.ones(5))
    assert len(cs) == 1 and len(cs[0].eqns) == 30


def test_reduction_ends_a_cluster_and_its_consumers_start_another() -> None:
    def f(x):
        s = red.reduce_sum(ew.exp(ew.sin(x)), (1,))
        return ew.log(ew.add(s, 1.0))

    cs = clusters(f, np.ones((4, 5)))
    assert [sorted(e.prim.name for e in c.eqns) for c in cs] == [
        ["exp", "reduce_sum", "sin"], ["add", "log"]]
    assert cs[0].reduce_axes == (1,)


def test_broadcast_operands_join_the_cluster() -> None:
    (c,) = clusters(lambda x, b: ew.tanh(ew.add(x, sh.broadcast_in_dim(b, (4, 3), (1,)))),
                    np.ones((4, 3)), np.ones(3))
    assert sorted(e.prim.name for e in c.eqns) == ["add", "broadcast_in_dim", "tanh"]


def test_non_fusible_equations_split_clusters() -> None:
    def f(x, w):
        h = ew.tanh(ew.sin(x))
        y = fnp.matmul(h, w)
        return ew.exp(ew.cos(y))

    cs = clusters(f, np.ones((3, 3)), np.ones((3, 3)))
    assert len(cs) == 2


def test_single_equations_and_unsupported_dtypes_are_not_fused() -> None:
    assert clusters(lambda x: ew.sin(x), np.ones(3)) == []
    assert clusters(lambda x: ew.add(ew.mul(x, x), x), np.ones(3, np.int32)) == []
    assert clusters(lambda x: ew.exp(ew.sin(x)), np.ones(3, np.complex128)) == []


def test_cluster_never_reads_a_later_result() -> None:
    """a = sin x; b = dot(a, w); c = a + b must not put c in a's cluster (it runs first)."""
    def f(x, w):
        a = ew.sin(ew.cos(x))
        b = fnp.matmul(a, w)
        return ew.exp(ew.add(a, b))

    x, w = np.full((3, 3), 0.3), np.full((3, 3), 0.2)
    assert len(clusters(f, x, w)) == 2
    np.testing.assert_allclose(fx.jit(f)(x, w), f(x, w), rtol=1e-14)


# -- generated kernels ---------------------------------------------------------------------

def test_lower_shows_trace_clusters_and_source() -> None:
    def f(x, b):
        return fnp.sum(fnp.tanh(x * 2.0 + b), axis=1)

    x, b = np.ones((4, 3), np.float32), np.ones(3, np.float32)
    text = fx.jit(f).lower(x, b).as_text()
    assert "# optimised trace" in text and "fused[kernel=fused_0]" in text
    assert "@njit(" in text and "def kernel(" in text and "np.float32(2.0)" in text


def test_float32_stays_float32_in_kernels() -> None:
    x = np.linspace(-2, 2, 50, dtype=np.float32)
    f = lambda x: fnp.exp(fnp.sin(x) * 0.5)  # noqa: E731
    low = fx.jit(f).lower(x)
    (k,) = low.kernels
    assert "float64" not in k.source, k.source
    got = fx.jit(f)(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, f(x), rtol=4e-7)


def test_numba_functions_of_float32_return_float32() -> None:
    """The generator writes np.sin(x) etc. without a cast: Numba must keep float32."""
    from numba import njit
    names = sorted(set(cpu._FUNCS.values()) - {"np.isfinite", "np.isnan"})
    two = {"np.arctan2", "np.power"}
    src = "def probe(x):\n    return (" + ", ".join(
        f"{n}(x, x)" if n in two else f"{n}(x)" for n in names) + ",)\n"
    scope = {"np": np, "math": __import__("math")}
    exec(src, scope)
    probe = njit(error_model="numpy")(scope["probe"])
    out = probe(np.float32(0.5))
    assert all(type(v) is np.float32 or isinstance(v, float) for v in out)
    sig = probe.nopython_signatures[0]
    assert all(str(t) == "float32" for t in sig.return_type), sig.return_type


def test_kernels_are_cached_on_disk() -> None:
    x = np.linspace(0, 1, 7)
    low = fx.jit(lambda x: fnp.cos(fnp.sin(x) + 0.25)).lower(x).compile()
    (k,) = low.kernels
    folder = cpu.cache_dir()
    assert os.path.exists(os.path.join(folder, k.key + ".py"))
    cached = os.listdir(os.path.join(folder, "__pycache__"))
    assert any(name.startswith(k.key) and name.endswith(".nbi") for name in cached)


@pytest.mark.parametrize("axis", [0, 1])
def test_large_cluster_runs_in_parallel_and_agrees(axis: int) -> None:
    x = np.random.default_rng(1).standard_normal((600, 500))
    assert x.size >= cpu.PARALLEL_MIN
    f = lambda x: fnp.sum(fnp.sqrt(x * x + 1.0) * fnp.sin(x), axis=axis)  # noqa: E731
    (k,) = fx.jit(f).lower(x).kernels
    if axis == 0:  # column sums: memory order with an array of accumulators (serial)
        assert "np.full" in k.source and not k.parallel
    else:
        assert k.parallel and "prange" in k.source
    np.testing.assert_allclose(fx.jit(f)(x), f(x), rtol=1e-12)


def test_full_reduction_is_chunked() -> None:
    x = np.random.default_rng(2).standard_normal((400, 300)).astype(np.float32)
    f = lambda x: (fnp.max(fnp.abs(x) * 2.0), fnp.sum(fnp.exp(x) * 0.5))  # noqa: E731
    got, want = fx.jit(f)(x), f(x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-7)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)


def test_nan_and_inf_follow_numpy() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -3.0])
    y = np.array([1.0, np.nan, 2.0, np.inf, -1.0, 0.0, 0.0])

    def f(x, y):
        return (fnp.maximum(x, y) * 1.5, fnp.minimum(x, y) + 0.5, fnp.sign(x) * fnp.abs(y),
                fnp.where(x > y, x, y) - 1.0, fnp.log(fnp.abs(x)) * 2.0, (x / y) + 1.0,
                fnp.max(x * 2.0), fnp.sqrt(x) + 1.0)

    with np.errstate(all="ignore"):
        want = f(x, y)
        got = fx.jit(f)(x, y)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_without_numba_jit_warns_once_and_replays(monkeypatch) -> None:
    monkeypatch.setattr(lowering, "numba_installed", lambda: False)
    monkeypatch.setattr(lowering, "numba_enabled", lambda: False)
    monkeypatch.setattr(lowering, "_warned", [])
    f = fx.jit(lambda x: fnp.exp(fnp.sin(x)))
    with pytest.warns(UserWarning, match="Numba is not installed"):
        got = f(np.ones(3))
    np.testing.assert_allclose(got, np.exp(np.sin(np.ones(3))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fx.jit(lambda x: fnp.cos(fnp.sin(x)))(np.ones(3))


def test_compiler_switch() -> None:
    assert compiler.jit_compiler() == "numba"
    compiler.set_jit_compiler("none")
    low = fx.jit(lambda x: fnp.exp(fnp.sin(x * 1.0))).lower(np.ones(3))
    assert low.kernels == [] and "mul" in str(low.trace)  # no passes either
    with pytest.raises(fx.FunctxError, match="not one of"):
        compiler.set_jit_compiler("llvm")


# -- the same scalar rules rendered as C (for the CUDA generator) --------------------------

def test_every_scalar_rule_renders_as_c_in_single_precision() -> None:
    """Each registered elementwise scalar rule, on float32 operands, renders as C that uses
    float functions and float constants only (no silent double work)."""
    from functx.compiler.c_expr import render_c
    from functx.registry import REGISTRY
    from functx.registry.scalar import var
    params = {"integer_pow": {"y": 3}, "round": {"rounding_method": "half_to_even"},
              "convert_element_type": {"new_dtype": np.dtype(np.float32)},
              "gelu": {"approximate": "none"}, "gelu_grad": {"approximate": "tanh"}}
    n_ins = {"select": 3, "clamp": 3, "gelu_grad": 2}
    rendered = 0
    for p in REGISTRY:
        rule = p.scalar
        if rule is None or rule.kind != "elementwise":
            continue
        k = n_ins.get(p.name, 2 if p.name in {"add", "sub", "mul", "div", "rem", "max", "min",
                                              "pow", "atan2", "eq", "ne", "lt", "le", "gt",
                                              "ge", "and", "or", "xor"} else 1)
        xs = [var(f"x{i}", np.float32) for i in range(k)]
        if p.name == "select":
            xs[0] = var("x0", np.bool_)
        out = fx.ShapeDtype((), np.float32)
        expr = rule.expr(*xs, out=out, **params.get(p.name, {}))
        if expr is None:  # bool-only rules (and, not...) decline float32
            continue
        lines, result = render_c(expr)
        text = "\n".join(lines)
        assert "double" not in text and "(double)" not in text, (p.name, text)
        for fn in ("sin(", "exp(", "tanh(", "log(", "sqrt(", "erf("):
            assert fn not in text, (p.name, text)  # the float versions: sinf(...)
        rendered += 1
    assert rendered >= 35


# -- hypothesis: random elementwise/reduction programs compiled vs eager ----------------------

UNARY = [ew.sin, ew.cos, ew.tanh, ew.exp, ew.logistic, ew.neg, ew.abs,
         lambda x: ew.log1p(ew.abs(x)), lambda x: ew.sqrt(ew.abs(x)),
         lambda x: ew.integer_pow(x, y=3), lambda x: ew.mul(x, 0.5)]
BINARY = [ew.add, ew.sub, ew.mul, ew.max, ew.min,
          lambda a, b: ew.div(a, ew.add(ew.abs(b), 1.0)),
          lambda a, b: ew.select(ew.gt(a, b), a, b)]


@st.composite
def programs(draw: Any) -> tuple:
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    n_in = draw(st.integers(1, 3))
    in_shapes = [shape] + [tuple(d if draw(st.booleans()) else 1 for d in shape)
                           for _ in range(n_in - 1)]
    steps = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 100), st.integers(0, 100),
                                    st.integers(0, 100)), min_size=2, max_size=12))
    reduce = draw(st.sampled_from([None, "sum", "max", "min"]))
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    seed = draw(st.integers(0, 2**31 - 1))
    return dtype, in_shapes, steps, reduce, axes, seed


def build(steps: list, reduce: str | None, axes: tuple) -> Any:
    def f(*xs):
        vals = list(xs)
        for binary, op, i, j in steps:
            a = vals[i % len(vals)]
            if binary:
                b = vals[j % len(vals)]
                out = BINARY[op % len(BINARY)](a, b)
            else:
                out = UNARY[op % len(UNARY)](a)
            vals.append(out)
        last = fnp.broadcast_to(vals[-1], np.broadcast_shapes(*[v.shape for v in vals]))
        if reduce is None:
            return vals[-1], vals[len(xs)]
        r = {"sum": red.reduce_sum, "max": red.reduce_max, "min": red.reduce_min}[reduce]
        return r(last, axes), vals[-1]
    return f


@settings(max_examples=15, deadline=None)
@given(programs())
def test_random_programs_compile_and_agree(program: tuple) -> None:
    dtype, in_shapes, steps, reduce, axes, seed = program
    rng = np.random.default_rng(seed)
    xs = [rng.uniform(-2, 2, s).astype(dtype) for s in in_shapes]
    f = build(steps, reduce, axes)
    trace = fx.make_trace(f)(*xs)
    for p in passes.PASSES:  # each pass keeps the types
        trace = checked(p(trace))
    with np.errstate(all="ignore"):
        want = f(*xs)
        got = fx.jit(f)(*xs)
    rtol = 2e-5 if dtype == np.float32 else 1e-12
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True)


# -- jit with the compiler against eager over the spec table ---------------------------------

from tests.test_primitive_rules import SPECS, Call, cotangent_like, draw_rng  # noqa: E402
from tests.test_primitive_transforms import (assert_tree_close, batched_case,  # noqa: E402
                                             stack_outputs, tangents_for)

# By default a sample (every fusible family, and a few that are not) keeps the suite fast:
# each spec compiles several kernels. FUNCTX_TEST_COMPILER_SPECS=all runs every spec.
SAMPLE = ("sin", "tanh", "logistic", "erf", "mul", "div", "max", "integer_pow", "select",
          "clamp", "convert_element_type", "reduce_sum", "reduce_max", "broadcast_in_dim",
          "dot_general", "transpose")
ALL = os.environ.get("FUNCTX_TEST_COMPILER_SPECS") == "all"
TABLE = SPECS if ALL else [s for s in SPECS if s.name in SAMPLE and not s.label]


@pytest.mark.parametrize("spec", TABLE, ids=[s.id for s in TABLE])
@settings(max_examples=3 if ALL else 1, deadline=None)
@given(data=st.data())
def test_jit_with_compiler_matches_eager_over_specs(spec: Any, data: Any) -> None:
    """jit of each spec's function, its VJP, its JVP and its vmap, compiled, equal eager."""
    call = Call(spec, data.draw(spec.args, label="args"))
    rng = draw_rng(data)
    args = call.dyn_args
    with np.errstate(all="ignore"):
        assert_tree_close(fx.jit(call.fn)(*args), call.fn(*args), f"{spec.id}: jit")
        batched, axes, per_example = batched_case(call, data, rng, 2)
        want = stack_outputs([call.fn(*ex) for ex in per_example])
        got = fx.jit(fx.vmap(call.fn, in_axes=tuple(axes), axis_size=2))(*batched)
        assert_tree_close(got, want, f"{spec.id}: jit(vmap)")
        if not call.diff:
            return
        u = cotangent_like(call.fn(*args), rng)

        def pull(u: Any, *xs: Any) -> Any:
            cts = fx.vjp(call.fn, *xs)[1](u)
            return tuple(cts[i] for i in call.diff)

        assert_tree_close(fx.jit(pull)(u, *args), pull(u, *args), f"{spec.id}: jit(vjp)")
        _, tangents = tangents_for(call, rng)

        def push(ts: Any, *xs: Any) -> Any:
            return fx.jvp(call.fn, xs, ts)[1]

        assert_tree_close(fx.jit(push)(tangents, *args), push(tangents, *args),
                          f"{spec.id}: jit(jvp)")


def test_passes_keep_effects(capsys: Any) -> None:
    """Two identical debug prints are not merged by CSE, prints of constants are not folded
    away, and DCE keeps a scan whose body prints though nothing reads its result."""
    from functx import lax

    def f(x):
        fx.debug.print("x {x}", x=x)
        fx.debug.print("x {x}", x=x)
        fx.debug.print("constant {c}", c=np.float64(2.0))
        lax.scan(lambda c, xi: (fx.debug.print("step {c}", c=c), c + xi)[1:] + (None,), 0.0, x)
        return fnp.sum(x)

    trace = fx.make_trace(f)(np.arange(2.0))
    optimised = passes.optimize(trace)
    typecheck(optimised)
    names = [e.prim.name for e in optimised.eqns]
    assert names.count("debug_callback") == 3 and "scan" in names
    assert float(fx.jit(f)(np.arange(2.0))) == 1.0
    out = capsys.readouterr().out.splitlines()
    assert out.count("x [0. 1.]") == 2 and "constant 2.0" in out
    assert ["step 0.0", "step 0.0"] == [line for line in out if line.startswith("step")]


def test_operand_transposes_fold_into_dot_general() -> None:
    """``a.T @ b`` and ``c @ swapaxes(d)`` read their operands through permuted dimension
    numbers (no transpose left); a transpose that would reorder free axes stays."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 4))
    c, d = rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 4, 3))
    e = rng.standard_normal((3, 4, 5))
    cases = [(lambda a, b: a.T @ b, (a, b), 0), (lambda c, d: c @ fnp.swapaxes(d, 1, 2), (c, d), 0),
             # free axes (4, 5) of e read as (5, 4): the transpose stays
             (lambda c, e: fnp.einsum("bij,jkl->bilk", c, e), (c, e), None)]
    for f, args, left in cases:
        trace = checked(passes.optimize(fx.make_trace(f)(*args)))
        if left == 0:
            assert prims(trace) == ["dot_general"], prims(trace)
        np.testing.assert_allclose(fx.jit(f)(*args), f(*args), rtol=1e-13, atol=1e-13)


def test_the_gradient_of_a_split_is_one_concatenate() -> None:
    """The pieces' cotangents of ``split`` (pads added together) become a concatenate."""
    x = np.random.default_rng(1).standard_normal((4, 9))

    def f(x):
        q, k, v = fnp.split(x, 3, axis=1)
        return fnp.sum(fnp.sin(q) * fnp.cos(k) + v * v)

    g = fx.jit(fx.grad(f))
    names = prims(checked(g.lower(x).trace))
    assert "pad" not in names and names.count("concatenate") == 1, names
    np.testing.assert_allclose(g(x), fx.grad(f)(x), rtol=1e-13, atol=1e-13)

    def uneven(x):  # pieces that do not cover the axis stay padded
        return fnp.sum(fnp.sin(x[:, 1:4])) + fnp.sum(fnp.cos(x[:, 4:6]))

    g = fx.jit(fx.grad(uneven))
    names = prims(checked(g.lower(x).trace))
    assert names.count("pad") == 1 and names.count("concatenate") == 1, names
    np.testing.assert_allclose(g(x), fx.grad(uneven)(x), rtol=1e-13, atol=1e-13)
