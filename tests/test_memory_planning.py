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

import functools
import tracemalloc
import warnings

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx import compiler
from functx.compiler import memory
from functx.ir import AbstractArray
from functx.registry import Primitive, Registry
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


# -- jit: buffer reuse and donation (functx.compiler.memory) -------------------------------

@pytest.fixture(params=["none", "numba"])
def jit_compiler(request):
    """Each jit test runs replaying the trace (ufunc steps) and with fused Numba kernels."""
    old = compiler.set_jit_compiler(request.param)
    yield request.param
    compiler.set_jit_compiler(old)


@pytest.fixture
def plan_everything(monkeypatch):
    """Plan intermediates of any size (the tests' arrays are small)."""
    monkeypatch.setattr(memory, "MIN_BYTES", 0)


def _loss(params, x):
    h = fnp.tanh(x @ params["w"] + params["b"])
    return fnp.sum((h * params["s"]) ** 2)


def _step(params, x):
    g = fx.grad(_loss)(params, x)
    return {k: params[k] - 0.1 * g[k] for k in params}


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal((16, 8)), "b": rng.standard_normal(8),
            "s": rng.standard_normal(8)}


def test_donated_training_step_updates_in_place(jit_compiler) -> None:
    x = np.random.default_rng(1).standard_normal((4, 16))
    want = fx.jit(_step)(_params(), x)
    p = _params()
    bufs = dict(p)
    got = fx.jit(_step, donate_argnums=0)(p, x)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
        assert np.shares_memory(got[k], bufs[k]), k   # the update wrote into the donated buffer
        assert not got[k].flags.writeable             # results stay read-only


def test_donated_steps_in_a_loop_match_undonated(jit_compiler) -> None:
    x = np.random.default_rng(2).standard_normal((4, 16))
    plain, donating = fx.jit(_step), fx.jit(_step, donate_argnames="params")
    p_ref, p = _params(), _params()
    first = dict(p)
    for _ in range(4):
        p_ref = plain(p_ref, x)
        p = donating(p, x)  # the previous results (read-only functx arrays) are donated too
    for k in p:
        np.testing.assert_array_equal(p[k], p_ref[k])
        assert np.shares_memory(p[k], first[k])
    p = donating(params=p, x=x)  # donated by keyword
    np.testing.assert_array_equal(p["w"], plain(p_ref, x)["w"])


def test_donation_never_changes_results_seen_elsewhere(jit_compiler, plan_everything) -> None:
    """A donated buffer is not used where a view of it is a result, or where the same array
    is also passed undonated."""
    x = np.arange(12.0).reshape(3, 4)
    f = fx.jit(lambda a: (a.T, a + 1.0), donate_argnums=0)
    with pytest.warns(UserWarning, match="donated buffers were not usable"):
        t, y = f(x.copy())
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(y, x + 1.0)
    g = fx.jit(lambda a, b: (a * 2.0, b + 0.0), donate_argnums=0)
    a = x.copy()
    d, e = g(a, a)
    np.testing.assert_array_equal(d, x * 2.0)
    np.testing.assert_array_equal(e, x)
    # one array twice (and a view of it) inside a donated pytree
    h = fx.jit(lambda p: (p[0] * 2.0, p[1] + 1.0, p[2] - 1.0), donate_argnums=0)
    a = x.copy()
    d, e, r = h((a, a, a[1:]))
    np.testing.assert_array_equal(d, x * 2.0)
    np.testing.assert_array_equal(e, x + 1.0)
    np.testing.assert_array_equal(r, x[1:] - 1.0)


def test_views_of_dead_buffers_keep_them_alive(jit_compiler, plan_everything) -> None:
    """An intermediate whose view is still needed is not written over."""
    def f(x):
        a = fnp.sin(x)
        v = a.reshape(4, 3)          # a view of a's memory
        b = fnp.cos(a) + 1.0         # a's last direct use
        c = fnp.exp(b) * 2.0         # b dies: a candidate buffer of a's type
        return v.reshape(3, 4) * c
    x = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    np.testing.assert_allclose(fx.jit(f)(x), f(x), rtol=1e-14)
    np.testing.assert_allclose(fx.jit(f, donate_argnums=0)(x.copy()), f(x), rtol=1e-14)


