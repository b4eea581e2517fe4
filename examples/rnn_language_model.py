"""A character-level RNN language model trained with ``functx.lax.scan``.

The model reads a short text one character at a time: an Elman RNN (``h = tanh(x W_x +
h W_h + b)``) whose hidden state is the ``scan`` carry, and a linear read-out to the next
character's logits. The whole sequence is one ``scan`` equation, so the training step
(``jit(value_and_grad(loss))`` with Adam) is traced once whatever the sequence length, and
its gradient is a reverse scan over the residuals each step's rules keep.

Run it with ``python examples/rnn_language_model.py``. It prints the traced loss function
(the ``scan`` with its body nested), the loss as training goes, the last line reading
``initial loss ... final loss ...``, and a greedy sample generated with ``lax.fori_loop``.
``--steps N`` changes the number of training steps and ``--checkpoint body`` (or ``sqrt``)
trains with a checkpointed scan (the same gradients, less memory).
"""
from __future__ import annotations

import argparse
from typing import Sequence

import numpy as np

import functx as fx
import functx.numpy as fnp
from functx import lax, nn, optim

TEXT = ("the quick brown fox jumps over the lazy dog. " * 4
        + "a functional autodiff library traces loops once. " * 4)
HIDDEN = 48
SEQ = 24
BATCH = 16


def init_params(vocab: int, hidden: int, seed: int = 0) -> dict:
    """The RNN's parameters (a dict of float32 arrays), scaled for a stable start."""
    rng = np.random.default_rng(seed)
    return {
        "wx": (rng.standard_normal((vocab, hidden)) * 0.3).astype(np.float32),
        "wh": (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32),
        "b": np.zeros(hidden, np.float32),
        "wo": (rng.standard_normal((hidden, vocab)) / np.sqrt(hidden)).astype(np.float32),
        "bo": np.zeros(vocab, np.float32),
    }


def loss_fn(params: dict, tokens: np.ndarray, checkpoint: str | None = None) -> fx.Tracer:
    """Mean next-character cross-entropy of ``tokens`` (batch, time+1) under the RNN."""
    vocab = params["wx"].shape[0]
    inputs = nn.one_hot(tokens[:, :-1].T, vocab, dtype=np.float32)  # (time, batch, vocab)
    targets = tokens[:, 1:].T                                           # (time, batch)

    def step(h, x):
        h = fnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
        return h, h

    h0 = fnp.zeros((tokens.shape[0], params["wh"].shape[0]), np.float32)
    _, hs = lax.scan(step, h0, inputs, checkpoint=checkpoint)
    logits = hs @ params["wo"] + params["bo"]
    logp = nn.log_softmax(logits, dim=-1)
    picked = fnp.take_along_axis(logp, targets[..., None], axis=-1)
    return -fnp.mean(picked)


def sample(params: dict, first: int, length: int) -> np.ndarray:
    """Greedy decoding from character ``first``: a ``fori_loop`` whose carry holds the
    hidden state, the current character and the characters so far."""
    vocab = params["wx"].shape[0]

    def body(i, carry):
        h, c, out = carry
        x = nn.one_hot(c, vocab, dtype=np.float32)
        h = fnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
        c = fnp.argmax(h @ params["wo"] + params["bo"])
        return h, c, out.at[i].set(c)

    h0 = fnp.zeros(params["wh"].shape[0], np.float32)
    _, _, out = lax.fori_loop(0, length, body,
                              (h0, np.asarray(first), np.zeros(length, np.int64)))
    return np.asarray(out)


def batches(data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A batch of random windows of SEQ + 1 characters."""
    starts = rng.integers(0, len(data) - SEQ - 1, size=BATCH)
    return np.stack([data[s:s + SEQ + 1] for s in starts])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--checkpoint", choices=["body", "sqrt"], default=None)
    args = parser.parse_args(argv)

    chars = sorted(set(TEXT))
    index = {c: i for i, c in enumerate(chars)}
    data = np.array([index[c] for c in TEXT])
    params = init_params(len(chars), HIDDEN)
    rng = np.random.default_rng(1)

    print("The traced loss (one scan equation, its body nested):")
    print(fx.make_trace(lambda p, t: loss_fn(p, t))(params, batches(data, rng)))

    opt = optim.adam(2e-2)
    state = opt.init(params)

    @fx.jit
    def train_step(params, state, tokens):
        loss, grads = fx.value_and_grad(loss_fn)(params, tokens, args.checkpoint)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state, loss

    losses = []
    for step in range(args.steps):
        params, state, loss = train_step(params, state, batches(data, rng))
        losses.append(float(loss))
        if step % 25 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {losses[-1]:.3f}")
    text = "".join(chars[i] for i in sample(params, index["t"], 40))
    print(f"greedy sample: t{text}")
    print(f"initial loss {losses[0]:.4f} final loss {np.mean(losses[-10:]):.4f}")


if __name__ == "__main__":
    main()
