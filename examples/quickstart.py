"""Quickstart: train a small neural network with functx on the two-moons data set.

The data set is generated here, deterministically, with NumPy (two interleaving half
circles, 256 points, labels -1 and +1). The model is a 2-32-1 multilayer perceptron with a
tanh hidden layer whose parameters live in a plain dict of NumPy arrays; it is trained with
full-batch gradient descent on the mean squared error, using ``functx.value_and_grad``.

Run it with ``python examples/quickstart.py``. It prints the traced loss function (what
``grad`` differentiates), the gradient's structure, and the loss and accuracy as training
goes; the last line reads ``initial loss ... final loss ...``. With ``tqdm`` installed the
training loop shows a progress bar (on stderr). ``--plot PATH`` saves the loss curve and
the learned decision boundary as a PNG (needs matplotlib; both are in the ``examples``
extra, ``pip install -e '.[examples]'``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

import functx as fx
import functx.numpy as fnp

STEPS = 500
LEARNING_RATE = 0.05
HIDDEN = 32


def two_moons(n: int, noise: float = 0.15, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of two interleaving half circles, standardised, and their ±1 labels.

    Returns:
        ``(x, y)`` with ``x`` of shape (n, 2) and ``y`` of shape (n, 1), both float64.
    """
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.0, np.pi, n)
    label = np.arange(n) % 2
    px = np.where(label == 0, np.cos(t), 1.0 - np.cos(t))
    py = np.where(label == 0, np.sin(t), 0.5 - np.sin(t))
    x = np.stack([px, py], axis=1) + noise * rng.standard_normal((n, 2))
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    return x, (2.0 * label - 1.0)[:, None]


def init_params(seed: int = 1) -> dict[str, np.ndarray]:
    """Random weights for the 2-HIDDEN-1 network (a dict of NumPy arrays)."""
    rng = np.random.default_rng(seed)
    return {
        "w1": rng.standard_normal((2, HIDDEN)),
        "b1": np.zeros(HIDDEN),
        "w2": rng.standard_normal((HIDDEN, 1)) / np.sqrt(HIDDEN),
        "b2": np.zeros(1),
    }


def predict(params: dict, x: np.ndarray) -> np.ndarray:
    """The network's output (a score; its sign is the predicted class)."""
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def loss(params: dict, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mean squared error between the scores and the ±1 labels."""
    return fnp.mean((predict(params, x) - y) ** 2)


def accuracy(params: dict, x: np.ndarray, y: np.ndarray) -> float:
    """Fraction of points whose predicted sign matches the label."""
    return float(np.mean(np.sign(predict(params, x)) == y))


def progress(steps: int):
    """A tqdm progress bar over ``range(steps)`` and its ``write`` function (which prints
    without breaking the bar), or without tqdm the plain range and ``print``."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return range(steps), print
    return tqdm(range(steps), desc="training", unit="step"), tqdm.write


def save_plot(history: list[float], params: dict, x: np.ndarray, y: np.ndarray,
              path: Path) -> None:
    """The loss curve and the decision boundary over the data, as a PNG (no window)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_data) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(history)
    ax_loss.set(xlabel="step", ylabel="mean squared error", yscale="log", title="training loss")
    gx, gy = np.meshgrid(np.linspace(x[:, 0].min() - 0.5, x[:, 0].max() + 0.5, 150),
                         np.linspace(x[:, 1].min() - 0.5, x[:, 1].max() + 0.5, 150))
    scores = np.asarray(predict(params, np.stack([gx.ravel(), gy.ravel()], axis=1)))
    ax_data.contourf(gx, gy, scores.reshape(gx.shape), levels=20, cmap="RdBu", alpha=0.6)
    ax_data.contour(gx, gy, scores.reshape(gx.shape), levels=[0.0], colors="k")
    for label, color in ((-1.0, "tab:red"), (1.0, "tab:blue")):
        points = x[y[:, 0] == label]
        ax_data.scatter(points[:, 0], points[:, 1], color=color, edgecolors="w", s=18,
                        label=f"label {label:+.0f}")
    ax_data.legend(loc="lower right")
    ax_data.set(title="decision boundary", xlabel="x0", ylabel="x1")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] = ()) -> None:
    """Print the trace of the loss, then train and report the loss going down.

    ``argv`` are the command-line options (``["--plot", "out.png"]``); the default (none)
    makes ``main()`` usable from a notebook, whose own ``sys.argv`` is the kernel's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plot", type=Path, default=None, metavar="PATH",
                        help="save the loss curve and decision boundary to PATH (PNG; "
                             "needs matplotlib)")
    args = parser.parse_args(list(argv))
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error("--plot needs matplotlib: pip install matplotlib "
                         "(or pip install -e '.[examples]')")
    x, y = two_moons(256)
    params = init_params()

    print("The loss function as functx traces it:")
    print(fx.make_trace(loss)(params, x, y))

    loss_and_grad = fx.value_and_grad(loss)
    value, grads = loss_and_grad(params, x, y)
    print("\nGradient: a dict shaped like the parameters:")
    for name in sorted(grads):
        print(f"  {name}: shape {grads[name].shape}, dtype {grads[name].dtype}")

    print("\nTraining with gradient descent:", flush=True)
    initial = float(value)
    history = []
    steps, write = progress(STEPS + 1)
    for step in steps:
        value, grads = loss_and_grad(params, x, y)
        history.append(float(value))
        if step % 100 == 0:
            write(f"  step {step:4d}  loss {float(value):.4f}  "
                  f"accuracy {accuracy(params, x, y):.3f}")
        if step < STEPS:
            params = fx.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    print(f"\ninitial loss {initial:.6f} final loss {float(value):.6f}")
    if args.plot is not None:
        save_plot(history, params, x, y, args.plot)
        print(f"plot saved to {args.plot}")


if __name__ == "__main__":
    main(sys.argv[1:])
