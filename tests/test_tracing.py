"""Tracing: make_trace listings, nesting, static arguments, eval_shape, typecheck, tracer
behaviour (methods, NumPy dispatch) and the errors of tracing (concretization, leaks).

Expected listings are written by hand from the printer's format (functx/ir.py): variables
are named a, b, c... in order of appearance, constants first, then inputs, then equation
outputs; ``name:type`` binders; literals as ``value:type``; weak types with a ``~``.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import functx
import functx.numpy as fnp
from functx import AbstractArray, Eqn, ShapeDtype, Trace, Var
from functx.errors import ConcretizationError, FunctxError, TracerLeakError
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red

THIS_FILE = Path(__file__).name


def listing(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


# -- the printed trace ---------------------------------------------------------------------------

def test_listing_with_a_python_scalar_literal() -> None:
    trace = functx.make_trace(lambda x: _ew.mul(_ew.sin(x), 2.0))(np.ones(3))
    assert str(trace) == listing("""
        { lambda ; a:f64[3]. let
            b:f64[3] = sin a
            c:f64[3] = mul b 2.0:~f64[]
          in (c,) }
    """)


def test_listing_with_a_constant_and_params() -> None:
    w = np.array([1.0, 2.0, 3.0])

    def f(x, y):
        s = _red.reduce_sum(_ew.mul(_ew.sin(x), w), (0, 1))
        return s, _ew.convert_element_type(y, new_dtype=np.float32)

    trace = functx.make_trace(f)(np.ones((2, 3)), np.ones(4, np.int32))
    assert str(trace) == listing("""
        { lambda a:f64[3] ; b:f64[2,3] c:i32[4]. let
            d:f64[2,3] = sin b
            e:f64[2,3] = mul d a
            f:f64[] = reduce_sum[axes=(0, 1)] e
            g:f32[4] = convert_element_type[new_dtype=float32] c
          in (f, g) }
    """)
    assert trace.const_values[0] is w
    assert trace.in_avals == (AbstractArray((2, 3), np.float64), AbstractArray((4,), np.int32))


def test_listing_of_a_numpy_scalar_literal_is_strongly_typed() -> None:
    """NumPy scalars (np.float64 included, although it subclasses float) are strong, as in
    NumPy 2; only Python scalars are weak."""
    trace = functx.make_trace(lambda x: _ew.mul(x, np.float64(2.0)))(np.ones(2))
    assert str(trace) == listing("""
        { lambda ; a:f64[2]. let
            b:f64[2] = mul a 2.0:f64[]
          in (b,) }
    """)


def test_listing_of_an_input_returned_unchanged_and_a_literal_output() -> None:
    trace = functx.make_trace(lambda x, y: (y, 1.5, x))(np.ones(2, np.float32), np.ones(()))
    assert str(trace) == listing("""
        { lambda ; a:f32[2] b:f64[]. let
          in (b, 1.5:~f64[], a) }
    """)


def test_make_trace_docstring_example() -> None:
    """The listing in make_trace's docstring is what make_trace prints."""
    trace = functx.make_trace(lambda x: fnp.sin(x).sum())(np.ones(3))
    assert str(trace) == listing("""
        { lambda ; a:f64[3]. let
            b:f64[3] = sin a
            c:f64[] = reduce_sum[axes=(0,)] b
          in (c,) }
    """)


# -- make_trace of transforms, nesting, static arguments -------------------------------------------

def test_make_trace_of_grad() -> None:
    """grad inside make_trace records the backward pass into the outer trace."""
    trace = functx.make_trace(functx.grad(lambda x: _ew.sin(x)))(np.ones(()))
    functx.typecheck(trace)
    names = [e.prim.name for e in trace.eqns]
    assert "cos" in names and "mul" in names
    assert trace.out_avals == (AbstractArray((), np.float64),)
    for x in (-1.0, 0.3, 2.0):
        np.testing.assert_allclose(functx.eval_trace(trace, np.asarray(x))[0], np.cos(x))


def test_make_trace_of_grad_of_grad_of_a_pytree_function() -> None:
    def loss(p):
        return _red.reduce_sum(_ew.mul(_ew.sin(p["a"]), p["b"]), (0,))

    g = functx.grad(lambda a, b: functx.grad(loss)({"a": a, "b": b})["a"][0], argnums=1)
    trace = functx.make_trace(g)(np.ones(3), np.ones(3))
    functx.typecheck(trace)
    a, b = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0])
    # d/db [cos(a_0) b_0] = [cos(a_0), 0, 0]
    np.testing.assert_allclose(functx.eval_trace(trace, a, b)[0], [np.cos(0.1), 0.0, 0.0])


