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
from functx.transforms._args import check_callable, index_tuple, resolve_argnums
from functx.transforms.grad import check_diff_inputs, check_diff_output, float0_zeros, vjp
from functx.transforms.jvp import jvp
from functx.transforms.vmap import vmap


def _is_single(argnums: Any) -> bool:
    """Whether ``argnums`` is one int (the result is then not wrapped in a tuple)."""
    return not isinstance(argnums, (tuple, list)) and not hasattr(argnums, "__iter__")


def _argnums_partial(f: Callable, argnums: int | Sequence[int], args: tuple, kwargs: dict,
                     fname: str, check: Callable[[list, list], None]
                     ) -> tuple[Callable, tuple]:
    """``f`` as a function of the ``argnums`` arguments only, and their values.

    ``check(leaves, owners)`` checks the differentiated leaves (their dtypes).

    Raises:
        GradError: ``argnums`` is out of range, repeats an argument, or names an argument
            ``check`` refuses (the error names the caller's line).
    """
    try:
        return _partial(f, argnums, args, kwargs, fname, check)
    except GradError as e:
        raise attach_source(e, user_source(2)) from None


def _partial(f: Callable, argnums: int | Sequence[int], args: tuple, kwargs: dict,
             fname: str, check: Callable[[list, list], None]) -> tuple[Callable, tuple]:
    nums = index_tuple(argnums, "argnums", fname, GradError)
    idx = resolve_argnums(nums, len(args), "argnums", fname, GradError, shown=argnums)

    def f_partial(*dyn: Any) -> Any:
        full = list(args)
        for i, a in zip(idx, dyn):
            full[i] = a
        return f(*full, **kwargs)

    dyn = tuple(args[i] for i in idx)
    leaves, owners = [], []
    for i, a in zip(idx, dyn):
        for leaf in tree.leaves(a):
            leaves.append(leaf)
            owners.append(i)
    check(leaves, owners)
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


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of ``f`` by forward mode (one JVP per input element, batched).

    Efficient when the inputs are small and the outputs large.

    Args:
        f: a function of arrays (pytrees of arrays).
        argnums: the positional argument(s) to differentiate (an int or a sequence of
            distinct ints).
        has_aux: ``f`` returns ``(output, aux)``; the Jacobian function then returns
            ``(jacobian, aux)``.
        holomorphic: ``f`` is holomorphic, with complex inputs and outputs; the Jacobian
            holds the complex derivatives. Without it the inputs must be real (as in JAX).

    Returns:
        A function with ``f``'s signature returning the Jacobian: for each output leaf, a
        pytree like the argument (a tuple of them for a sequence ``argnums``) whose leaves
        have shape ``out.shape + in.shape``.

    Raises:
        GradError: ``f`` is not callable or ``argnums`` is not ints (when the Jacobian
            function is made); a differentiated argument is not real floating-point (not
            complex, with ``holomorphic``), or ``argnums`` is out of range or repeats.

    Example:
        >>> fx.jacfwd(lambda x: x ** 2)(np.array([1.0, 2.0]))
        array([[2., 0.],
               [0., 4.]])
    """
    fname = f"jacfwd({getattr(f, '__name__', 'f')})"
    check_callable(f, "jacfwd", GradError)
    index_tuple(argnums, "argnums", fname, GradError)
    single = _is_single(argnums)

    def check(leaves: list, owners: list) -> None:
        check_diff_inputs(leaves, owners, fname, holomorphic, allow_int=False,
                          complex_ok=False)

    @functools.wraps(f)
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        f_partial, dyn = _argnums_partial(f, argnums, args, kwargs, fname, check)
        leaves, in_tree = tree.flatten(dyn)
        leaves = _as_arrays(leaves)
        dyn = tree.unflatten(in_tree, leaves)
        basis, _ = _std_basis(leaves)
        in_avals = [abstractify(x) for x in leaves]

        aux_box: list = []

        def push(*ts: Any) -> Any:
            res = jvp(f_partial, dyn, tree.unflatten(in_tree, list(ts)), has_aux=has_aux)
            if holomorphic:  # the primal outputs are concrete here (outside the batch)
                for k, y in enumerate(tree.leaves(res[0])):
                    check_diff_output(abstractify(y), fname, True, f"output leaf {k}")
            if has_aux:
                # The primal computation (aux included) runs on concrete values, outside the
                # batch: aux is returned as it is, like the output of f.
                aux_box.append(res[2])
            return res[1]

        try:
            jac = vmap(push, out_axes=-1)(*basis)
        except GradError as e:
            raise attach_source(e, user_source(1)) from None
        aux = aux_box[0] if has_aux else None
        sub_tree = tree.structure(dyn[0]) if single else in_tree
        n0 = len(tree.leaves(dyn[0])) if single else None
        avals = in_avals[:n0] if n0 is not None else in_avals
        result = tree.map(lambda j: _unravel_last(j, tuple(j.shape[:-1]), avals, sub_tree), jac)
        return (result, aux) if has_aux else result

    return jacfun


def jacrev(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """The Jacobian of ``f`` by reverse mode (one VJP per output element, batched).

    Efficient when the outputs are small and the inputs large. Same arguments, layout and
    errors as :func:`jacfwd`, except that, as for :func:`functx.grad`, the outputs must be
    real floating-point (complex with ``holomorphic``), complex inputs of a real function
    are allowed (JAX's convention ``df/dx - i df/dy``), and ``allow_int=True`` gives integer
    inputs a zero block of dtype ``float0``.

    Example:
        >>> fx.jacrev(lambda x: fnp.sum(x ** 3))(np.array([1.0, 2.0]))
        array([ 3., 12.])
    """
    fname = f"jacrev({getattr(f, '__name__', 'f')})"
    check_callable(f, "jacrev", GradError)
    index_tuple(argnums, "argnums", fname, GradError)
    single = _is_single(argnums)

    def check(leaves: list, owners: list) -> None:
        check_diff_inputs(leaves, owners, fname, holomorphic, allow_int)

    @functools.wraps(f)
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        f_partial, dyn = _argnums_partial(f, argnums, args, kwargs, fname, check)
        res = vjp(f_partial, *dyn, has_aux=has_aux)
        y, pull = res[0], res[1]
        aux = res[2] if has_aux else None
        y_leaves, y_tree = tree.flatten(y)
        y_leaves = _as_arrays(y_leaves)
        out_avals = [abstractify(x) for x in y_leaves]
        try:
            for k, a in enumerate(out_avals):
                check_diff_output(a, fname, holomorphic, f"output leaf {k}")
        except GradError as e:
            raise attach_source(e, user_source(1)) from None
        basis, _ = _std_basis(y_leaves)

        def pull_one(*cts: Any) -> Any:
            return pull(tree.unflatten(y_tree, list(cts)))

        cts = vmap(pull_one)(*basis)  # a tuple per argument, leaves (total, *in.shape)
        in_leaves, in_tree = tree.flatten(cts)
        # rows of the flat output, split per output leaf: out leaf -> input pytree
        blocks = []
        start = 0
        for a in out_avals:
            n = int(np.prod(a.shape, dtype=np.int64))
            per_in = [_reshape_rows(c[start:start + n], a.shape) if INEXACT_DTYPES[c.dtype]
                      else float0_zeros(tuple(a.shape) + tuple(c.shape[1:]))
                      for c in in_leaves]
            per_in_tree = tree.unflatten(in_tree, per_in)
            blocks.append(per_in_tree[0] if single else per_in_tree)
            start += n
        result = tree.unflatten(y_tree, blocks)
        return (result, aux) if has_aux else result

    return jacfun


def _reshape_rows(x: Any, out_shape: tuple) -> Any:
    return _reshape(x, tuple(out_shape) + tuple(x.shape[1:]))


def hessian(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """The Hessian of a scalar function: ``jacfwd(jacrev(f))``.

    Args:
        f: a function returning a scalar (pytrees of arrays in).
        argnums, has_aux, holomorphic: as for :func:`jacfwd`.

    Returns:
        A function returning the Hessian; for pytree inputs, a nested pytree of blocks
        ``H[i][j]`` of shape ``in_i.shape + in_j.shape``.

    Raises:
        GradError: as :func:`jacfwd` and :func:`jacrev`.

    Example:
        >>> fx.hessian(lambda x: fnp.sum(x ** 3))(np.array([1.0, 2.0]))
        array([[ 6.,  0.],
               [ 0., 12.]])
    """
    check_callable(f, "hessian", GradError)
    return jacfwd(jacrev(f, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)
