"""class_nll and class_nll_grad: the negative log-likelihood of class indices, fused.

Written with the general primitives, ``nll_loss`` (and ``cross_entropy`` after its
log_softmax) takes a dozen small operations per step: pick the targets' entries, mask the
ignored ones, weight, sum, divide, and as many again backwards. On a GPU each costs a
kernel launch and its Python overhead, which dominate at typical sizes; these two
primitives take one kernel (two small ones for a reduction) each way.

* ``class_nll(x, t, w, *, axis, reduction)``: ``x`` holds log-probabilities with the
  classes along ``axis``; ``t`` holds integer targets, of ``x``'s shape without ``axis``;
  ``w`` holds the class weights, shape ``(C,)``, or is 0-d (one weight for every class: 1
  for none). With ``picked[p] = x[p, t[p]]`` and ``wt[p] = w[t[p]]`` where ``t[p]`` is in
  ``[0, C)`` and both 0 elsewhere (a target outside the classes contributes nothing:
  ``functx.nn`` maps ``ignore_index`` there), the result is ``-wt * picked`` for
  ``reduction="none"`` (``t``'s shape), its sum for ``"sum"``, and for ``"mean"`` that sum
  divided by ``sum(wt)`` (NaN when the weights sum to 0, as in PyTorch).
* ``class_nll_grad(t, w, g, *, axis, size, reduction)``: the transpose of ``class_nll`` in
  ``x``: zeros of ``x``'s shape (``size`` classes along ``axis``) holding, at ``[p, t[p]]``,
  ``-wt[p] * g[p]`` (``"none"``; ``g`` has ``t``'s shape), ``-wt[p] * g`` (``"sum"``; ``g``
  is 0-d) or ``-wt[p] * g / sum(wt)`` (``"mean"``).

Each primitive is linear in its array operand (``x``, ``g``), and the other one is its
transpose there: that is the VJP and JVP of each in that operand. Derivatives with respect
to the weights, and batching where weights differ per example or a reduction must stay
per example, use the same formulas in composite functx operations (``take_along`` /
``put_along``). Implementations compute in the input's dtype, half precision (float16,
bfloat16) in float32 with the result rounded once.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import add_tangents, batch_at, batch_size, moveaxis
from functx.primitives._util import (
    fmt,
    in_compute_dtype,
    is_real_float,
    ndim_of,
    same_dtypes,
    shape_of,
)
from functx.primitives.cuda import nll as _cuda
from functx.primitives.indexing import put_along, put_one_per_row, take_along
from functx.registry import Primitive, composite_jvp, composite_vjp
from functx.tracing import bind

__all__ = ["class_nll", "class_nll_grad", "class_nll_p", "class_nll_grad_p"]

REDUCTIONS = ("none", "sum", "mean")


# -- shape rules -------------------------------------------------------------------------------

def _check(name: str, t: AbstractArray, w: AbstractArray, f: AbstractArray, axis: int,
           size: int, reduction: str) -> None:
    """Checks shared by both primitives (``f`` is x or g, the float operand)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {REDUCTIONS}, not {reduction!r}.")
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{name} needs integer class indices but got {t}; convert them with "
                         ".astype(int).")
    if not is_real_float(f.dtype):
        raise DTypeError(f"{name} needs a real floating-point operand but got {f}.")
    if not 0 <= axis <= t.ndim:
        raise ShapeError(f"{name}: the class axis {axis} is out of range for targets {t}.")
    if tuple(w.shape) not in ((size,), ()):
        raise ShapeError(f"{name}: the weights must have shape ({size},) (one per class) or "
                         f"be 0-d, but they are {w}.")
    same_dtypes(name, f, w)


def _nll_aval(x: AbstractArray, t: AbstractArray, w: AbstractArray, *, axis: int,
              reduction: str) -> AbstractArray:
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"class_nll: the class axis {axis} is out of range for {x}.")
    _check("class_nll", t, w, x, axis, x.shape[axis], reduction)
    if tuple(t.shape) != x.shape[:axis] + x.shape[axis + 1:]:
        raise ShapeError(f"class_nll of {fmt([x, t])}: the targets must have x's shape "
                         f"without the class axis {axis}, "
                         f"{x.shape[:axis] + x.shape[axis + 1:]}.")
    return AbstractArray(t.shape if reduction == "none" else (), x.dtype)


def _nll_grad_aval(t: AbstractArray, w: AbstractArray, g: AbstractArray, *, axis: int,
                   size: int, reduction: str) -> AbstractArray:
    _check("class_nll_grad", t, w, g, axis, size, reduction)
    want = tuple(t.shape) if reduction == "none" else ()
    if tuple(g.shape) != want:
        raise ShapeError(f"class_nll_grad with reduction={reduction!r} needs a cotangent of "
                         f"shape {want} but got {g}.")
    return AbstractArray(t.shape[:axis] + (size,) + t.shape[axis:], g.dtype)


