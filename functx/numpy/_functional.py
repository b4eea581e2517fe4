"""Functions of functions and array constructors from Python objects: vectorize,
frompyfunc, apply_along_axis, apply_over_axes, fromfunction, einsum_path, frombuffer,
fromstring, fromiter, from_dlpack.

``vectorize``, ``frompyfunc`` and ``apply_along_axis`` are built on ``functx.vmap``, as in
``jax.numpy``: the function is traced once for one example and batched, not called once
per element, so it must be written with functx operations (no Python control flow on
values; ``fnp.where`` instead).

Differences from NumPy:
    * ``vectorize``'s ``otypes``/``cache`` are not supported; ``excluded`` and
      ``signature`` are.
    * ``frompyfunc`` returns a vectorized function with ``nin``/``nout``/``identity`` and
      ``outer``/``reduce``/``accumulate`` methods (``reduce``/``accumulate`` loop in Python
      over the reduced axis); its results are arrays, not object arrays.
"""
from __future__ import annotations

import builtins
import re
from typing import Any, Callable

import numpy as np

from functx import tree
from functx.errors import ArgumentError, ShapeError
from functx.numpy import _shape as _fshape
from functx.numpy._devices import filled
from functx.numpy._promotion import asarray
from functx.transforms.vmap import vmap

__all__ = [
    "vectorize", "frompyfunc", "apply_along_axis", "apply_over_axes", "fromfunction",
    "einsum_path", "frombuffer", "fromstring", "fromiter", "from_dlpack",
]


# ----------------------------------------------------------------------------------------
# vectorize

_DIM = r"\w+"
_CORE = rf"\((?:{_DIM}(?:,\s*{_DIM})*)?\)"
_ARGS = rf"{_CORE}(?:,\s*{_CORE})*"
_SIGNATURE = re.compile(rf"^\s*({_ARGS})\s*->\s*({_ARGS})\s*$")


def _parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    m = _SIGNATURE.match(signature.replace(" ", ""))
    if m is None:
        raise ArgumentError(f"functx.numpy.vectorize: not a valid gufunc signature: "
                            f"{signature!r} (e.g. '(n),(n)->()').")

    def cores(s: str) -> list[tuple[str, ...]]:
        return [tuple(d for d in c.split(",") if d) for c in re.findall(r"\(([^)]*)\)", s)]

    return cores(m.group(1)), cores(m.group(2))


