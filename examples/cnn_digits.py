"""Train a small convolutional network on scikit-learn's 8x8 handwritten digits with functx.

The data set is ``sklearn.datasets.load_digits`` (1797 grey-scale 8x8 images of the digits
0-9, shipped inside scikit-learn: nothing is downloaded). It is split 80/20, stratified,
with a fixed seed. The network is written with functx.nn, its parameters a plain dict of
NumPy arrays::

    conv2d 1->16 (3x3, pad 1) -> relu -> max_pool2d 2      [16, 4, 4]
    conv2d 16->32 (3x3, pad 1) -> relu -> avg_pool2d 2     [32, 2, 2]
    flatten -> linear 128->64 -> relu -> linear 64->10     logits

trained on the cross-entropy with Adam, whose update is a few ``functx.tree.map`` calls over
the parameter dict, and ``functx.value_and_grad`` for the gradients.

Needs scikit-learn; the ``examples`` extra (``pip install -e '.[examples]'``) has it, and
matplotlib and tqdm. Run ``python examples/cnn_digits.py`` (about 20 epochs, well under two
minutes on a laptop CPU). It shows a progress bar (tqdm's when tqdm is installed, a plain
one on stderr otherwise), prints each epoch's loss and accuracies, saves a plot of the
training loss and the accuracies to ``--plot PATH`` (``--out`` is the same option; default
``examples/cnn_digits.png``; skipped with a note when matplotlib is not installed), and ends
with a line ``final test accuracy 0.9xxx, wall time XX.X s (CPU time XX.X s)``.
``--epochs`` and ``--limit`` (use only the first N training images) make quick runs.
From Python or a notebook, ``main(["--epochs", "3"])`` returns the history.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp

DEFAULT_OUT = Path(__file__).resolve().parent / "cnn_digits.png"


def load_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The digits as ``(x_train, y_train, x_test, y_test)``: images ``[N, 1, 8, 8]`` float32
    scaled to [0, 1], labels int64; a stratified 80/20 split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2,
                                                        random_state=seed, stratify=y)
    return x_train, y_train, x_test, y_test


def init_params(seed: int = 0) -> dict[str, np.ndarray]:
    """He-initialised weights (and zero biases) of the network, float32."""
    rng = np.random.default_rng(seed)

    def he(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    return {
        "conv1_w": he((16, 1, 3, 3), 9), "conv1_b": np.zeros(16, np.float32),
        "conv2_w": he((32, 16, 3, 3), 16 * 9), "conv2_b": np.zeros(32, np.float32),
        "fc1_w": he((64, 128), 128), "fc1_b": np.zeros(64, np.float32),
        "fc2_w": he((10, 64), 64), "fc2_b": np.zeros(10, np.float32),
    }


def predict(params: dict, x: Any) -> Any:
    """Logits ``[N, 10]`` of images ``[N, 1, 8, 8]``."""
    h = fnn.max_pool2d(fnn.relu(fnn.conv2d(x, params["conv1_w"], params["conv1_b"],
                                           padding=1)), 2)
    h = fnn.avg_pool2d(fnn.relu(fnn.conv2d(h, params["conv2_w"], params["conv2_b"],
                                           padding=1)), 2)
    h = fnp.reshape(h, (h.shape[0], -1))
    h = fnn.relu(fnn.linear(h, params["fc1_w"], params["fc1_b"]))
    return fnn.linear(h, params["fc2_w"], params["fc2_b"])


def loss_fn(params: dict, x: Any, y: Any) -> Any:
    """Mean cross-entropy of the batch."""
    return fnn.cross_entropy(predict(params, x), y)


def accuracy(params: dict, x: np.ndarray, y: np.ndarray) -> float:
    """Fraction of images whose largest logit is the label."""
    return float(np.mean(np.argmax(np.asarray(predict(params, x)), axis=1) == y))


def adam_init(params: dict) -> dict:
    """Adam's state: zero first and second moments shaped like the parameters."""
    zeros = fx.tree.map(np.zeros_like, params)
    return {"m": zeros, "v": fx.tree.map(np.zeros_like, params), "step": 0}


def adam_update(params: dict, grads: dict, state: dict, lr: float = 3e-3,
                b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple[dict, dict]:
    """One Adam step (Kingma & Ba), written with ``functx.tree.map`` over the dicts."""
    step = state["step"] + 1
    m = fx.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = fx.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    c1, c2 = 1 - b1 ** step, 1 - b2 ** step
    new = fx.tree.map(lambda p, m, v: (p - lr * (m / c1) / (np.sqrt(v / c2) + eps)).astype(
        p.dtype), params, m, v)
    return new, {"m": m, "v": v, "step": step}


class ProgressBar:
    """A one-line text progress bar on stderr (redrawn in place on a terminal; elsewhere it
    prints only when an epoch completes): the fallback when tqdm is not installed."""

    def __init__(self, total: int, desc: str = "", width: int = 30,
                 stream: Any = sys.stderr) -> None:
        self.total, self.desc, self.width, self.stream = total, desc, width, stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()

    def update(self, done: int, text: str) -> None:
        if not self.tty and done < self.total:
            return
        filled = int(self.width * done / max(self.total, 1))
        bar = "#" * filled + "." * (self.width - filled)
        end = "\n" if done >= self.total else ""
        self.stream.write(f"\r[{bar}] {done:>{len(str(self.total))}}/{self.total} "
                          f"{self.desc} {text}{end}")
        self.stream.flush()

    def close(self) -> None:
        pass


class TqdmBar:
    """The same interface over a tqdm bar (a widget in a notebook with ipywidgets)."""

    def __init__(self, total: int, desc: str) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="batch", leave=False)

    def update(self, done: int, text: str) -> None:
        self.bar.update(done - self.bar.n)
        self.bar.set_postfix_str(text, refresh=False)

    def close(self) -> None:
        self.bar.close()


