"""Memory planning (issue 20, item 4).

* Residuals only where the backward pass needs them (``functx.transforms.residuals``): a
  VJP record keeps the inputs that the *needed* cotangents' rules read, not every input the
  rule declares: in ``c * a3`` with ``c`` constant, ``a3`` is not kept. Checked on the
  records themselves, on what ``needed_residuals`` answers for known rules, and with
  tracemalloc on a chain where the saving is large; gradients are checked against the
  analytic derivative.
* ``jit``'s buffer reuse and ``donate_argnums`` (``functx.compiler.memory``): below.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.ir import AbstractArray
from functx.primitives.elementwise import _arithmetic as arith
from functx.primitives.linalg import dot_general_p
from functx.transforms.reverse import ConcreteTraceBuilder
from functx.transforms.residuals import needed_residuals

F64 = np.dtype(np.float64)


def _records(f, *args):
    """(trace, VJP records) of ``f`` traced concretely on ``args`` (all differentiated)."""
    b = ConcreteTraceBuilder("vjp")
    with b:
        ins = [b.new_input(a) for a in args]
        trace = b.build([f(*ins)])
    return trace, b.records


def _record_of(trace, records, name):
    (rec,) = [r for e, r in zip(trace.eqns, records) if e.prim.name == name]
    return rec


# -- residuals only where the backward pass needs them -------------------------------------

def test_constant_factor_keeps_only_the_constant() -> None:
    """``c * a3``: a3's cotangent reads c; c needs no cotangent, so a3 is not kept."""
    c = fnp.asarray(np.full(5, 2.0))
    trace, records = _records(lambda a: (c * a ** 3).sum(), np.linspace(0.5, 1.5, 5))
    ins, out, targets = _record_of(trace, records, "mul")
    assert targets[0] is None and targets[1] is not None
    assert ins[0] is c                        # the constant, read by a3's cotangent
    assert type(ins[1]) is AbstractArray       # a3: only its type
    assert type(out) is AbstractArray


def test_both_factors_differentiated_keep_both() -> None:
    trace, records = _records(lambda c, a: (c * a ** 3).sum(), np.full(5, 2.0),
                              np.linspace(0.5, 1.5, 5))
    ins, _, targets = _record_of(trace, records, "mul")
    assert all(t is not None for t in targets)
    assert all(type(x) is np.ndarray for x in ins)


def test_gradients_unchanged() -> None:
    c = np.linspace(-1.0, 2.0, 5)
    a = np.linspace(0.5, 1.5, 5)
    g = fx.grad(lambda a: (c * a ** 3).sum())(a)
    np.testing.assert_allclose(g, 3 * c * a ** 2, rtol=1e-14)
    # a constant divisor and a constant numerator (div saves its output for y's cotangent)
    g1 = fx.grad(lambda a: (fnp.sin(a) / c).sum())(a)
    np.testing.assert_allclose(g1, np.cos(a) / c, rtol=1e-14)
    g2 = fx.grad(lambda a: (c / fnp.exp(a)).sum())(a)
    np.testing.assert_allclose(g2, -c * np.exp(-a), rtol=1e-13)
    # a constant matrix on either side of a product
    w = np.arange(15.0).reshape(5, 3) / 10
    g3 = fx.grad(lambda a: fnp.tanh(a @ w).sum())(a)
    np.testing.assert_allclose(g3, w @ (1 - np.tanh(a @ w) ** 2), rtol=1e-13)
    # second order: the backward pass of a pruned record is itself differentiated
    gg = fx.grad(lambda a: fx.grad(lambda a: (c * a ** 3).sum())(a).sum())(a)
    np.testing.assert_allclose(gg, 6 * c * a, rtol=1e-14)


def test_needed_residuals_of_known_rules() -> None:
    """What the analysis answers for rules whose reads are known by reading them."""
    v = AbstractArray((4,), F64)
    mul, div = arith.mul_p, arith.div_p
    assert needed_residuals(mul, (False, True), (v, v), (v,), {}) == ((0,), False)
    assert needed_residuals(mul, (True, False), (v, v), (v,), {}) == ((1,), False)
    assert needed_residuals(mul, (True, True), (v, v), (v,), {}) == ((0, 1), False)
    # div(x, y): x's cotangent ct / y reads y; y's reads y and the output
    assert needed_residuals(div, (True, False), (v, v), (v,), {}) == ((1,), False)
    assert needed_residuals(div, (False, True), (v, v), (v,), {}) == ((1,), True)
    # a product with a constant matrix: x @ w, only x's cotangent: w is read, x is not
    x, w = AbstractArray((2, 4), F64), AbstractArray((4, 3), F64)
    dn = (((1,), (0,)), ((), ()))
    params = {k: val for k, val in _dot_params(dn).items()}
    got = needed_residuals(dot_general_p, (True, False), (x, w),
                           (AbstractArray((2, 3), F64),), params)
    assert got == ((1,), False)


def _dot_params(dn):
    """The parameters of ``x @ w`` as functx binds them (read from a real trace)."""
    trace = fx.make_trace(lambda x, w: x @ w)(np.ones((2, 4)), np.ones((4, 3)))
    (eqn,) = [e for e in trace.eqns if e.prim is dot_general_p]
    assert eqn.params["dimension_numbers"] == dn
    return eqn.params


def test_rules_declaring_every_input_keep_their_declaration() -> None:
    """Higher-order and custom rules (``save_inputs=True``) are not analysed."""
    from functx.transforms.custom import custom_vjp_call_p  # (the primitive, for its flags)
    v = AbstractArray((4,), F64)
    assert needed_residuals(custom_vjp_call_p, (False, True), (v, v), (v,), {}) is None


def _held_after_forward(f, x) -> tuple[int, int]:
    """Bytes vjp keeps between forward and backward, and the peak over both."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out, f_vjp = fx.vjp(f, x)
        held = tracemalloc.get_traced_memory()[0] - before
        f_vjp(np.ones_like(out))
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return held, peak


def test_chain_with_constant_factors_keeps_half() -> None:
    """``x <- c * sin(x)`` repeated: sin keeps x; mul used to keep sin(x) as well (for c's
    cotangent, which nobody needs). Now one activation per step is held, not two."""
    depth, n = 12, 1 << 15
    act = n * 8
    c = fnp.asarray(np.full(n, 0.9))
    x0 = fnp.asarray(np.linspace(0.1, 1.0, n))

    def f(x):
        for _ in range(depth):
            x = c * fnp.sin(x)
        return x

    held, peak = _held_after_forward(f, x0)
    assert held <= depth * act * 1.25 + 64 * 1024   # x per step (the output too)
    assert held >= depth * act * 0.9
    assert peak <= depth * act * 1.25 + 4 * act
    # and the gradient: the product of c * cos(x_k) along the chain
    g = fx.grad(lambda x: f(x).sum())(x0)
    x, want = np.asarray(x0), np.ones(n)
    for _ in range(depth):
        want = want * 0.9 * np.cos(x)
        x = 0.9 * np.sin(x)
    np.testing.assert_allclose(g, want, rtol=1e-12)