class vectorize:  # noqa: N801 - NumPy's name
    """A function of arrays made from ``pyfunc``, a function of single elements (or, with
    ``signature``, of core sub-arrays such as ``'(n),(n)->()'``), broadcast over the other
    axes with ``functx.vmap`` (see the module doc).

    Args:
        pyfunc: the function; it is traced for one example.
        excluded: positions or names of arguments passed through unchanged.
        signature: a generalized-ufunc signature naming each argument's core axes.

    Raises:
        ArgumentError: an invalid signature, or arguments that do not match it.

    Example:
        >>> f = fnp.vectorize(lambda a, b: fnp.where(a > b, a - b, a + b))
        >>> f(np.array([1.0, 4.0]), 2.0)
        array([3., 2.])
    """

    def __init__(self, pyfunc: Callable, otypes: Any = None, doc: str | None = None,
                 excluded: Any = frozenset(), cache: builtins.bool = False,
                 signature: str | None = None) -> None:
        if otypes is not None:
            raise ArgumentError("functx.numpy.vectorize does not support otypes=; cast the "
                                "result with astype.")
        self.pyfunc = pyfunc
        self.excluded = frozenset(excluded)
        self.signature = signature
        self._sig = None if signature is None else _parse_signature(signature)
        self.__doc__ = doc if doc is not None else getattr(pyfunc, "__doc__", None)
        self.__name__ = getattr(pyfunc, "__name__", "vectorized")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # split the arguments into batched ones and the excluded ones (passed as they are)
        pos = [i for i in range(len(args)) if i not in self.excluded]
        names = [k for k in kwargs if k not in self.excluded]
        arrays = [_fshape.as_array(args[i]) for i in pos] + [
            _fshape.as_array(kwargs[k]) for k in names]
        cores = self._sig[0] if self._sig else [()] * len(arrays)
        if len(cores) != len(arrays):
            raise ArgumentError(f"functx.numpy.vectorize: the signature "
                                f"{self.signature!r} has {len(cores)} inputs, but the function "
                                f"was called with {len(arrays)} (non-excluded) arguments.")
        sizes: dict[str, int] = {}
        loops = []
        for a, core in zip(arrays, cores):
            nd = len(a.shape)
            if nd < len(core):
                raise ArgumentError(f"functx.numpy.vectorize: an argument of shape "
                                    f"{tuple(a.shape)} has fewer axes than its core "
                                    f"dimensions {core} in {self.signature!r}.")
            for name, d in zip(core, a.shape[nd - len(core):]):
                if sizes.setdefault(name, d) != d:
                    raise ArgumentError(f"functx.numpy.vectorize: core dimension {name!r} "
                                        f"is {sizes[name]} for one argument and {d} for "
                                        f"another.")
            loops.append(tuple(a.shape[:nd - len(core)]))
        loop = np.broadcast_shapes(*loops) if loops else ()
        n = int(np.prod(loop, dtype=np.int64))
        flat = [_fshape.reshape(_fshape.broadcast_to(a, loop + tuple(a.shape[len(lp):])),
                                (n,) + tuple(a.shape[len(lp):]))
                for a, lp in zip(arrays, loops)]

        def one(*xs: Any) -> Any:
            full = list(args)
            kw = dict(kwargs)
            for i, x in zip(pos, xs[:len(pos)]):
                full[i] = x
            for k, x in zip(names, xs[len(pos):]):
                kw[k] = x
            return self.pyfunc(*full, **kw)

        if n == 0:
            probe = vmap(one)(*[_fshape.broadcast_to(np.zeros((), f.dtype),
                                                     (1,) + tuple(f.shape[1:])) for f in flat])
            out = tree.map(lambda o: o[:0], probe)
        else:
            out = vmap(one)(*flat) if arrays else self.pyfunc(*args, **kwargs)
        if not arrays:
            return out
        leaves, treedef = tree.flatten(out)
        leaves = [_fshape.reshape(o, loop + tuple(o.shape[1:])) for o in leaves]
        return tree.unflatten(treedef, leaves)


# ----------------------------------------------------------------------------------------
# frompyfunc


