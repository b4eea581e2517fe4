"""A neural ODE fitted to a spiral, integrated with RK4 in ``functx.lax.fori_loop``.

The data are points of a damped spiral, the solution of ``dy/dt = A y``, observed at 16
times. The model is ``dy/dt = f_theta(y)`` with ``f_theta`` a small tanh network; it is
integrated with the classical Runge-Kutta method: a ``scan`` over the observation times
whose body is a ``fori_loop`` of RK4 steps (static bounds, so it is a ``scan`` too and
reverse mode differentiates it). The training step, ``jit(value_and_grad(loss))`` with
Adam, is traced once; its gradient is a reverse scan through both loops (backpropagation
through the solver; the memory it keeps is one step's residuals per RK4 step).

``--solver adjoint`` integrates with ``functx.experimental.ode.odeint`` instead (adaptive
Dormand-Prince, as JAX's ``odeint``): its gradient comes from the adjoint method, which
solves a second ODE backwards in time instead of keeping every step's residuals.

Run it with ``python examples/neural_ode.py``; the last line reads ``initial loss ...
final loss ...``. ``--steps N`` changes the number of training steps.
"""
from __future__ import annotations

import argparse
from typing import Sequence

import numpy as np

import functx as fx
import functx.numpy as fnp
from functx import lax, optim
from functx.experimental.ode import odeint

A = np.array([[-0.1, 2.0], [-2.0, -0.1]])
TIMES = np.linspace(0.0, 1.5, 16)
SUBSTEPS = 4  # RK4 steps between two observations


def spiral() -> np.ndarray:
    """The observed trajectory (16, 2): the exact solution ``expm(A t) y0``."""
    y0 = np.array([2.0, 0.0])
    w, v = np.linalg.eig(A)
    return np.stack([np.real(v @ (np.exp(w * t) * np.linalg.solve(v, y0))) for t in TIMES])


def init_params(hidden: int = 32, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"w1": rng.standard_normal((2, hidden)) * 0.5, "b1": np.zeros(hidden),
            "w2": rng.standard_normal((hidden, 2)) * 0.1, "b2": np.zeros(2)}


def dynamics(params: dict, y: fx.Tracer) -> fx.Tracer:
    """``f_theta(y)``: the learned vector field."""
    return fnp.tanh(y @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def rk4_step(f, y, h):
    k1 = f(y)
    k2 = f(y + h / 2 * k1)
    k3 = f(y + h / 2 * k2)
    k4 = f(y + h * k3)
    return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def solve(params: dict, y0: np.ndarray) -> fx.Tracer:
    """The model's trajectory at TIMES: a scan over the intervals, RK4 inside each."""
    f = lambda y: dynamics(params, y)  # noqa: E731

    def interval(y, dt):
        h = dt / SUBSTEPS
        y = lax.fori_loop(0, SUBSTEPS, lambda i, y: rk4_step(f, y, h), y)
        return y, y

    _, ys = lax.scan(interval, y0, np.diff(TIMES))
    return fnp.concatenate([y0[None], ys])


def solve_adjoint(params: dict, y0: np.ndarray) -> fx.Tracer:
    """The same trajectory from the adaptive solver (its gradient: the adjoint method)."""
    return odeint(lambda y, t, p: dynamics(p, y), y0, TIMES, params, rtol=1e-6, atol=1e-6)


SOLVERS = {"rk4": solve, "adjoint": solve_adjoint}


def loss_fn(params: dict, target: np.ndarray, solver: str = "rk4") -> fx.Tracer:
    return fnp.mean((SOLVERS[solver](params, target[0]) - target) ** 2)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--solver", choices=sorted(SOLVERS), default="rk4")
    args = parser.parse_args(argv)
    target = spiral()
    params = init_params()
    opt = optim.adam(1e-2)
    state = opt.init(params)

    @fx.jit
    def train_step(params, state):
        loss, grads = fx.value_and_grad(loss_fn)(params, target, args.solver)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state, loss

    if args.solver == "rk4":
        trace = fx.make_trace(loss_fn)(params, target)
        print(f"The traced loss has {len(trace.eqns)} top-level equations "
              f"({len(TIMES) - 1} intervals x {SUBSTEPS} RK4 steps run inside one scan).")
    losses = []
    for step in range(args.steps):
        params, state, loss = train_step(params, state)
        losses.append(float(loss))
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {losses[-1]:.5f}")
    end = np.asarray(SOLVERS[args.solver](params, target[0]))[-1]
    print(f"predicted end point {np.round(end, 3)}, observed {np.round(target[-1], 3)}")
    print(f"initial loss {losses[0]:.5f} final loss {losses[-1]:.5f}")


if __name__ == "__main__":
    main()
