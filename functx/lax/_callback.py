"""Host callbacks: ``pure_callback`` (values computed by NumPy/SciPy code on the host) and
``debug_callback`` (host code run for its effect: ``functx.debug.print``).

Both are primitives whose parameter is the host function, so they work under every
transform:

* eagerly, and in ``jit``'s replay, the implementation moves the arguments to the host
  (NumPy arrays, read-only), calls the function, and moves the results back to the
  arguments' device (CuPy on CUDA);
* ``vmap``: ``pure_callback`` follows its ``vmap_method`` (``"sequential"``,
  ``"expand_dims"``, ``"broadcast_all"``, as in JAX); ``debug_callback`` calls the function
  once per batch member (as JAX 0.10 does), in one equation of the batched trace;
* ``grad``/``jvp``: ``pure_callback`` has no derivative (its rules raise a ``GradError``
  that says to wrap it in ``custom_vjp``/``custom_jvp``); ``debug_callback`` has no outputs,
  so nothing flows through it and it runs in the forward pass only.

``debug_callback`` declares effects (``Primitive.has_effects``): ``jit``'s dead-code
elimination keeps it although nothing reads its (absent) outputs. ``pure_callback`` is pure:
its equation is dropped when its results are unused, as in JAX.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from functx import numpy as fnp
from functx import tree
from functx.backends import owned_read_only, to_numpy
from functx.errors import ArgumentTypeError, DTypeError, GradError, ShapeError, VmapError
from functx.ir import AbstractArray
from functx.registry import Primitive
from functx.tracing import Tracer, bind, innermost_abstract_builder

__all__ = ["pure_callback", "pure_callback_p", "debug_callback", "debug_callback_p",
           "HostFunction", "VMAP_METHODS"]

# ("sequential_unrolled" is JAX's name for a sequential loop it unrolls: here the same)
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")


class HostFunction:
    """A host function as an equation parameter: ``fn(*host_arrays)`` with a readable name.

    Compared and hashed by identity (each call of ``pure_callback`` makes a new one)."""

    __slots__ = ("fn", "name")

    def __init__(self, fn: Callable, name: str) -> None:
        self.fn = fn
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _host(x: Any) -> Any:
    """A read-only NumPy view (or host copy) of an array or scalar argument."""
    h = np.asarray(to_numpy(x))
    if type(h) is np.ndarray and h.flags.writeable:
        h = h.view()
        h.flags.writeable = False
    return h


def _dynamic(x: Any) -> bool:
    """Whether a pytree leaf is passed to the primitive (an array, a tracer, a number)."""
    return (type(x) is Tracer or isinstance(x, (bool, int, float, complex, np.generic))
            or (hasattr(x, "shape") and hasattr(x, "dtype")))


def _split_leaves(args: tuple, kwargs: dict) -> tuple[list, Callable[[list], tuple]]:
    """``(the array leaves of (args, kwargs), rebuild)``: ``rebuild(values)`` puts values in
    place of the array leaves and returns ``(args, kwargs)``; other leaves (strings, ...)
    stay as they are."""
    leaves, treedef = tree.flatten((args, kwargs))
    where = [i for i, x in enumerate(leaves) if _dynamic(x)]

    def rebuild(values: list) -> tuple:
        full = list(leaves)
        for i, v in zip(where, values):
            full[i] = v
        return tree.unflatten(treedef, full)

    return [leaves[i] for i in where], rebuild


def _bind_staged(prim: Primitive, leaves: list, **params: Any) -> Any:
    """``bind(prim, *leaves, **params)``, recorded in the innermost abstract trace (``jit``,
    ``make_trace``) even when no leaf is traced (a callback of constants only), so that it
    runs at every call of the traced function rather than once while tracing."""
    if not any(type(x) is Tracer for x in leaves):
        builder = innermost_abstract_builder()
        if builder is not None:
            return builder.process(prim, tuple(leaves), params)
    return bind(prim, *leaves, **params)


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


# -- pure_callback ---------------------------------------------------------------------------

pure_callback_p = Primitive("pure_callback", multiple_results=True)
pure_callback_p.cache_abstract_eval = False  # params hold a fresh host function per call


@pure_callback_p.def_abstract_eval
def _pure_callback_aval(*avals: AbstractArray, callback: HostFunction,
                        result_avals: tuple, vmap_method: str | None) -> list:
    return list(result_avals)


def host_results(outs: Any, avals: Sequence[AbstractArray], name: str) -> list:
    """The host function's results as NumPy arrays of the declared types.

    Raises:
        ShapeError: the number of results or a result's shape differs from the declared one.
        DTypeError: a result's dtype differs (Python scalars are converted).
    """
    if len(outs) != len(avals):
        raise ShapeError(f"pure_callback({name}) returned {len(outs)} array(s) but "
                         f"result_shape_dtypes declares {len(avals)}: "
                         f"{', '.join(map(str, avals))}.")
    got = []
    for k, (o, a) in enumerate(zip(outs, avals)):
        weak = isinstance(o, (bool, int, float, complex))
        h = np.asarray(to_numpy(o))
        if h.dtype != a.dtype:
            if not weak:
                raise DTypeError(
                    f"pure_callback({name}) returned result {k} of dtype {h.dtype} but "
                    f"result_shape_dtypes declares {a}. Return arrays of the declared dtype "
                    f"(e.g. np.asarray(r, dtype={np.dtype(a.dtype).name!r})).")
            h = h.astype(a.dtype)
        if tuple(h.shape) != tuple(a.shape):
            raise ShapeError(f"pure_callback({name}) returned result {k} of shape "
                             f"{tuple(h.shape)} but result_shape_dtypes declares {a}.")
        got.append(h)
    return got


@pure_callback_p.def_impl
def _pure_callback_impl(xp: Any, *args: Any, callback: HostFunction, result_avals: tuple,
                        vmap_method: str | None) -> list:
    outs = host_results(callback.fn(*[_host(a) for a in args]), result_avals, callback.name)
    if xp is np:  # the callback may keep what it returns: writeable arrays are copied
        return [owned_read_only(o) for o in outs]
    return [xp.asarray(o) for o in outs]


def _no_derivative(name: str) -> GradError:
    return GradError(
        f"pure_callback({name}) has no derivative: functx cannot differentiate host code. "
        "Wrap the function that calls pure_callback in functx.custom_vjp (or custom_jvp) "
        "and give its derivative, possibly with another pure_callback; or wrap its inputs "
        "in functx.stop_gradient if no gradient should flow through it.")


@pure_callback_p.def_vjp
def _pure_callback_vjp(cts: list, ins: tuple, out: list, *, callback: HostFunction,
                       result_avals: tuple, vmap_method: str | None) -> tuple:
    raise _no_derivative(callback.name)


@pure_callback_p.def_jvp
def _pure_callback_jvp(tangents: tuple, primals: tuple, out: list, *, callback: HostFunction,
                       result_avals: tuple, vmap_method: str | None) -> list:
    raise _no_derivative(callback.name)


@pure_callback_p.def_batch
def _pure_callback_batch(args: tuple, dims: tuple, *, callback: HostFunction,
                         result_avals: tuple, vmap_method: str | None) -> tuple:
    size = next(fnp.shape(x)[d] for x, d in zip(args, dims) if d is not None)
    if vmap_method not in VMAP_METHODS:
        raise VmapError(
            f"vmap of pure_callback({callback.name}) needs to know how to batch the host "
            f"function, but vmap_method={vmap_method!r}. Pass vmap_method='sequential' (call "
            "it once per batch member), 'expand_dims' (call it once; unbatched arguments get "
            "a leading axis of size 1) or 'broadcast_all' (call it once; every argument is "
            "broadcast to the batch), as in jax.pure_callback.")
    batched_avals = tuple(AbstractArray((size,) + tuple(a.shape), a.dtype)
                          for a in result_avals)
    if vmap_method in ("sequential", "sequential_unrolled"):
        xs = [x if d is None else fnp.moveaxis(x, d, 0) for x, d in zip(args, dims)]
        which = [d is not None for d in dims]
        inner = callback

        def sequential(*host: Any) -> list:
            per = [host_results(inner.fn(*[h[b, ...] if w else h for h, w in zip(host, which)]),
                               result_avals, inner.name) for b in range(size)]
            if not per:
                return [np.zeros(a.shape, a.dtype) for a in batched_avals]
            return [np.stack([p[k] for p in per]) for k in range(len(result_avals))]

        fn = HostFunction(sequential, f"sequential({inner.name})")
    else:
        if vmap_method == "expand_dims":
            xs = [fnp.expand_dims(x, 0) if d is None else fnp.moveaxis(x, d, 0)
                  for x, d in zip(args, dims)]
        else:  # broadcast_all
            xs = [fnp.broadcast_to(x, (size,) + tuple(fnp.shape(x))) if d is None
                  else fnp.moveaxis(x, d, 0) for x, d in zip(args, dims)]
        fn = callback
    outs = bind(pure_callback_p, *xs, callback=fn, result_avals=batched_avals,
                vmap_method=vmap_method)
    return outs, [0] * len(outs)


def _result_avals(result_shape_dtypes: Any, name: str) -> tuple[list, Any]:
    leaves, treedef = tree.flatten(result_shape_dtypes)
    avals = []
    for x in leaves:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise ArgumentTypeError(
                f"pure_callback({name}): result_shape_dtypes must be a pytree of objects "
                f"with .shape and .dtype (functx.ShapeDtype, NumPy arrays), but a leaf is "
                f"{type(x).__name__} {x!r:.60}.")
        avals.append(AbstractArray(tuple(int(n) for n in x.shape), np.dtype(x.dtype)))
    return avals, treedef


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  sharding: Any = None, vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Call the host function ``callback`` from inside any transform (``jit``, ``vmap``...).

    ``callback`` receives NumPy arrays (read-only; CUDA arrays are copied to the host) in
    place of the array leaves of ``args`` and ``kwargs``, and returns a pytree of arrays
    matching ``result_shape_dtypes``; the results move back to the arguments' device. It
    must be pure: under ``jit`` it runs at every call, and it may be dropped when its
    results are unused (use ``functx.debug.callback`` for effects).

    Args:
        callback: the host function (NumPy, SciPy, any Python code).
        result_shape_dtypes: a pytree of objects with ``.shape`` and ``.dtype``
            (``functx.ShapeDtype``, arrays) describing the results.
        *args: the arguments (pytrees of arrays; non-array leaves are passed as they are).
        sharding: accepted for compatibility with ``jax.pure_callback`` (functx runs on one
            device) and ignored.
        vmap_method: how ``vmap`` batches the call: ``"sequential"`` (once per batch
            member), ``"expand_dims"`` (once, batched arguments with the batch axis first,
            unbatched ones with a leading axis of size 1; the callback must return results
            with the batch axis first) or ``"broadcast_all"`` (as ``"expand_dims"``, with
            every argument broadcast to the batch). None: ``vmap`` raises.
        **kwargs: keyword arguments of ``callback`` (pytrees of arrays).

    Returns:
        The results, a pytree shaped like ``result_shape_dtypes``.

    Raises:
        ArgumentTypeError: ``callback`` is not callable or a leaf of
            ``result_shape_dtypes`` has no shape and dtype.
        ShapeError, DTypeError: when the call runs, ``callback`` returned results that do
            not match ``result_shape_dtypes`` (Python scalars are converted).
        GradError: ``grad`` or ``jvp`` reached the call (wrap it in ``custom_vjp``).
        VmapError: ``vmap`` reached the call without a ``vmap_method``.

    Example:
        >>> import scipy.special
        >>> def gammaln(x):
        ...     return fx.pure_callback(scipy.special.gammaln,
        ...                             fx.ShapeDtype(x.shape, x.dtype), x,
        ...                             vmap_method="expand_dims")
        >>> fx.jit(fx.vmap(gammaln))(np.ones((3, 2)))
        array([[0., 0.], [0., 0.], [0., 0.]])
    """
    if not callable(callback):
        raise ArgumentTypeError(f"pure_callback: callback must be callable, but got "
                                f"{type(callback).__name__} {callback!r:.60}.")
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ArgumentTypeError(f"pure_callback: vmap_method must be one of "
                                f"{', '.join(map(repr, VMAP_METHODS))} or None, but got "
                                f"{vmap_method!r}.")
    name = _fn_name(callback)
    avals, out_tree = _result_avals(result_shape_dtypes, name)
    leaves, rebuild = _split_leaves(args, kwargs)

    def flat(*host: Any) -> list:
        a, kw = rebuild(list(host))
        result = callback(*a, **kw)
        outs, got_tree = tree.flatten(result)
        if got_tree != out_tree:
            raise ShapeError(f"pure_callback({name}) returned a result structured as "
                             f"{got_tree} but result_shape_dtypes is structured as "
                             f"{out_tree}.")
        return outs

    outs = _bind_staged(pure_callback_p, leaves, callback=HostFunction(flat, name),
                        result_avals=tuple(avals), vmap_method=vmap_method)
    return tree.unflatten(out_tree, list(outs))


