"""Shared helpers for writing primitive rules: shape checks and gradient plumbing."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray


def fmt(avals: Sequence[Any]) -> str:
    """``f32[3,4], f32[4]`` for a list of abstract values."""
    return ", ".join(str(a) for a in avals)


def broadcast_shapes(name: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy broadcasting of ``shapes``.

    Raises:
        ShapeError: the shapes do not broadcast; the message names ``name`` and the shapes.
    """
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return shapes[0]
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        dims = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ShapeError(
                f"{name}: shapes {', '.join(map(str, shapes))} cannot be broadcast together "
                f"(axis {i - ndim} has sizes {sorted(dims)}). Make the sizes equal, or insert "
                "size-1 axes (x[:, None]) where you mean to broadcast.")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


_WEAK_PLACEHOLDER = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}


def is_extension_float(dt: np.dtype) -> bool:
    """Whether ``dt`` is a floating-point type NumPy does not know as one (kind ``V`` with its
    own scalar type: ``ml_dtypes.bfloat16`` and its kin)."""
    return dt.kind == "V" and dt.type is not np.void


def same_dtypes(name: str, *avals: AbstractArray) -> np.dtype:
    """The common dtype of ``avals``, which must all be equal at the primitive level.

    Weakly typed operands (Python scalars) take the dtype of the others where NumPy 2
    would keep that dtype (``f32`` with ``2.0`` is ``f32``; ``i64`` with ``2.5`` is an error),
    and where JAX would for bfloat16 (a weak bool, int or float keeps it, as for float16).

    Raises:
        DTypeError: they differ; functx.numpy promotes dtypes, primitives do not.
    """
    strong = [a.dtype for a in avals if not a.weak_type]
    dt = strong[0] if strong else avals[0].dtype
    for a in avals:
        if a.weak_type and strong:
            if is_extension_float(dt):  # NumPy promotes bfloat16 with 0.0 to float64
                ok = a.dtype.kind in "biuf"
            else:
                ok = np.result_type(dt, _WEAK_PLACEHOLDER.get(a.dtype.kind, 0.0)) == dt
        else:
            ok = a.dtype == dt
        if not ok:
            raise DTypeError(
                f"{name} needs operands of one dtype but got {fmt(avals)}. The primitive does "
                "not promote: use the functx.numpy function (which promotes as NumPy does) or "
                "convert first with x.astype(dtype).")
    return dt


def require_dtype_kind(name: str, aval: AbstractArray, kinds: str, what: str) -> None:
    """Check ``aval.dtype.kind`` is one of ``kinds`` ('f' float, 'c' complex, 'i' int, ...).

    Raises:
        DTypeError: naming the primitive, the operand and what dtype it needs.
    """
    if aval.dtype.kind not in kinds:
        raise DTypeError(f"{name} needs {what} operands but got {aval}. Convert it with "
                         f"x.astype(...) first.")


def is_float(aval: Any) -> bool:
    return np.dtype(aval.dtype).kind in "fc" or aval.dtype.name == "bfloat16"


def is_real_float(dt: Any) -> bool:
    """Whether ``dt`` is a real floating-point dtype (float16/32/64 or bfloat16)."""
    dt = np.dtype(dt)
    return dt.kind == "f" or is_extension_float(dt)


_F32 = np.dtype(np.float32)


def compute_dtype(dt: Any) -> np.dtype:
    """The dtype an implementation computes a result of dtype ``dt`` in: float32 for the
    half-precision types (float16, bfloat16: the result is rounded once, at the end), else
    ``dt`` itself."""
    dt = np.dtype(dt)
    return _F32 if (dt.kind == "f" and dt.itemsize == 2) or is_extension_float(dt) else dt


def in_compute_dtype(*arrays: Any) -> tuple:
    """``arrays`` converted to :func:`compute_dtype` of the first one's dtype (the same
    arrays where that is their own dtype). Implementations call this on entry and round
    their results back to the input dtype once, at the end."""
    dt = compute_dtype(arrays[0].dtype)
    if dt == arrays[0].dtype:
        return arrays
    return tuple(a.astype(dt) if hasattr(a, "astype") else a for a in arrays)


def normalize_axes(name: str, axes: Sequence[int], ndim: int) -> tuple[int, ...]:
    """Axes made non-negative and checked to be in range and distinct.

    Raises:
        ShapeError: an axis is out of range or repeated.
    """
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"{name}: axis {a} is out of range for an array of rank {ndim}; "
                             f"use an axis in [{-ndim}, {ndim}).")
        a = a % ndim if ndim else 0
        if a in out:
            raise ShapeError(f"{name}: axis {a} is repeated in {tuple(axes)}.")
        out.append(a)
    return tuple(out)


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of an array, a tracer or a Python scalar (without NumPy's dispatch, which
    would route a tracer through ``__array_function__``)."""
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def ndim_of(x: Any) -> int:
    """The rank of an array, a tracer or a Python scalar (see :func:`shape_of`)."""
    return len(x.shape) if hasattr(x, "shape") else np.ndim(x)


def dilated_size(n: int, d: int) -> int:
    """The size of an axis of ``n`` elements with ``d - 1`` holes between neighbours."""
    return 0 if n == 0 else (n - 1) * d + 1


def out_spatial(in_sizes: Sequence[int], kernel: Sequence[int], window_strides: Sequence[int],
                padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
                rhs_dilation: Sequence[int]) -> tuple[int, ...]:
    """The spatial sizes of a convolution's output (0 where the padded input is shorter than
    the kernel); see functx/primitives/conv.py for the parameters."""
    out = []
    for n, k, s, (lo, hi), ld, rd in zip(in_sizes, kernel, window_strides, padding,
                                          lhs_dilation, rhs_dilation):
        span = dilated_size(n, ld) + lo + hi - dilated_size(k, rd)
        out.append(span // s + 1 if span >= 0 else 0)
    return tuple(out)