def progress_bar(total: int, desc: str) -> ProgressBar | TqdmBar:
    """tqdm's bar when tqdm is installed, else the plain :class:`ProgressBar`."""
    try:
        return TqdmBar(total, desc)
    except ImportError:
        return ProgressBar(total, desc)


def have_matplotlib() -> bool:
    """Whether matplotlib can be imported (plots are skipped without it)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def save_plot(history: dict, path: Path) -> None:
    """The training loss (per step and per epoch) and the accuracies, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    steps = np.arange(1, len(history["step_loss"]) + 1) / history["steps_per_epoch"]
    ax_loss.plot(steps, history["step_loss"], alpha=0.35, label="batch")
    epochs = np.arange(1, len(history["train_loss"]) + 1)
    ax_loss.plot(epochs, history["train_loss"], marker="o", label="epoch mean")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy", yscale="log", title="training loss")
    ax_loss.legend()
    ax_acc.plot(epochs, history["train_acc"], marker="o", label="train")
    ax_acc.plot(epochs, history["test_acc"], marker="o", label="test")
    low = min(history["train_acc"] + history["test_acc"])
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy",
               ylim=(max(0.0, min(0.9, low) - 0.02), 1.0))
    ax_acc.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def train(epochs: int, batch_size: int, lr: float, limit: int | None, seed: int) -> dict:
    """Train and return the history (losses, accuracies, parameters)."""
    x_train, y_train, x_test, y_test = load_data(seed)
    if limit is not None:
        x_train, y_train = x_train[:limit], y_train[:limit]
    params = init_params(seed)
    state = adam_init(params)
    rng = np.random.default_rng(seed + 1)
    loss_and_grad = fx.value_and_grad(loss_fn)
    steps = -(-len(x_train) // batch_size)
    history: dict = {"step_loss": [], "train_loss": [], "train_acc": [], "test_acc": [],
                     "steps_per_epoch": steps}
    print(f"{len(x_train)} training and {len(x_test)} test images; "
          f"{sum(p.size for p in fx.tree.leaves(params))} parameters")
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x_train))
        bar = progress_bar(steps, f"epoch {epoch}/{epochs}")
        losses = []
        for i in range(steps):
            idx = order[i * batch_size:(i + 1) * batch_size]
            value, grads = loss_and_grad(params, x_train[idx], y_train[idx])
            params, state = adam_update(params, grads, state, lr=lr)
            losses.append(float(value))
            bar.update(i + 1, f"loss {np.mean(losses):.4f}")
        bar.close()
        history["step_loss"].extend(losses)
        history["train_loss"].append(float(np.mean(losses)))
        history["train_acc"].append(accuracy(params, x_train, y_train))
        history["test_acc"].append(accuracy(params, x_test, y_test))
        print(f"epoch {epoch:2d}  loss {history['train_loss'][-1]:.4f}  "
              f"train accuracy {history['train_acc'][-1]:.4f}  "
              f"test accuracy {history['test_acc'][-1]:.4f}", flush=True)
    history["params"] = params
    return history


def main(argv: Sequence[str] = ()) -> dict:
    """Parse the arguments, train, save the plot; return the history (see :func:`train`).

    ``argv`` are the command-line options (``["--epochs", "3"]``); the default (none) makes
    ``main()`` usable from a notebook, whose own ``sys.argv`` is the kernel's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--limit", type=int, default=None,
                        help="use only the first LIMIT training images (quick runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", "--out", dest="plot", type=Path, default=DEFAULT_OUT,
                        metavar="PATH", help="where to save the loss/accuracy plot (PNG; "
                        "needs matplotlib, skipped without it)")
    args = parser.parse_args(list(argv))
    start, cpu_start = time.perf_counter(), time.process_time()
    history = train(args.epochs, args.batch_size, args.lr, args.limit, args.seed)
    if have_matplotlib():
        save_plot(history, args.plot)
        print(f"plot saved to {args.plot}")
    else:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    print(f"first batch loss {history['step_loss'][0]:.4f} "
          f"last epoch loss {history['train_loss'][-1]:.4f}")
    print(f"final test accuracy {history['test_acc'][-1]:.4f}, wall time {wall:.1f} s "
          f"(CPU time {cpu:.1f} s)")
    history["wall_time"], history["cpu_time"] = wall, cpu
    return history


if __name__ == "__main__":
    main(sys.argv[1:])
