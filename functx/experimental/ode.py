"""``odeint``: adaptive Dormand-Prince integration with the adjoint method for gradients.

JAX's ``jax.experimental.ode.odeint``, ported: the same algorithm (Dormand-Prince 5(4)
steps, step-size control from the mean error ratio, a 4th-order dense-output polynomial
for the requested times, Hairer-Nørsett-Wanner's initial step), the same signature and the
same derivative: reverse mode solves the adjoint system backwards in time (a second
``odeint`` of the augmented state ``(y, y_bar, t_bar, args_bar)``), so memory does not grow
with the number of steps, as in Chen et al., "Neural Ordinary Differential Equations"
(2018). The loop is ``functx.lax.while_loop`` inside ``functx.lax.scan``: one trace for any
number of steps, under ``jit`` and ``vmap`` too.

Example:
    >>> def f(y, t, k): return -k * y
    >>> ys = odeint(f, 1.0, np.linspace(0.0, 1.0, 5), 2.0)   # exp(-2 t)
    >>> fx.grad(lambda k: odeint(f, 1.0, np.array([0.0, 1.0]), k)[-1])(2.0)   # -exp(-2)
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import functx.numpy as fnp
from functx import lax, tree
from functx.errors import FunctxError
from functx.flatten_util import ravel_pytree
from functx.tracing import Tracer, make_trace
from functx.transforms.custom import custom_vjp
from functx.transforms.grad import vjp
from functx.transforms.vmap import vmap

__all__ = ["odeint"]

# The Dormand-Prince 5(4) tableau: nodes, stage weights, the 5th-order solution, the error
# estimate (5th minus 4th order) and the dense-output midpoint (Shampine, 1986).
_ALPHA = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_BETA = ((1 / 5,),
         (3 / 40, 9 / 40),
         (44 / 45, -56 / 15, 32 / 9),
         (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
         (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
         (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84))
_C_SOL = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_C_ERR = (35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60)
_C_MID = (6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2,
          -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
          -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _combine(weights: tuple, k: list) -> Any:
    """``sum_j weights[j] * k[j]`` (zero weights skipped)."""
    out = None
    for w, kj in zip(weights, k):
        if w != 0.0:
            out = w * kj if out is None else out + w * kj
    return out


def _rk_step(func: Callable, y0: Any, f0: Any, t0: Any, dt: Any) -> tuple:
    """One Dormand-Prince step: ``(y1, f1, error estimate, stages)``."""
    k = [f0]
    for alpha, beta in zip(_ALPHA, _BETA):
        k.append(func(y0 + dt * _combine(beta, k), t0 + dt * alpha))
    return y0 + dt * _combine(_C_SOL, k), k[-1], dt * _combine(_C_ERR, k), k


def _dense_output(y0: Any, y1: Any, k: list, dt: Any) -> Any:
    """The 4th-order polynomial through the step (coefficients, highest power first)."""
    y_mid = y0 + dt * _combine(_C_MID, k)
    dy0, dy1 = dt * k[0], dt * k[-1]
    return fnp.stack([-2 * dy0 + 2 * dy1 - 8 * y0 - 8 * y1 + 16 * y_mid,
                      5 * dy0 - 3 * dy1 + 18 * y0 + 14 * y1 - 32 * y_mid,
                      -4 * dy0 + dy1 - 11 * y0 - 5 * y1 + 16 * y_mid,
                      dy0, y0])


def _polyval(coeffs: Any, s: Any) -> Any:
    out = coeffs[0]
    for j in range(1, 5):
        out = out * s + coeffs[j]
    return out


def _initial_step(func: Callable, t0: Any, y0: Any, rtol: float, atol: float, f0: Any) -> Any:
    """Hairer, Nørsett and Wanner, Solving ODEs I, section II.4 (order 4)."""
    scale = atol + fnp.abs(y0) * rtol
    d0 = fnp.linalg.norm(y0 / scale)
    d1 = fnp.linalg.norm(f0 / scale)
    h0 = fnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / fnp.maximum(d1, 1e-300))
    f1 = func(y0 + h0 * f0, t0 + h0)
    d2 = fnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = fnp.where((d1 <= 1e-15) & (d2 <= 1e-15), fnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / fnp.maximum(fnp.maximum(d1, d2), 1e-300)) ** (1.0 / 5.0))
    return fnp.minimum(100.0 * h0, h1)


def _error_ratio(err: Any, rtol: float, atol: float, y0: Any, y1: Any) -> Any:
    tol = atol + rtol * fnp.maximum(fnp.abs(y0), fnp.abs(y1))
    return fnp.sqrt(fnp.mean((err / tol) ** 2))


def _next_step(dt: Any, ratio: Any) -> Any:
    """The step size after a step with error ratio ``ratio`` (safety 0.9, growth at most 10,
    shrink at most 5 after a rejected step)."""
    floor = fnp.where(ratio < 1, 1.0, 0.2)
    factor = fnp.minimum(10.0, fnp.maximum(fnp.maximum(ratio, 1e-300) ** -0.2 * 0.9, floor))
    return fnp.where(ratio == 0, dt * 10.0, dt * factor)


def _solve(func: Callable, rtol: float, atol: float, mxstep: float, hmax: float, y0: Any,
           ts: Any, *args: Any) -> Any:
    f = lambda y, t: func(y, t, *args)  # noqa: E731

    def to_time(carry: list, target: Any) -> tuple:
        def cond(state: list) -> Any:
            i, _, _, t, dt, _, _ = state
            return (t < target) & (i < mxstep) & (dt > 0)

        def body(state: list) -> list:
            i, y, fy, t, dt, last_t, coeffs = state
            y1, f1, err, k = _rk_step(f, y, fy, t, dt)
            ratio = _error_ratio(err, rtol, atol, y, y1)
            new = [y1, f1, t + dt, t, _dense_output(y, y1, k, dt)]
            old = [y, fy, t, last_t, coeffs]
            ok = ratio <= 1
            kept = [fnp.where(ok, a, b) for a, b in zip(new, old)]
            dt = fnp.clip(_next_step(dt, ratio), 0.0, hmax)
            return [i + 1, kept[0], kept[1], kept[2], dt, kept[3], kept[4]]

        _, *carry = lax.while_loop(cond, body, [fnp.asarray(0)] + carry)
        _, _, t, _, last_t, coeffs = carry
        return carry, _polyval(coeffs, (target - last_t) / (t - last_t))

    f0 = f(y0, ts[0])
    dt = fnp.clip(_initial_step(f, ts[0], y0, rtol, atol, f0), 0.0, hmax)
    init = [y0, f0, ts[0], dt, ts[0], fnp.stack([y0] * 5)]
    _, ys = lax.scan(to_time, init, ts[1:])
    return fnp.concatenate([y0[None], ys])


def _solve_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):  # noqa: ANN001, ANN202
    ys = _solve(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _solve_bwd(func, rtol, atol, mxstep, hmax, res, g):  # noqa: ANN001, ANN202
    """The adjoint method: integrate ``(y, y_bar, t_bar, args_bar)`` backwards between the
    requested times, adding each time's output cotangent on the way."""
    ys, ts, args = res

    def augmented(state: tuple, minus_t: Any, *a: Any) -> tuple:
        y, y_bar = state[0], state[1]
        y_dot, pull = vjp(func, y, -minus_t, *a)
        return (-y_dot, *pull(y_bar))

    def at(a: Any, i: Any) -> Any:  # (a may be a NumPy array: index it with functx)
        return fnp.take(a, i, axis=0)

    def back(carry: tuple, i: Any) -> tuple:
        y_bar, t0_bar, args_bar = carry
        y_i, t_i = at(ys, i), at(ts, i)
        t_bar = fnp.dot(func(y_i, t_i, *args), at(g, i))
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(
            augmented, (y_i, y_bar, t0_bar, args_bar), fnp.stack([-t_i, -at(ts, i - 1)]),
            *args, rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = tree.map(lambda a: a[1], (y_bar, t0_bar, args_bar))
        return (y_bar + at(g, i - 1), t0_bar, args_bar), t_bar

    init = (g[-1], fnp.zeros((), ts.dtype), tree.map(fnp.zeros_like, args))
    (y_bar, t0_bar, args_bar), rev_ts_bar = lax.scan(back, init,
                                                     fnp.arange(len(ts) - 1, 0, -1))
    ts_bar = fnp.concatenate([t0_bar[None], rev_ts_bar[::-1]])
    return (y_bar, ts_bar, *args_bar)


_solve_vjp = custom_vjp(_solve, nondiff_argnums=(0, 1, 2, 3, 4))
_solve_vjp.defvjp(_solve_fwd, _solve_bwd)


def odeint(func: Callable, y0: Any, t: Any, *args: Any, rtol: float = 1.4e-8,
           atol: float = 1.4e-8, mxstep: float = np.inf, hmax: float = np.inf) -> Any:
    """Solve ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0`` at the times ``t``
    (adaptive Dormand-Prince; as ``jax.experimental.ode.odeint``).

    Args:
        func: the time derivative, ``func(y, t, *args)``, returning a pytree like ``y``.
        y0: the initial state (an array or a pytree of arrays).
        t: a 1-d float array of strictly increasing times.
        *args: more arrays (pytrees) for ``func``; pass what you differentiate here, not in
            a closure (see Raises).
        rtol, atol: the relative and absolute local error tolerances.
        mxstep: the most steps between two requested times.
        hmax: the largest step.

    Returns:
        ``y`` at every time of ``t``: ``y0``'s pytree with a leading axis of ``len(t)``.
        ``grad`` goes through the adjoint method (with respect to ``y0``, ``t`` and
        ``args``); forward mode is not defined (as in JAX).

    Raises:
        FunctxError: ``t`` is not a 1-d float array, or ``func`` closes over a value being
            differentiated or traced (its derivative would be silently dropped: pass it in
            ``args``).

    Example:
        >>> ys = odeint(lambda y, t, k: -k * y, 1.0, np.linspace(0.0, 1.0, 5), 2.0)
    """
    t = fnp.asarray(t)
    if t.ndim != 1 or not fnp.issubdtype(t.dtype, fnp.floating):
        raise FunctxError(f"odeint needs t as a 1-d array of float times (strictly "
                          f"increasing) but got {t.dtype}{list(t.shape)}.")
    y0 = tree.map(lambda a: fnp.asarray(a, dtype=fnp.result_type(a, t.dtype)), y0)
    flat0, unravel = ravel_pytree(y0)

    def flat_func(y: Any, s: Any, *a: Any) -> Any:
        return ravel_pytree(func(unravel(y), s, *a))[0]

    closed = make_trace(flat_func)(flat0, t[0], *args).const_values
    if any(type(c) is Tracer for c in closed):
        raise FunctxError("odeint: func closes over a value that an enclosing transform "
                          "traces (grad, jit, vmap...); its derivative would be lost. Pass it "
                          "to odeint as one of *args (func(y, t, *args)) instead.")
    out = _solve_vjp(flat_func, rtol, atol, mxstep, hmax, flat0, t, *args)
    return vmap(unravel)(out)
