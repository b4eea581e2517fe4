"""functx.nn.ctc_loss against torch.nn.functional.ctc_loss (CPU, float64) as the oracle.

Hypothesis draws T, N, C, the target width S, blank, the reduction, zero_infinity, the
target layout (padded, concatenated, unbatched 1-d or 2-d), the lengths' form (list, int64
or int32 array) and lengths that may admit no alignment (torch's loss is then inf, or 0 with
zero_infinity). Checked: the loss; the gradient with respect to logits fed through
log_softmax (equal to torch's, NaN rows included); and the gradient with respect to
log_probs themselves, which is torch's minus ``exp(log_probs)`` (torch returns the gradient
for logits of a log_softmax; see functx/nn/ctc.py). Then vmap/jvp/second-order smoke checks
and the error messages.
"""
from __future__ import annotations

import re
from types import SimpleNamespace as P
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.nn import ArgumentError
from functx.test_util import check_grads
from tests.specs.ctc import needed_steps

torch = pytest.importorskip("torch", reason="PyTorch (CPU) is the oracle of functx.nn.ctc_loss")
F = torch.nn.functional
torch.set_num_threads(1)

RTOL, ATOL = 1e-10, 1e-12


@st.composite
def cases(draw) -> P:
    """One ctc_loss call's arguments (NumPy), and the same for torch."""
    t_len, c = draw(st.integers(1, 8)), draw(st.integers(2, 5))
    layout = draw(st.sampled_from(["padded", "concatenated", "unbatched1d", "unbatched2d"]))
    n = 1 if layout.startswith("unbatched") else draw(st.integers(1, 4))
    width = draw(st.integers(0, 4))
    blank = draw(st.integers(0, c - 1))
    labels = [k for k in range(c) if k != blank]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    padded = rng.integers(0, c, size=(n, width))  # padding may be blank: it is ignored
    target_lengths = np.array([draw(st.integers(0, width)) for _ in range(n)], np.int64)
    for b in range(n):
        padded[b, :target_lengths[b]] = rng.choice(labels, size=target_lengths[b])
    # Mostly enough time steps; sometimes too few (inf loss), sometimes none.
    input_lengths = np.array(
        [draw(st.integers(min(needed_steps(padded[b, :target_lengths[b]]), t_len), t_len))
         if draw(st.integers(0, 3)) else draw(st.integers(0, t_len)) for b in range(n)],
        np.int64)
    logits = rng.normal(scale=2.0, size=(t_len, n, c))
    concat = np.concatenate([padded[b, :target_lengths[b]] for b in range(n)]).astype(np.int64)
    form = draw(st.sampled_from(["list", "int64", "int32"]))

    def lengths(v: np.ndarray) -> Any:
        if layout.startswith("unbatched") and draw(st.booleans()):
            return int(v[0]) if form == "list" else v[0].astype(form)
        return [int(x) for x in v] if form == "list" else v.astype(form)

    if layout == "padded":
        targets = padded
    elif layout == "concatenated" or layout == "unbatched1d":
        targets = concat
    else:
        targets = padded
    if layout.startswith("unbatched"):
        logits = logits[:, 0]
    return P(logits=logits, targets=targets, il=lengths(input_lengths),
             tl=lengths(target_lengths), blank=blank,
             reduction=draw(st.sampled_from(["none", "sum", "mean"])),
             zero_infinity=draw(st.booleans()), layout=layout, n=n,
             rows=[padded[b, :target_lengths[b]] for b in range(n)],
             input_lengths=input_lengths, target_lengths=target_lengths)


def fx_loss(case: P, log_probs: Any) -> Any:
    return fnn.ctc_loss(log_probs, case.targets, case.il, case.tl, blank=case.blank,
                        reduction=case.reduction, zero_infinity=case.zero_infinity)


def torch_loss(case: P, log_probs: Any) -> Any:
    def t(v: Any) -> Any:
        return torch.as_tensor(np.asarray(v, dtype=np.int64))
    return F.ctc_loss(log_probs, t(case.targets), t(case.il), t(case.tl), blank=case.blank,
                      reduction=case.reduction, zero_infinity=case.zero_infinity)


def log_softmax_np(z: np.ndarray) -> np.ndarray:
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True))


