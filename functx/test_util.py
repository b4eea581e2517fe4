"""Testing helpers for users' own functions and primitives: :func:`check_grads`."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from functx import tree
from functx.primitives.shape import array_module
from functx.transforms.grad import vjp
from functx.transforms.jvp import jvp

# Default tolerances and finite-difference steps by dtype (as in JAX's check_grads).
_TOL = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 2e-2, np.dtype(np.float64): 1e-5,
        np.dtype(np.complex64): 2e-2, np.dtype(np.complex128): 1e-5}
_EPS = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-2, np.dtype(np.float64): 1e-4,
        np.dtype(np.complex64): 1e-2, np.dtype(np.complex128): 1e-4}


def _host(x: Any) -> np.ndarray:
    if hasattr(x, "get") and not isinstance(x, (np.ndarray, np.generic)):
        x = x.get()  # CuPy
    return np.asarray(x)


def _is_float(x: Any) -> bool:
    return np.dtype(_dtype(x)).kind in "fc"


def _dtype(x: Any) -> np.dtype:
    return np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)


def _like(x: Any, value: np.ndarray) -> Any:
    """``value`` (a NumPy array) as an array of ``x``'s dtype on ``x``'s device."""
    xp = array_module(x)
    return xp.asarray(value.astype(_dtype(x)))


def _random_like(rng: np.random.Generator, x: Any) -> Any:
    shape = np.shape(_host(x)) if not hasattr(x, "shape") else tuple(x.shape)
    v = rng.standard_normal(shape)
    if _dtype(x).kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return _like(x, np.asarray(v))


def _conj(x: Any) -> Any:
    return x if not np.iscomplexobj(_host(x)) else _like(x, np.conj(_host(x)))


def _inner(a: Any, b: Any) -> complex:
    total = 0.0
    for x, y in zip(tree.leaves(a), tree.leaves(b)):
        if _is_float(x):
            total += np.vdot(_host(x).astype(np.complex128).ravel(),
                             _host(y).astype(np.complex128).ravel()).real
    return total


def _tolerance(leaves: Sequence[Any], given: float | None) -> float:
    if given is not None:
        return given
    dts = [_dtype(x) for x in leaves if _is_float(x)]
    return max([_TOL.get(d, 1e-5) for d in dts] or [1e-5])


def _common_host(g: Any, w: Any) -> tuple[np.ndarray, np.ndarray]:
    """``g`` and ``w`` on the host in float64, or complex128 when either is complex (so real
    values are never reported with a ``+0j``)."""
    g, w = _host(g), _host(w)
    dt = np.complex128 if np.iscomplexobj(g) or np.iscomplexobj(w) else np.float64
    return g.astype(dt), w.astype(dt)


def _assert_close(got: Any, want: Any, atol: float, rtol: float, what: str) -> None:
    g_leaves, w_leaves = tree.leaves(got), tree.leaves(want)
    if len(g_leaves) != len(w_leaves):
        raise AssertionError(f"check_grads: {what}: {len(g_leaves)} outputs vs "
                             f"{len(w_leaves)}.")
    for k, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        g, w = _common_host(g, w)
        if g.shape != w.shape:
            raise AssertionError(f"check_grads: {what}: output leaf {k} has shape {g.shape} "
                                 f"but the reference has {w.shape}.")
        err = np.abs(g - w)
        bound = atol + rtol * np.abs(w)
        if np.any(err > bound) or np.any(np.isnan(g) != np.isnan(w)):
            i = int(np.argmax(err - bound)) if err.size else 0
            where = tuple(int(j) for j in np.unravel_index(i, g.shape)) if g.ndim else ()
            raise AssertionError(
                f"check_grads: {what} does not match: output leaf {k}, worst element "
                f"{where}: got {g.ravel()[i]}, expected {w.ravel()[i]} (atol={atol}, "
                f"rtol={rtol}).")


def _numerical_jvp(f: Callable, args: tuple, tangents: tuple, eps: float) -> Any:
    leaves, in_tree = tree.flatten(args)
    t_leaves = tree.leaves(tangents)

    def shifted(sign: float) -> Any:
        new = [(_like(x, _host(x) + sign * eps * _host(t)) if _is_float(x) else x)
               for x, t in zip(leaves, t_leaves)]
        return f(*tree.unflatten(in_tree, new))

    plus, minus = shifted(1.0), shifted(-1.0)

    def difference(p: Any, m: Any) -> np.ndarray:
        p, m = _common_host(p, m)
        return (p - m) / (2 * eps)

    return tree.map(difference, plus, minus)


def _default_eps(leaves: Sequence[Any], eps: float | None) -> float:
    if eps is not None:
        return eps
    return max([_EPS.get(_dtype(x), 1e-4) for x in leaves if _is_float(x)] or [1e-4])


def check_jvp(f: Callable, args: tuple, atol: float | None = None, rtol: float | None = None,
              eps: float | None = None, seed: int = 0, what: str = "JVP") -> None:
    """Checks ``jvp(f)`` at ``args`` against central finite differences.

    The primal output of ``jvp`` must match ``f(*args)``, and the tangent output along a
    random tangent ``v`` must match ``(f(x + eps v) - f(x - eps v)) / (2 eps)`` elementwise
    (as JAX's ``check_jvp``).

    Args:
        f: a function of arrays (pytrees of arrays).
        args: the point to check at (a tuple of arguments).
        atol, rtol: tolerances; by default from the inputs' dtypes.
        eps: the finite-difference step; by default from the inputs' dtypes.
        seed: the seed of the random tangent.
        what: how messages name the checked derivative.

    Raises:
        AssertionError: the primal or the tangent output does not match.

    Example:
        >>> check_jvp(fnp.sin, (np.array([0.5, 1.0]),))
    """
    rng = np.random.default_rng(seed)
    leaves = tree.leaves(args)
    tangents = tree.map(lambda x: _random_like(rng, x), args)
    tol = _tolerance(leaves, None)
    atol = atol if atol is not None else tol
    rtol = rtol if rtol is not None else tol
    out, t_out = jvp(f, tuple(args), tuple(tangents))
    _assert_close(out, f(*args), atol, rtol, what + " primal output (against f itself)")
    numeric = _numerical_jvp(f, tuple(args), tuple(tangents), _default_eps(leaves, eps))
    _assert_close(t_out, numeric, atol, rtol, what + " (against finite differences)")


def check_vjp(f: Callable, args: tuple, atol: float | None = None, rtol: float | None = None,
              eps: float | None = None, seed: int = 0, what: str = "VJP") -> None:
    """Checks ``vjp(f)`` at ``args`` against central finite differences, independently of
    forward mode.

    The primal output of ``vjp`` must match ``f(*args)``, and for random ``v`` (shaped like
    the inputs) and ``u`` (shaped like the outputs) the dot-product test must hold:
    ``Re<v, J^T u> == Re<(f(x + eps v) - f(x - eps v)) / (2 eps), u>``, as in JAX's
    ``check_vjp``. Forward mode is not used, so a wrong ``custom_vjp`` rule cannot hide
    behind a forward mode derived from it.

    Args:
        f: a function of arrays (pytrees of arrays).
        args: the point to check at (a tuple of arguments).
        atol, rtol: tolerances on the two inner products; by default from the dtypes.
        eps: the finite-difference step; by default from the inputs' dtypes.
        seed: the seed of the random ``v`` and ``u``.
        what: how messages name the checked derivative.

    Raises:
        AssertionError: the primal output or the inner products do not match.

    Example:
        >>> check_vjp(fnp.sin, (np.array([0.5, 1.0]),))
    """
    rng = np.random.default_rng(seed)
    leaves = tree.leaves(args)
    out, pull = vjp(f, *args)
    tol = _tolerance(leaves + tree.leaves(out), None)
    atol = atol if atol is not None else tol
    rtol = rtol if rtol is not None else tol
    _assert_close(out, f(*args), atol, rtol, what + " primal output (against f itself)")
    tangents = tree.map(lambda x: _random_like(rng, x), tuple(args))
    eps = _default_eps(leaves, eps)
    t_numeric = _numerical_jvp(f, tuple(args), tangents, eps)
    u = tree.map(lambda x: _random_like(rng, x), out)
    # functx's (JAX's) convention: the VJP is J^T ct, without conjugation, so the adjoint
    # that the inner product pairs with J is conj(J^T conj(u)).
    ct_in = tree.map(_conj, pull(tree.map(_conj, u)))
    got = float(_inner(tangents, ct_in))
    want = float(_inner(t_numeric, u))
    if not abs(got - want) <= atol + rtol * abs(want):
        raise AssertionError(
            f"check_grads: {what} does not match finite differences: for random v and u, "
            f"Re<v, VJP(u)> = {got!r} but Re<(f(x + eps v) - f(x - eps v)) / (2 eps), u> = "
            f"{want!r} (eps={eps}, atol={atol}, rtol={rtol}).")


def check_grads(f: Callable, args: Sequence[Any], order: int,
                modes: Sequence[str] = ("fwd", "rev"), atol: float | None = None,
                rtol: float | None = None, eps: float | None = None) -> None:
    """Check the derivatives of ``f`` at ``args`` numerically, up to ``order``.

    Each mode is checked against central finite differences on its own, as in JAX: forward
    mode elementwise along a random tangent (:func:`check_jvp`), reverse mode by the
    dot-product test ``Re<v, J^T u> == Re<J_fd v, u>`` for random ``v`` and ``u``
    (:func:`check_vjp`), so ``modes=("rev",)`` never relies on forward mode (which functx
    derives from a ``custom_vjp``'s own rule). For ``order > 1`` the same checks run on the
    derivative functions themselves (``(x, v) -> jvp(f, x, v)`` and
    ``x -> vjp(f, x)(f(x))``), recursively.

    Args:
        f: a function of arrays (pytrees of arrays).
        args: the point to check at (a tuple of arguments).
        order: how many times to differentiate (1 = first derivatives).
        modes: ``"fwd"``, ``"rev"`` or both.
        atol, rtol: tolerances; by default from the inputs' dtype (1e-5 for float64,
            2e-2 for float32).
        eps: the finite-difference step; by default 1e-4 for float64, 1e-2 for float32.

    Raises:
        AssertionError: a derivative does not match, naming the mode and order.
        ValueError: ``order`` < 1 or an unknown mode.

    Example:
        >>> check_grads(fnp.sin, (np.array([0.5, 1.0]),), order=2)
    """
    if order < 1:
        raise ValueError(f"check_grads: order must be at least 1, got {order}.")
    bad = set(modes) - {"fwd", "rev"}
    if bad:
        raise ValueError(f"check_grads: unknown modes {sorted(bad)}; use 'fwd' and/or 'rev'.")
    args = tuple(np.asarray(a) if isinstance(a, (int, float, complex)) else a for a in args)
    _check(f, args, order, tuple(modes), atol, rtol, eps, "")


def _check(f: Callable, args: tuple, order: int, modes: tuple, atol: Any, rtol: Any,
           eps: Any, prefix: str) -> None:
    if "fwd" in modes:
        what = f"JVP of {prefix}" if prefix else "JVP"
        check_jvp(f, args, atol, rtol, eps, what=what)
        if order > 1:
            def f_jvp(primals: tuple, tangents: tuple) -> Any:
                return jvp(f, tuple(primals), tuple(tangents))

            _check(f_jvp, (args, args), order - 1, modes, atol, rtol, eps, what)
    if "rev" in modes:
        what = f"VJP of {prefix}" if prefix else "VJP"
        check_vjp(f, args, atol, rtol, eps, what=what)
        if order > 1:
            def f_vjp(*xs: Any) -> Any:
                out, pull = vjp(f, *xs)
                return pull(out)

            _check(f_vjp, args, order - 1, modes, atol, rtol, eps, what)