# -- generic implementations -------------------------------------------------------------------

def _targets(xp: Any, t: Any, w: Any, n: int) -> tuple[Any, Any, Any]:
    """(in range, safe index, weight per position (0 out of range))."""
    ok = (t >= 0) & (t < n)
    safe = xp.where(ok, t, 0)
    if n == 0:  # (no class: every target is out of range)
        return ok, safe, xp.zeros(t.shape, w.dtype)
    wt = w[safe] if w.ndim else xp.broadcast_to(w, t.shape)
    return ok, safe, xp.where(ok, wt, xp.zeros((), w.dtype))


def _nll_impl(xp: Any, x: Any, t: Any, w: Any, *, axis: int, reduction: str) -> Any:
    dt = x.dtype
    x, w = in_compute_dtype(x, w)
    n = x.shape[axis]
    ok, safe, wt = _targets(xp, t, w, n)
    if n == 0 or t.size == 0:
        picked = xp.zeros(t.shape, x.dtype)
    else:
        picked = xp.squeeze(xp.take_along_axis(x, xp.expand_dims(safe, axis), axis), axis)
        picked = xp.where(ok, picked, xp.zeros((), x.dtype))
    terms = -(wt * picked)
    if reduction == "none":
        return terms.astype(dt, copy=False)
    total = xp.sum(terms)
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            total = total / xp.sum(wt)
    return xp.asarray(total, dtype=dt)


def _nll_grad_impl(xp: Any, t: Any, w: Any, g: Any, *, axis: int, size: int,
                   reduction: str) -> Any:
    dt = g.dtype
    out = xp.zeros(t.shape[:axis] + (size,) + t.shape[axis:], dt)
    if size == 0 or t.size == 0:
        return out
    g, w = in_compute_dtype(g, w)
    ok, safe, wt = _targets(xp, t, w, size)
    coef = -(wt * g)
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            coef = coef / xp.sum(wt)
    coef = xp.where(ok, coef, xp.zeros((), coef.dtype)).astype(dt, copy=False)
    return put_one_per_row(xp, out.shape, axis, safe, coef)


class_nll_p = Primitive("class_nll")
class_nll_p.def_abstract_eval(_nll_aval)
class_nll_p.def_impl(_nll_impl)
class_nll_p.def_impl(functools.partial(_cuda.class_nll, fallback=_nll_impl),
                     backend="cuda")

class_nll_grad_p = Primitive("class_nll_grad")
class_nll_grad_p.def_abstract_eval(_nll_grad_aval)
class_nll_grad_p.def_impl(_nll_grad_impl)
class_nll_grad_p.def_impl(functools.partial(_cuda.class_nll_grad,
                                            fallback=_nll_grad_impl), backend="cuda")


# -- the same formulas in composite functx operations (derivatives in w, batching) -------------

def _weights_at(t: Any, w: Any, shape: tuple, axis: int, w_dims: tuple | None) -> Any:
    """``w[t]`` per position (0 out of range); ``w`` broadcasts to the dense ``shape`` along
    ``w_dims`` (default: the class axis, or nothing for a 0-d ``w``)."""
    if w_dims is None:
        w_dims = (axis,) if ndim_of(w) else ()
    return take_along(_shape.broadcast_in_dim(w, shape, w_dims), t, axis=axis)


def _nll_composite(x: Any, t: Any, w: Any, axis: int, reduction: str, lead: int = 0,
                   w_dims: tuple | None = None) -> Any:
    """class_nll in functx operations; the first ``lead`` axes are a batch (kept)."""
    wt = _weights_at(t, w, tuple(shape_of(x)), axis, w_dims)
    terms = _ew.neg(_ew.mul(wt, take_along(x, t, axis=axis)))
    if reduction == "none":
        return terms
    axes = tuple(range(lead, ndim_of(terms)))
    total = _red.reduce_sum(terms, axes)
    return total if reduction == "sum" else _ew.div(total, _red.reduce_sum(wt, axes))


def _nll_grad_composite(t: Any, w: Any, g: Any, axis: int, size: int, reduction: str,
                        lead: int = 0, w_dims: tuple | None = None) -> Any:
    """class_nll_grad in functx operations; the first ``lead`` axes are a batch."""
    tshape = tuple(shape_of(t))
    wt = _weights_at(t, w, tshape[:axis] + (size,) + tshape[axis:], axis, w_dims)
    if reduction != "none":  # g holds one value per example: spread it over the positions
        g = _shape.broadcast_in_dim(g, tshape, tuple(range(lead)))
    coef = _ew.neg(_ew.mul(wt, g))
    if reduction == "mean":
        axes = tuple(range(lead, len(tshape)))
        den = _red.reduce_sum(wt, axes)
        coef = _ew.div(coef, _shape.broadcast_in_dim(den, tshape, tuple(range(lead))))
    return put_along(t, coef, axis=axis, size=size)