@settings(max_examples=60)
@given(case=cases(), seed=st.integers(0, 2**32 - 1))
def test_against_torch(case: P, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Through log_softmax: values and gradients with respect to the logits equal torch's.
    out, pull = fx.vjp(lambda z: fx_loss(case, fnn.log_softmax(z, -1)), case.logits)
    z_t = torch.tensor(case.logits, requires_grad=True)
    want = torch_loss(case, F.log_softmax(z_t, -1))
    assert np.shape(out) == tuple(want.shape) and np.asarray(out).dtype == np.float64
    np.testing.assert_allclose(out, want.detach().numpy(), rtol=RTOL, atol=ATOL)
    ct = rng.normal(size=np.shape(out))
    (g,) = pull(ct)
    (g_t,) = torch.autograd.grad(want, z_t, torch.tensor(ct))
    np.testing.assert_allclose(g, g_t.numpy(), rtol=1e-9, atol=1e-11, equal_nan=True)

    # With respect to log_probs: torch's gradient less exp(log_probs) * (that row's share of
    # the cotangent) where t < input_length and the row's loss is finite (or zeroed).
    lp = log_softmax_np(case.logits)
    (g_lp,) = fx.vjp(lambda x: fx_loss(case, x), lp)[1](ct)
    lp_t = torch.tensor(lp, requires_grad=True)
    (g_lp_t,) = torch.autograd.grad(torch_loss(case, lp_t), lp_t, torch.tensor(ct))
    if case.reduction == "none":
        share = np.broadcast_to(ct, (case.n,))
    elif case.reduction == "sum":
        share = np.full(case.n, float(ct))
    else:
        share = float(ct) / (case.n * np.maximum(case.target_lengths, 1))
    feasible = case.input_lengths >= [needed_steps(r) for r in case.rows]
    live = np.arange(lp.shape[0])[:, None] < case.input_lengths[None, :]  # [T, N]
    scale = np.where(live & feasible[None, :], share[None, :], 0.0)
    if case.layout.startswith("unbatched"):
        scale = scale[:, 0]
    np.testing.assert_allclose(g_lp, g_lp_t.numpy() - np.exp(lp) * scale[..., None],
                               rtol=1e-9, atol=1e-11, equal_nan=True)


def test_the_torch_gradient_difference_is_exactly_exp_log_probs() -> None:
    """A worked case: torch's ctc_loss gradient minus ours is exp(log_probs) for t < T_n."""
    rng = np.random.default_rng(0)
    lp = rng.normal(size=(6, 2, 4))  # not normalised: the difference shows plainly
    targets, il, tl = np.array([[1, 2, 2], [3, 1, 0]]), np.array([6, 4]), np.array([3, 2])
    g = fx.grad(lambda x: fnn.ctc_loss(x, targets, il, tl, reduction="sum"))(lp)
    x_t = torch.tensor(lp, requires_grad=True)
    F.ctc_loss(x_t, torch.tensor(targets), torch.tensor(il), torch.tensor(tl),
               reduction="sum").backward()
    live = (np.arange(6)[:, None] < il[None, :])[..., None]
    np.testing.assert_allclose(x_t.grad.numpy() - g, np.where(live, np.exp(lp), 0.0),
                               rtol=1e-10, atol=1e-12)
    # and ours is the derivative: finite differences agree.
    v = rng.normal(size=lp.shape)
    f = lambda x: float(fnn.ctc_loss(x, targets, il, tl, reduction="sum"))  # noqa: E731
    fd = (f(lp + 1e-6 * v) - f(lp - 1e-6 * v)) / 2e-6
    assert abs(np.sum(g * v) - fd) < 1e-6 * max(1.0, abs(fd))


def test_float32_matches_torch() -> None:
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(12, 3, 6)).astype(np.float32)
    targets, il, tl = rng.integers(1, 6, size=(3, 4)), [12, 10, 7], [4, 3, 2]
    loss = lambda z: fnn.ctc_loss(fnn.log_softmax(z, 2), targets, il, tl)  # noqa: E731
    out, g = fx.value_and_grad(loss)(logits)
    assert out.dtype == np.float32 and g.dtype == np.float32
    z_t = torch.tensor(logits, requires_grad=True)
    want = F.ctc_loss(F.log_softmax(z_t, 2), torch.tensor(targets), torch.tensor(il),
                      torch.tensor(tl))
    want.backward()
    np.testing.assert_allclose(out, want.item(), rtol=1e-5)
    np.testing.assert_allclose(g, z_t.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_infeasible_rows_are_inf_or_zero_like_torch() -> None:
    lp = log_softmax_np(np.random.default_rng(2).normal(size=(3, 3, 4)))
    targets = np.array([[1, 1, 0], [1, 2, 3], [2, 0, 0]])
    il, tl = np.array([3, 2, 0]), np.array([2, 3, 1])  # needs 3, 3, 1 steps
    for zero_infinity in (False, True):
        got = fnn.ctc_loss(lp, targets, il, tl, reduction="none", zero_infinity=zero_infinity)
        want = F.ctc_loss(torch.tensor(lp), torch.tensor(targets), torch.tensor(il),
                          torch.tensor(tl), reduction="none", zero_infinity=zero_infinity)
        np.testing.assert_array_equal(got, want.numpy())
        assert np.isfinite(got[0]) and got[1] == got[2] == (0.0 if zero_infinity else np.inf)


def test_padding_values_past_target_lengths_are_ignored() -> None:
    lp = log_softmax_np(np.random.default_rng(3).normal(size=(5, 2, 4)))
    a = fnn.ctc_loss(lp, np.array([[1, 2, 0], [3, 0, 0]]), [5, 5], [2, 1], reduction="none")
    b = fnn.ctc_loss(lp, np.array([[1, 2, -7], [3, 99, 2]]), [5, 5], [2, 1], reduction="none")
    c = fnn.ctc_loss(lp, np.array([1, 2, 3]), [5, 5], [2, 1], reduction="none")
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


# -- transforms ------------------------------------------------------------------------------

def _problem(seed: int = 4) -> P:
    rng = np.random.default_rng(seed)
    return P(z=rng.normal(size=(3, 6, 2, 4)),  # a batch of 3 problems [T=6, N=2, C=4]
             targets=np.array([[1, 2, 1], [3, 3, 0]]), il=np.array([6, 5]),
             tl=np.array([3, 2]))


def test_vmap_over_log_probs_and_lengths_matches_a_loop() -> None:
    p = _problem()

    def loss(z: Any, il: Any) -> Any:
        return fnn.ctc_loss(fnn.log_softmax(z, -1), p.targets, il, p.tl, reduction="none")

    ils = np.array([[6, 5], [4, 6], [5, 4]])
    got = fx.vmap(loss)(p.z, ils)
    want = np.stack([loss(p.z[k], ils[k]) for k in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # concatenated targets with traced lengths (the padded width is then their total)
    concat = np.array([1, 2, 1, 3, 3])
    got = fx.vmap(lambda z: fnn.ctc_loss(z, concat, p.il, fx.numpy.asarray(p.tl)))(p.z)
    want = [fnn.ctc_loss(p.z[k], p.targets, p.il, p.tl) for k in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # per-example gradients
    grads = fx.vmap(fx.grad(lambda z: fnp.sum(loss(z, p.il))))(p.z)
    for k in range(3):
        np.testing.assert_allclose(grads[k], fx.grad(lambda z: fnp.sum(loss(z, p.il)))(p.z[k]),
                                   rtol=1e-10, atol=1e-12)


def test_jvp_matches_vjp_and_second_order_checks() -> None:
    p = _problem()
    z = p.z[0]

    def loss(z: Any) -> Any:
        return fnn.ctc_loss(fnn.log_softmax(z, -1), p.targets, p.il, p.tl)

    v = np.random.default_rng(5).normal(size=z.shape)
    out, t = fx.jvp(loss, (z,), (v,))
    np.testing.assert_allclose(out, loss(z), rtol=1e-12)
    np.testing.assert_allclose(t, np.sum(fx.grad(loss)(z) * v), rtol=1e-10)
    check_grads(loss, (z,), order=2, eps=1e-5, atol=1e-5, rtol=1e-5)


# -- errors ------------------------------------------------------------------------------------

LP = np.log(np.full((4, 2, 3), 1 / 3))
TG = np.array([[1, 2], [2, 0]])

ERRORS: list[tuple[Callable, type, str]] = [
    (lambda: fnn.ctc_loss(LP, TG, [4, 4], [2, 1], reduction="avg"), ArgumentError,
     r"reduction .* 'avg'"),
    (lambda: fnn.ctc_loss(LP, TG, [4, 4], [2, 1], blank=3), ArgumentError,
     r"blank=3 is out of range for C=3"),
    (lambda: fnn.ctc_loss(LP, TG, [4, 4], [2, 1], blank=-1), ArgumentError, r"blank=-1"),
    (lambda: fnn.ctc_loss(LP, TG, [5, 4], [2, 1]), ArgumentError,
     r"input_lengths\[0\] = 5 is out of range: it must be in \[0, 4\]"),
    (lambda: fnn.ctc_loss(LP, TG, [4, -1], [2, 1]), ArgumentError, r"input_lengths\[1\] = -1"),
    (lambda: fnn.ctc_loss(LP, TG, [4, 4], [3, 1]), ArgumentError,
     r"target_lengths\[0\] = 3 is out of range.*S=2"),
    (lambda: fnn.ctc_loss(LP, np.array([1, 2, 2]), [4, 4], [2, 2]), ShapeError,
     r"sum\(target_lengths\) = 4 labels, but they hold 3"),
    (lambda: fnn.ctc_loss(LP, np.array([[0, 2], [2, 0]]), [4, 4], [2, 1]), ArgumentError,
     r"targets\[0, 0\] = 0 is the blank label"),
    (lambda: fnn.ctc_loss(LP, np.array([[1, 3], [2, 0]]), [4, 4], [2, 1]), ArgumentError,
     r"targets\[0, 1\] = 3 is out of range for C=3"),
    (lambda: fnn.ctc_loss(LP[0, 0], TG, [4, 4], [2, 1]), ShapeError,
     r"log_probs must have shape \[T, N, C\].*\(3,\)"),
    (lambda: fnn.ctc_loss(LP[None], TG, [4, 4], [2, 1]), ShapeError, r"\(1, 4, 2, 3\)"),
    (lambda: fnn.ctc_loss(LP, TG[None], [4, 4], [2, 1]), ShapeError,
     r"targets must be \[N=2, S\] padded or 1-d concatenated.*\(1, 2, 2\)"),
    (lambda: fnn.ctc_loss(LP, TG[:1], [4, 4], [2, 1]), ShapeError, r"targets must be"),
    (lambda: fnn.ctc_loss(LP, TG, [4, 4, 4], [2, 1]), ShapeError,
     r"input_lengths must have shape \(2,\).*\(3,\)"),
    (lambda: fnn.ctc_loss(LP, TG, [[4, 4]], [2, 1]), ShapeError, r"input_lengths .*\(1, 2\)"),
    (lambda: fnn.ctc_loss(LP, TG, [4, 4], np.array([2.0, 1.0])), DTypeError,
     r"target_lengths must hold integers.*float64"),
    (lambda: fnn.ctc_loss(LP, TG.astype(float), [4, 4], [2, 1]), DTypeError,
     r"targets must hold integers"),
    (lambda: fnn.ctc_loss(LP.astype(np.int64), TG, [4, 4], [2, 1]), DTypeError,
     r"log_probs must be floating point.*int64"),
    (lambda: fnn.ctc_loss(LP[:, :0], TG[:0], [], []), ShapeError, r"must not be empty"),
    (lambda: fnn.ctc_loss(LP, TG, [4, 4], [2, 1], zero_infinity="yes"), ArgumentError,
     r"zero_infinity must be a bool"),
    (lambda: fnn.ctc_loss(LP[:, 0], np.array([1, 2]), 4, 1), ShapeError,
     r"sum\(target_lengths\) = 1 labels, but they hold 2"),
]


@pytest.mark.parametrize("call, exc, pattern", ERRORS,
                         ids=[f"error{i}" for i in range(len(ERRORS))])
def test_error_messages(call: Callable, exc: type, pattern: str) -> None:
    with pytest.raises(exc) as info:
        call()
    assert re.search(pattern, str(info.value)), str(info.value)
    assert "functx.nn.ctc_loss" in str(info.value)