# -- debug_callback --------------------------------------------------------------------------

debug_callback_p = Primitive("debug_callback", multiple_results=True)
debug_callback_p.cache_abstract_eval = False  # params hold a fresh host function per call
debug_callback_p.has_effects = True  # no outputs: dead-code elimination must keep it


@debug_callback_p.def_abstract_eval
def _debug_callback_aval(*avals: AbstractArray, callback: HostFunction) -> list:
    return []


@debug_callback_p.def_impl
def _debug_callback_impl(xp: Any, *args: Any, callback: HostFunction) -> list:
    callback.fn(*[_host(a) for a in args])
    return []


debug_callback_p.def_zero_vjp()  # no outputs: no cotangent ever reaches it
debug_callback_p.def_jvp(lambda tangents, primals, out, **params: None)


@debug_callback_p.def_batch
def _debug_callback_batch(args: tuple, dims: tuple, *, callback: HostFunction) -> tuple:
    size = next(fnp.shape(x)[d] for x, d in zip(args, dims) if d is not None)
    xs = [x if d is None else fnp.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    which = [d is not None for d in dims]
    inner = callback

    def per_member(*host: Any) -> None:
        for b in range(size):
            inner.fn(*[h[b, ...] if w else h for h, w in zip(host, which)])

    bind(debug_callback_p, *xs, callback=HostFunction(per_member, inner.name))
    return [], []


def debug_callback(callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call ``callback(*args, **kwargs)`` on the host with the actual values, from inside
    any transform, for its effect (printing, logging, inspecting).

    The array leaves of ``args``/``kwargs`` arrive as read-only NumPy arrays. Under ``jit``
    it runs at every call (it is never dropped as dead code); under ``vmap`` once per batch
    member, in order; under ``grad``/``jvp`` in the forward pass only, with the primal
    values. Its return value is ignored.

    Args:
        callback: the host function.
        *args, **kwargs: its arguments (pytrees of arrays; other leaves as they are).

    Returns:
        None.

    Raises:
        ArgumentTypeError: ``callback`` is not callable.

    Example:
        >>> fx.jit(lambda x: (debug_callback(print, x), x * 2)[1])(np.ones(2))
        [1. 1.]
    """
    if not callable(callback):
        raise ArgumentTypeError(f"debug.callback: callback must be callable, but got "
                                f"{type(callback).__name__} {callback!r:.60}.")
    leaves, rebuild = _split_leaves(args, kwargs)

    def flat(*host: Any) -> None:
        a, kw = rebuild(list(host))
        callback(*a, **kw)

    _bind_staged(debug_callback_p, leaves, callback=HostFunction(flat, _fn_name(callback)))