def test_nested_make_trace_lifts_outer_tracers_to_constants() -> None:
    inner_traces = []

    def outer(x):
        inner = functx.make_trace(lambda y: _ew.mul(x, y))(x)
        inner_traces.append(inner)
        return functx.eval_trace(inner, _ew.sin(x))[0]

    trace = functx.make_trace(outer)(np.ones(2))
    (inner,) = inner_traces
    assert str(inner) == listing("""
        { lambda a:f64[2] ; b:f64[2]. let
            c:f64[2] = mul a b
          in (c,) }
    """)
    assert isinstance(inner.const_values[0], functx.Tracer)
    functx.typecheck(trace)
    assert [e.prim.name for e in trace.eqns] == ["sin", "mul"]
    x = np.array([0.5, -1.0])
    np.testing.assert_allclose(functx.eval_trace(trace, x)[0], x * np.sin(x))


def test_static_argnums() -> None:
    def f(x, n, flag):
        for _ in range(n):
            x = _ew.sin(x)
        return _ew.neg(x) if flag else x

    trace = functx.make_trace(f, static_argnums=(1, -1))(np.ones(2), 3, True)
    assert [e.prim.name for e in trace.eqns] == ["sin", "sin", "sin", "neg"]
    assert len(trace.in_vars) == 1
    trace = functx.make_trace(f, static_argnums=(1, 2))(np.ones(2), 1, False)
    assert [e.prim.name for e in trace.eqns] == ["sin"]
    trace = functx.make_trace(f, static_argnums=(1, 2))(np.ones(2), 0, False)
    assert trace.eqns == () and len(trace.in_vars) == 1


def test_static_argument_that_is_not_an_array_must_be_static() -> None:
    with pytest.raises(FunctxError, match="static_argnums"):
        functx.make_trace(lambda x, name: x)(np.ones(2), "label")
    trace = functx.make_trace(lambda x, name: x, static_argnums=1)(np.ones(2), "label")
    assert len(trace.in_vars) == 1


def test_make_trace_with_pytree_inputs_and_keyword_arguments() -> None:
    def f(p, *, scale):
        return {"out": _ew.mul(p["w"], scale), "n": None}

    trace = functx.make_trace(f)({"w": np.ones((2, 2))}, scale=np.float64(3.0))
    assert len(trace.in_vars) == 2 and len(trace.outputs) == 1


# -- eval_shape ------------------------------------------------------------------------------------

def test_make_trace_and_eval_shape_accept_shape_dtype() -> None:
    """ShapeDtype (= AbstractArray) is an argument leaf, not a pytree of its fields."""
    trace = functx.make_trace(lambda x: _ew.sin(x))(ShapeDtype((2, 3), np.float32))
    assert trace.in_avals == (AbstractArray((2, 3), np.float32),)
    out = functx.eval_shape(lambda x: _ew.sin(x), ShapeDtype((2, 3), np.float32))
    assert out == AbstractArray((2, 3), np.float32)


def test_eval_shape_with_shape_dtype_pytrees() -> None:
    def f(d):
        return {"s": _ew.sin(d["a"]),
                "t": (_red.reduce_sum(d["b"], (0,)), _ew.mul(d["b"], d["c"]))}

    out = functx.eval_shape(f, {"a": ShapeDtype((2, 3), np.float32),
                                "b": ShapeDtype((4,), np.float64),
                                "c": np.ones((3, 1), np.float64)})
    assert set(out) == {"s", "t"} and isinstance(out["t"], tuple)
    assert (out["s"].shape, out["s"].dtype) == ((2, 3), np.float32)
    assert (out["t"][0].shape, out["t"][0].dtype) == ((), np.float64)
    assert (out["t"][1].shape, out["t"][1].dtype) == ((3, 4), np.float64)


def test_eval_shape_computes_nothing() -> None:
    """A 10^5 x 10^5 float64 input (80 GB) costs nothing to shape-evaluate."""
    out = functx.eval_shape(lambda x: _red.reduce_sum(_ew.exp(x), (1,)),
                            ShapeDtype((100_000, 100_000), np.float64))
    assert out.shape == (100_000,) and out.dtype == np.float64


def test_eval_shape_docstring_example() -> None:
    out = functx.eval_shape(lambda x: x @ x.T, ShapeDtype((3, 4), np.float32))
    assert out.shape == (3, 3) and out.dtype == np.float32


