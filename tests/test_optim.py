"""Tests of functx.optim: optimizers, transformations, wrappers and schedules.

Two kinds of tests:

* tests that always run: first steps computed by hand from the published formulas, schedule
  values at chosen steps, convergence on a quadratic under ``fx.jit``, ensembles under
  ``fx.vmap``, gradient accumulation, skipping of non-finite steps, masking;
* comparisons with optax (the oracle, skipped when optax is not installed): every optimizer
  and transformation over several steps on float64 pytree params (a dict of arrays), the
  updates, the params and the state leaves equal to optax's to float64 rounding.
"""
from __future__ import annotations


import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
import functx.optim as optim
from functx import tree

RTOL, ATOL = 1e-12, 1e-14


def _params():
    r = np.random.default_rng(0)
    return {"w": r.normal(size=(4, 3)), "b": r.normal(size=3),
            "c": {"v": r.normal(size=(2, 2, 5))}}


def _grads(n: int = 6, seed: int = 1):
    r = np.random.default_rng(seed)
    return [{"w": r.normal(size=(4, 3)), "b": r.normal(size=3),
             "c": {"v": r.normal(size=(2, 2, 5))}} for _ in range(n)]


def _run(opt, params, grads):
    """Steps of ``opt`` (eager): the list of (updates, params) and the last state."""
    state = opt.init(params)
    out = []
    for g in grads:
        updates, state = opt.update(g, state, params)
        params = optim.apply_updates(params, updates)
        out.append((updates, params))
    return out, state


def _close(a, b, rtol=RTOL, atol=ATOL):
    la, lb = tree.leaves(a), tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------------------
# the protocol


def test_state_is_pytree_with_int32_counter():
    opt = optim.adam(1e-3)
    state = opt.init(_params())
    count = state[0].count
    assert isinstance(opt, optim.GradientTransformation)
    assert count.shape == () and count.dtype == np.int32 and int(count) == 0
    _, state = opt.update(_grads(1)[0], state)
    assert state[0].count.dtype == np.int32 and int(state[0].count) == 1
    # the moments have the params' structure
    assert tree.structure(state[0].mu) == tree.structure(_params())


def test_apply_updates_keeps_dtype():
    p = {"a": np.ones(3, np.float32), "b": np.ones(2)}
    new = optim.apply_updates(p, {"a": np.full(3, 0.5), "b": np.full(2, -1.0)})
    assert new["a"].dtype == np.float32 and new["b"].dtype == np.float64
    np.testing.assert_array_equal(new["a"], [1.5, 1.5, 1.5])
    np.testing.assert_array_equal(new["b"], [0.0, 0.0])


def test_chain_state_mismatch_raises():
    opt = optim.chain(optim.scale(2.0), optim.scale(3.0))
    with pytest.raises(fx.ArgumentError, match="chain"):
        opt.update({"a": np.ones(2)}, (optim.EmptyState(),))


def test_chain_composes_in_order():
    opt = optim.chain(optim.clip(1.0), optim.scale(-2.0))
    u, _ = opt.update({"a": np.array([3.0, -0.5])}, opt.init({"a": np.zeros(2)}))
    np.testing.assert_array_equal(u["a"], [-2.0, 1.0])


def test_params_required_errors():
    for opt in (optim.adamw(1e-3), optim.lamb(1e-3), optim.adafactor()):
        state = opt.init(_params())
        with pytest.raises(fx.ArgumentError, match="params"):
            opt.update(_grads(1)[0], state)


def test_global_norm():
    np.testing.assert_allclose(optim.global_norm({"a": np.array([3.0]), "b": [np.array(4.0)]}),
                               5.0)


# ----------------------------------------------------------------------------------------
# first steps by hand (the published formulas)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum_by_hand(nesterov):
    lr, mom = 0.1, 0.9
    g1, g2 = np.array([1.0, -2.0]), np.array([0.5, 4.0])
    opt = optim.sgd(lr, momentum=mom, nesterov=nesterov)
    state = opt.init({"x": np.zeros(2)})
    u1, state = opt.update({"x": g1}, state)
    u2, state = opt.update({"x": g2}, state)
    t1 = g1
    t2 = g2 + mom * t1
    e1 = -lr * (g1 + mom * t1 if nesterov else t1)
    e2 = -lr * (g2 + mom * t2 if nesterov else t2)
    np.testing.assert_allclose(u1["x"], e1, rtol=1e-15)
    np.testing.assert_allclose(u2["x"], e2, rtol=1e-15)


