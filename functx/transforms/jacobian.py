"""Jacobians and Hessians: ``jacfwd``, ``jacrev`` and ``hessian``.

``jacfwd`` pushes the standard basis of the inputs through ``jvp``, and ``jacrev`` pulls the
standard basis of the outputs back through ``vjp``, both batched over the basis vectors with
``vmap`` (the primal computation runs once). The result has JAX's layout: for each output
leaf, a pytree shaped like the differentiated argument(s) whose leaves have shape
``out_leaf.shape + in_leaf.shape``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from functx import tree
from functx.errors import GradError
from functx.ir import abstractify
from functx.primitives import shape as _shape
from functx.tracing import INEXACT_DTYPES, Tracer, attach_source, user_source
from functx.transforms.grad import vjp
from functx.transforms.jvp import jvp
from functx.transforms.vmap import vmap


def _argnums_partial(f: Callable, argnums: int | Sequence[int], args: tuple, kwargs: dict,
                     fname: str) -> tuple[Callable, tuple]:
    """``f`` as a function of the ``argnums`` arguments only, and their values.

    Raises:
        GradError: ``argnums`` is out of range or names a non-float argument (the error
            names the caller's line).
    """
    try:
        return _partial(f, argnums, args, kwargs, fname)
    except GradError as e:
        raise attach_source(e, user_source(2)) from None


def _partial(f: Callable, argnums: int | Sequence[int], args: tuple, kwargs: dict,
             fname: str) -> tuple[Callable, tuple]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if any(not -len(args) <= i < len(args) for i in nums):
        raise GradError(f"{fname}: argnums={argnums} but the function was called with "
                        f"{len(args)} positional argument(s).")
    idx = [i % len(args) for i in nums]

    def f_partial(*dyn: Any) -> Any:
        full = list(args)
        for i, a in zip(idx, dyn):
            full[i] = a
        return f(*full, **kwargs)

    dyn = tuple(args[i] for i in idx)
    for i, a in zip(idx, dyn):
        for leaf in tree.leaves(a):
            if not INEXACT_DTYPES[abstractify(leaf).dtype]:
                raise GradError(f"{fname}: argument {i} has a leaf of type {abstractify(leaf)}"
                                "; Jacobians are taken only with respect to floating-point "
                                "inputs. Convert it with x.astype(float), or leave it out "
                                "of argnums.")
    return f_partial, dyn


def _as_arrays(leaves: list) -> list:
    return [np.asarray(x) if isinstance(x, (bool, int, float, complex)) else x for x in leaves]


def _std_basis(leaves: list) -> tuple[list, int]:
    """The standard basis of the flattened ``leaves``: per leaf, a (N, *leaf.shape) block of
    the N x N identity (N = total size), in the leaf's dtype and on its device."""
    avals = [abstractify(x) for x in leaves]
    sizes = [int(np.prod(a.shape, dtype=np.int64)) for a in avals]
    total = sum(sizes)
    blocks, start = [], 0
    for x, a, n in zip(leaves, avals, sizes):
        xp = _shape.array_module(x)
        block = xp.zeros((total, n), dtype=a.dtype)
        if n:
            block[xp.arange(start, start + n), xp.arange(n)] = 1
        blocks.append(block.reshape((total,) + tuple(a.shape)))
        start += n
    return blocks, total


def _reshape(x: Any, shape: tuple) -> Any:
    """``x`` with a new shape, as ``functx.numpy.reshape`` does it: a tracer that has the
    shape already is returned as it is (an array gets a read-only view)."""
    shape = tuple(shape)
    if type(x) is Tracer and tuple(x.shape) == shape:
        return x
    return _shape.reshape(x, shape)


def _unravel_last(jac: Any, out_shape: tuple, in_avals: list, in_tree: Any) -> Any:
    """Split the trailing flat-input axis of ``jac`` into one block per input leaf."""
    blocks, start = [], 0
    for a in in_avals:
        n = int(np.prod(a.shape, dtype=np.int64))
        blk = jac[..., start:start + n]
        blocks.append(_reshape(blk, tuple(out_shape) + tuple(a.shape)))
        start += n
    return tree.unflatten(in_tree, blocks)


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The Jacobian of ``f`` by forward mode (one JVP per input element, batched).

    Efficient when the inputs are small and the outputs large.

    Args:
        f: a function of arrays (pytrees of arrays).
        argnums: the positional argument(s) to differentiate (int or tuple of ints).
        has_aux: ``f`` returns ``(output, aux)``; the Jacobian function then returns
            ``(jacobian, aux)``.

    Returns:
        A function with ``f``'s signature returning the Jacobian: for each output leaf, a
        pytree like the argument (a tuple of them for tuple ``argnums``) whose leaves have
        shape ``out.shape + in.shape``.

    Raises:
        GradError: a differentiated argument is not floating-point, or ``argnums`` is out
            of range.

    Example:
        >>> fx.jacfwd(lambda x: x ** 2)(np.array([1.0, 2.0]))
        array([[2., 0.],
               [0., 4.]])
    """
    fname = f"jacfwd({getattr(f, '__name__', 'f')})"

    @functools.wraps(f)
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        f_partial, dyn = _argnums_partial(f, argnums, args, kwargs, fname)
        leaves, in_tree = tree.flatten(dyn)
        leaves = _as_arrays(leaves)
        dyn = tree.unflatten(in_tree, leaves)
        basis, _ = _std_basis(leaves)
        in_avals = [abstractify(x) for x in leaves]

        aux_box: list = []

        def push(*ts: Any) -> Any:
            res = jvp(f_partial, dyn, tree.unflatten(in_tree, list(ts)), has_aux=has_aux)
            if has_aux:
                # The primal computation (aux included) runs on concrete values, outside the
                # batch: aux is returned as it is, like the output of f.
                aux_box.append(res[2])
            return res[1]

        jac = vmap(push, out_axes=-1)(*basis)
        aux = aux_box[0] if has_aux else None
        sub_tree = tree.structure(dyn[0]) if isinstance(argnums, int) else in_tree
        n0 = len(tree.leaves(dyn[0])) if isinstance(argnums, int) else None
        avals = in_avals[:n0] if n0 is not None else in_avals
        result = tree.map(lambda j: _unravel_last(j, tuple(j.shape[:-1]), avals, sub_tree), jac)
        return (result, aux) if has_aux else result

    return jacfun


def jacrev(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The Jacobian of ``f`` by reverse mode (one VJP per output element, batched).

    Efficient when the outputs are small and the inputs large. Same arguments, layout and
    errors as :func:`jacfwd`.

    Example:
        >>> fx.jacrev(lambda x: fnp.sum(x ** 3))(np.array([1.0, 2.0]))
        array([ 3., 12.])
    """
    fname = f"jacrev({getattr(f, '__name__', 'f')})"

    @functools.wraps(f)
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        f_partial, dyn = _argnums_partial(f, argnums, args, kwargs, fname)
        res = vjp(f_partial, *dyn, has_aux=has_aux)
        y, pull = res[0], res[1]
        aux = res[2] if has_aux else None
        y_leaves, y_tree = tree.flatten(y)
        y_leaves = _as_arrays(y_leaves)
        basis, _ = _std_basis(y_leaves)
        out_avals = [abstractify(x) for x in y_leaves]

        def pull_one(*cts: Any) -> Any:
            return pull(tree.unflatten(y_tree, list(cts)))

        cts = vmap(pull_one)(*basis)  # a tuple per argument, leaves (total, *in.shape)
        in_leaves, in_tree = tree.flatten(cts)
        # rows of the flat output, split per output leaf: out leaf -> input pytree
        blocks = []
        start = 0
        for a in out_avals:
            n = int(np.prod(a.shape, dtype=np.int64))
            per_in = [_reshape_rows(c[start:start + n], a.shape) for c in in_leaves]
            per_in_tree = tree.unflatten(in_tree, per_in)
            blocks.append(per_in_tree[0] if isinstance(argnums, int) else per_in_tree)
            start += n
        result = tree.unflatten(y_tree, blocks)
        return (result, aux) if has_aux else result

    return jacfun


def _reshape_rows(x: Any, out_shape: tuple) -> Any:
    return _reshape(x, tuple(out_shape) + tuple(x.shape[1:]))


def hessian(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The Hessian of a scalar function: ``jacfwd(jacrev(f))``.

    Args:
        f: a function returning a scalar (pytrees of arrays in).
        argnums, has_aux: as for :func:`jacfwd`.

    Returns:
        A function returning the Hessian; for pytree inputs, a nested pytree of blocks
        ``H[i][j]`` of shape ``in_i.shape + in_j.shape``.

    Example:
        >>> fx.hessian(lambda x: fnp.sum(x ** 3))(np.array([1.0, 2.0]))
        array([[ 6.,  0.],
               [ 0., 12.]])
    """
    return jacfwd(jacrev(f, argnums, has_aux), argnums, has_aux)
