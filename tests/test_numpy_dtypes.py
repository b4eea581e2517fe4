"""functx.numpy's dtype boundary: non-numeric operands are refused, bfloat16 promotes as a
floating-point type (JAX's rules where NumPy + ml_dtypes have none or a wrong one)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.errors import DTypeError

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
X = np.arange(3.0)

# -- non-numeric dtypes ------------------------------------------------------------------------

NON_NUMERIC = [
    pytest.param(np.array(["a", "b", "c"]), "<U1", id="str"),
    pytest.param(np.array([b"a", b"b", b"c"]), "|S1", id="bytes"),
    pytest.param(np.array([1.0, "x", None], dtype=object), "object", id="object"),
    pytest.param(np.zeros(3, "V8"), "|V8", id="void"),
    pytest.param(np.zeros(3, [("f", "f8")]), r"\[\('f', '<f8'\)\]", id="structured"),
    pytest.param(np.array(["2020-01-01"] * 3, "datetime64[D]"), r"datetime64\[D\]",
                 id="datetime"),
    pytest.param(np.array([1, 2, 3], "timedelta64[s]"), r"timedelta64\[s\]", id="timedelta"),
]


@pytest.mark.parametrize("bad, shown", NON_NUMERIC)
def test_binary_functions_refuse_non_numeric_arrays(bad: np.ndarray, shown: str) -> None:
    for fn, name in [(fnp.add, "add"), (fnp.multiply, "multiply"), (fnp.maximum, "maximum")]:
        with pytest.raises(DTypeError, match=rf"functx\.numpy\.{name} got an operand of dtype "
                                             rf"{shown} .*numbers and booleans"):
            fn(X, bad)


@pytest.mark.parametrize("bad, shown", NON_NUMERIC)
def test_conversions_refuse_non_numeric_dtypes(bad: np.ndarray, shown: str) -> None:
    with pytest.raises(DTypeError, match=rf"functx\.numpy\.asarray got an operand of dtype "
                                         rf"{shown}"):
        fnp.asarray(bad)
    with pytest.raises(DTypeError, match=rf"functx\.numpy\.astype .*dtype {shown}"):
        fnp.astype(bad, np.float64)
    with pytest.raises(DTypeError, match=rf"dtype {shown}"):
        fnp.astype(X, bad.dtype)
    with pytest.raises(DTypeError, match=rf"functx\.numpy\.result_type .*dtype {shown}"):
        fnp.result_type(X, bad.dtype)


def test_python_strings_and_bytes_are_refused_where_numpy_would_not_compute() -> None:
    # NumPy raises for add(float array, "a"); functx used to return a string array.
    with pytest.raises(TypeError):
        np.add(X, "a")
    for bad, shown in [("a", "<U1"), (b"ab", "|S2"), (["a", "b", "c"], "<U1")]:
        with pytest.raises(DTypeError, match=rf"dtype {shown} \(") as e:
            fnp.add(X, bad)
        assert __file__ in str(e.value)  # the user's line is named
    with pytest.raises(DTypeError, match=r"asarray got an operand of dtype <U3"):
        fnp.asarray("abc")
    with pytest.raises(DTypeError, match=r"asarray .*dtype <U"):
        fnp.asarray([1.0, 2.0], dtype=str)


@pytest.mark.parametrize("call, name", [
    (lambda: fnp.add(X, "a"), "add"),
    (lambda: fnp.add("a", X), "add"),
    (lambda: fnp.multiply(X, b"ab"), "multiply"),
    (lambda: fnp.maximum(X, ["a", "b", "c"]), "maximum"),
    (lambda: fnp.arctan2(X, "a"), "arctan2"),
    (lambda: fnp.add(X, "a", dtype=np.float64), "add"),
    (lambda: fnp.sin("a"), "sin"),
    (lambda: fnp.negative(["a"]), "negative"),
    (lambda: fnp.logical_and(X, "a"), "logical_and"),
    (lambda: fnp.isposinf("a"), "isposinf"),
    (lambda: fnp.nan_to_num("a"), "nan_to_num"),
    (lambda: fnp.round("a"), "round"),
    (lambda: fnp.clip("a", 0.0, 1.0), "clip"),
    (lambda: fnp.clip(X, "a", 1.0), "clip"),
    (lambda: fnp.where(X > 1, "a", X), "where"),
], ids=lambda v: "" if callable(v) else v)
def test_python_strings_are_refused_in_the_name_of_the_function_called(call: Any,
                                                                       name: str) -> None:
    # The string is converted by the operand helpers; the error names the user's function,
    # not the asarray they call internally.
    with pytest.raises(DTypeError, match=rf"^functx\.numpy\.{name} got an operand of dtype "
                                         r"[<|][US]\d+ \("):
        call()


def test_inside_grad_the_error_names_the_function_not_a_later_primitive() -> None:
    with pytest.raises(DTypeError, match=r"functx\.numpy\.multiply got an operand of dtype "
                                         r"<U1"):
        fx.grad(lambda x: fnp.sum(fnp.multiply(x, np.array(["a", "b"]))))(np.ones(2))
    with pytest.raises(DTypeError, match=r"dtype <U1"):
        fx.grad(lambda x: fnp.sum(x * "a"))(np.ones(2))


def test_numeric_dtypes_still_pass() -> None:
    for dt in [np.bool_, np.int8, np.uint16, np.int64, np.float16, np.float32, np.complex128]:
        a = np.ones(3, dt)
        assert fnp.add(a, a).dtype == np.add(a, a).dtype
        assert fnp.asarray(a).dtype == dt
    assert fnp.asarray([True, False]).dtype == np.bool_


# -- bfloat16 promotion --------------------------------------------------------------------------

B = np.array([1.5, -2.0, 0.25], BF16)

# JAX's promotion table (jnp.promote_types) for bfloat16 with these operands.
JAX_BF16 = [
    (2.0, BF16), (2, BF16), (True, BF16), (1j, np.complex64),
    (np.ones(3, BF16), BF16), (np.ones(3, np.bool_), BF16), (np.ones(3, np.int8), BF16),
    (np.ones(3, np.uint8), BF16), (np.ones(3, np.float16), np.float32),
    (np.ones(3, np.float32), np.float32), (np.ones(3, np.float64), np.float64),
    (np.ones(3, np.complex64), np.complex64), (np.ones(3, np.complex128), np.complex128),
]


def _label(v: Any) -> str:
    return str(v.dtype) if isinstance(v, np.ndarray) else repr(v)


@pytest.mark.parametrize("other, want", JAX_BF16, ids=[_label(o) for o, _ in JAX_BF16])
def test_bfloat16_promotes_as_in_jax(other: Any, want: Any) -> None:
    want = np.dtype(want)
    assert fnp.result_type(B, other) == want and fnp.result_type(other, B) == want
    for fn in (fnp.multiply, fnp.add, fnp.subtract):
        out = fn(B, other)
        assert out.dtype == want, (fn.__name__, out.dtype)
        assert fn(other, B).dtype == want
    ref = np.asarray(B, np.float64) * np.asarray(other).astype(np.complex128 if want.kind == "c"
                                                                else np.float64)
    np.testing.assert_allclose(np.asarray(fnp.multiply(B, other)).astype(ref.dtype), ref,
                               rtol=1e-2)


def test_bfloat16_with_wide_integers_promotes_as_float16_would() -> None:
    # No JAX-compatible answer in NumPy's lattice (JAX keeps bfloat16); functx follows
    # NumPy's float16 rule instead of ml_dtypes' error.
    for dt in (np.int16, np.int32, np.int64):
        assert fnp.result_type(B, np.ones(1, dt)) == np.result_type(np.float16, dt)
    assert fnp.promote_types(BF16, np.float16) == np.float32
    assert fnp.promote_types(np.float16, BF16) == np.float32
    assert fnp.promote_types(BF16, np.int8) == BF16
    assert fnp.promote_types(np.float16, np.int16) == np.float32  # NumPy's, unchanged


def test_bfloat16_weak_scalars_inside_transforms() -> None:
    out = fx.jit(lambda b: b * 2.0 + 1)(B) if hasattr(fx, "jit") else B * 2.0 + 1
    assert out.dtype == BF16
    g = fx.grad(lambda b: fnp.sum(fnp.multiply(b, 3.0)).astype(np.float32))(B)
    assert g.dtype == BF16
    np.testing.assert_array_equal(np.asarray(g, np.float32), [3.0, 3.0, 3.0])


def test_bfloat16_matmul_returns_bfloat16() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5)).astype(BF16)
    b = rng.standard_normal((5, 3)).astype(BF16)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    for out in [fnp.matmul(a, b), fnp.dot(a, b), fnp.einsum("ij,jk->ik", a, b),
                fnp.matmul(np.stack([a, a]), np.stack([b, b]))[1],
                fnp.matmul(a[:, :1], b[:1, :])]:
        assert out.dtype == BF16
    np.testing.assert_allclose(np.asarray(fnp.matmul(a, b), np.float32), ref, rtol=1e-2,
                               atol=1e-2)
    # Accumulated in float32 and rounded once: as close as bfloat16 can be.
    err = np.abs(np.asarray(fnp.matmul(a, b), np.float32) - ref)
    assert np.all(err <= np.abs(ref) * 2.0 ** -8 + 1e-6)
    ga = fx.grad(lambda a: fnp.sum(fnp.matmul(a, b)).astype(np.float32))(a)
    assert ga.dtype == BF16
    np.testing.assert_allclose(np.asarray(ga, np.float32),
                               np.broadcast_to(b.astype(np.float32).sum(1), (4, 5)), rtol=1e-2)