def test_sgd_plain_by_hand():
    u, _ = optim.sgd(0.5).update({"x": np.array([2.0, -4.0])}, optim.sgd(0.5).init(None))
    np.testing.assert_array_equal(u["x"], [-1.0, 2.0])


def test_adam_two_steps_by_hand():
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-8
    g1, g2 = np.array([0.3, -2.0, 0.0]), np.array([1.0, 0.5, -0.1])
    opt = optim.adam(lr)
    state = opt.init({"x": np.zeros(3)})
    u1, state = opt.update({"x": g1}, state)
    u2, state = opt.update({"x": g2}, state)
    m, v = (1 - b1) * g1, (1 - b2) * g1 ** 2
    e1 = -lr * (m / (1 - b1)) / (np.sqrt(v / (1 - b2)) + eps)
    m, v = b1 * m + (1 - b1) * g2, b2 * v + (1 - b2) * g2 ** 2
    e2 = -lr * (m / (1 - b1 ** 2)) / (np.sqrt(v / (1 - b2 ** 2)) + eps)
    np.testing.assert_allclose(u1["x"], e1, rtol=1e-14)
    np.testing.assert_allclose(u2["x"], e2, rtol=1e-14)
    # Adam's first step is -lr * sign(g) (up to eps)
    np.testing.assert_allclose(u1["x"], -lr * np.sign(g1), atol=1e-8)


def test_adamw_decay_by_hand():
    lr, wd = 0.1, 0.5
    p, g = {"x": np.array([2.0])}, {"x": np.array([1.0])}
    opt = optim.adamw(lr, weight_decay=wd, eps=0.0)
    u, _ = opt.update(g, opt.init(p), p)
    np.testing.assert_allclose(u["x"], -lr * (1.0 + wd * 2.0), rtol=1e-15)


def test_lion_by_hand():
    g = {"x": np.array([0.2, -3.0, 0.0])}
    opt = optim.lion(0.1, weight_decay=0.0)
    u, state = opt.update(g, opt.init(g), g)
    np.testing.assert_array_equal(u["x"], [-0.1, 0.1, 0.0])
    np.testing.assert_allclose(state[0].mu["x"], 0.01 * g["x"], rtol=1e-15)


# ----------------------------------------------------------------------------------------
# schedules


def test_schedule_values():
    lin = optim.linear_schedule(0.0, 1.0, 10, transition_begin=5)
    assert [float(lin(n)) for n in (0, 5, 8, 15, 30)] == pytest.approx([0, 0, 0.3, 1, 1])
    poly = optim.polynomial_schedule(1.0, 0.0, 2, 10)
    assert float(poly(5)) == pytest.approx(0.25)
    cos = optim.cosine_decay_schedule(2.0, 10, alpha=0.1)
    assert float(cos(0)) == pytest.approx(2.0)
    assert float(cos(5)) == pytest.approx(2.0 * (0.9 * 0.5 + 0.1))
    assert float(cos(10)) == pytest.approx(0.2) and float(cos(50)) == pytest.approx(0.2)
    w = optim.warmup_cosine_decay_schedule(0.0, 1.0, 10, 110, end_value=0.1)
    assert float(w(5)) == pytest.approx(0.5) and float(w(10)) == pytest.approx(1.0)
    assert float(w(60)) == pytest.approx(0.9 * 0.5 + 0.1)
    assert float(w(110)) == pytest.approx(0.1) and float(w(500)) == pytest.approx(0.1)
    ex = optim.exponential_decay(1.0, 10, 0.5)
    assert float(ex(20)) == pytest.approx(0.25) and float(ex(15)) == pytest.approx(0.5 ** 1.5)
    st = optim.exponential_decay(1.0, 10, 0.5, staircase=True, end_value=0.2)
    assert float(st(15)) == pytest.approx(0.5) and float(st(100)) == pytest.approx(0.2)
    late = optim.exponential_decay(1.0, 10, 0.5, transition_begin=10)
    assert float(late(5)) == 1.0 and float(late(20)) == pytest.approx(0.5)
    pw = optim.piecewise_constant_schedule(1.0, {10: 0.1, 20: 0.5})
    assert [float(pw(n)) for n in (9, 10, 19, 20, 100)] == pytest.approx(
        [1.0, 0.1, 0.1, 0.05, 0.05])
    j = optim.join_schedules([optim.constant_schedule(3.0), optim.linear_schedule(1.0, 0.0, 10)],
                             [5])
    assert [float(j(n)) for n in (0, 4, 5, 10, 20)] == pytest.approx([3, 3, 1, 0.5, 0])
    assert optim.constant_schedule(0.1)(7) == 0.1


