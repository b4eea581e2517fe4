"""Gaussian-process regression with functx: fit the kernel's hyperparameters by gradient
descent on the negative log marginal likelihood, then predict.

The marginal likelihood of targets ``y`` at inputs ``x`` under a zero-mean GP with an RBF
kernel ``k(x, x') = sf^2 exp(-(x - x')^2 / (2 ell^2))`` and noise ``sn^2`` is

    -log p(y) = 1/2 y^T K^-1 y + 1/2 log det K + n/2 log(2 pi),   K = k(x, x) + sn^2 I,

computed with a Cholesky factor (``cho_factor`` + ``cho_solve``) and ``slogdet``; ``grad``
differentiates through both. The posterior mean and variance at test inputs come from the
same factor. A plot of the posterior is saved to ``gaussian_process.png`` when matplotlib is
installed (pass ``--plot PATH`` to choose the file).

Run: ``python examples/gaussian_process.py``
"""
from __future__ import annotations

import argparse

import numpy as np

import functx as fx
import functx.numpy as fnp
import functx.scipy.linalg as fsl


def kernel(params, a, b):
    log_ell, log_sf = params[0], params[1]
    d = (a[:, None] - b[None, :]) / fnp.exp(log_ell)
    return fnp.exp(2 * log_sf) * fnp.exp(-0.5 * d * d)


def neg_log_marginal_likelihood(params, x, y):
    n = x.shape[0]
    K = kernel(params, x, x) + (fnp.exp(2 * params[2]) + 1e-6) * fnp.eye(n)
    factor = fsl.cho_factor(K, lower=True)
    alpha = fsl.cho_solve(factor, y)
    logdet = fnp.linalg.slogdet(K).logabsdet
    return 0.5 * fnp.sum(y * alpha) + 0.5 * logdet + 0.5 * n * np.log(2 * np.pi)


def posterior(params, x, y, x_test):
    n = x.shape[0]
    K = kernel(params, x, x) + (fnp.exp(2 * params[2]) + 1e-6) * fnp.eye(n)
    L = fnp.linalg.cholesky(K)
    k_star = kernel(params, x, x_test)
    mean = k_star.T @ fsl.cho_solve((L, True), y)
    v = fsl.solve_triangular(L, k_star, lower=True)
    var = fnp.exp(2 * params[1]) - fnp.sum(v * v, axis=0)
    return mean, var


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot", default="gaussian_process.png")
    ap.add_argument("--steps", type=int, default=150)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-4, 4, 60))
    y = np.sin(1.5 * x) + 0.15 * rng.standard_normal(x.shape)
    params = np.array([np.log(3.0), np.log(0.5), np.log(0.5)])  # ell, sf, sn: poor guesses

    value_and_grad = fx.jit(fx.value_and_grad(neg_log_marginal_likelihood))
    initial = float(value_and_grad(params, x, y)[0])
    lr, m, v = 0.05, np.zeros(3), np.zeros(3)
    for t in range(1, args.steps + 1):  # Adam on the log-hyperparameters
        loss, g = value_and_grad(params, x, y)
        g = np.asarray(g)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        params = params - lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    final = float(value_and_grad(params, x, y)[0])
    ell, sf, sn = np.exp(params)
    print(f"initial nll {initial:.4f} final nll {final:.4f}")
    print(f"fitted lengthscale {ell:.3f} signal std {sf:.3f} noise std {sn:.3f}")

    x_test = np.linspace(-5, 5, 200)
    mean, var = posterior(params, x, y, x_test)
    inside = np.abs(x_test) < 3.5
    rmse = float(np.sqrt(np.mean((np.asarray(mean)[inside] - np.sin(1.5 * x_test[inside])) ** 2)))
    print(f"posterior rmse against the true function {rmse:.4f}")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    sd = np.sqrt(np.maximum(np.asarray(var), 0))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.fill_between(x_test, mean - 2 * sd, mean + 2 * sd, alpha=0.25, label="±2 sd")
    ax.plot(x_test, mean, label="posterior mean")
    ax.plot(x, y, "k.", ms=4, label="data")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=100)
    print(f"saved {args.plot}")


if __name__ == "__main__":
    main()