class _PyUfunc:
    """What :func:`frompyfunc` returns: a vectorized function with ufunc-like methods."""

    def __init__(self, func: Callable, nin: int, nout: int, identity: Any) -> None:
        self._func, self.nin, self.nout, self.identity = func, nin, nout, identity
        self.nargs = nin + nout
        self.__name__ = getattr(func, "__name__", "ufunc")
        self._vec = vectorize(func)

    def __repr__(self) -> str:
        return f"<functx.numpy.frompyfunc {self.__name__} (nin={self.nin}, nout={self.nout})>"

    def __call__(self, *args: Any) -> Any:
        if len(args) != self.nin:
            raise ArgumentError(f"functx.numpy.frompyfunc({self.__name__}) takes {self.nin} "
                                f"arguments, got {len(args)}.")
        return self._vec(*args)

    def outer(self, a: Any, b: Any) -> Any:
        """``f(a[..., None...], b)``: the function on every pair of elements."""
        self._binary("outer")
        a, b = _fshape.as_array(a), _fshape.as_array(b)
        a = _fshape.reshape(a, tuple(a.shape) + (1,) * len(b.shape))
        return self(a, b)

    def _binary(self, what: str) -> None:
        if self.nin != 2 or self.nout != 1:
            raise ArgumentError(f"functx.numpy.frompyfunc: {what} needs a function of 2 "
                                f"inputs and 1 output, this one has nin={self.nin}, "
                                f"nout={self.nout}.")

    def accumulate(self, a: Any, axis: int = 0) -> Any:
        """The running results of applying the function along ``axis``."""
        self._binary("accumulate")
        a = _fshape.as_array(a)
        ax = _fshape.norm_axis(axis, len(a.shape), "accumulate")
        parts = [_fshape.slice_axis(a, i, i + 1, ax) for i in range(a.shape[ax])]
        acc, out = None, []
        for p in parts:
            acc = p if acc is None else self(acc, p)
            out.append(acc)
        return _fshape.concatenate(out, axis=ax) if out else a

    def reduce(self, a: Any, axis: int | None = 0) -> Any:
        """The function folded along ``axis`` (``identity`` for an empty axis)."""
        self._binary("reduce")
        a = _fshape.as_array(a)
        if axis is None:
            a, axis = _fshape.ravel(a), 0
        ax = _fshape.norm_axis(axis, len(a.shape), "reduce")
        if a.shape[ax] == 0:
            if self.identity is None:
                raise ArgumentError("functx.numpy.frompyfunc: reduce of an empty axis needs "
                                    "an identity; pass identity= to frompyfunc.")
            shape = tuple(d for i, d in enumerate(a.shape) if i != ax)
            return filled(a, self.identity, a.dtype, shape)
        acc = None
        for i in range(a.shape[ax]):
            p = _fshape.squeeze(_fshape.slice_axis(a, i, i + 1, ax), ax)
            acc = p if acc is None else self(acc, p)
        return acc


def frompyfunc(func: Callable, /, nin: int, nout: int, *, identity: Any = None) -> _PyUfunc:
    """A ufunc-like function from ``func`` of ``nin`` elements (``nout`` results), with
    ``outer``, ``reduce`` and ``accumulate`` (see the module doc).

    Example:
        >>> add = fnp.frompyfunc(lambda a, b: a + b, 2, 1, identity=0)
        >>> add.reduce(np.array([1, 2, 3]))
        array(6)
    """
    if int(nin) < 1 or int(nout) < 1:
        raise ArgumentError(f"functx.numpy.frompyfunc: nin and nout must be positive, got "
                            f"{nin} and {nout}.")
    return _PyUfunc(func, int(nin), int(nout), identity)


# ----------------------------------------------------------------------------------------
# apply


def apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """``func1d`` applied to every 1-D slice of ``arr`` along ``axis`` (vmapped); the
    slice's axis is replaced by the axes of ``func1d``'s result.

    Raises:
        ShapeError: ``arr`` is 0-d or has no slices.

    Example:
        >>> fnp.apply_along_axis(lambda r: r[0] + r[-1], 1, np.arange(6.0).reshape(2, 3))
        array([2., 8.])
    """
    arr = _fshape.as_array(arr)
    nd = len(arr.shape)
    if nd == 0:
        raise ShapeError("functx.numpy.apply_along_axis needs an array of at least one "
                         "dimension, got a 0-d array.")
    axis = _fshape.norm_axis(axis, nd, "apply_along_axis")
    x = _fshape.moveaxis(arr, axis, -1)
    lead = tuple(x.shape[:-1])
    n = int(np.prod(lead, dtype=np.int64))
    if n == 0:
        raise ShapeError(f"functx.numpy.apply_along_axis: cannot apply a function to the "
                         f"slices of an array of shape {tuple(arr.shape)}: there are none.")
    flat = _fshape.reshape(x, (n, x.shape[-1]))
    out = vmap(lambda row: asarray(func1d(row, *args, **kwargs)))(flat)
    core = tuple(out.shape[1:])
    out = _fshape.reshape(out, lead + core)
    # the result's own axes go where the applied axis was
    k = len(core)
    perm = list(range(axis)) + [len(lead) + j for j in range(k)] + list(range(axis, len(lead)))
    return _fshape.transpose(out, perm)