def test_schedule_on_int32_counter_and_traced():
    sched = optim.warmup_cosine_decay_schedule(0.0, 1.0, 4, 12)
    counts = np.arange(16, dtype=np.int32)
    eager = [float(sched(c)) for c in counts]
    jitted = fx.jit(sched)
    assert [float(jitted(c)) for c in counts] == pytest.approx(eager, rel=1e-15)
    assert np.asarray(fx.vmap(sched)(counts)) == pytest.approx(eager, rel=1e-15)


def test_schedule_errors():
    with pytest.raises(fx.ArgumentError):
        optim.cosine_decay_schedule(1.0, 0)
    with pytest.raises(fx.ArgumentError):
        optim.piecewise_constant_schedule(1.0, {5: -1.0})


def test_scale_by_schedule_uses_count():
    opt = optim.sgd(optim.piecewise_constant_schedule(1.0, {2: 0.1}))
    state = opt.init({"x": np.zeros(1)})
    got = []
    for _ in range(4):
        u, state = opt.update({"x": np.ones(1)}, state)
        got.append(float(u["x"][0]))
    assert got == pytest.approx([-1.0, -1.0, -0.1, -0.1])


# ----------------------------------------------------------------------------------------
# transforms: jit, vmap, minimisation


def _quadratic(p):
    return fnp.sum((p["a"] - 3.0) ** 2) + fnp.sum((p["b"] + 1.0) ** 2)


def test_adam_minimises_quadratic_under_jit():
    opt = optim.adam(0.1)
    params = {"a": np.zeros(3), "b": np.array([5.0, -4.0])}
    state = opt.init(params)

    @fx.jit
    def step(params, state):
        loss, grads = fx.value_and_grad(_quadratic)(params)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state, loss

    for _ in range(400):
        params, state, loss = step(params, state)
    np.testing.assert_allclose(params["a"], 3.0, atol=1e-3)
    np.testing.assert_allclose(params["b"], -1.0, atol=1e-3)
    assert state[0].count.dtype == np.int32 and int(state[0].count) == 400


@pytest.mark.parametrize("make", [
    lambda: optim.adamw(optim.cosine_decay_schedule(1e-2, 5), weight_decay=0.1),
    lambda: optim.chain(optim.clip_by_global_norm(1.0), optim.lamb(1e-2, weight_decay=1e-2)),
    lambda: optim.adafactor(1e-2, min_dim_size_to_factor=2, momentum=0.9),
    lambda: optim.apply_if_finite(optim.radam(1e-2), 2),
    lambda: optim.MultiSteps(optim.sgd(0.1, momentum=0.9), 2).gradient_transformation(),
], ids=["adamw", "lamb", "adafactor", "apply_if_finite", "multisteps"])
def test_jit_step_equals_eager(make):
    opt = make()
    grads = _grads(5)
    eager, eager_state = _run(opt, _params(), grads)
    step = fx.jit(lambda g, s, p: opt.update(g, s, p))
    params, state = _params(), opt.init(_params())
    for (u_ref, p_ref), g in zip(eager, grads):
        u, state = step(g, state, params)
        params = optim.apply_updates(params, u)
        _close(u, u_ref, rtol=1e-13)
        _close(params, p_ref, rtol=1e-13)
    _close(state, eager_state, rtol=1e-13)


