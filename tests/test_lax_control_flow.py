"""functx.lax's control flow against jax.lax (differential tests), and its promises: one
equation and one trace for any trip count, reverse mode by a reverse scan, the while_loop
reverse-mode error, errors at trace time naming the user's line, nested listings.

The per-primitive property checks (VJP against finite differences, JVP, vmap against a
loop, jit against eager, CUDA against CPU) run from tests/specs/control_flow.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx import lax

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(0)


def close(got, want, rtol=1e-10, atol=1e-12):
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


# -- an RNN with scan ----------------------------------------------------------------------

def rnn_loss(np_, L, reverse=False, **kw):
    def loss(params, h0, xs):
        W, U, b = params

        def step(h, x):
            h = np_.tanh(h @ W + x @ U + b)
            return h, np_.sin(h).sum(axis=-1)

        h, ys = L.scan(step, h0, xs, reverse=reverse, **kw)
        return (h ** 2).sum() + (ys * np_.arange(1.0, ys.shape[0] + 1)[:, None]).sum()
    return loss


def rnn_case(T=7, B=2, D=3, H=4):
    params = (RNG.normal(size=(H, H)) * 0.5, RNG.normal(size=(D, H)), RNG.normal(size=H))
    return params, RNG.normal(size=(B, H)), RNG.normal(size=(T, B, D))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("checkpoint", [None, "body", "sqrt"])
def test_rnn_scan_value_and_grad_match_jax(reverse, checkpoint):
    args = rnn_case()
    f = rnn_loss(fnp, lax, reverse, checkpoint=checkpoint)
    g = rnn_loss(jnp, jax.lax, reverse)
    close(f(*args), g(*args))
    close(fx.grad(f, argnums=(0, 1, 2))(*args), jax.grad(g, argnums=(0, 1, 2))(*args))


def test_rnn_scan_jvp_vmap_jit_match_jax():
    args = rnn_case()
    f, g = rnn_loss(fnp, lax), rnn_loss(jnp, jax.lax)
    tangents = jax.tree_util.tree_map(lambda a: RNG.normal(size=np.shape(a)), args)
    close(fx.jvp(f, args, tangents), jax.jvp(g, args, tangents))
    close(fx.linearize(f, *args)[1](*tangents), jax.jvp(g, args, tangents)[1])
    seqs = RNG.normal(size=(5,) + args[2].shape)  # vmap over sequences
    close(fx.vmap(f, in_axes=(None, None, 0))(args[0], args[1], seqs),
          jax.vmap(g, in_axes=(None, None, 0))(args[0], args[1], seqs))
    close(fx.vmap(fx.grad(f), in_axes=(None, None, 0))(args[0], args[1], seqs),
          jax.vmap(jax.grad(g), in_axes=(None, None, 0))(args[0], args[1], seqs))
    close(fx.jit(f)(*args), g(*args))
    close(fx.jit(fx.grad(f))(*args), jax.grad(g)(*args))
    close(fx.grad(fx.jit(f))(*args), jax.grad(g)(*args))


def test_scan_pytrees_closures_and_none_xs():
    w = RNG.normal(size=3)

    def f(np_, L, w):
        def step(c, x):
            return {"a": c["a"] * w + x["u"], "n": c["n"] + 1}, (c["a"].sum(), None)
        c, (ys, _) = L.scan(step, {"a": np_.ones(3), "n": np_.asarray(0)},
                            {"u": np_.ones((4, 3))})
        c2, ys2 = L.scan(lambda c, _: (c * 2.0, c), 1.0, None, length=3)
        return c["a"].sum() + ys.sum() + c2 + ys2.sum(), c["n"]

    close(f(fnp, lax, w), f(jnp, jax.lax, w))
    close(fx.grad(lambda w: f(fnp, lax, w)[0])(w), jax.grad(lambda w: f(jnp, jax.lax, w)[0])(w))


# -- RK4 with fori_loop ---------------------------------------------------------------------

def rk4(np_, L, n=20, h=0.05):
    def solve(y0, k):
        def fun(y):
            return np_.stack([y[1], -k * np_.sin(y[0])])

        def body(i, y):
            k1 = fun(y)
            k2 = fun(y + h / 2 * k1)
            k3 = fun(y + h / 2 * k2)
            k4 = fun(y + h * k3)
            return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return L.fori_loop(0, n, body, y0)
    return solve


def test_rk4_fori_loop_matches_jax_in_every_mode():
    y0, k = np.array([1.0, 0.0]), np.array(2.0)
    f, g = rk4(fnp, lax), rk4(jnp, jax.lax)
    close(f(y0, k), g(y0, k))
    close(fx.jacrev(f, argnums=(0, 1))(y0, k), jax.jacrev(g, argnums=(0, 1))(y0, k))
    close(fx.jacfwd(f, argnums=(0, 1))(y0, k), jax.jacfwd(g, argnums=(0, 1))(y0, k))
    close(fx.hessian(lambda k: f(y0, k).sum())(k), jax.hessian(lambda k: g(y0, k).sum())(k))
    ks = np.array([0.5, 1.0, 3.0])
    close(fx.vmap(f, in_axes=(None, 0))(y0, ks), jax.vmap(g, in_axes=(None, 0))(y0, ks))


def test_fori_loop_with_traced_bounds_is_a_while_loop():
    def f(np_, L, x, n):
        return L.fori_loop(0, n, lambda i, y: y * 1.5 + i, x)
    x = np.array([1.0, 2.0])
    close(fx.jit(lambda x, n: f(fnp, lax, x, n))(x, np.array(4)), f(jnp, jax.lax, x, 4))
    trace = fx.make_trace(lambda x, n: f(fnp, lax, x, n))(x, np.array(4))
    assert "while" in {e.prim.name for e in trace.eqns}
    close(fx.jvp(lambda x: fx.jit(lambda x, n: f(fnp, lax, x, n))(x, np.array(3)), (x,),
                 (np.ones(2),)),
          jax.jvp(lambda x: f(jnp, jax.lax, x, 3), (x,), (np.ones(2),)))


# -- Newton with while_loop -------------------------------------------------------------------

def newton(np_, L):
    def sqrt(a):
        return L.while_loop(lambda x: np_.abs(x * x - a) > 1e-12,
                            lambda x: 0.5 * (x + a / x), a)
    return sqrt


def test_newton_while_loop_values_vmap_jvp_match_jax():
    f, g = newton(fnp, lax), newton(jnp, jax.lax)
    a = np.array(3.0)
    close(f(a), np.sqrt(3.0))
    close(fx.jvp(f, (a,), (np.array(1.0),)), jax.jvp(g, (a,), (np.array(1.0),)))
    batch = np.array([0.5, 2.0, 3.0, 100.0])  # different trip counts per member
    close(fx.vmap(f)(batch), jax.vmap(g)(batch))
    close(fx.jit(fx.vmap(f))(batch), jax.vmap(g)(batch))
    close(fx.vmap(lambda a: fx.jvp(f, (a,), (np.array(1.0),))[1])(batch),
          0.5 / np.sqrt(batch), rtol=1e-8)
    close(fx.jacfwd(f)(a), jax.jacfwd(g)(a))


def test_while_loop_reverse_mode_raises_a_clear_error():
    f = newton(fnp, lax)
    with pytest.raises(lax.ReverseModeError, match="scan.*fori_loop") as info:
        fx.grad(f)(np.array(3.0))
    assert isinstance(info.value, fx.FunctxError)
    with pytest.raises(lax.ReverseModeError):
        fx.grad(lambda x: fx.jit(lambda x, n: lax.fori_loop(0, n, lambda i, y: y * x, x))(
            x, np.array(3)))(np.array(2.0))


# -- cond / switch -------------------------------------------------------------------------------

def test_cond_and_switch_under_vmap_with_batched_predicates():
    def c(np_, L):
        return lambda p, x: L.cond(p > 0, lambda x: np_.sin(x) * p, lambda x: np_.cos(x) - p, x)

    def s(np_, L):
        return lambda i, x: L.switch(i, [np_.sin, np_.cos, lambda x: x * x], x)
    ps, xs = np.array([1.0, -1.0, 2.0]), RNG.normal(size=(3, 4))
    close(fx.vmap(c(fnp, lax))(ps, xs), jax.vmap(c(jnp, jax.lax))(ps, xs))
    close(fx.vmap(fx.grad(lambda p, x: c(fnp, lax)(p, x).sum(), argnums=(0, 1)))(ps, xs),
          jax.vmap(jax.grad(lambda p, x: c(jnp, jax.lax)(p, x).sum(), argnums=(0, 1)))(ps, xs))
    idx, X = np.array([0, 1, 2, 7, -3]), RNG.normal(size=(5, 4))  # out of range: clamped
    close(fx.vmap(s(fnp, lax))(idx, X), jax.vmap(s(jnp, jax.lax))(idx, X))
    close(fx.jit(fx.vmap(fx.grad(lambda i, x: s(fnp, lax)(i, x).sum(), argnums=1)))(idx, X),
          jax.vmap(jax.grad(lambda i, x: s(jnp, jax.lax)(i, x).sum(), argnums=1))(idx, X))
    close(fx.vmap(s(fnp, lax), in_axes=(None, 0))(np.array(1), X),
          jax.vmap(s(jnp, jax.lax), in_axes=(None, 0))(1, X))
    t = RNG.normal(size=4)
    close(fx.jvp(lambda x: s(fnp, lax)(np.array(2), x), (X[0],), (t,)),
          jax.jvp(lambda x: s(jnp, jax.lax)(2, x), (X[0],), (t,)))


def test_cond_differentiates_only_the_taken_branch():
    calls = []

    def bad(x):
        calls.append(1)
        return fnp.log(x)  # nan derivative at x <= 0 if it ran

    f = lambda x: lax.cond(x > 0, bad, lambda x: x * 2.0, x)
    assert fx.grad(f)(np.array(-1.0)) == 2.0
    assert fx.grad(f)(np.array(2.0)) == 0.5


# -- nesting, memory, trace size ---------------------------------------------------------------

def test_nested_loops_and_checkpoint_compose():
    W = RNG.normal(size=(3, 3)) * 0.5

    def f(np_, L, ck, W, xs):
        def inner(d, y):
            return np_.sin(d @ W + y), d.sum()

        def outer(c, x):
            d, ys = L.scan(ck(inner), c, x)
            return d, ys.sum() + L.fori_loop(0, 3, lambda i, z: z * 0.5 + d.sum(), 0.0)
        c, ys = L.scan(outer, np_.ones(3), xs)
        return c.sum() + ys.sum()

    xs = RNG.normal(size=(3, 4, 3))
    want = jax.grad(lambda W: f(jnp, jax.lax, lambda g: g, W, xs))(W)
    for ck in (lambda g: g, fx.checkpoint):
        close(fx.grad(lambda W: f(fnp, lax, ck, W, xs))(W), want)
    close(fx.grad(fx.checkpoint(lambda W: f(fnp, lax, lambda g: g, W, xs)))(W), want)
    hess = jax.hessian(lambda W: f(jnp, jax.lax, lambda g: g, W, xs))(W)
    close(fx.hessian(lambda W: f(fnp, lax, lambda g: g, W, xs))(W), hess, rtol=1e-8)
    gg = jax.grad(lambda W: jax.grad(lambda W: f(jnp, jax.lax, lambda g: g, W, xs))(W).sum())
    close(fx.grad(lambda W: fx.grad(lambda W: f(fnp, lax, lambda g: g, W, xs))(W).sum())(W),
          gg(W), rtol=1e-8)


def _kept_bytes(f, *args):
    return sum(a.size * np.dtype(a.dtype).itemsize for a, _ in fx.saved_residuals(f, *args))


def test_memory_checkpointed_body_and_sqrt_segments_keep_less():
    H, T = 16, 400
    W = RNG.normal(size=(H, H)) / 4
    xs = RNG.normal(size=(T, 1, H))

    def loss(W, checkpoint):
        def step(h, x):  # a deeper cell: the plain scan keeps each layer's output
            for _ in range(3):
                h = fnp.tanh(h @ W + x)
            return h, None
        return lax.scan(step, fnp.zeros((1, H)), xs, checkpoint=checkpoint)[0].sum()

    plain = _kept_bytes(lambda W: loss(W, None), W)
    body = _kept_bytes(lambda W: loss(W, "body"), W)
    sqrt = _kept_bytes(lambda W: loss(W, "sqrt"), W)
    step_bytes = H * 8
    assert plain >= 3 * T * step_bytes  # every layer's input, per step
    assert body <= T * step_bytes + xs.nbytes + 10 * W.nbytes  # one carry per step
    assert sqrt - xs.nbytes < (body - xs.nbytes) / 4  # (xs: kept by every variant)
    g = fx.grad(lambda W: loss(W, None))(W)
    for mode in ("body", "sqrt"):
        close(fx.grad(lambda W: loss(W, mode))(W), g)


def test_trace_size_and_tracing_work_do_not_grow_with_the_trip_count():
    calls = []

    def step(h, x):
        calls.append(1)
        return fnp.tanh(h + x), h.sum()

    def f(h, xs):
        return lax.scan(step, h, xs)[0].sum()

    h = np.ones(3)
    small = fx.make_trace(f)(h, np.ones((10, 3)))
    big = fx.make_trace(f)(h, np.ones((10_000, 3)))
    assert len(small.eqns) == len(big.eqns)
    calls.clear()
    jf = fx.jit(f)
    jf(h, np.ones((10_000, 3)))
    jf(h, np.ones((10_000, 3)))
    assert len(calls) == 1  # traced once, the body's executor replayed
    calls.clear()
    g = fx.grad(f)(h, np.ones((1000, 3)) * 0.01)  # concrete tracing: still one equation
    assert len(calls) == 1 and g.shape == (3,)


def test_make_trace_prints_sub_traces_indented():
    def f(x, xs):
        return lax.scan(lambda c, x: (c * x, lax.cond(c.sum() > 0, fnp.sin, fnp.cos, c)),
                        x, xs)

    text = str(fx.make_trace(f)(np.ones(2), np.ones((5, 2))))
    lines = text.splitlines()
    scan_line = next(l for l in lines if "scan[body=" in l)
    assert scan_line.startswith("    ")
    assert any(l.startswith("        { lambda") for l in lines)  # the body, nested
    assert any(l.startswith("                { lambda") for l in lines)  # cond's branches
    assert "length=5" in text and "branches=(" in text
    fx.make_trace(f)(np.ones(2), np.ones((5, 2)))._repr_html_()  # renders
    assert "cluster" in fx.make_trace(f)(np.ones(2), np.ones((5, 2))).to_dot()


# -- errors at trace time ---------------------------------------------------------------------

def test_errors_name_the_function_shapes_and_the_users_line():
    with pytest.raises(lax.ControlFlowError, match=r"f32\[3\] instead of f64\[3\]") as e:
        lax.scan(lambda c, x: (c.astype(np.float32), x), np.ones(3), np.ones((4, 3)))
    assert "Your code:" in str(e.value) and "test_lax_control_flow.py" in str(e.value)
    with pytest.raises(lax.ControlFlowError, match=r"f64\[2\] instead of f64\[3\]"):
        lax.scan(lambda c, x: (c[:2], x), np.ones(3), np.ones((4, 3)))
    with pytest.raises(lax.ControlFlowError, match=r"leading axes.*\[4, 5\]"):
        lax.scan(lambda c, x: (c, x), 0.0, (np.ones((4, 3)), np.ones((5,))))
    with pytest.raises(lax.ControlFlowError, match="length"):
        lax.scan(lambda c, x: (c, x), 0.0, None)
    with pytest.raises(lax.ControlFlowError, match="pair"):
        lax.scan(lambda c, x: c, 0.0, np.ones(3))
    with pytest.raises(lax.ControlFlowError, match="boolean scalar"):
        lax.while_loop(lambda x: x, lambda x: x - 1.0, 3.0)
    with pytest.raises(lax.ControlFlowError, match="boolean scalar"):
        lax.while_loop(lambda x: x > 0, lambda x: x - 1.0, np.ones(2))
    with pytest.raises(lax.ControlFlowError, match="init_val"):
        lax.while_loop(lambda x: x < 3, lambda x: x + 1.5, 0)
    with pytest.raises(lax.ControlFlowError, match="predicate"):
        lax.cond(np.array(1.5), fnp.sin, fnp.cos, 1.0)
    with pytest.raises(lax.ControlFlowError, match="branch 1"):
        lax.cond(True, lambda x: x, lambda x: x[:1], np.ones(2))
    with pytest.raises(lax.ControlFlowError, match="integer scalar"):
        lax.switch(np.array([0, 1]), [fnp.sin], 1.0)
    with pytest.raises(lax.ControlFlowError, match="upper"):
        lax.fori_loop(0, 2.5, lambda i, x: x, 1.0)


def test_map_and_associative_scan_match_jax():
    X = RNG.normal(size=(7, 3))
    close(lax.map(fnp.sin, X), jax.lax.map(jnp.sin, X))
    close(lax.map(lambda x: x.sum(), X, batch_size=3), jax.lax.map(lambda x: x.sum(), X))
    close(fx.grad(lambda X: lax.map(fnp.sin, X).sum())(X), np.cos(X))
    for rev in (False, True):
        close(lax.associative_scan(fnp.add, X, reverse=rev, axis=0),
              jax.lax.associative_scan(jnp.add, X, reverse=rev, axis=0))
    pair = (RNG.normal(size=6), RNG.normal(size=6))  # a linear recurrence, as in SSMs
    comb_f = lambda a, b: (a[0] * b[0], a[1] * b[0] + b[1])
    close(lax.associative_scan(comb_f, pair), jax.lax.associative_scan(comb_f, pair))
    close(fx.grad(lambda a: lax.associative_scan(comb_f, (a, pair[1]))[1].sum())(pair[0]),
          jax.grad(lambda a: jax.lax.associative_scan(comb_f, (a, pair[1]))[1].sum())(pair[0]))


def test_jit_drops_unused_ys_from_the_scan_body():
    def f(h, xs):
        c, (a, b) = lax.scan(lambda c, x: (fnp.tanh(c + x), (fnp.sin(c), fnp.exp(c))), h, xs)
        return c, a

    jf = fx.jit(f)
    h, xs = np.ones(3), RNG.normal(size=(5, 3))
    close(jf(h, xs), f(h, xs))
    # the planned trace's scan has lost the unused ys (and its body the exp)
    from functx.transforms.interpret import prune
    eqn = next(e for e in prune(fx.make_trace(f)(h, xs)).eqns if e.prim.name == "scan")
    assert len(eqn.outputs) == 2 and len(eqn.params["body"].outputs) == 2
    assert "exp" not in str(prune(eqn.params["body"]))  # what the body's executor runs


def test_debug_print_inside_loops_survives_dead_code_elimination(capsys) -> None:
    """A scan, while_loop or cond whose results nothing reads is kept under jit when its
    body prints (their has_effects asks the sub-traces)."""
    import functx as fx
    from functx import lax

    def f(x):
        def body(c, xi):
            fx.debug.print("scan c={c}", c=c)
            return c + xi, None
        lax.scan(body, 0.0, x)
        lax.while_loop(lambda c: c < 1.0, lambda c: (fx.debug.print("while {c}", c=c), c + 1.0)[1],
                       x[0])
        lax.cond(x[0] > -1.0, lambda: fx.debug.print("cond taken"), lambda: None)
        return fnp.sum(x)

    assert float(fx.jit(f)(np.arange(3.0))) == 3.0
    printed = capsys.readouterr().out.split("\n")
    assert printed[:5] == ["scan c=0.0", "scan c=0.0", "scan c=1.0", "while 0.0", "cond taken"]


def test_loops_of_constants_that_print_run_at_every_jit_call_in_order(capsys) -> None:
    """A scan, while_loop or cond none of whose operands is traced (a carry of constants)
    but whose body prints is recorded in jit's trace, not run once while tracing: its
    prints come at every call, between the prints around it."""
    import functx as fx
    from functx import lax

    def f(x):
        fx.debug.print("1 x={}", x)
        lax.while_loop(lambda c: c < 2, lambda c: (fx.debug.print("2 while {}", c), c + 1)[1], 0)
        lax.scan(lambda c, _: (fx.debug.print("3 scan {}", c), (c + 1, None))[1], 0, None,
                 length=2)
        lax.fori_loop(0, 1, lambda i, c: (fx.debug.print("4 fori {}", i), c)[1], 0.0)
        lax.cond(True, lambda: fx.debug.print("5 cond"), lambda: None)
        fx.debug.print("6 x={}", x)
        return x * 2

    want = ["1 x=1.0", "2 while 0", "2 while 1", "3 scan 0", "3 scan 1", "4 fori 0", "5 cond",
            "6 x=1.0"]
    f(np.float64(1.0))
    assert capsys.readouterr().out.splitlines() == want
    g = fx.jit(f)
    for _ in range(2):
        np.testing.assert_array_equal(g(np.float64(1.0)), 2.0)
        assert capsys.readouterr().out.splitlines() == want
    # a loop of constants without effects still runs once, at trace time (nothing staged)
    h = fx.jit(lambda x: x + lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0))
    assert "while" not in str(fx.make_trace(h)(np.float64(1.0)))


# -- the VJP's weight cotangents, summed after the loop ----------------------------------

def _bwd_scan(trace):
    return next(e for e in trace.eqns if e.prim.name == "scan"
                and e.params["name"].endswith("_bwd"))


def transposed_rnn_loss(np_, L):
    """An RNN whose weights are read transposed, with a negated bias (the weight
    cotangents pass through transpose and neg on their way to the accumulator)."""
    def loss(params, h0, xs):
        W, U, b = params

        def step(h, x):
            h = np_.tanh(h @ W.T + x @ U - b)
            return h, (h * h).sum(axis=-1)

        h, ys = L.scan(step, h0, xs)
        return (h ** 3).sum() + (ys * np_.arange(1.0, ys.shape[0] + 1)[:, None]).sum()
    return loss


@pytest.mark.parametrize("make", [rnn_loss, transposed_rnn_loss])
def test_weight_cotangents_are_one_product_after_the_loop(make):
    args = rnn_case(T=9, B=3, D=2, H=5)
    f, g = make(fnp, lax), make(jnp, jax.lax)
    trace = fx.make_trace(fx.grad(f))(*args)
    bwd = _bwd_scan(trace)
    # the backward step carries the hidden state's cotangent and the state passed back,
    # not the three parameters' cotangents: those are products over (steps, batch)
    assert bwd.params["n_carry"] == 2
    contracting = [e.params["dimension_numbers"][0] for e in trace.eqns
                   if e.prim.name == "dot_general"]
    assert ((0, 1), (0, 1)) in contracting
    want = jax.grad(g)(*args)
    close(fx.grad(f)(*args), want)
    close(fx.jit(fx.grad(f))(*args), want)
    # differentiable again, and under vmap (per-sequence gradients)
    v = jax.tree_util.tree_map(lambda a: RNG.normal(size=np.shape(a)), args[0])
    hvp = lambda F, gr, jv: jv(lambda p: gr(F)(p, *args[1:]), (args[0],), (v,))[1]  # noqa: E731
    close(hvp(f, fx.grad, fx.jvp), hvp(g, jax.grad, jax.jvp), rtol=1e-9)
    seqs = RNG.normal(size=(4,) + args[2].shape)
    close(fx.vmap(fx.grad(f), in_axes=(None, None, 0))(args[0], args[1], seqs),
          jax.vmap(jax.grad(g), in_axes=(None, None, 0))(args[0], args[1], seqs))


def test_sums_stay_in_the_loop_when_stacking_would_cost_more_memory():
    from functx.lax._scan_sums import sink_sums

    W, acc, h = RNG.normal(size=(16, 16)), np.zeros((16, 16)), RNG.normal(size=(32, 16))

    def step(W, acc, h, x):  # acc + h^T h', the product of two per-step values
        h2 = fnp.tanh(h @ W * x.sum())
        return acc + h.T @ h2, h2

    for x, sunk in ((np.ones((6, 1)), False), (np.ones((6, 64, 16)), True)):
        body = fx.make_trace(step)(W, acc, h, x[0])
        # stacking h and h' (2 x 32 x 16 per step) against the loop's own stacked input x:
        # 1 number per step (refused), or 64 x 16 per step (taken)
        out = sink_sums(body, [W], [acc, h], [x], (0,), length=6)
        assert (out is not None) is sunk
        if sunk:
            new_body, init, finish = out
            assert len(init) == 1 and len(new_body.outputs) == 1 + 2