def test_eval_shape_reports_shape_errors() -> None:
    with pytest.raises(functx.ShapeError, match="add"):
        functx.eval_shape(lambda x, y: _ew.add(x, y), ShapeDtype((2, 3), np.float64),
                          ShapeDtype((4,), np.float64))


# -- typecheck ---------------------------------------------------------------------------------------

def test_typecheck_accepts_traces_of_make_trace() -> None:
    trace = functx.make_trace(lambda x: _ew.mul(_ew.sin(x), _ew.cos(x)))(np.ones((2, 2)))
    functx.typecheck(trace)


def test_typecheck_catches_a_wrong_output_type() -> None:
    trace = functx.make_trace(lambda x: _ew.sin(x))(np.ones(3))
    (eqn,) = trace.eqns
    wrong = Var(AbstractArray((3,), np.float32))
    bad = Eqn(eqn.prim, eqn.inputs, eqn.params, (wrong,), eqn.source)
    corrupt = Trace(trace.in_vars, (), (), (bad,), (wrong,))
    with pytest.raises(FunctxError) as e:
        functx.typecheck(corrupt)
    msg = str(e.value)
    assert "sin" in msg and "f32[3]" in msg and "f64[3]" in msg


def test_typecheck_catches_a_wrong_shape() -> None:
    trace = functx.make_trace(lambda x: _red.reduce_sum(x, (0,)))(np.ones((2, 5)))
    (eqn,) = trace.eqns
    wrong = Var(AbstractArray((2,), np.float64))
    bad = eqn._replace(outputs=(wrong,))
    with pytest.raises(FunctxError, match=r"reduce_sum.*f64\[5\]"):
        functx.typecheck(Trace(trace.in_vars, (), (), (bad,), (wrong,)))


def test_typecheck_catches_use_before_definition() -> None:
    trace = functx.make_trace(lambda x: _ew.cos(_ew.sin(x)))(np.ones(3))
    swapped = Trace(trace.in_vars, (), (), trace.eqns[::-1], trace.outputs)
    with pytest.raises(FunctxError, match="before it is defined"):
        functx.typecheck(swapped)
    undefined_output = Trace(trace.in_vars, (), (), (), trace.outputs)
    with pytest.raises(FunctxError, match="output"):
        functx.typecheck(undefined_output)


# -- errors while tracing ----------------------------------------------------------------------------

def test_concretization_error_on_if() -> None:
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(ConcretizationError) as e:
        functx.make_trace(f)(np.ones((2, 3)))
    msg = str(e.value)
    assert "bool[2,3]" in msg                       # names the traced value's type
    assert "where" in msg and "static_argnums" in msg  # says what to do
    assert "make_trace" in msg                      # and where we are
    assert THIS_FILE in msg                         # and the user's line


def test_concretization_error_on_float_and_asarray() -> None:
    with pytest.raises(ConcretizationError, match=r"float\(\).*f64\[\]"):
        functx.make_trace(lambda x: float(x))(np.ones(()))
    with pytest.raises(ConcretizationError, match="functx.numpy"):
        functx.make_trace(lambda x: np.asarray(x))(np.ones(2))
    with pytest.raises(ConcretizationError):
        functx.eval_shape(lambda x: x if x else x, np.ones((), np.bool_))


def test_tracer_leak_error() -> None:
    leaked = []

    def f(x):
        leaked.append(x)
        return _ew.sin(x)

    functx.grad(f)(1.0)
    with pytest.raises(TracerLeakError) as e:
        _ew.sin(leaked[0])
    msg = str(e.value)
    assert "grad" in msg and "f64[]" in msg
    assert "escaped" in msg and "return" in msg
    assert THIS_FILE in msg
    with pytest.raises(TracerLeakError):
        float(leaked[0])
    with pytest.raises(TracerLeakError):
        leaked[0] * 2.0


def test_tracer_leak_from_make_trace() -> None:
    leaked = []
    functx.make_trace(lambda x: leaked.append(x) or x)(np.ones(2))
    with pytest.raises(TracerLeakError, match="make_trace"):
        _ew.neg(leaked[0])


def test_leaked_tracer_used_in_a_later_trace() -> None:
    leaked = []
    functx.make_trace(lambda x: leaked.append(x) or x)(np.ones(2))
    with pytest.raises(TracerLeakError):
        functx.make_trace(lambda y: _ew.add(y, leaked[0]))(np.ones(2))


# -- tracers behave like arrays ----------------------------------------------------------------------