def test_ensemble_step_under_vmap():
    """fx.vmap over an ensemble of models: each member's step equals its own step."""
    opt = optim.adamw(optim.exponential_decay(0.05, 2, 0.5), weight_decay=0.01,
                      mask={"a": True, "b": False})
    r = np.random.default_rng(3)
    members = 3
    params = {"a": r.normal(size=(members, 3)), "b": r.normal(size=(members, 2))}

    def loss(p, x):
        return fnp.sum((p["a"] * x) ** 2) + fnp.sum(fnp.sin(p["b"]))

    def step(p, s, x):
        grads = fx.grad(loss)(p, x)
        updates, s = opt.update(grads, s, p)
        return optim.apply_updates(p, updates), s

    states = fx.vmap(opt.init)(params)
    xs = r.normal(size=(members, 3))
    batched = fx.jit(fx.vmap(step))
    bp, bs = params, states
    for _ in range(3):
        bp, bs = batched(bp, bs, xs)
    for i in range(members):
        p_i = {k: v[i] for k, v in params.items()}
        s_i = opt.init(p_i)
        for _ in range(3):
            p_i, s_i = step(p_i, s_i, xs[i])
        _close({k: v[i] for k, v in bp.items()}, p_i, rtol=1e-13)
        _close(tree.map(lambda v: v[i], bs), s_i, rtol=1e-13)


# ----------------------------------------------------------------------------------------
# wrappers


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_multisteps_equals_step_on_mean_gradient(dtype):
    k = 3
    grads = _grads(2 * k, seed=5)
    inner = optim.adam(1e-2)
    acc = optim.MultiSteps(inner, every_k_schedule=k, accumulator_dtype=dtype)
    params = _params()
    state = acc.init(params)
    ref_state = inner.init(params)
    ref_params = params
    rtol = 1e-14 if dtype == np.float64 else 1e-6
    for block in range(2):
        block_grads = grads[block * k:(block + 1) * k]
        for i, g in enumerate(block_grads):
            u, state = acc.update(g, state, params)
            params = optim.apply_updates(params, u)
            if i < k - 1:
                assert all(not np.any(x) for x in tree.leaves(u))
                assert not bool(acc.has_updated(state))
        assert bool(acc.has_updated(state))
        mean = tree.map(lambda *gs: sum(gs) / k, *block_grads)
        ref_u, ref_state = inner.update(mean, ref_state, ref_params)
        ref_params = optim.apply_updates(ref_params, ref_u)
        _close(u, ref_u, rtol=rtol, atol=1e-12)
        _close(params, ref_params, rtol=rtol, atol=1e-12)
    assert int(state.gradient_step) == 2 and int(state.mini_step) == 0


def test_multisteps_skip_not_finite():
    acc = optim.MultiSteps(optim.sgd(1.0), 2, should_skip_update_fn=optim.skip_not_finite,
                           accumulator_dtype=np.float64)
    p = {"x": np.zeros(2)}
    state = acc.init(p)
    u, state = acc.update({"x": np.array([1.0, 2.0])}, state, p)
    u, state = acc.update({"x": np.array([np.nan, 2.0])}, state, p)  # skipped
    assert not np.any(u["x"]) and int(state.mini_step) == 1
    assert bool(state.skip_state["should_skip"]) and int(state.skip_state["num_not_finite"]) == 1
    u, state = acc.update({"x": np.array([3.0, 4.0])}, state, p)
    np.testing.assert_allclose(u["x"], [-2.0, -3.0])


def test_apply_if_finite_skips_nan_step():
    inner = optim.adam(0.1)
    opt = optim.apply_if_finite(inner, max_consecutive_errors=2)
    p = {"x": np.array([1.0, 2.0])}
    good = {"x": np.array([0.5, -1.0])}
    bad = {"x": np.array([np.nan, 1.0])}
    state = opt.init(p)
    u, state = opt.update(good, state, p)
    inner_before = state.inner_state
    u, state = opt.update(bad, state, p)
    np.testing.assert_array_equal(u["x"], [0.0, 0.0])
    _close(state.inner_state, inner_before, rtol=0, atol=0)
    assert not bool(state.last_finite)
    assert int(state.notfinite_count) == 1 and int(state.total_notfinite) == 1
    # the next finite step continues as if the NaN step never happened
    u, state = opt.update(good, state, p)
    ref_state = inner.init(p)
    _, ref_state = inner.update(good, ref_state, p)
    ref_u, _ = inner.update(good, ref_state, p)
    _close(u, ref_u)
    assert int(state.notfinite_count) == 0 and int(state.total_notfinite) == 1
    # more than max_consecutive_errors non-finite steps in a row: applied (as optax does)
    for _ in range(3):
        u, state = opt.update(bad, state, p)
    assert np.isnan(u["x"][0]) and int(state.notfinite_count) == 3


