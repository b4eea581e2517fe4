"""Quickstart: train a small neural network with functx on the two-moons data set.

The data set is generated here, deterministically, with NumPy (two interleaving half
circles, 256 points, labels -1 and +1). The model is a 2-32-1 multilayer perceptron with a
tanh hidden layer whose parameters live in a plain dict of NumPy arrays; it is trained with
full-batch gradient descent on the mean squared error, using ``functx.value_and_grad``.

Run it with ``python examples/quickstart.py``. It prints the traced loss function (what
``grad`` differentiates), the gradient's structure, and the loss and accuracy as training
goes; the last line reads ``initial loss ... final loss ...``.
"""
from __future__ import annotations

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


def main() -> None:
    """Print the trace of the loss, then train and report the loss going down."""
    x, y = two_moons(256)
    params = init_params()

    print("The loss function as functx traces it:")
    print(fx.make_trace(loss)(params, x, y))

    loss_and_grad = fx.value_and_grad(loss)
    value, grads = loss_and_grad(params, x, y)
    print("\nGradient: a dict shaped like the parameters:")
    for name in sorted(grads):
        print(f"  {name}: shape {grads[name].shape}, dtype {grads[name].dtype}")

    print("\nTraining with gradient descent:")
    initial = float(value)
    for step in range(STEPS + 1):
        value, grads = loss_and_grad(params, x, y)
        if step % 100 == 0:
            print(f"  step {step:4d}  loss {float(value):.4f}  "
                  f"accuracy {accuracy(params, x, y):.3f}")
        if step < STEPS:
            params = fx.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    print(f"\ninitial loss {initial:.6f} final loss {float(value):.6f}")


if __name__ == "__main__":
    main()