def apply_over_axes(func: Callable, a: Any, axes: Any) -> Any:
    """``func(a, axis)`` applied for each axis in ``axes`` in turn; a result with one axis
    fewer gets it back (size 1), so the dimension count stays.

    Raises:
        ShapeError: ``func`` returns an array of another dimension count.

    Example:
        >>> fnp.apply_over_axes(fnp.sum, np.ones((2, 3)), [0, 1])
        array([[6.]])
    """
    val = _fshape.as_array(a)
    nd = len(val.shape)
    for axis in ([axes] if np.ndim(axes) == 0 else list(axes)):
        ax = axis + nd if axis < 0 else axis
        res = _fshape.as_array(func(val, ax))
        if len(res.shape) == nd:
            val = res
        elif len(res.shape) == nd - 1:
            val = _fshape.expand_dims(res, ax)
        else:
            raise ShapeError(f"functx.numpy.apply_over_axes: the function must return an "
                             f"array with {nd} or {nd - 1} dimensions, got shape "
                             f"{tuple(res.shape)}.")
    return val


def fromfunction(function: Callable, shape: Any, *, dtype: Any = float, **kwargs: Any) -> Any:
    """``function(*indices(shape, dtype))``: the function of the coordinates of each
    element, called once with the whole index grids.

    Example:
        >>> fnp.fromfunction(lambda i, j: i + j, (2, 2), dtype=int)
        array([[0, 1],
               [1, 2]])
    """
    shape = tuple(int(s) for s in shape)
    grids = [asarray(g) for g in np.indices(shape, dtype=dtype)]
    return function(*grids, **kwargs)


def einsum_path(subscripts: str, /, *operands: Any, optimize: Any = "auto") -> tuple:
    """The contraction order NumPy's ``einsum_path`` finds for operands of these shapes,
    and its report (only the operands' shapes and dtypes are used).

    Example:
        >>> fnp.einsum_path("ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)),
        ...                 np.ones((4, 5)))[0]
        ['einsum_path', (1, 2), (0, 1)]
    """
    shells = [np.broadcast_to(np.zeros((), _fshape.as_array(o).dtype if not isinstance(
        o, str) else np.float64), tuple(_fshape.as_array(o).shape)) for o in operands]
    opt = "greedy" if optimize in ("auto", True) else optimize
    return np.einsum_path(subscripts, *shells, optimize=opt)


# ----------------------------------------------------------------------------------------
# arrays from Python objects and buffers


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Any:
    """A 1-D array read from the bytes of ``buffer`` (a copy; read-only).

    Example:
        >>> fnp.frombuffer(b"\\x01\\x02", dtype=np.uint8)
        array([1, 2], dtype=uint8)
    """
    return asarray(np.array(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Any:
    """A 1-D array parsed from text numbers separated by ``sep``.

    Example:
        >>> fnp.fromstring("1 2 3", sep=" ")
        array([1., 2., 3.])
    """
    if sep == "":
        raise ArgumentError("functx.numpy.fromstring: sep must be given (binary mode is "
                            "deprecated in NumPy); use frombuffer for bytes.")
    return asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromiter(iterable: Any, dtype: Any, count: int = -1) -> Any:
    """A 1-D array of the values of ``iterable``.

    Example:
        >>> fnp.fromiter(range(3), dtype=np.int64)
        array([0, 1, 2])
    """
    return asarray(np.fromiter(iterable, dtype=dtype, count=count))


def from_dlpack(x: Any, /, *, device: Any = None, copy: Any = None) -> Any:
    """An array from an object that supports the DLPack protocol (a NumPy array for host
    memory; CuPy's ``from_dlpack`` for device memory).

    Example:
        >>> fnp.from_dlpack(np.arange(2))
        array([0, 1])
    """
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None and dev()[0] != 1:  # not kDLCPU
        import cupy  # noqa: PLC0415 - CuPy is optional and imported only for device memory

        return cupy.from_dlpack(x)
    return asarray(np.array(np.from_dlpack(x), copy=True))