def test_tracer_attributes_and_methods_under_make_trace() -> None:
    seen = {}

    def f(x):
        seen.update(shape=x.shape, ndim=x.ndim, dtype=x.dtype, size=x.size, len=len(x))
        return (x.T, x.reshape(3, 2), x.reshape((6,)), x.sum(), x.sum(axis=0),
                x.astype(np.float32), x[1], x[:, 0], x[0, 1:], x[..., None], x.mean(axis=1))

    x = np.arange(6.0).reshape(2, 3)
    trace = functx.make_trace(f)(x)
    assert seen == {"shape": (2, 3), "ndim": 2, "dtype": np.float64, "size": 6, "len": 2}
    functx.typecheck(trace)
    expected = (x.T, x.reshape(3, 2), x.reshape(6), x.sum(), x.sum(axis=0),
                x.astype(np.float32), x[1], x[:, 0], x[0, 1:], x[..., None], x.mean(axis=1))
    got = functx.eval_trace(trace, x)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e)
    assert [(a.shape, a.dtype) for a in trace.out_avals] == [(e.shape, e.dtype) for e in expected]


def test_tracer_operators_under_make_trace() -> None:
    def f(x, y):
        return (x + y, x - 1.0, 2.0 * x, x / y, -x, x ** 2, abs(x), x @ y.T, x < y)

    x, y = np.array([[1.0, -2.0]]), np.array([[3.0, 4.0]])
    trace = functx.make_trace(f)(x, y)
    expected = (x + y, x - 1.0, 2.0 * x, x / y, -x, x ** 2, abs(x), x @ y.T, x < y)
    for g, e in zip(functx.eval_trace(trace, x, y), expected):
        assert g.dtype == e.dtype
        np.testing.assert_allclose(g, e)


def test_tracers_are_immutable() -> None:
    def f(x):
        x[0] = 1.0
        return x

    with pytest.raises(TypeError, match=r"\.at\[idx\]\.set"):
        functx.make_trace(f)(np.ones(2))


def test_numpy_functions_on_tracers_dispatch_to_functx_numpy() -> None:
    def f(x):
        return np.sum(np.sin(x)), np.add(x, 1.0), np.exp(x) * 2.0, np.reshape(x, (3, 1))

    x = np.array([0.1, 0.2, 0.3])
    trace = functx.make_trace(f)(x)
    names = [e.prim.name for e in trace.eqns]
    assert "sin" in names and "reduce_sum" in names and "exp" in names
    got = functx.eval_trace(trace, x)
    expected = (np.sum(np.sin(x)), x + 1.0, np.exp(x) * 2.0, x.reshape(3, 1))
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e)
    g = functx.grad(lambda x: np.sum(np.sin(x)))(x)
    np.testing.assert_allclose(g, np.cos(x))


def test_numpy_ufunc_out_argument_is_rejected() -> None:
    def f(x):
        out = np.empty(2)
        return np.sin(x, out=out)

    with pytest.raises(TypeError):
        functx.make_trace(f)(np.ones(2))


# -- eval_trace ------------------------------------------------------------------------------------

def test_eval_trace_matches_the_function() -> None:
    w = np.array([[1.0, -1.0], [0.5, 2.0]])

    def f(x, y):
        return _ew.add(_red.reduce_sum(_ew.mul(_ew.exp(x), w), (1,)), _ew.mul(y, 3.0))

    x, y = np.array([[0.1, 0.2], [0.3, 0.4]]), np.array([1.0, 2.0])
    trace = functx.make_trace(f)(x, y)
    (got,) = functx.eval_trace(trace, x, y)
    np.testing.assert_allclose(got, f(x, y), rtol=1e-15)
    np.testing.assert_allclose(got, (np.exp(x) * w).sum(1) + 3 * y)
    assert type(got) is np.ndarray and not got.flags.writeable
    (other,) = functx.eval_trace(trace, x, y, consts=[2 * w])
    np.testing.assert_allclose(other, (np.exp(x) * 2 * w).sum(1) + 3 * y)


def test_eval_trace_under_grad_differentiates_the_trace() -> None:
    trace = functx.make_trace(lambda x: _red.reduce_sum(_ew.sin(x), (0,)))(np.ones(3))
    x = np.array([0.1, 0.2, 0.3])
    g = functx.grad(lambda x: functx.eval_trace(trace, x)[0])(x)
    np.testing.assert_allclose(g, np.cos(x))


def test_eval_trace_checks_the_number_of_arguments() -> None:
    trace = functx.make_trace(lambda x, y: _ew.add(x, y))(np.ones(2), np.ones(2))
    with pytest.raises(FunctxError, match="takes 2 inputs"):
        functx.eval_trace(trace, np.ones(2))