def test_masked_leaves_pass_through_unchanged():
    opt = optim.masked(optim.sgd(0.1, momentum=0.9), {"w": True, "b": False, "c": True})
    params, grads = _params(), _grads(2)
    state = opt.init(params)
    for g in grads:
        u, state = opt.update(g, state, params)
        np.testing.assert_array_equal(u["b"], g["b"])  # passed through as is
    np.testing.assert_allclose(u["w"], -0.1 * (grads[1]["w"] + 0.9 * grads[0]["w"]))
    trace_state = state.inner_state[0].trace
    assert isinstance(trace_state["b"], optim.MaskedNode)  # no state for masked leaves
    assert len(tree.leaves(trace_state)) == 2


def test_masked_with_callable_and_prefix_mask():
    params = _params()
    opt = optim.masked(optim.set_to_zero(), lambda p: {"w": False, "b": True, "c": False})
    u, _ = opt.update(params, opt.init(params))
    assert not np.any(u["b"]) and np.array_equal(u["c"]["v"], params["c"]["v"])


def test_multi_transform_frozen_leaves_unchanged():
    labels = {"w": "adam", "b": "frozen", "c": {"v": "sgd"}}
    opt = optim.multi_transform({"adam": optim.adam(1e-2), "sgd": optim.sgd(0.1),
                                 "frozen": optim.set_to_zero()}, labels)
    params = _params()
    state = opt.init(params)
    for g in _grads(3):
        u, state = opt.update(g, state, params)
        new = optim.apply_updates(params, u)
        np.testing.assert_array_equal(new["b"], params["b"])
        np.testing.assert_allclose(u["c"]["v"], -0.1 * g["c"]["v"])
        assert np.all(new["w"] != params["w"])
        params = new
    assert set(state.inner_states) == {"adam", "sgd", "frozen"}
    with pytest.raises(fx.ArgumentError, match="label"):
        optim.multi_transform({"adam": optim.adam(1e-2)}, labels).init(params)


def test_float32_params_stay_float32():
    p = {"x": np.ones(3, np.float32)}
    for opt in (optim.adam(optim.cosine_decay_schedule(1e-2, 10)), optim.radam(1e-2),
                optim.chain(optim.add_decayed_weights(optim.linear_schedule(0.1, 0.0, 5)),
                            optim.sgd(0.1, momentum=0.9)),
                optim.MultiSteps(optim.adam(1e-2), 2).gradient_transformation(),
                optim.lamb(1e-2), optim.adafactor(1e-2), optim.rmsprop(1e-2, centered=True)):
        state = opt.init(p)
        for _ in range(2):
            u, state = opt.update({"x": np.array([0.1, -0.2, 0.3], np.float32)}, state, p)
            assert u["x"].dtype == np.float32
            assert all(leaf.dtype in (np.float32, np.int32, np.bool_)
                       for leaf in tree.leaves(state))
            p = optim.apply_updates(p, u)
            assert p["x"].dtype == np.float32


# ----------------------------------------------------------------------------------------
# optax as the oracle


@pytest.fixture
def optax_x64():
    """optax with JAX's float64 mode on for the test (restored afterwards)."""
    optax = pytest.importorskip("optax")
    import jax

    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield optax
    finally:
        jax.config.update("jax_enable_x64", before)


def _optax_run(optax, opt, params, grads):
    import jax
    import jax.numpy as jnp

    params = jax.tree.map(jnp.asarray, params)
    state = opt.init(params)
    out = []
    for g in grads:
        updates, state = opt.update(jax.tree.map(jnp.asarray, g), state, params)
        params = optax.apply_updates(params, updates)
        out.append(([np.asarray(x) for x in jax.tree.leaves(updates)],
                    [np.asarray(x) for x in jax.tree.leaves(params)]))
    return out, [np.asarray(x) for x in jax.tree.leaves(state)]


