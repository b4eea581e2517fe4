"""Values that would escape a trace: float()/int()/complex()/.item()/.tolist() of a value
that carries a derivative raise ConcretizationError under grad, vjp, jvp and linearize
(as in JAX) instead of silently turning it into a constant; integer and boolean values,
bool() (Python control flow) and values behind stop_gradient keep converting.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.errors import ConcretizationError, TracerLeakError

# conversion name -> a function applying it to a traced scalar and using the result
CONVERSIONS = {
    "float": lambda x: x * float(x),
    "int": lambda x: x * int(x),
    "complex": lambda x: x * complex(x).real,
    "item": lambda x: x * x.item(),
    "tolist": lambda x: x * x.tolist(),
    "index": lambda x: x * [1.0, 2.0, 3.0, 4.0][x],  # __index__
    "math": lambda x: x * math.sin(x),  # math functions call __float__
}

# transform name -> a function running ``f`` at 3.0 under it
TRANSFORMS = {
    "grad": lambda f: fx.grad(f)(3.0),
    "vjp": lambda f: fx.vjp(f, 3.0)[0],
    "jvp": lambda f: fx.jvp(f, (3.0,), (1.0,))[0],
    "linearize": lambda f: fx.linearize(f, 3.0)[0],
    "grad of grad": lambda f: fx.grad(fx.grad(f))(3.0),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("conversion", list(CONVERSIONS))
def test_conversion_of_a_differentiated_value_raises(conversion: str, transform: str) -> None:
    with pytest.raises(ConcretizationError) as info:
        TRANSFORMS[transform](CONVERSIONS[conversion])
    msg = str(info.value)
    assert "derivative" in msg and "stop_gradient" in msg, msg
    assert "Your code:" in msg and "test_escapes.py" in msg, msg


def test_the_issue_example() -> None:
    """grad(lambda x: x * float(x))(3.0) used to give 3 (float(x) silently a constant); the
    right answer is 6, which the array itself gives."""
    with pytest.raises(ConcretizationError, match="float"):
        fx.grad(lambda x: x * float(x))(3.0)
    assert float(fx.grad(lambda x: x * x)(3.0)) == 6.0


def test_the_error_is_also_a_type_error() -> None:
    """Code that catches TypeError around float() (as for NumPy arrays of size > 1) still
    catches it."""
    with pytest.raises(TypeError):
        fx.grad(lambda x: x * float(x))(3.0)


def test_complex_values_refuse_too() -> None:
    def f(z):
        return fnp.abs(z * complex(z)) ** 2

    with pytest.raises(ConcretizationError):
        fx.vjp(f, np.complex128(1 + 2j))


@pytest.mark.parametrize("transform", ["grad", "vjp", "jvp", "linearize"])
def test_stop_gradient_then_convert_is_a_constant(transform: str) -> None:
    """The documented way to take a constant: the value behind stop_gradient is not a
    tracer of the transform, so it converts, and contributes no derivative."""
    def f(x):
        return x * float(fx.stop_gradient(x)) + x * fx.stop_gradient(x).item()

    if transform == "grad":
        assert float(fx.grad(f)(3.0)) == 6.0  # d/dx (c x + c x) at c = 3
    elif transform == "vjp":
        out, f_vjp = fx.vjp(f, 3.0)
        assert float(out) == 18.0 and float(f_vjp(1.0)[0]) == 6.0
    elif transform == "jvp":
        out, t = fx.jvp(f, (3.0,), (1.0,))
        assert float(out) == 18.0 and float(t) == 6.0
    else:
        out, f_lin = fx.linearize(f, 3.0)
        assert float(out) == 18.0 and float(f_lin(1.0)) == 6.0


def test_values_without_a_derivative_convert() -> None:
    """Outputs of zero-derivative operations (floor, comparisons, integer casts) are plain
    values under grad, as in JAX: they convert, and index Python lists."""
    table = [10.0, 20.0, 30.0, 40.0]

    def f(x):
        i = x.astype(int)  # an integer: no derivative
        j = int(fnp.floor(x))  # floor has a zero derivative
        assert isinstance(i.item(), int) and isinstance(float(i), float)
        return x * table[i] + x * table[j] + x * float(x > 2.0)

    assert float(fx.grad(f)(2.5)) == 30.0 + 30.0 + 1.0
    out, t = fx.jvp(f, (2.5,), (1.0,))
    assert float(t) == 61.0


def test_integer_inputs_convert_under_vjp() -> None:
    """An integer primal is a tracer of vjp's trace, but carries no derivative: int(),
    __index__, .item() and .tolist() work on it."""
    def f(x, n):
        table = [1.0, 2.0, 3.0]
        return x * table[n] + x * int(n) + x * n.item() + x * sum(n.reshape(1).tolist())

    out, f_vjp = fx.vjp(f, 2.0, np.int64(2))
    assert float(out) == 2.0 * (3 + 2 + 2 + 2)
    assert float(f_vjp(1.0)[0]) == 9.0


def test_bool_control_flow_keeps_working() -> None:
    """bool() of a differentiated value (an `if`) is Python control flow, which functx
    supports under grad: branching has no derivative of its own."""
    def f(x):
        if x:  # bool() of the float tracer itself
            x = x * 2.0
        while x < 10.0:
            x = x * 3.0
        return x

    assert float(fx.grad(f)(1.0)) == 18.0  # 1 -> 2 -> 6 -> 18
    assert float(fx.jvp(f, (1.0,), (1.0,))[1]) == 18.0


def test_abstract_tracing_still_refuses_every_conversion() -> None:
    for conv in (float, int, bool, complex):
        with pytest.raises(ConcretizationError, match="abstract"):
            fx.make_trace(lambda x, conv=conv: x * conv(x))(np.float64(1.0))
    with pytest.raises(ConcretizationError, match="abstract"):
        fx.jit(lambda n: fnp.ones(3) * [1.0, 2.0][n])(np.int64(1))


def test_a_leaked_tracer_reports_the_leak() -> None:
    box = []
    fx.grad(lambda x: box.append(x) or x * 1.0)(1.0)
    with pytest.raises(TracerLeakError):
        float(box[0])
