"""Gradient checkpointing: ``checkpoint``, its policies, ``checkpoint_sequential``,
``checkpoint_name``, ``saved_residuals`` / ``print_saved_residuals`` and ``is_recomputing``.

What is checked:

* gradients with and without checkpoint agree bit for bit, for every policy, for chains of
  blocks with their own parameters (where the cotangents of a block's inputs are added in
  the same order either way), nested checkpoints, closures, unused outputs, custom_vjp and
  key-based dropout inside (the recomputation draws the same mask);
* and to rounding (the additions are grouped differently) for shared parameters,
  grad-of-grad, jvp, linearize and vmap in every order;
* what each policy keeps, read from ``saved_residuals`` (a table of expected primitives per
  policy), and that ``print_saved_residuals`` prints it with source lines;
* the memory the forward pass keeps, measured with tracemalloc;
* ``is_recomputing`` and which equations the backward pass recomputes (a probe primitive
  in a private registry logs its own calls);
* ``static_argnums``, ``checkpoint_sequential``'s segments, and the errors.
"""
from __future__ import annotations

import functools
import inspect
import re
import tracemalloc
from collections import Counter
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp
import functx.random as fxr
from functx import checkpoint_policies as cp
from functx import tree
from functx.registry import Primitive, Registry

FEW = settings(max_examples=max(3, settings.default.max_examples // 3))

NAMES_H = cp.save_only_these_names("h")
POLICIES: dict[str, Callable] = {
    "nothing_saveable": cp.nothing_saveable,
    "everything_saveable": cp.everything_saveable,
    "dots_saveable": cp.dots_saveable,
    "dots_with_no_batch_dims_saveable": cp.dots_with_no_batch_dims_saveable,
    "save_only_these_names(h)": NAMES_H,
    "save_any_names_but_these(h)": cp.save_any_names_but_these("h"),
    "save_any_names_but_these(other)": cp.save_any_names_but_these("other"),
    "save_from_both_policies(dots, names h)": cp.save_from_both_policies(cp.dots_saveable,
                                                                         NAMES_H),
    "user policy (tanh)": lambda prim, *avals, **params: prim.name == "tanh",
}

# What each policy keeps of one `block` (below), as the primitives that made the values.
# Derived by hand from the block: the VJP rules of tanh read its output, sin its input, mul
# both inputs, dot_general both inputs; `name` is an identity, so keeping h also provides
# the first tanh's output. `block`'s own input and output are kept by the checkpoint
# equation itself whatever the policy.
KEPT_PER_BLOCK: dict[str, Counter] = {
    "nothing_saveable": Counter(),
    "everything_saveable": Counter({"name": 1, "sin": 1, "mul": 1, "tanh": 1}),
    "dots_saveable": Counter({"dot_general": 2}),
    "dots_with_no_batch_dims_saveable": Counter({"dot_general": 2}),
    "save_only_these_names(h)": Counter({"name": 1}),
    "save_any_names_but_these(h)": Counter(),
    "save_any_names_but_these(other)": Counter({"name": 1}),
    "save_from_both_policies(dots, names h)": Counter({"dot_general": 1, "name": 1}),
    "user policy (tanh)": Counter({"tanh": 2}),
}


def block(p: dict, x: Any) -> Any:
    """A residual block whose values are kept differently by every policy."""
    a = x @ p["w"]
    h = fx.checkpoint_name(fnp.tanh(a), "h")
    s = fnp.sin(h) * h
    return x + fnp.tanh(s @ p["v"])


def chain(params: list, x: Any, wrap: Callable | None = None) -> Any:
    """The blocks applied in turn (each one wrapped by ``wrap``), then a scalar loss."""
    b = block if wrap is None else wrap(block)
    for p in params:
        x = b(p, x)
    return fnp.sum(x * x) / 2


def make_params(rng: np.random.Generator, depth: int, width: int) -> list:
    return [{"w": rng.standard_normal((width, width)) / np.sqrt(width),
             "v": rng.standard_normal((width, width)) / np.sqrt(width)}
            for _ in range(depth)]


@st.composite
def problems(draw: Any) -> tuple:
    """(params, x): a chain of 1-3 blocks on a (batch, width) float64 input."""
    depth = draw(st.integers(1, 3), label="depth")
    batch = draw(st.integers(1, 4), label="batch")
    width = draw(st.integers(1, 5), label="width")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    return make_params(rng, depth, width), rng.standard_normal((batch, width))


def assert_trees_identical(a: Any, b: Any) -> None:
    la, lb = tree.leaves(a), tree.leaves(b)
    assert tree.structure(a) == tree.structure(b)
    for x, y in zip(la, lb):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        # bit for bit, signed zeros included
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


def assert_trees_close(a: Any, b: Any, rtol: float = 1e-11, atol: float = 1e-12) -> None:
    assert tree.structure(a) == tree.structure(b)
    for x, y in zip(tree.leaves(a), tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def per_policy(fn: Callable) -> Callable:
    return pytest.mark.parametrize("policy", list(POLICIES.values()), ids=list(POLICIES))(fn)


# -- gradients agree ---------------------------------------------------------------------------

@per_policy
@FEW
@given(prob=problems())
def test_grad_is_bit_identical(policy: Callable, prob: tuple) -> None:
    """grad with respect to the parameters and the input, with and without checkpoint."""
    params, x = prob
    ck = functools.partial(fx.checkpoint, policy=policy)
    want = fx.grad(chain, argnums=(0, 1))(params, x)
    got = fx.grad(lambda p, x: chain(p, x, ck), argnums=(0, 1))(params, x)
    assert_trees_identical(got, want)
    value = fx.value_and_grad(lambda p: chain(p, x, ck))(params)[0]
    assert_trees_identical(value, chain(params, x))


@per_policy
@FEW
@given(prob=problems())
def test_forward_values_are_identical(policy: Callable, prob: tuple) -> None:
    """The checkpointed function returns f's values eagerly, under make_trace, under vjp."""
    params, x = prob
    f = fx.checkpoint(block, policy=policy)
    assert_trees_identical(f(params[0], x), block(params[0], x))
    trace = fx.make_trace(f)(params[0], x)
    assert [e.prim.name for e in trace.eqns] == ["checkpoint"]
    assert_trees_identical(fx.eval_trace(trace, *tree.leaves((params[0], x)))[0],
                           block(params[0], x))
    assert_trees_identical(fx.vjp(f, params[0], x)[0], block(params[0], x))


@per_policy
@settings(max_examples=5)
@given(prob=problems())
def test_shared_parameters_agree_to_rounding(policy: Callable, prob: tuple) -> None:
    """One parameter set used by every block: the per-block cotangents are summed inside
    each checkpoint first, so only rounding may differ."""
    params, x = prob
    shared = [params[0]] * 3
    ck = functools.partial(fx.checkpoint, policy=policy)
    want = fx.grad(lambda p: chain([p] * 3, x))(shared[0])
    got = fx.grad(lambda p: chain([p] * 3, x, ck))(shared[0])
    assert_trees_close(got, want)


@pytest.mark.parametrize("outer", ["nothing_saveable", "dots_saveable", "everything_saveable"])
@pytest.mark.parametrize("inner", ["nothing_saveable", "save_only_these_names(h)"])
@settings(max_examples=5)
@given(prob=problems())
def test_nested_checkpoints(outer: str, inner: str, prob: tuple) -> None:
    """checkpoint inside checkpoint: bit-identical gradients; the inner one recomputes
    inside the outer one's recomputation."""
    params, x = prob

    def two_blocks(p: dict, x: Any) -> Any:
        inner_block = fx.checkpoint(block, policy=POLICIES[inner])
        return inner_block(p, inner_block(p | {"w": p["v"], "v": p["w"]}, x))

    def loss(params: list, x: Any, nested: bool) -> Any:
        f = fx.checkpoint(two_blocks, policy=POLICIES[outer]) if nested else \
            (lambda p, x: block(p, block(p | {"w": p["v"], "v": p["w"]}, x)))
        for p in params:
            x = f(p, x)
        return fnp.sum(x * x) / 2

    want = fx.grad(loss, argnums=(0, 1))(params, x, False)
    got = fx.grad(loss, argnums=(0, 1))(params, x, True)
    assert_trees_close(got, want)  # p is used by both inner blocks: sums are regrouped


@per_policy
@settings(max_examples=5)
@given(prob=problems())
def test_grad_of_grad(policy: Callable, prob: tuple) -> None:
    """Second derivatives through checkpoint (its VJP rule is differentiated)."""
    params, x = prob
    ck = functools.partial(fx.checkpoint, policy=policy)
    u = np.cos(np.arange(x.size, dtype=np.float64)).reshape(x.shape)

    def gx(x: Any, wrap: Any) -> Any:
        g = fx.grad(lambda x: chain(params, x, wrap))(x)
        return fnp.sum(g * u)

    assert_trees_close(fx.grad(gx)(x, ck), fx.grad(gx)(x, None))
    # third order, through the recorded recomputation
    ggg = fx.grad(lambda x, w: fx.grad(gx)(x, w)[0, 0])
    assert_trees_close(ggg(x, ck), ggg(x, None))


@per_policy
@settings(max_examples=5)
@given(prob=problems())
def test_jvp_linearize_and_hvp(policy: Callable, prob: tuple) -> None:
    """Forward mode through checkpoint, and forward-over-reverse (Hessian-vector)."""
    params, x = prob
    ck = functools.partial(fx.checkpoint, policy=policy)
    t = np.sin(np.arange(x.size, dtype=np.float64)).reshape(x.shape)
    want = fx.jvp(lambda x: chain(params, x), (x,), (t,))
    got = fx.jvp(lambda x: chain(params, x, ck), (x,), (t,))
    assert_trees_close(got, want)
    out, f_lin = fx.linearize(lambda x: chain(params, x, ck), x)
    assert_trees_close((out, f_lin(t)), want)
    hvp = fx.jvp(fx.grad(lambda x: chain(params, x, ck)), (x,), (t,))[1]
    assert_trees_close(hvp, fx.jvp(fx.grad(lambda x: chain(params, x)), (x,), (t,))[1])


@per_policy
@settings(max_examples=5)
@given(prob=problems(), n=st.integers(1, 3))
def test_vmap_in_every_order(policy: Callable, prob: tuple, n: int) -> None:
    """vmap(checkpoint), vmap(grad(checkpoint)) and grad(vmap(checkpoint)) against the
    same without checkpoint."""
    params, x = prob
    ck = functools.partial(fx.checkpoint, policy=policy)
    xs = np.stack([x * (k + 1) for k in range(n)])
    b0 = fx.checkpoint(block, policy=policy)
    assert_trees_close(fx.vmap(b0, in_axes=(None, 0))(params[0], xs),
                       fx.vmap(block, in_axes=(None, 0))(params[0], xs))
    assert_trees_close(fx.vmap(fx.grad(lambda p, x: chain(p, x, ck)), in_axes=(None, 0))(params, xs),
                       fx.vmap(fx.grad(chain), in_axes=(None, 0))(params, xs))
    batched = lambda p, wrap: fnp.sum(fx.vmap(lambda x: chain(p, x, wrap))(xs))
    assert_trees_close(fx.grad(batched)(params, ck), fx.grad(batched)(params, None))


def test_batched_dots_and_the_no_batch_dims_policy() -> None:
    """A batched matrix product is a dot to dots_saveable but not to
    dots_with_no_batch_dims_saveable; both give identical gradients."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))

    def f(a: Any, b: Any) -> Any:
        return fnp.sum(fnp.tanh(fnp.matmul(a, b)))

    want = fx.grad(f, argnums=(0, 1))(a, b)
    kinds = {}
    for name in ("dots_saveable", "dots_with_no_batch_dims_saveable"):
        g = fx.checkpoint(f, policy=POLICIES[name])
        assert_trees_identical(fx.grad(g, argnums=(0, 1))(a, b), want)
        kinds[name] = kept_prims(g, a, b)
    assert kinds["dots_saveable"] == Counter({"dot_general": 1})
    assert kinds["dots_with_no_batch_dims_saveable"] == Counter()


def test_closures_unused_outputs_and_integer_values() -> None:
    """Values the function closes over (even ones grad differentiates) become inputs of the
    checkpoint; outputs the caller drops and integer inputs/outputs need no cotangent."""
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((4, 4)), rng.standard_normal((3, 4))
    idx = np.array([2, 0, 1])

    def loss(w: Any, wrap: Any) -> Any:
        def f(x: Any, i: Any) -> Any:
            h = fnp.tanh(x @ w)  # w closed over
            return h[i], fnp.sin(h), fnp.argmax(h, axis=1)
        g = wrap(f) if wrap else f
        y, unused, k = g(x, idx)
        return fnp.sum(y * y) + fnp.sum(k)

    for policy in POLICIES.values():
        got = fx.grad(loss)(w, functools.partial(fx.checkpoint, policy=policy))
        assert_trees_identical(got, fx.grad(loss)(w, None))


def test_custom_vjp_inside_checkpoint() -> None:
    """A custom_vjp function inside a checkpoint keeps its own rule when recomputed."""
    @fx.custom_vjp
    def clip_grad(x: Any) -> Any:
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda res, g: (fnp.clip(g, -0.1, 0.1),))
    rng = np.random.default_rng(2)
    w, x = rng.standard_normal((4, 4)), rng.standard_normal((3, 4))

    def loss(w: Any, wrap: Any) -> Any:
        f = lambda w: fnp.sum(fnp.tanh(clip_grad(x @ w)) ** 2)
        return (wrap(f) if wrap else f)(w)

    want = fx.grad(loss)(w, None)
    assert np.max(np.abs(want)) > 0
    for policy in POLICIES.values():
        assert_trees_identical(fx.grad(loss)(w, functools.partial(fx.checkpoint,
                                                                  policy=policy)), want)


# -- dropout (functx.nn.dropout, key-based): recomputation draws the same mask ------------------

def dropout_block(p: dict, key: Any, x: Any) -> Any:
    h = fnn.dropout(key, fnp.tanh(x @ p["w"]), 0.5)
    return x + fnp.sin(h) @ p["v"]


@per_policy
@settings(max_examples=5)
@given(prob=problems())
def test_dropout_inside_checkpoint(policy: Callable, prob: tuple) -> None:
    """Gradients with dropout inside a checkpoint equal those without checkpoint and those
    computed with the masks drawn beforehand (so recomputation drew the same masks)."""
    params, x = prob
    keys = fxr.split(fxr.key(7), len(params))

    def loss(params: list, x: Any, wrap: Any) -> Any:
        b = wrap(dropout_block) if wrap else dropout_block
        for p, k in zip(params, keys):
            x = b(p, k, x)
        return fnp.sum(x * x)

    ck = functools.partial(fx.checkpoint, policy=policy)
    got = fx.grad(loss, argnums=(0, 1))(params, x, ck)
    assert_trees_identical(got, fx.grad(loss, argnums=(0, 1))(params, x, None))

    def loss_fixed_masks(params: list, x: Any) -> Any:
        for p, k in zip(params, keys):
            keep = np.asarray(fxr.bernoulli(k, np.float64(0.5), (x.shape[0], p["w"].shape[1])))
            h = fnp.where(keep, fnp.tanh(x @ p["w"]) / 0.5, 0.0)
            x = x + fnp.sin(h) @ p["v"]
        return fnp.sum(x * x)

    assert_trees_identical(got, fx.grad(loss_fixed_masks, argnums=(0, 1))(params, x))


# -- what each policy keeps --------------------------------------------------------------------

_KEPT = re.compile(r"output of (\w+)(?: \(named '(\w+)'\))? from (.+?):(\d+) \((\w+)\), "
                   r"kept by checkpoint\((\w+)\) with policy (.+)$")


def kept_prims(f: Callable, *args: Any) -> Counter:
    """The primitives whose outputs some checkpoint keeps, from saved_residuals."""
    found = Counter()
    for _, what in fx.saved_residuals(f, *args):
        m = _KEPT.search(what)
        if m:
            found[m.group(1)] += 1
    return found


def line_of(fn: Callable, text: str) -> int:
    """The line number of the line of ``fn``'s source containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, line in enumerate(lines) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


@pytest.mark.parametrize("name", list(POLICIES))
def test_saved_residuals_per_policy(name: str) -> None:
    """saved_residuals lists, for each block, the values the policy keeps (with the source
    line inside the block that made them), besides the checkpoints' inputs and outputs."""
    depth = 3
    params = make_params(np.random.default_rng(3), depth, 4)
    x = np.ones((2, 4))
    ck = functools.partial(fx.checkpoint, policy=POLICIES[name])
    res = fx.saved_residuals(lambda params, x: chain(params, x, ck), params, x)
    kept = Counter()
    for aval, what in res:
        m = _KEPT.search(what)
        if not m:
            continue
        prim, label, _, line, fn, ck_name, policy = m.groups()
        kept[prim] += 1
        assert fn == "block" and ck_name == "block" and policy == repr(POLICIES[name])
        marker = {"dot_general": "@", "tanh": "tanh", "name": "checkpoint_name",
                  "sin": "fnp.sin", "mul": "fnp.sin"}[prim]
        assert int(line) in [line_of(block, t) for t in
                             ("x @ p", "fnp.tanh(a)", "fnp.sin(h)", "s @ p")
                             if marker in _source_line(block, t)]
        if prim == "name":
            assert label == "h"
        assert tuple(aval.shape) == (2, 4) and aval.dtype == np.float64
    expected = Counter({k: v * depth for k, v in KEPT_PER_BLOCK[name].items()})
    assert kept == expected
    ck_outputs = [what for _, what in res if what.startswith("output of checkpoint(block)")]
    assert len(ck_outputs) == depth  # each block's output (the next one's input)
    args = sorted(what for _, what in res if what.startswith("from the argument"))
    assert args == sorted(["from the argument x"] + [
        f"from the argument params[{i}][{k!r}]" for i in range(depth) for k in ("v", "w")])


def _source_line(fn: Callable, text: str) -> str:
    lines, _ = inspect.getsourcelines(fn)
    return next(line for line in lines if text in line)


def test_everything_saveable_keeps_what_grad_keeps() -> None:
    """With everything_saveable the checkpoint keeps the same intermediate bytes as grad
    without checkpoint (nothing more, nothing recomputed); nothing_saveable keeps none."""
    params = make_params(np.random.default_rng(4), 2, 3)
    x = np.ones((5, 3))

    def inner_bytes(wrap: Any, kept_only: bool) -> int:
        total = 0
        for aval, what in fx.saved_residuals(lambda p: chain(p, x, wrap), params):
            inside = "kept by checkpoint" in what if kept_only else (
                "(block)" in what and not what.startswith("output of add"))
            if inside:
                total += aval.size * aval.dtype.itemsize
        return total

    plain = inner_bytes(None, False)
    assert plain == 2 * 4 * 5 * 3 * 8  # tanh, sin, mul, tanh outputs of (5, 3) per block
    every = functools.partial(fx.checkpoint, policy=cp.everything_saveable)
    assert inner_bytes(every, True) == plain
    assert inner_bytes(fx.checkpoint, True) == 0


@pytest.mark.parametrize("name", ["nothing_saveable", "dots_saveable",
                                  "save_only_these_names(h)"])
def test_print_saved_residuals(name: str, capsys: Any) -> None:
    """print_saved_residuals prints one line per kept value (type and origin) and a total."""
    params = make_params(np.random.default_rng(5), 2, 8)
    x = np.ones((6, 8))
    f = lambda params, x: chain(params, x, functools.partial(fx.checkpoint,
                                                             policy=POLICIES[name]))
    assert fx.print_saved_residuals(f, params, x) is None
    lines = capsys.readouterr().out.strip().splitlines()
    res = fx.saved_residuals(f, params, x)
    assert lines[:-1] == [f"{aval} {what}" for aval, what in res]
    total = sum(a.size * a.dtype.itemsize for a, _ in res)
    assert lines[-1].startswith(f"{len(res)} residuals, ")
    assert total > 1024 and f"{total / 1024:.1f} KiB" in lines[-1]
    kept = [line for line in lines if "kept by checkpoint(block)" in line]
    assert len(kept) == 2 * sum(KEPT_PER_BLOCK[name].values())
    for line in kept:
        assert line.startswith("f64[6,8] output of ")
        assert f"{__file__}:" in line and f"with policy {POLICIES[name]!r}" in line
    assert any(line.startswith("f64[8,8] from the argument params[0]['w']") for line in lines)


# -- memory actually saved (tracemalloc counts NumPy's allocations) ------------------------------

def _kept_and_peak(f: Callable, *args: Any) -> tuple[int, int]:
    """Bytes held after the forward pass of vjp, and the peak over forward and backward."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out, f_vjp = fx.vjp(f, *args)
        kept = tracemalloc.get_traced_memory()[0] - before
        f_vjp(np.ones_like(out))
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return kept, peak


def test_checkpoint_keeps_less_memory() -> None:
    """The forward pass under vjp keeps about one activation per checkpointed block (its
    input) instead of all the block's intermediates; the backward peak drops too."""
    depth, batch, width = 8, 64, 128
    act = batch * width * 8
    # functx arrays (read-only): vjp keeps snapshots (copies) of writeable NumPy arrays it
    # needs later (tests/test_aliasing.py), which would count as kept here
    params = tree.map(fnp.asarray, make_params(np.random.default_rng(6), depth, width))
    x = fnp.asarray(np.random.default_rng(7).standard_normal((batch, width)))
    loss = lambda wrap: (lambda x: chain(params, x, wrap))
    kept_plain, peak_plain = _kept_and_peak(loss(None), x)
    kept_ck, peak_ck = _kept_and_peak(loss(fx.checkpoint), x)
    kept_all, _ = _kept_and_peak(loss(functools.partial(
        fx.checkpoint, policy=cp.everything_saveable)), x)
    # plain vjp keeps h, sin(h) and the last tanh's output per block: the weights are
    # constants, so neither x (read by x @ w only for w's cotangent) nor s (read by s @ v
    # only for v's) is kept (functx.transforms.residuals)
    assert 3 * depth * act <= kept_plain <= 4 * depth * act
    assert kept_ck <= (depth + 1) * act + 64 * 1024  # block inputs (+ the loss input)
    assert kept_ck <= kept_plain / 2.5
    assert peak_ck <= peak_plain / 1.5
    # everything_saveable keeps every intermediate of each block: at least as much as no
    # checkpoint (which keeps only what the needed cotangents read)
    assert kept_plain - act <= kept_all <= 6 * depth * act


def test_eager_checkpoint_frees_intermediates() -> None:
    """Evaluating a checkpoint eagerly holds only the live values of its trace."""
    width = 512
    x = np.random.default_rng(8).standard_normal((width, width))  # 2 MiB

    def f(x: Any) -> Any:
        for _ in range(10):
            x = fnp.sin(x)
        return x

    g = fx.checkpoint(f)
    g(x)
    tracemalloc.start()
    try:
        g(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 3 * x.nbytes  # input (not traced) + two live values of the chain


# -- is_recomputing and what is recomputed ----------------------------------------------------

class Probe:
    """An identity primitive (in a private registry) that logs is_recomputing() per call."""

    def __init__(self, name: str, save_input: bool) -> None:
        self.log: list[bool] = []
        self.p = Primitive(name, registry=Registry())
        self.p.def_abstract_eval(lambda x: x)
        self.p.def_impl(lambda xp, x: (self.log.append(fx.is_recomputing()), x)[1])
        self.p.def_vjp(lambda ct, ins, out: (ct,), save_inputs=(0,) if save_input else ())

    def __call__(self, x: Any) -> Any:
        return self.p.bind(x)


def test_is_recomputing() -> None:
    """True only while the backward pass recomputes; an equation the backward pass needs
    no value of (the last probe) is not recomputed; a saved value is not recomputed."""
    assert fx.is_recomputing() is False
    mid, last = Probe("probe_mid", True), Probe("probe_last", False)
    seen_in_python: list[bool] = []

    def f(w: Any, x: Any) -> Any:
        seen_in_python.append(fx.is_recomputing())
        h = mid(fnp.tanh(x @ w))
        return last(fnp.sin(h))

    rng = np.random.default_rng(9)
    w, x = rng.standard_normal((3, 3)), rng.standard_normal((2, 3))
    loss = lambda w, f: fnp.sum(f(w, x))
    want = fx.grad(loss)(w, f)
    assert mid.log == [False] and last.log == [False]
    mid.log.clear(), last.log.clear()

    got = fx.grad(loss)(w, fx.checkpoint(f))
    assert_trees_identical(got, want)
    assert mid.log == [False, True]  # forward, then recomputed (sin reads its output)
    assert last.log == [False]       # nothing reads its output: not recomputed
    assert seen_in_python[-1] is False  # Python runs once, at trace time
    assert fx.is_recomputing() is False
    mid.log.clear(), last.log.clear()

    keep_mid = lambda prim, *avals, **params: prim.name == "probe_mid"
    got = fx.grad(loss)(w, fx.checkpoint(f, policy=keep_mid))
    assert_trees_identical(got, want)
    assert mid.log == [False] and last.log == [False]  # kept, so not recomputed


def test_only_needed_equations_are_recomputed() -> None:
    """Cotangents needed only for some inputs: the recomputation skips what no needed
    cotangent depends on."""
    probe = Probe("probe_skip", True)

    def f(w: Any, c: Any) -> Any:
        return fnp.sum(fnp.sin(w) + fnp.cos(probe(c * c)))

    w, c = np.ones(3), np.full(3, 2.0)
    fx.grad(fx.checkpoint(f), argnums=0)(w, c)
    assert probe.log == [False]  # c's branch needs no cotangent
    probe.log.clear()
    fx.grad(fx.checkpoint(f), argnums=1)(w, c)
    assert probe.log == [False, True]


# -- static arguments, checkpoint_sequential, errors -------------------------------------------

def test_static_argnums() -> None:
    """Static arguments steer Python control flow and are passed as they are."""
    def f(x: Any, n: int, act: str) -> Any:
        for _ in range(n):
            x = fnp.tanh(x) if act == "tanh" else fnp.sin(x)
        return fnp.sum(x)

    x = np.linspace(-1, 1, 5)
    g = fx.checkpoint(f, static_argnums=(1, 2))
    for n, act in [(0, "tanh"), (3, "tanh"), (2, "sin")]:
        assert_trees_identical(fx.grad(g)(x, n, act), fx.grad(f)(x, n, act))
    g_neg = fx.checkpoint(f, static_argnums=(-2, -1))
    assert_trees_identical(fx.grad(g_neg)(x, 2, "sin"), fx.grad(f)(x, 2, "sin"))
    with pytest.raises(fx.FunctxError, match="static_argnums"):
        fx.checkpoint(f, static_argnums=5)(x, 1, "sin")

    def branchy(x: Any) -> Any:
        return fnp.sin(x) if fnp.sum(x) > 0 else x
    with pytest.raises(fx.ConcretizationError, match=r"checkpoint\(branchy\)"):
        fx.checkpoint(branchy)(x)


def test_pytrees_and_keyword_arguments() -> None:
    """Arguments and results are pytrees; keyword arguments are traced too."""
    def f(p: dict, x: Any, *, scale: Any) -> Any:
        return {"y": fnp.tanh(x @ p["w"]) * scale, "aux": (x, None)}

    rng = np.random.default_rng(10)
    p, x = {"w": rng.standard_normal((3, 2))}, rng.standard_normal((4, 3))
    g = fx.checkpoint(f)
    out = g(p, x, scale=2.0)
    assert tree.structure(out) == tree.structure(f(p, x, scale=2.0))
    assert_trees_identical(out, f(p, x, scale=2.0))
    loss = lambda p, fn: fnp.sum(fn(p, x, scale=np.array(2.0))["y"] ** 2)
    assert_trees_identical(fx.grad(loss)(p, g), fx.grad(loss)(p, f))


@pytest.mark.parametrize("n,segments", [(1, 1), (4, 1), (4, 2), (7, 3), (9, 3), (5, 5)])
def test_checkpoint_sequential(n: int, segments: int) -> None:
    """Gradients equal the plain chain's; segments-1 checkpoints, sizes as documented."""
    rng = np.random.default_rng(n)
    ws = [rng.standard_normal((3, 3)) / 2 for _ in range(n)]
    x = rng.standard_normal((2, 3))
    layer = lambda w, h: h + fnp.tanh(h @ w)

    def loss(ws: list, seq: bool) -> Any:
        fns = [functools.partial(layer, w) for w in ws]
        if seq:
            h = fx.checkpoint_sequential(fns, segments)(x)
        else:
            h = x
            for fn in fns:
                h = fn(h)
        return fnp.sum(h * h)

    assert_trees_identical(fx.grad(loss)(ws, True), fx.grad(loss)(ws, False))
    trace = fx.make_trace(lambda ws: loss(ws, True))(ws)
    cks = [e for e in trace.eqns if e.prim.name == "checkpoint"]
    assert len(cks) == segments - 1
    size, extra = divmod(n, segments)
    for s, e in enumerate(cks):
        dots = [q for q in e.params["trace"].eqns if q.prim.name == "dot_general"]
        assert len(dots) == size + (s < extra)


def test_errors() -> None:
    x = np.ones(3)
    with pytest.raises(fx.FunctxError, match="checkpoint needs a callable"):
        fx.checkpoint(3)
    with pytest.raises(TypeError, match="policy must be a function"):
        fx.checkpoint(fnp.sin, policy="dots")
    with pytest.raises(fx.FunctxError, match=r"checkpoint\(<lambda>\).*output.*str"):
        fx.checkpoint(lambda x: "not an array")(x)
    with pytest.raises(fx.FunctxError, match=r"checkpoint\(<lambda>\).*argument.*str"):
        fx.checkpoint(lambda x, s: x)(x, "s")
    with pytest.raises(TypeError, match="name must be a string"):
        fx.checkpoint_name(x, 3)
    with pytest.raises(TypeError, match="save_only_these_names takes the names as strings"):
        cp.save_only_these_names(1)
    with pytest.raises(TypeError, match="save_from_both_policies takes two policies"):
        cp.save_from_both_policies(cp.dots_saveable, "x")
    with pytest.raises(fx.FunctxError, match="at least one function"):
        fx.checkpoint_sequential([], 1)
    with pytest.raises(fx.FunctxError, match=r"segments=3 must be an integer between 1 and"):
        fx.checkpoint_sequential([fnp.sin, fnp.cos], 3)
    with pytest.raises(fx.FunctxError, match=r"segments=0"):
        fx.checkpoint_sequential([fnp.sin], 0)
    with pytest.raises(fx.FunctxError, match=r"functions\[1\] is a int"):
        fx.checkpoint_sequential([fnp.sin, 1], 1)
    trace = fx.make_trace(fx.checkpoint(fnp.sin))(x)
    with pytest.raises(fx.ShapeError, match=r"checkpoint\(sin\): input 0 has shape \(4,\)"):
        fx.bind(trace.eqns[0].prim, np.ones(4), **trace.eqns[0].params)


def test_policy_reprs_and_trace_printing() -> None:
    """Policies print by name, in traces too."""
    assert repr(cp.dots_saveable) == "dots_saveable"
    assert repr(NAMES_H) == "save_only_these_names('h')"
    text = str(fx.make_trace(fx.checkpoint(fnp.sin, policy=cp.dots_saveable))(np.ones(2)))
    assert "checkpoint[trace=" in text and "policy=dots_saveable" in text and "sin" in text


def test_higher_order_primitives_keep_no_shape_cache_entries() -> None:
    """checkpoint and custom_vjp/custom_jvp calls have fresh params (a sub-trace, a
    closure) at every call: memoising their shape rule would only keep those alive."""
    import functx.tracing as tracing

    @fx.custom_vjp
    def square(x):
        return x * x

    square.defvjp(lambda x: (x * x, x), lambda x, ct: (2.0 * x * ct,))
    x = np.linspace(0.1, 1.0, 5)
    for _ in range(3):
        f = lambda x: fnp.sum(fx.checkpoint(fnp.sin)(square(x)))  # noqa: E731
        np.testing.assert_allclose(fx.grad(f)(x), np.cos(x * x) * 2 * x, rtol=1e-14)
        fx.make_trace(f)(x)
    higher = {"checkpoint", "custom_vjp_call", "custom_jvp_call"}
    assert not [k for k in tracing._AE_CACHE if k[0].name in higher]