_MASK = {"w": True, "b": False, "c": {"v": True}}
_LABELS = {"w": "a", "b": "s", "c": {"v": "z"}}

# name -> (construction written once for both libraries, rtol); same names and signatures
_CASES = {
    "sgd": (lambda o: o.sgd(0.1), RTOL),
    "sgd_momentum": (lambda o: o.sgd(0.1, momentum=0.9), RTOL),
    "sgd_nesterov": (lambda o: o.sgd(0.1, momentum=0.9, nesterov=True), RTOL),
    "adam": (lambda o: o.adam(1e-2), RTOL),
    "adam_eps_root": (lambda o: o.adam(1e-2, b1=0.8, b2=0.99, eps=1e-3, eps_root=1e-4), RTOL),
    "adam_nesterov": (lambda o: o.adam(1e-2, nesterov=True), RTOL),
    "adam_schedule": (lambda o: o.adam(lambda n: 0.1 / (1 + n)), RTOL),
    "adam_cosine": (lambda o: o.adam(o.cosine_decay_schedule(0.1, 4, alpha=0.1)), RTOL),
    "adamw": (lambda o: o.adamw(1e-2, weight_decay=0.1), RTOL),
    "adamw_mask": (lambda o: o.adamw(1e-2, weight_decay=0.1, mask=_MASK), RTOL),
    "adamw_mask_fn": (lambda o: o.adamw(1e-2, weight_decay=0.1,
                                        mask=lambda p: {"w": True, "b": False, "c": True}),
                      RTOL),
    "nadam": (lambda o: o.nadam(1e-2), RTOL),
    "nadamw": (lambda o: o.nadamw(1e-2, weight_decay=0.05), RTOL),
    # RAdam's rho_t = rho_inf - 2 t b2^t / (1 - b2^t) cancels ~3 digits near the threshold;
    # XLA's and NumPy's float64 pow differ by an ulp there
    "radam": (lambda o: o.radam(1e-2), 1e-9),
    "radam_nesterov": (lambda o: o.radam(1e-2, b2=0.9, threshold=4.5, nesterov=True), 1e-9),
    "adamax": (lambda o: o.adamax(1e-2), RTOL),
    "adagrad": (lambda o: o.adagrad(1e-1), RTOL),
    "rmsprop": (lambda o: o.rmsprop(1e-2), RTOL),
    "rmsprop_centered": (lambda o: o.rmsprop(1e-2, centered=True, momentum=0.9, nesterov=True,
                                             eps_in_sqrt=False), RTOL),
    "rmsprop_centered_bias": (lambda o: o.rmsprop(1e-2, centered=True, bias_correction=True,
                                                  eps=1e-3), RTOL),
    "rmsprop_bias": (lambda o: o.rmsprop(1e-2, momentum=0.5, bias_correction=True,
                                         initial_scale=0.1), RTOL),
    # optax computes Adafactor's decay 1 - (t+1)^-0.8 in float32, its pow off by an ulp at
    # some steps (t = 4 here): agreement to float32 rounding of that decay
    "adafactor": (lambda o: o.adafactor(1e-2), 1e-6),
    "adafactor_factored": (lambda o: o.adafactor(1e-2, min_dim_size_to_factor=2, momentum=0.9,
                                                 weight_decay_rate=1e-3), 1e-6),
    "adafactor_relative": (lambda o: o.adafactor(), 1e-6),
    "lamb": (lambda o: o.lamb(1e-2, weight_decay=0.01), RTOL),
    "lion": (lambda o: o.lion(1e-3), RTOL),
    "lion_mask": (lambda o: o.lion(1e-3, weight_decay=0.1, mask=_MASK), RTOL),
    "clip": (lambda o: o.chain(o.clip(0.5), o.sgd(0.1)), RTOL),
    "clip_by_global_norm": (lambda o: o.chain(o.clip_by_global_norm(2.0), o.adam(1e-2)), RTOL),
    "clip_by_block_rms": (lambda o: o.chain(o.clip_by_block_rms(0.5), o.sgd(0.1)), RTOL),
    "add_decayed_weights": (lambda o: o.chain(o.add_decayed_weights(0.1), o.sgd(0.1)), RTOL),
    "add_decayed_weights_schedule": (
        lambda o: o.chain(o.add_decayed_weights(lambda n: 0.1 / (1 + n)), o.sgd(0.1)), RTOL),
    "scale_by_schedule": (
        lambda o: o.chain(o.scale_by_adam(), o.scale_by_schedule(
            o.piecewise_constant_schedule(-0.1, {2: 0.5, 4: 0.1}))), RTOL),
    "ema": (lambda o: o.chain(o.ema(0.9), o.scale(-0.1)), RTOL),
    "trust_ratio": (lambda o: o.chain(o.scale_by_trust_ratio(), o.scale(-0.1)), RTOL),
    "param_block_norm": (lambda o: o.chain(o.scale_by_param_block_norm(), o.scale(-0.1)), RTOL),
    "masked": (lambda o: o.masked(o.adam(1e-2), _MASK), RTOL),
    "multi_transform": (lambda o: o.multi_transform(
        {"a": o.adam(1e-2), "s": o.sgd(0.1, momentum=0.9), "z": o.set_to_zero()}, _LABELS),
        RTOL),
    "multisteps": (lambda o: o.MultiSteps(o.adam(1e-2), 3), RTOL),
    "multisteps_sum": (lambda o: o.MultiSteps(o.lamb(1e-2), lambda s: 2, use_grad_mean=False),
                       RTOL),
    "apply_if_finite": (lambda o: o.apply_if_finite(o.adam(1e-2), 1), RTOL),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_matches_optax(optax_x64, name):
    make, rtol = _CASES[name]
    grads = _grads(6)
    if name == "apply_if_finite":  # a skipped step, then one applied anyway (NaNs)
        grads[2] = dict(grads[2], b=np.array([np.nan, 1.0, 2.0]))
        grads[3] = dict(grads[3], w=np.full((4, 3), np.inf))
        grads = grads[:4]
    with np.errstate(invalid="ignore"):  # apply_if_finite's last step divides inf by inf
        ours, our_state = _run(make(optim), _params(), grads)
    theirs, their_state = _optax_run(optax_x64, make(optax_x64), _params(), grads)
    for step, ((u, p), (tu, tp)) in enumerate(zip(ours, theirs)):
        if name != "apply_if_finite":
            assert all(np.all(np.isfinite(y)) for y in tu + tp), "a case must stay finite"
        for x, y in zip(tree.leaves(u) + tree.leaves(p), tu + tp):
            np.testing.assert_allclose(np.asarray(x), y, rtol=rtol, atol=ATOL,
                                       err_msg=f"{name}, step {step}")
    ours_leaves = [np.asarray(x) for x in tree.leaves(our_state)]
    assert len(ours_leaves) == len(their_state)
    for x, y in zip(ours_leaves, their_state):
        assert x.dtype == y.dtype and x.shape == y.shape
        if x.dtype.kind == "f":
            np.testing.assert_allclose(x, y, rtol=max(rtol, 1e-6 if x.dtype == np.float32
                                                      else rtol), atol=ATOL)
        else:
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name,args", [
    ("constant_schedule", (0.3,)),
    ("linear_schedule", (0.1, 0.9, 7, 3)),
    ("polynomial_schedule", (1.0, 0.1, 2.5, 8, 2)),
    ("cosine_decay_schedule", (0.5, 9, 0.2, 1.5)),
    ("warmup_cosine_decay_schedule", (0.01, 1.0, 4, 15, 0.05)),
    ("exponential_decay", (1.0, 3, 0.7, 2)),
    ("exponential_decay", (1.0, 3, 0.7, 2, True, 0.4)),
    ("exponential_decay", (0.5, 4, 1.3, 0, False, 1.0)),
    ("piecewise_constant_schedule", (2.0, {3: 0.5, 7: 0.1, 12: 3.0})),
])
def test_schedule_matches_optax(optax_x64, name, args):
    import jax.numpy as jnp

    ours, theirs = getattr(optim, name)(*args), getattr(optax_x64, name)(*args)
    for n in range(20):
        # optax turns an int32 count / int into float32; an int64 count keeps float64
        expected = np.asarray(theirs(jnp.asarray(n, jnp.int64)))
        got = ours(np.asarray(n, np.int32))
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-14, atol=1e-16,
                                   err_msg=f"{name}{args} at step {n}")