# -- class_nll's rules -------------------------------------------------------------------------

@class_nll_p.def_vjp(save_inputs=(0, 1, 2), selective=True)
def _nll_vjp(ct, ins, out, *, axis, reduction, needs):
    x, t, w = ins
    dx = dw = None
    if needs[0]:
        dx = class_nll_grad(t, w, ct, axis=axis, size=shape_of(x)[axis], reduction=reduction)
    if needs[2]:
        dw = composite_vjp(_nll_composite, ins, ct, (2,), axis=axis, reduction=reduction)[2]
    return dx, None, dw


@class_nll_p.def_jvp
def _nll_jvp(tangents, primals, out, *, axis, reduction):
    (tx, _, tw), (_, t, w) = tangents, primals
    res = None if tx is None else class_nll(tx, t, w, axis=axis, reduction=reduction)
    if tw is not None:
        res = add_tangents(res, composite_jvp(_nll_composite, primals, (None, None, tw),
                                              axis=axis, reduction=reduction))
    return res


def _batched_weights(w: Any, dw: int | None, axis: int) -> tuple[Any, tuple | None]:
    """Per-example weights moved to the front, with their dims in the batched dense shape."""
    if dw is None:
        return w, None
    w = moveaxis(w, dw, 0)
    return w, ((0, axis) if ndim_of(w) == 2 else (0,))


@class_nll_p.def_batch
def _nll_batch(args, dims, *, axis, reduction):
    (x, t, w), (dx, dt, dw) = args, dims
    size = batch_size(args, dims)
    xb, tb = batch_at(x, dx, 0, size), batch_at(t, dt, 0, size)
    if dw is None and reduction == "none":
        return class_nll(xb, tb, w, axis=axis + 1, reduction="none"), 0
    wb, w_dims = _batched_weights(w, dw, axis + 1)
    return _nll_composite(xb, tb, wb, axis + 1, reduction, lead=1, w_dims=w_dims), 0


# -- class_nll_grad's rules --------------------------------------------------------------------

@class_nll_grad_p.def_vjp(save_inputs=(0, 1, 2), selective=True)
def _nll_grad_vjp(ct, ins, out, *, axis, size, reduction, needs):
    t, w, g = ins
    dw = dg = None
    if needs[2]:
        dg = class_nll(ct, t, w, axis=axis, reduction=reduction)
    if needs[1]:
        dw = composite_vjp(_nll_grad_composite, ins, ct, (1,), axis=axis, size=size,
                           reduction=reduction)[1]
    return None, dw, dg


@class_nll_grad_p.def_jvp
def _nll_grad_jvp(tangents, primals, out, *, axis, size, reduction):
    (_, tw, tg), (t, w, _) = tangents, primals
    res = None if tg is None else class_nll_grad(t, w, tg, axis=axis, size=size,
                                                 reduction=reduction)
    if tw is not None:
        res = add_tangents(res, composite_jvp(_nll_grad_composite, primals, (None, tw, None),
                                              axis=axis, size=size, reduction=reduction))
    return res


@class_nll_grad_p.def_batch
def _nll_grad_batch(args, dims, *, axis, size, reduction):
    (t, w, g), (dt, dw, dg) = args, dims
    n = batch_size(args, dims)
    tb, gb = batch_at(t, dt, 0, n), batch_at(g, dg, 0, n)
    if dw is None and reduction == "none":
        return class_nll_grad(tb, w, gb, axis=axis + 1, size=size, reduction="none"), 0
    wb, w_dims = _batched_weights(w, dw, axis + 1)
    return _nll_grad_composite(tb, wb, gb, axis + 1, size, reduction, lead=1,
                               w_dims=w_dims), 0


# -- wrappers ----------------------------------------------------------------------------------

def class_nll(x: Any, t: Any, w: Any, *, axis: int, reduction: str) -> Any:
    """The weighted negative log-likelihood of the class indices ``t`` under the
    log-probabilities ``x`` (classes along ``axis``), reduced (see the module docstring).

    Example:
        >>> class_nll(np.log([[0.5, 0.5], [0.25, 0.75]]), np.array([0, 1]), np.array(1.0),
        ...           axis=1, reduction="none")
        array([0.69314718, 0.28768207])
    """
    return bind(class_nll_p, x, t, w, axis=int(axis), reduction=str(reduction))


def class_nll_grad(t: Any, w: Any, g: Any, *, axis: int, size: int, reduction: str) -> Any:
    """The cotangent of ``class_nll``'s ``x`` for the output cotangent ``g`` (see the module
    docstring); ``size`` is the number of classes."""
    return bind(class_nll_grad_p, t, w, g, axis=int(axis), size=int(size),
                reduction=str(reduction))
