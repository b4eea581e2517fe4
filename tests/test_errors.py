"""Error messages: they name the operation, the shapes/dtypes, the user's source line, and
say what to do. (Grad errors: see also tests/test_grad.py.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import functx
import functx.numpy as fnp
from functx.errors import DTypeError, FunctxError, GradError, ShapeError
from functx.primitives import elementwise as _ew

THIS_FILE = Path(__file__).name


def assert_names_shape_mismatch(msg: str) -> None:
    """The message names the primitive, both shapes, what to do, and this file."""
    assert "add" in msg
    assert "(2, 3)" in msg and "(4,)" in msg
    assert "broadcast" in msg
    assert THIS_FILE in msg, f"the user's source line is missing from: {msg}"


# -- shape errors --------------------------------------------------------------------------------

def test_shape_mismatch_eager() -> None:
    with pytest.raises(ShapeError) as e:
        _ew.add(np.ones((2, 3)), np.ones(4))
    assert_names_shape_mismatch(str(e.value))


def test_shape_mismatch_under_make_trace() -> None:
    with pytest.raises(ShapeError) as e:
        functx.make_trace(lambda x, y: _ew.add(x, y))(np.ones((2, 3)), np.ones(4))
    assert_names_shape_mismatch(str(e.value))


def test_shape_mismatch_under_grad() -> None:
    with pytest.raises(ShapeError) as e:
        functx.grad(lambda x: fnp.sum(_ew.add(x, np.ones(4))))(np.ones((2, 3)))
    assert_names_shape_mismatch(str(e.value))


def test_shape_mismatch_through_functx_numpy_and_operators() -> None:
    """Errors raised below functx.numpy still point at the user's line, not the library's."""
    with pytest.raises(ShapeError) as e:
        fnp.add(np.ones((2, 3)), np.ones(4))
    assert_names_shape_mismatch(str(e.value))
    with pytest.raises(ShapeError) as e:
        functx.grad(lambda x: fnp.sum(x + np.ones(4)))(np.ones((2, 3)))
    assert_names_shape_mismatch(str(e.value))


def test_shape_error_points_at_the_line_that_failed() -> None:
    def f(x):
        y = _ew.sin(x)
        return _ew.add(y, np.ones(4))  # the failing line

    line = f.__code__.co_firstlineno + 2
    with pytest.raises(ShapeError, match=rf"{THIS_FILE}:{line}\b"):
        functx.make_trace(f)(np.ones((2, 3)))


# -- dtype errors ---------------------------------------------------------------------------------

def assert_dtype_mismatch_advice(msg: str) -> None:
    assert "add" in msg and "f32" in msg and "f64" in msg
    assert "functx.numpy" in msg and "astype" in msg


def test_dtype_mismatch_at_the_primitive_level_under_make_trace() -> None:
    with pytest.raises(DTypeError) as e:
        functx.make_trace(lambda x, y: _ew.add(x, y))(np.ones(3, np.float32), np.ones(3))
    assert_dtype_mismatch_advice(str(e.value))
    assert THIS_FILE in str(e.value)


def test_dtype_mismatch_at_the_primitive_level_eager() -> None:
    with pytest.raises(DTypeError) as e:
        _ew.add(np.ones(3, np.float32), np.ones(3))
    assert_dtype_mismatch_advice(str(e.value))


def test_dtype_mismatch_at_the_primitive_level_under_grad() -> None:
    with pytest.raises(DTypeError) as e:
        functx.grad(lambda x: fnp.sum(_ew.mul(x, np.ones(3, np.float32))))(np.ones(3))
    assert "mul" in str(e.value) and "astype" in str(e.value)


def test_functx_numpy_promotes_where_the_primitive_refuses() -> None:
    out = fnp.add(np.ones(3, np.float32), np.ones(3))
    assert out.dtype == np.float64


# -- grad errors ----------------------------------------------------------------------------------

def test_grad_error_messages_say_what_to_do() -> None:
    with pytest.raises(GradError) as e:
        functx.grad(lambda x: x * 2.0)(np.arange(3))
    assert "int64" in str(e.value) and "astype" in str(e.value)
    with pytest.raises(GradError) as e:
        functx.grad(lambda x: x * 2.0)(np.ones(2))
    assert "vjp" in str(e.value) and "sum" in str(e.value)
    with pytest.raises(GradError) as e:
        functx.grad(lambda x: None)(1.0)
    assert "scalar" in str(e.value)
    _, f_vjp = functx.vjp(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(GradError) as e:
        f_vjp(np.ones((3, 1)))
    assert "(3, 1)" in str(e.value) and "(3,)" in str(e.value)


def test_every_error_type_is_a_functx_error() -> None:
    for name in ("ShapeError", "DTypeError", "ConcretizationError", "TracerLeakError",
                 "MissingRuleError", "DeviceError", "GradError"):
        assert issubclass(getattr(functx, name), FunctxError)