def test_join_schedules_matches_optax(optax_x64):
    import jax.numpy as jnp

    def make(o):
        return o.join_schedules([o.constant_schedule(1.0), o.cosine_decay_schedule(1.0, 5),
                                 o.exponential_decay(0.5, 2, 0.5)], [3, 9])

    ours, theirs = make(optim), make(optax_x64)
    for n in range(16):
        np.testing.assert_allclose(np.asarray(ours(np.int32(n))),
                                   np.asarray(theirs(jnp.asarray(n, jnp.int64))), rtol=1e-14)


def test_factored_rms_exact_with_float64_decay(optax_x64):
    """With the same float64 decay function, the factored estimator equals optax's to
    float64 rounding (isolates the float32 decay of the default)."""
    def decay(step, rate):
        return 1.0 - (step + 1.0) ** (-rate)

    def make(o):
        return o.chain(o.scale_by_factored_rms(min_dim_size_to_factor=2, decay_rate_fn=decay),
                       o.scale(-0.1))

    ours, _ = _run(make(optim), _params(), _grads(6))
    theirs, _ = _optax_run(optax_x64, make(optax_x64), _params(), _grads(6))
    for (u, p), (tu, tp) in zip(ours, theirs):
        for x, y in zip(tree.leaves(u) + tree.leaves(p), tu + tp):
            np.testing.assert_allclose(np.asarray(x), y, rtol=1e-12, atol=ATOL)