def test_unusable_donation_warns_once_per_signature(jit_compiler) -> None:
    f = fx.jit(lambda a, b: fnp.sum(a) * b, donate_argnums=0)
    with pytest.warns(UserWarning, match=r"f64\[5\]"):
        f(np.ones(5), 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(f(np.ones(5), 3.0)) == 15.0   # the same signature: no new warning
    with pytest.warns(UserWarning, match=r"f64\[6\]"):
        f(np.ones(6), 2.0)


def test_donate_argument_errors() -> None:
    def step(params, x, *, lr=0.1):
        return params
    with pytest.raises(fx.FunctxError, match="no argument 2 to donate"):
        fx.jit(step, donate_argnums=2)
    with pytest.raises(fx.FunctxError, match="negative"):
        fx.jit(step, donate_argnums=-1)
    with pytest.raises(fx.FunctxError, match="donate_argnums"):
        fx.jit(step, donate_argnums="params")
    with pytest.raises(fx.FunctxError, match="both static and donated"):
        fx.jit(step, static_argnums=1, donate_argnums=(0, 1))
    with pytest.raises(fx.FunctxError, match="both static and donated"):
        fx.jit(step, static_argnames="lr", donate_argnames="lr")
    with pytest.raises(fx.FunctxError, match="'y'"):
        fx.jit(step, donate_argnames="y")
    fx.jit(step, donate_argnames="lr")  # a keyword-only parameter may be donated


# A probe primitive (private registry) whose out-implementation logs the buffers it gets.
_PROBES = Registry()
probe_p = Primitive("probe_sin", registry=_PROBES)
probe_p.def_abstract_eval(lambda x: x)
probe_p.def_impl(lambda xp, x: xp.sin(x))
_GOT: list = []


@functools.partial(probe_p.def_impl_out, alias="any")
def _probe_out(xp, x, *, out):
    _GOT.append(out)
    return xp.sin(x, out=out)


def test_dead_intermediates_and_donated_inputs_are_reused(plan_everything) -> None:
    """Each probe step after the first writes into the buffer of the value that dies there
    (in place); with donation, the first one too."""
    old = compiler.set_jit_compiler("none")  # (the probe is not fusible anyway)
    try:
        def f(x):
            for _ in range(4):
                x = probe_p.bind(x)
            return x
        x = np.linspace(0.0, 1.0, 10)
        _GOT.clear()
        np.testing.assert_array_equal(fx.jit(f)(x), f(x))
        assert len(_GOT) == 3 and all(b is _GOT[0] for b in _GOT)
        _GOT.clear()
        a = x.copy()
        out = fx.jit(f, donate_argnums=0)(a)
        np.testing.assert_array_equal(out, f(x))
        assert len(_GOT) == 4 and all(b is a for b in _GOT) and np.shares_memory(out, a)
    finally:
        compiler.set_jit_compiler(old)


def test_kernel_writes_into_given_outputs() -> None:
    """``Kernel(*arrays, outs=...)``: the fused kernel fills preallocated outputs."""
    pytest.importorskip("numba")
    old = compiler.set_jit_compiler("numba")
    try:
        low = fx.jit(lambda x, y: fnp.exp(x) * y + 1.0).lower(np.ones(6), np.ones(6))
    finally:
        compiler.set_jit_compiler(old)
    (k,) = low.kernels
    x, y = np.linspace(0, 1, 6), np.linspace(1, 2, 6)
    buf = np.empty(6)
    (out,) = k(x, y, outs=[buf])
    assert out is buf
    np.testing.assert_allclose(buf, np.exp(x) * y + 1.0, rtol=1e-15)
    assert (0, 0) in k.inplace and (1, 0) in k.inplace   # elementwise: in place is safe
    (again,) = k(x, y, outs=[x])                        # in place on its first input
    np.testing.assert_allclose(again, buf, rtol=1e-15)


def _step_peak(step, params, x) -> int:
    """The tracemalloc peak of one call (after a first call compiled it; the smaller of
    two, so that a cache some first call fills does not count)."""
    peaks = []
    for _ in range(3):
        params = step(params, x)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            params = step(params, x)
            peaks.append(tracemalloc.get_traced_memory()[1] - before)
        finally:
            tracemalloc.stop()
    return min(peaks[1:])


def test_planning_never_raises_the_peak(jit_compiler, monkeypatch) -> None:
    """Keeping dead buffers for later steps must not raise a step's peak memory; donating
    the parameters lowers it or keeps it."""
    rng = np.random.default_rng(3)
    params = [{"w": rng.standard_normal((96, 96)) / 10, "b": np.zeros(96)} for _ in range(3)]
    x = rng.standard_normal((64, 96))

    def loss(ps, h):
        for p in ps:
            h = h + fnp.tanh(h @ p["w"] + p["b"]) * 0.5
        return fnp.mean(h ** 2)

    def step(ps, h):
        g = fx.grad(loss)(ps, h)
        return [{k: p[k] - 0.01 * gp[k] for k in p} for p, gp in zip(ps, g)]

    copy = lambda: [dict(p) for p in params]
    planned = _step_peak(fx.jit(step), copy(), x)
    donated = _step_peak(fx.jit(step, donate_argnums=0), copy(), x)
    monkeypatch.setattr(memory, "MIN_BYTES", 1 << 62)  # plan nothing
    unplanned = _step_peak(fx.jit(step), copy(), x)
    assert planned <= unplanned * 1.02 + 4096
    assert donated <= planned * 1.02 + 4096
