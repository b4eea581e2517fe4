"""CPU benchmark of the composed transforms: Hessians, Jacobians, HVPs, jvp cost, vmap(grad).

Every workload runs side by side in this one process with functx and whichever peers are
importable (HIPS autograd, JAX eager and ``jit``, ``torch.func``); none is a functx
dependency. Results are checked against functx's before timing. Times are medians of
interleaved repeats (``_harness.py``), reported with the ratio to functx.

Workloads (float64):

1. ``hessian``: the Hessian of ``logsumexp(A x)``, x in R^100, A of shape (200, 100);
2. ``jac_tall`` / ``jac_wide``: the Jacobian of ``tanh(W x)`` for a 10 -> 1000 map and a
   1000 -> 10 map, by forward and by reverse mode;
3. ``hvp``: a Hessian-vector product of the same log-sum-exp (``jvp`` of ``grad``);
4. ``jvp_cost``: one ``jvp`` of a 784-256-256-10 tanh MLP (batch 128) over one plain forward
   evaluation (target: at most 3x);
5. ``per_example``: per-example gradients of a squared loss (batch 128) by ``vmap(grad)``,
   by a Python loop of ``grad``, and one batched ``grad`` of the summed loss, for a small
   32-64-64-10 MLP (overhead-bound: what vmap is for) and the 784-256-256-10 one (bound by
   writing 128 x 270k per-example gradient entries, whatever the method).

Usage: ``python benchmarks/bench_transforms.py [--quick] [--only NAME] [--no-peers]``
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
import functx as fx  # noqa: E402
import functx.numpy as fnp  # noqa: E402
from _harness import environment_report, measure, relative_error  # noqa: E402


def _have(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _table(title: str, timings: list, ref: str, unit: str = "ms", scale: float = 1e3) -> str:
    base = next(t.median for t in timings if t.name == ref)
    lines = [f"### {title}", "", f"| system | median ({unit}) | IQR ({unit}) | ÷ {ref} |",
             "|---|---:|---:|---:|"]
    for t in timings:
        lo, hi = t.quartiles
        lines.append(f"| {t.name} | {t.median * scale:.3f} | {lo * scale:.3f}–{hi * scale:.3f} "
                     f"| {t.median / base:.2f} |")
    return "\n".join(lines) + "\n"


def _check(name: str, got: Any, want: Any, tol: float = 1e-8) -> None:
    err = relative_error(np.asarray(got), np.asarray(want))
    if err > tol:
        raise SystemExit(f"{name}: result differs from functx's (relative error {err:.2e})")


def _block_jax(x: Any) -> Any:
    import jax

    return jax.block_until_ready(x)


def workload_hessian(peers: bool, reps: int) -> list[str]:
    r = np.random.default_rng(0)
    A = r.normal(size=(200, 100)) / 10
    x = r.normal(size=100)
    v = r.normal(size=100)

    def f(x):
        z = A @ x
        m = fnp.max(z)
        return fnp.log(fnp.sum(fnp.exp(z - m))) + m

    H = fx.hessian(f)(x)
    hvp_ref = H @ v
    hess_steps: dict[str, Callable] = {"functx hessian": lambda: fx.hessian(f)(x)}
    hvp_steps: dict[str, Callable] = {
        "functx jvp(grad)": lambda: fx.jvp(fx.grad(f), (x,), (v,))[1]}
    if peers and _have("autograd"):
        import autograd
        import autograd.numpy as anp

        def fa(x):
            z = anp.dot(A, x)
            m = anp.max(z)
            return anp.log(anp.sum(anp.exp(z - m))) + m

        _check("autograd hessian", autograd.hessian(fa)(x), H)
        hess_steps["autograd hessian"] = lambda: autograd.hessian(fa)(x)
        hvp = autograd.hessian_vector_product(fa)
        _check("autograd hvp", hvp(x, v), hvp_ref)
        hvp_steps["autograd hessian_vector_product"] = lambda: hvp(x, v)
    if peers and _have("jax"):
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        Aj, xj, vj = jnp.asarray(A), jnp.asarray(x), jnp.asarray(v)

        def fj(x):
            return jax.nn.logsumexp(Aj @ x)

        hj = jax.hessian(fj)
        hjit = jax.jit(hj)
        _check("jax hessian", hj(xj), H)
        hess_steps["jax hessian (eager)"] = lambda: _block_jax(hj(xj))
        hess_steps["jax hessian (jit)"] = lambda: _block_jax(hjit(xj))
        hvpj = lambda x, v: jax.jvp(jax.grad(fj), (x,), (v,))[1]  # noqa: E731
        hvpjit = jax.jit(hvpj)
        hvp_steps["jax jvp(grad) (eager)"] = lambda: _block_jax(hvpj(xj, vj))
        hvp_steps["jax jvp(grad) (jit)"] = lambda: _block_jax(hvpjit(xj, vj))
    if peers and _have("torch"):
        import torch
        import torch.func as tf

        At, xt, vt = torch.tensor(A), torch.tensor(x), torch.tensor(v)

        def ft(x):
            return torch.logsumexp(At @ x, 0)

        _check("torch.func hessian", tf.hessian(ft)(xt).numpy(), H)
        hess_steps["torch.func hessian"] = lambda: tf.hessian(ft)(xt)
        hvp_steps["torch.func jvp(grad)"] = lambda: tf.jvp(tf.grad(ft), (xt,), (vt,))[1]
    return [_table("Hessian of logsumexp(A x), x in R^100", measure(hess_steps, reps, 2),
                   "functx hessian"),
            _table("Hessian-vector product, same function", measure(hvp_steps, reps * 5, 3),
                   "functx jvp(grad)")]


def workload_jacobians(peers: bool, reps: int) -> list[str]:
    out = []
    r = np.random.default_rng(1)
    for label, (m, n) in (("10 -> 1000", (1000, 10)), ("1000 -> 10", (10, 1000))):
        W = r.normal(size=(m, n)) / np.sqrt(n)
        x = r.normal(size=n)
        f = lambda x: fnp.tanh(W @ x)  # noqa: E731
        J = fx.jacrev(f)(x)
        _check("functx jacfwd", fx.jacfwd(f)(x), J)
        steps: dict[str, Callable] = {"functx jacfwd": lambda: fx.jacfwd(f)(x),
                                      "functx jacrev": lambda: fx.jacrev(f)(x)}
        if peers and _have("autograd"):
            import autograd
            import autograd.numpy as anp

            fa = lambda x: anp.tanh(anp.dot(W, x))  # noqa: E731
            _check("autograd jacobian", autograd.jacobian(fa)(x), J)
            steps["autograd jacobian (reverse)"] = lambda: autograd.jacobian(fa)(x)
        if peers and _have("jax"):
            import jax
            import jax.numpy as jnp

            jax.config.update("jax_enable_x64", True)
            Wj, xj = jnp.asarray(W), jnp.asarray(x)
            fj = lambda x: jnp.tanh(Wj @ x)  # noqa: E731
            jf, jr = jax.jacfwd(fj), jax.jacrev(fj)
            jfj, jrj = jax.jit(jf), jax.jit(jr)
            _check("jax jacfwd", jf(xj), J)
            steps["jax jacfwd (eager)"] = lambda: _block_jax(jf(xj))
            steps["jax jacrev (eager)"] = lambda: _block_jax(jr(xj))
            steps["jax jacfwd (jit)"] = lambda: _block_jax(jfj(xj))
            steps["jax jacrev (jit)"] = lambda: _block_jax(jrj(xj))
        if peers and _have("torch"):
            import torch
            import torch.func as tf

            Wt, xt = torch.tensor(W), torch.tensor(x)
            ft = lambda x: torch.tanh(Wt @ x)  # noqa: E731
            _check("torch.func jacfwd", tf.jacfwd(ft)(xt).numpy(), J)
            steps["torch.func jacfwd"] = lambda: tf.jacfwd(ft)(xt)
            steps["torch.func jacrev"] = lambda: tf.jacrev(ft)(xt)
        out.append(_table(f"Jacobian of tanh(W x), {label}", measure(steps, reps, 2),
                          "functx jacfwd"))
    return out


def _mlp_params(r: np.random.Generator, sizes: tuple) -> dict:
    return {f"w{i}": r.normal(size=(a, b)) / np.sqrt(a) for i, (a, b) in
            enumerate(zip(sizes[:-1], sizes[1:]))}


def _mlp(params: dict, x: Any, np_like: Any) -> Any:
    h = x
    n = len(params)
    for i in range(n):
        h = h @ params[f"w{i}"]
        if i < n - 1:
            h = np_like.tanh(h)
    return h


def workload_jvp_cost(peers: bool, reps: int) -> list[str]:
    r = np.random.default_rng(2)
    params = _mlp_params(r, (784, 256, 256, 10))
    x = r.normal(size=(128, 784))
    tparams = {k: r.normal(size=v.shape) for k, v in params.items()}
    steps = {"functx primal": lambda: _mlp(params, x, fnp),
             "functx jvp": lambda: fx.jvp(lambda p: _mlp(p, x, fnp), (params,), (tparams,)),
             "NumPy primal": lambda: _mlp(params, x, np)}
    if peers and _have("autograd"):
        pass  # autograd has no forward mode of its own for a fair comparison
    return [_table("jvp of a 784-256-256-10 MLP (batch 128) vs one evaluation",
                   measure(steps, reps * 3, 3), "functx primal")]


def workload_per_example(peers: bool, reps: int) -> list[str]:
    return [_per_example(peers, reps, sizes) for sizes in ((32, 64, 64, 10), (784, 256, 256, 10))]


def _per_example_by_hand(params: dict, X: np.ndarray, Y: np.ndarray) -> dict:
    """Per-example gradients of ``sum((mlp(x) - y)**2)`` written out in NumPy: the floor
    for any NumPy-executed method (the batched outer products dominate)."""
    n = len(params)
    hs = [X]
    for i in range(n):
        h = hs[-1] @ params[f"w{i}"]
        hs.append(np.tanh(h) if i < n - 1 else h)
    g = 2.0 * (hs[-1] - Y)
    grads = {}
    for i in reversed(range(n)):
        grads[f"w{i}"] = np.einsum("bi,bj->bij", hs[i], g)
        if i:
            g = (g @ params[f"w{i}"].T) * (1.0 - hs[i] ** 2)
    return grads


def _per_example(peers: bool, reps: int, sizes: tuple) -> str:
    r = np.random.default_rng(3)
    params = _mlp_params(r, sizes)
    X, Y = r.normal(size=(128, sizes[0])), r.normal(size=(128, sizes[-1]))

    def loss(p, x, y):
        return fnp.sum((_mlp(p, x, fnp) - y) ** 2)

    def total(p, X, Y):
        return fnp.sum((_mlp(p, X, fnp) - Y) ** 2)

    per = fx.vmap(fx.grad(loss), in_axes=(None, 0, 0))
    ref = per(params, X, Y)
    loop0 = fx.grad(loss)(params, X[0], Y[0])
    _check("loop", loop0["w0"], ref["w0"][0])
    _check("numpy by hand", _per_example_by_hand(params, X, Y)["w0"], ref["w0"])
    steps: dict[str, Callable] = {
        "functx vmap(grad)": lambda: per(params, X, Y),
        "numpy by hand, per-example": lambda: _per_example_by_hand(params, X, Y),
        "functx loop of grad": lambda: [fx.grad(loss)(params, X[i], Y[i]) for i in range(128)],
        "functx grad of summed loss": lambda: fx.grad(total)(params, X, Y),
    }
    jper, jtotal = fx.jit(per), fx.jit(fx.grad(total))
    _check("jit", jper(params, X, Y)["w0"], ref["w0"])
    steps["functx jit(vmap(grad))"] = lambda: jper(params, X, Y)
    steps["functx jit(grad) of summed loss"] = lambda: jtotal(params, X, Y)
    if peers and _have("autograd"):
        import autograd
        import autograd.numpy as anp

        la = lambda p, x, y: anp.sum((_mlp(p, x, anp) - y) ** 2)  # noqa: E731
        ga = autograd.grad(la)
        _check("autograd", ga(params, X[0], Y[0])["w0"], ref["w0"][0])
        steps["autograd loop of grad"] = lambda: [ga(params, X[i], Y[i]) for i in range(128)]
    if peers and _have("jax"):
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        pj = {k: jnp.asarray(v) for k, v in params.items()}
        Xj, Yj = jnp.asarray(X), jnp.asarray(Y)
        lj = lambda p, x, y: jnp.sum((_mlp(p, x, jnp) - y) ** 2)  # noqa: E731
        vg = jax.vmap(jax.grad(lj), in_axes=(None, 0, 0))
        vgj = jax.jit(vg)
        _check("jax", vg(pj, Xj, Yj)["w0"], ref["w0"])
        steps["jax vmap(grad) (eager)"] = lambda: _block_jax(vg(pj, Xj, Yj))
        steps["jax vmap(grad) (jit)"] = lambda: _block_jax(vgj(pj, Xj, Yj))
    if peers and _have("torch"):
        import torch
        import torch.func as tf

        pt = {k: torch.tensor(v) for k, v in params.items()}
        Xt, Yt = torch.tensor(X), torch.tensor(Y)
        lt = lambda p, x, y: torch.sum((_mlp(p, x, torch) - y) ** 2)  # noqa: E731
        vgt = tf.vmap(tf.grad(lt), in_dims=(None, 0, 0))
        _check("torch.func", vgt(pt, Xt, Yt)["w0"].numpy(), ref["w0"])
        steps["torch.func vmap(grad)"] = lambda: vgt(pt, Xt, Yt)
    name = "-".join(map(str, sizes))
    return _table(f"Per-example gradients, {name} tanh MLP, batch 128",
                  measure(steps, reps, 1, block=2), "functx vmap(grad)")


WORKLOADS = {"hessian": workload_hessian, "jacobians": workload_jacobians,
             "jvp_cost": workload_jvp_cost, "per_example": workload_per_example}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=sorted(WORKLOADS))
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    args = ap.parse_args()
    reps = args.repeats or (6 if args.quick else 20)
    mods = {}
    for name in ("autograd", "jax", "torch"):
        if not args.no_peers and _have(name):
            mods[name] = __import__(name)
    print(environment_report(mods, ROOT))
    for name, fn in WORKLOADS.items():
        if args.only and name != args.only:
            continue
        for table in fn(not args.no_peers, reps):
            print(table, flush=True)


if __name__ == "__main__":
    main()