# ----------------------------------------------------------------------------------------
# devices: states and updates stay on the params' device (the fake device of
# tests/test_backends.py always; CUDA where there is one)


def _device_params():
    import functx.backends as B

    names = ["fakegpu"] + (["cuda"] if "cuda" in B.backends() else [])
    return names


@pytest.fixture(params=_device_params())
def device(request):
    import functx.backends as B

    if request.param == "fakegpu":
        # under the name pytest imports it by (tests/ is on sys.path, no __init__.py)
        import test_backends

        registered = B._BACKENDS.get("fakegpu") is test_backends.FAKE
        B.register_backend(test_backends.FAKE)
        try:
            yield fx.Device("fakegpu", 0)
        finally:
            if not registered:
                B._BACKENDS.pop("fakegpu", None)
                B.BY_TYPE.pop(test_backends.FakeArray, None)
    else:
        yield fx.Device(request.param, 0)


@pytest.mark.parametrize("make", [
    lambda: optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 6), mask=_MASK),
    lambda: optim.chain(optim.clip_by_global_norm(1.0), optim.lamb(1e-2, weight_decay=0.1)),
    lambda: optim.adafactor(1e-2, min_dim_size_to_factor=2, momentum=0.9),
    lambda: optim.radam(optim.exponential_decay(1e-2, 2, 0.5), b2=0.9),
    lambda: optim.apply_if_finite(optim.multi_transform(
        {"a": optim.adam(1e-2), "s": optim.sgd(0.1, momentum=0.9), "z": optim.set_to_zero()},
        _LABELS), 2),
    lambda: optim.MultiSteps(optim.rmsprop(1e-2, centered=True), 2,
                             should_skip_update_fn=optim.skip_not_finite
                             ).gradient_transformation(),
], ids=["adamw", "lamb", "adafactor", "radam", "apply_if_finite", "multisteps"])
def test_states_and_updates_stay_on_device(device, make):
    opt = make()
    grads = _grads(4)
    ref, ref_state = _run(opt, _params(), grads)
    params = fx.device_put(_params(), device)
    state = opt.init(params)
    step = fx.jit(lambda g, s, p: opt.update(g, s, p))
    for i, g in enumerate(grads):
        update = step if i % 2 else opt.update  # eager and jitted steps alternate
        u, state = update(fx.device_put(g, device), state, params)
        params = optim.apply_updates(params, u)
        for leaf in tree.leaves((u, params, state)):
            assert fx.device_of(leaf) == device
        _close(fx.to_numpy(params), ref[i][1], rtol=1e-12)
    _close(fx.to_numpy(state), ref_state, rtol=1e-12)
