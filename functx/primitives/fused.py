"""Fused primitives for speed: layer_norm (and its gradient), softmax, log_softmax, gelu.

Written as composites of elementwise primitives these take one kernel launch and one pass
over memory per operation (a dozen for a layer norm's forward and backward); as primitives
they take one or two, on the CPU through NumPy and on CUDA through the kernels of
``functx.primitives.cuda.fused``. Every one has every rule, written with functx operations:

* ``layer_norm(x, weight, bias, *, eps)`` normalises over the LAST axis of ``x``:
  ``xhat * weight + bias`` with ``xhat = (x - mean) / sqrt(var + eps)`` (biased variance,
  two-pass). ``weight`` and ``bias`` have shape ``(D,)`` or are 0-d (broadcast along the
  axis): an absent weight is passed as a 0-d 1 and an absent bias as a 0-d 0, which cost
  nothing and, being 0-d, join any device. Its VJP is ``dx = layer_norm_grad(x, w, ct)``,
  ``dweight = sum(ct * xhat)``, ``dbias = sum(ct)`` over the leading axes (each only where
  needed; all three from one ``layer_norm_grads`` when a parameter needs one); its JVP is ``weight * J tx + xhat * tweight + tbias`` with ``J tx =
  layer_norm_grad(x, 1, tx)`` (the Jacobian of ``xhat`` is symmetric).
* ``layer_norm_grads(x, weight, g, *, eps)``: ``(dx, dweight, dbias)`` in one pass (the
  VJP's primitive when a parameter needs its cotangent; see its section).
* ``layer_norm_grad(x, weight, g, *, eps)`` is ``J^T (g * weight)``:
  ``rstd * (gw - mean(gw) - xhat * mean(gw * xhat))`` with ``gw = g * weight``, statistics
  recomputed from ``x`` (one kernel on CUDA, no saved mean or rstd). Its own VJP and JVP
  differentiate the same formula written in composite functx operations, so every order
  of derivative exists (only second and higher orders pay for the composite).
* ``softmax(x, *, axis)``: ``exp(x - m) / sum(exp(x - m))`` with ``m`` the maximum along
  ``axis`` (0 where it is not finite: a row of ``-inf`` gives NaN, as in PyTorch). VJP
  ``y * (ct - sum(ct * y))``, JVP ``y * (t - sum(t * y))`` (the Jacobian is symmetric).
* ``log_softmax(x, *, axis)``: ``(x - m) - log(sum(exp(x - m)))``. VJP
  ``log_softmax_grad(y, ct) = ct - exp(y) * sum(ct)`` (a primitive: one kernel on CUDA),
  JVP ``t - sum(exp(y) * t)``.
* ``gelu(x, *, approximate)``: ``x * Phi(x)`` (``approximate="none"``, through ``erf``) or
  ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (``"tanh"``). Its VJP and JVP are
  ``gelu_grad(x, ct)``.
* ``gelu_grad(x, g, *, approximate)`` is ``g * gelu'(x)`` (one kernel); its derivatives use
  ``gelu''`` written in functx operations.

Batching: normalisation is over one axis, so a batch axis anywhere else passes through; a
batch on that axis (``layer_norm``'s last) moves to the front. A per-example weight or bias
falls back to the primitive without affine parameters and a broadcast product.

Dtypes: float16, bfloat16, float32 and float64. The CPU implementations compute float32
and float64 in their own dtype, and the half-precision types (float16, bfloat16) in float32,
rounding each result once, at the end (``functx.primitives._util.in_compute_dtype``).
Exact GELU and its gradient in float32 (the half types through it) are one compiled loop
each, a float64 formula per element rounded once (functx/primitives/elementwise/_gelu32.py;
without Numba, the same formula in NumPy).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import (add_tangents, batch_size, broadcast_to_shape,
                                         moveaxis, to_front, unary_batch)
from functx.primitives._precision import in_float32
from functx.primitives._util import (
    in_compute_dtype,
    is_real_float,
    ndim_of,
    same_dtypes,
    shape_of,
)
from functx.primitives.cuda import fused as _cuda
from functx.primitives.elementwise import _gelu32
from functx.primitives.elementwise._common import scalar_float
from functx.registry import Primitive
from functx.registry.scalar import call, where
from functx.tracing import bind, trace_function

__all__ = ["layer_norm", "layer_norm_grad", "softmax", "log_softmax", "gelu", "gelu_grad",
           "layer_norm_p", "layer_norm_grad_p", "softmax_p", "log_softmax_p", "gelu_p",
           "gelu_grad_p", "log_softmax_grad_p", "layer_norm_grads_p", "layer_norm_grads",
           "log_softmax_grad"]

GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# -- shared checks and helpers ---------------------------------------------------------------

def _check_real_float(name: str, x: AbstractArray) -> None:
    if not is_real_float(x.dtype):
        raise DTypeError(f"{name} needs a real floating-point operand but got {x}. Convert it "
                         "with x.astype(np.float32) (or float64) first.")


def _check_axis(name: str, x: AbstractArray, axis: int) -> None:
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"{name}: axis {axis} is out of range for {x}; use an axis in "
                         f"[0, {x.ndim}) (functx.nn normalises negative axes).")


def _sum_keep(a: Any, axis: int) -> Any:
    """``sum(a, axis, keepdims=True)`` with functx primitives."""
    shape = shape_of(a)
    kept = shape[:axis] + (1,) + shape[axis + 1:]
    return _shape.reshape(_red.reduce_sum(a, (axis,)), kept)


def _lead_sum(a: Any, shape: Sequence[int]) -> Any:
    """A cotangent of the result summed back to a parameter of ``shape`` (``(D,)`` or ``()``)."""
    return _ew.unbroadcast(a, AbstractArray(tuple(shape), np.dtype(a.dtype)))


def _front(v: Any, d: int | None, size: int, nd: int) -> Any:
    """A parameter (``(D,)`` or ``()`` per example) batched at ``d``, shaped to broadcast
    against an ``nd``-dimensional operand whose batch is in front; unbatched: as it is."""
    if d is None:
        return v
    v = moveaxis(v, d, 0)
    rest = shape_of(v)[1:]
    return _shape.reshape(v, (size,) + (1,) * (nd - 1 - len(rest)) + tuple(rest))


# -- layer_norm ------------------------------------------------------------------------------

def _ln_aval(x: AbstractArray, w: AbstractArray, b: AbstractArray, *,
             eps: float) -> AbstractArray:
    _check_layer_norm_operands("layer_norm", x, w, ("bias", b))
    return AbstractArray(x.shape, x.dtype)


def _check_layer_norm_operands(name: str, x: AbstractArray, w: AbstractArray,
                               other: tuple[str, AbstractArray]) -> None:
    _check_real_float(name, x)
    if x.ndim < 1:
        raise ShapeError(f"{name} normalises over the last axis, so it needs an operand of "
                         f"rank >= 1, but got {x}.")
    d = x.shape[-1]
    what, o = other
    params = [("weight", w)] + ([(what, o)] if what != "g" else [])
    for pname, p in params:
        if tuple(p.shape) not in ((d,), ()):
            raise ShapeError(f"{name}: {pname} must have shape ({d},) (the last axis of {x}) "
                             f"or be a scalar, but it is {p}.")
    if what == "g" and tuple(o.shape) != tuple(x.shape):
        raise ShapeError(f"{name}: the cotangent g must have the shape of x ({x}) but it is "
                         f"{o}.")
    same_dtypes(name, x, w, o)


def _ln_stats(xp: Any, x: Any, eps: float) -> tuple[Any, Any]:
    """``(xhat, rstd)`` over the last axis (rstd with a kept axis)."""
    mean = xp.mean(x, axis=-1, keepdims=True)
    c = x - mean
    rstd = 1 / xp.sqrt(xp.mean(c * c, axis=-1, keepdims=True) + eps)
    return c * rstd, rstd


def _ln_impl(xp: Any, x: Any, w: Any, b: Any, *, eps: float) -> Any:
    dt = x.dtype
    if x.size == 0:
        return xp.zeros(x.shape, dt)
    x, w, b = in_compute_dtype(x, w, b)
    xhat, _ = _ln_stats(xp, x, eps)
    return (xhat * w + b).astype(dt, copy=False)


def _ln_grad_impl(xp: Any, x: Any, w: Any, g: Any, *, eps: float) -> Any:
    dt = x.dtype
    if x.size == 0:
        return xp.zeros(x.shape, dt)
    x, w, g = in_compute_dtype(x, w, g)
    xhat, rstd = _ln_stats(xp, x, eps)
    gw = g * w
    out = rstd * (gw - xp.mean(gw, axis=-1, keepdims=True)
                  - xhat * xp.mean(gw * xhat, axis=-1, keepdims=True))
    return out.astype(dt, copy=False)


layer_norm_p = Primitive("layer_norm")
layer_norm_p.def_abstract_eval(_ln_aval)
layer_norm_p.def_impl(_ln_impl)
layer_norm_p.def_impl(_cuda.layer_norm, backend="cuda")

layer_norm_grad_p = Primitive("layer_norm_grad")
layer_norm_grad_p.def_abstract_eval(
    lambda x, w, g, *, eps: (_check_layer_norm_operands("layer_norm_grad", x, w, ("g", g)),
                             AbstractArray(x.shape, x.dtype))[1])
layer_norm_grad_p.def_impl(_ln_grad_impl)
layer_norm_grad_p.def_impl(_cuda.layer_norm_grad, backend="cuda")


def _normalized(x: Any, eps: float) -> Any:
    """``xhat``: the primitive with a 0-d weight 1 and bias 0."""
    return bind(layer_norm_p, x, _ew.scalar(x, 1), _ew.scalar(x, 0), eps=eps)


@layer_norm_p.def_vjp(save_inputs=(0, 1), selective=True)
def _ln_vjp(ct, ins, out, *, eps, needs):
    x, w, b = ins  # (b only abstract: its value is not saved)
    if not (needs[1] or needs[2]):
        return (bind(layer_norm_grad_p, x, w, ct, eps=eps) if needs[0] else None), None, None
    dx, dw, db = bind(layer_norm_grads_p, x, w, ct, eps=eps)  # one pass over x and ct
    return (dx if needs[0] else None, _lead_sum(dw, shape_of(w)) if needs[1] else None,
            _lead_sum(db, shape_of(b)) if needs[2] else None)


@layer_norm_p.def_jvp
def _ln_jvp(tangents, primals, out, *, eps):
    (tx, tw, tb), (x, w, _) = tangents, primals
    t = None
    if tx is not None:
        t = _ew.mul(w, bind(layer_norm_grad_p, x, _ew.scalar(x, 1), tx, eps=eps))
    if tw is not None:
        t = add_tangents(t, _ew.mul(_normalized(x, eps), tw))
    t = add_tangents(t, tb)
    return None if t is None else broadcast_to_shape(t, shape_of(out))


@layer_norm_p.def_batch
def _ln_batch(args, dims, *, eps):
    (x, w, b), (dx, dw, db) = args, dims
    size = batch_size(args, dims)
    if dw is None and db is None:
        if dx == ndim_of(x) - 1:  # the batch sits on the normalised axis: move it
            x, dx = moveaxis(x, dx, 0), 0
        return bind(layer_norm_p, x, w, b, eps=eps), dx
    xb = to_front(x, dx, size)
    nd = ndim_of(xb)
    y = _ew.mul(_normalized(xb, eps), _front(w, dw, size, nd))
    return _ew.add(y, _front(b, db, size, nd)), 0


# The same formula as _ln_grad_impl, in functx operations: the derivatives of layer_norm_grad
# are its derivatives (every order exists; only second and higher orders pay for it).
# ``mean(a)`` is the mean over the last axis, broadcastable against ``a``.

def _mean_keep(a: Any) -> Any:
    """The mean over the last axis with the axis kept (size 1)."""
    return _ew.mul(_sum_keep(a, ndim_of(a) - 1), 1.0 / shape_of(a)[-1])


def _mean_rows(a: Any) -> Any:
    """The mean over the last axis broadcast back to ``a``'s shape: a row reduction, then
    a broadcast and elementwise operations, which the CUDA compiler fuses with their
    neighbours into one row kernel (``layer_norm``'s expansion)."""
    shape = shape_of(a)
    s = _red.reduce_sum(a, (len(shape) - 1,))
    return _ew.mul(_shape.broadcast_in_dim(s, shape, tuple(range(len(shape) - 1))),
                   1.0 / shape[-1])


def _standardize(x: Any, eps: float, mean: Any = _mean_keep) -> tuple:
    """``(xhat, rstd)``: ``x`` standardised over its last axis, and ``1 / std``."""
    c = _ew.sub(x, mean(x))
    rstd = _ew.rsqrt(_ew.add(mean(_ew.mul(c, c)), eps))
    return _ew.mul(c, rstd), rstd


def _ln_grad_formula(x: Any, w: Any, g: Any, *, eps: float, mean: Any = _mean_keep) -> Any:
    xhat, rstd = _standardize(x, eps, mean)
    gw = _ew.mul(g, w)
    inner = _ew.sub(_ew.sub(gw, mean(gw)), _ew.mul(xhat, mean(_ew.mul(gw, xhat))))
    return _ew.mul(rstd, inner)


_ln_grad_composite = in_float32(_ln_grad_formula)


def _no_features(x: Any, w: Any, g: Any, *, eps: float) -> bool:
    """Rows of length 0: nothing to differentiate (and no mean to take)."""
    return shape_of(x)[-1] == 0


layer_norm_grad_p.def_composite_rules(_ln_grad_composite, zero_if=_no_features)


# The CUDA compiler's expansions (``prim.def_expand``): the same formulas with the row means
# broadcast back (``_mean_rows``), so that a layer norm, the elementwise operations around it
# and its gradient become one row kernel that reads each row once.
def _ln_formula(x: Any, w: Any, b: Any, *, eps: float, mean: Any = _mean_keep) -> Any:
    return _ew.add(_ew.mul(_standardize(x, eps, mean)[0], w), b)


def _row_expansion(name: str, formula: Any, **extra: Any) -> Any:
    """The expansion rule of a primitive over the last axis (None for empty rows, or
    where its ``axis`` parameter is another): the trace of ``formula(*operands,
    **params, **extra)`` evaluated as the primitive does (``in_float32``)."""
    def expand(*avals: AbstractArray, **params: Any) -> Any:
        if avals[0].shape[-1] == 0 or params.get("axis", avals[0].ndim - 1) != avals[0].ndim - 1:
            return None
        f = in_float32(formula)
        return trace_function(lambda *xs: f(*xs, **params, **extra), avals, {}, name)[0]
    return expand


layer_norm_p.def_expand(_row_expansion("layer_norm", _ln_formula, mean=_mean_rows))
layer_norm_grad_p.def_expand(_row_expansion("layer_norm_grad", _ln_grad_formula,
                                            mean=_mean_rows))


@layer_norm_grad_p.def_batch
def _ln_grad_batch(args, dims, *, eps):
    (x, w, g), (dx, dw, dg) = args, dims
    size = batch_size(args, dims)
    if dw is not None:  # per-example weights: J^T (g * w) with the weight folded into g
        xb, gb = to_front(x, dx, size), to_front(g, dg, size)
        gw = _ew.mul(gb, _front(w, dw, size, ndim_of(xb)))
        return bind(layer_norm_grad_p, xb, _ew.scalar(xb, 1), gw, eps=eps), 0
    if dx == dg and dx != ndim_of(x) - 1:
        return bind(layer_norm_grad_p, x, w, g, eps=eps), dx
    return bind(layer_norm_grad_p, to_front(x, dx, size), w, to_front(g, dg, size),
                eps=eps), 0


# layer_norm's whole backward pass as one primitive: ``(dx, dweight, dbias)`` with ``dx =
# layer_norm_grad(x, w, g)``, ``dweight = sum(g * xhat)`` and ``dbias = sum(g)`` over every
# axis but the last (shape ``(D,)`` whatever ``w``'s shape; the VJP sums further for a 0-d
# weight). On CUDA one kernel computes all three in one pass over ``x`` and ``g`` (column
# sums per block of rows, then a sum of the blocks' rows): no ``xhat`` array, no column
# reductions. Its derivatives differentiate the composite formula, like layer_norm_grad's.

def _ln_grads_aval(x: AbstractArray, w: AbstractArray, g: AbstractArray, *,
                   eps: float) -> tuple:
    _check_layer_norm_operands("layer_norm_grads", x, w, ("g", g))
    d = AbstractArray(x.shape[-1:], x.dtype)
    return AbstractArray(x.shape, x.dtype), d, d


def _ln_grads_impl(xp: Any, x: Any, w: Any, g: Any, *, eps: float) -> tuple:
    lead = tuple(range(x.ndim - 1))
    dt = x.dtype
    if x.size == 0:
        return (xp.zeros(x.shape, dt), xp.zeros(x.shape[-1:], dt), xp.zeros(x.shape[-1:], dt))
    dx = _ln_grad_impl(xp, x, w, g, eps=eps)
    x, w, g = in_compute_dtype(x, w, g)
    xhat, _ = _ln_stats(xp, x, eps)
    dw = xp.sum(g * xhat, axis=lead) if lead else g * xhat
    db = xp.sum(g, axis=lead) if lead else xp.array(g, copy=True)
    return dx, dw.astype(dt, copy=False), db.astype(dt, copy=False)


layer_norm_grads_p = Primitive("layer_norm_grads", multiple_results=True)
layer_norm_grads_p.def_abstract_eval(_ln_grads_aval)
layer_norm_grads_p.def_impl(_ln_grads_impl)
layer_norm_grads_p.def_impl(_cuda.layer_norm_grads, backend="cuda")


@in_float32
def _ln_grads_composite(x: Any, w: Any, g: Any, *, eps: float) -> tuple:
    """``layer_norm_grads``'s outputs in functx operations (its derivatives' formula)."""
    lead = tuple(range(ndim_of(x) - 1))
    dw = _ew.mul(g, _standardize(x, eps)[0])
    return (_ln_grad_composite(x, w, g, eps=eps), _red.reduce_sum(dw, lead) if lead else dw,
            _red.reduce_sum(g, lead) if lead else g)


layer_norm_grads_p.def_composite_rules(_ln_grads_composite, zero_if=_no_features)


@layer_norm_grads_p.def_batch
def _ln_grads_batch(args, dims, *, eps):
    # dweight and dbias sum over the leading axes of one example, not over the batch.
    (x, w, g), (dx, dw, dg) = args, dims
    size = batch_size(args, dims)
    xb, gb = to_front(x, dx, size), to_front(g, dg, size)
    ddx, _ = _ln_grad_batch((xb, w, gb), (0, dw, 0), eps=eps)
    inner = tuple(range(1, ndim_of(xb) - 1))
    gx = _ew.mul(gb, _normalized(xb, eps))
    return ([ddx, _red.reduce_sum(gx, inner) if inner else gx,
             _red.reduce_sum(gb, inner) if inner else gb], [0, 0, 0])


def layer_norm(x: Any, weight: Any, bias: Any, *, eps: float) -> Any:
    """Normalise ``x`` over its last axis, then scale by ``weight`` and shift by ``bias``
    (each of shape ``(D,)`` or 0-d); see the module docstring. ``functx.nn.layer_norm`` is
    the user-facing function.

    Example:
        >>> layer_norm(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2), eps=0.0)
        array([[-1.,  1.]])
    """
    return bind(layer_norm_p, x, weight, bias, eps=float(eps))


def layer_norm_grad(x: Any, weight: Any, g: Any, *, eps: float) -> Any:
    """The cotangent of ``layer_norm``'s input ``x`` for the output cotangent ``g`` (see the
    module docstring)."""
    return bind(layer_norm_grad_p, x, weight, g, eps=float(eps))


def layer_norm_grads(x: Any, weight: Any, g: Any, *, eps: float) -> tuple:
    """``(dx, dweight, dbias)`` of ``layer_norm`` for the output cotangent ``g``, the
    parameter gradients summed over every axis but the last (see the module docstring)."""
    return tuple(bind(layer_norm_grads_p, x, weight, g, eps=float(eps)))


def log_softmax_grad(y: Any, g: Any, *, axis: int) -> Any:
    """``g - exp(y) * sum(g, axis)``: log_softmax's VJP for its output ``y`` and the
    cotangent ``g`` (``axis`` normalised to ``[0, y.ndim)``)."""
    return bind(log_softmax_grad_p, y, g, axis=_axis(axis, y))


# -- softmax, log_softmax --------------------------------------------------------------------

def _softmax_aval(name: str):
    def rule(x: AbstractArray, *, axis: int) -> AbstractArray:
        _check_real_float(name, x)
        _check_axis(name, x, axis)
        return AbstractArray(x.shape, x.dtype)
    return rule


def _shifted(xp: Any, x: Any, axis: int) -> Any:
    """``x`` minus its maximum along ``axis`` (0 where that maximum is not finite)."""
    m = xp.max(x, axis=axis, keepdims=True)
    return x - xp.where(xp.isfinite(m), m, 0).astype(x.dtype, copy=False)


def _softmax_impl(xp: Any, x: Any, *, axis: int) -> Any:
    dt = x.dtype
    if x.size == 0:
        return xp.zeros(x.shape, dt)
    (x,) = in_compute_dtype(x)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        e = xp.exp(_shifted(xp, x, axis))
        return (e / xp.sum(e, axis=axis, keepdims=True)).astype(dt, copy=False)


def _log_softmax_impl(xp: Any, x: Any, *, axis: int) -> Any:
    dt = x.dtype
    if x.size == 0:
        return xp.zeros(x.shape, dt)
    (x,) = in_compute_dtype(x)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        s = _shifted(xp, x, axis)
        return (s - xp.log(xp.sum(xp.exp(s), axis=axis, keepdims=True))).astype(dt,
                                                                                copy=False)


def _axis_batch(prim: Primitive):
    def rule(args, dims, *, axis):
        d = dims[0]
        return bind(prim, args[0], axis=axis + (axis >= d)), d
    return rule


def _softmax_rows(x: Any, *, axis: int, log: bool) -> Any:
    """softmax (``log``: log_softmax) over the last axis as ``_softmax_impl`` computes it,
    the row statistics broadcast back: the CUDA compiler's expansion, fused with the
    operations around it into one row kernel (``x * scale + mask`` of attention)."""
    shape = shape_of(x)
    lead = tuple(range(len(shape) - 1))

    def back(s: Any) -> Any:
        return _shape.broadcast_in_dim(s, shape, lead)

    m = back(_red.reduce_max(x, (axis,)))
    s = _ew.sub(x, _ew.select(_ew.is_finite(m), m, _ew.scalar(m, 0)))
    if log:
        return _ew.sub(s, back(_ew.log(_red.reduce_sum(_ew.exp(s), (axis,)))))
    e = _ew.exp(s)
    return _ew.div(e, back(_red.reduce_sum(e, (axis,))))


softmax_p = Primitive("softmax")
softmax_p.def_abstract_eval(_softmax_aval("softmax"))
softmax_p.def_impl(_softmax_impl)
softmax_p.def_impl(_cuda.softmax, backend="cuda")
softmax_p.def_vjp(lambda ct, ins, out, *, axis: (
    _ew.mul(out, _ew.sub(ct, _sum_keep(_ew.mul(ct, out), axis))),), save_output=True)
softmax_p.def_jvp(lambda tangents, primals, out, *, axis: None if tangents[0] is None else
                  _ew.mul(out, _ew.sub(tangents[0], _sum_keep(_ew.mul(tangents[0], out), axis))))
softmax_p.def_batch(_axis_batch(softmax_p))
softmax_p.def_expand(_row_expansion("softmax", _softmax_rows, log=False))

log_softmax_p = Primitive("log_softmax")
log_softmax_p.def_abstract_eval(_softmax_aval("log_softmax"))
log_softmax_p.def_impl(_log_softmax_impl)
log_softmax_p.def_impl(_cuda.log_softmax, backend="cuda")
log_softmax_p.def_vjp(lambda ct, ins, out, *, axis: (
    bind(log_softmax_grad_p, out, ct, axis=axis),), save_output=True)
log_softmax_p.def_jvp(lambda tangents, primals, out, *, axis: None if tangents[0] is None else
                      _ew.sub(tangents[0], _sum_keep(_ew.mul(_ew.exp(out), tangents[0]), axis)))
log_softmax_p.def_batch(_axis_batch(log_softmax_p))
log_softmax_p.def_expand(_row_expansion("log_softmax", _softmax_rows, log=True))


# log_softmax's VJP, ``g - exp(y) * sum(g)`` along the axis, as one primitive (one kernel on
# CUDA instead of a reduction and three elementwise passes). Its derivatives are written out:
# ``d/dy = -ct * exp(y) * sum(g)`` and ``d/dg = ct - sum(ct * exp(y))``.

def _log_softmax_grad_aval(y: AbstractArray, g: AbstractArray, *, axis: int) -> AbstractArray:
    _check_real_float("log_softmax_grad", y)
    _check_axis("log_softmax_grad", y, axis)
    if tuple(g.shape) != tuple(y.shape):
        raise ShapeError(f"log_softmax_grad: the cotangent g must have the shape of y ({y}) "
                         f"but it is {g}.")
    same_dtypes("log_softmax_grad", y, g)
    return AbstractArray(y.shape, y.dtype)


def _log_softmax_grad_impl(xp: Any, y: Any, g: Any, *, axis: int) -> Any:
    dt = y.dtype
    if y.size == 0:
        return xp.zeros(y.shape, dt)
    y, g = in_compute_dtype(y, g)
    return (g - xp.exp(y) * xp.sum(g, axis=axis, keepdims=True)).astype(dt, copy=False)


log_softmax_grad_p = Primitive("log_softmax_grad")
log_softmax_grad_p.def_abstract_eval(_log_softmax_grad_aval)
log_softmax_grad_p.def_impl(_log_softmax_grad_impl)
log_softmax_grad_p.def_impl(_cuda.log_softmax_grad, backend="cuda")


@log_softmax_grad_p.def_vjp(save_inputs=(0, 1), selective=True)
def _log_softmax_grad_vjp(ct, ins, out, *, axis, needs):
    y, g = ins
    p = _ew.exp(y)
    dy = _ew.neg(_ew.mul(_ew.mul(ct, p), _sum_keep(g, axis))) if needs[0] else None
    dg = _ew.sub(ct, _sum_keep(_ew.mul(ct, p), axis)) if needs[1] else None
    return dy, dg


@log_softmax_grad_p.def_jvp
def _log_softmax_grad_jvp(tangents, primals, out, *, axis):
    (ty, tg), (y, g) = tangents, primals
    p = _ew.exp(y)
    t = None if tg is None else _ew.sub(tg, _ew.mul(p, _sum_keep(tg, axis)))
    if ty is not None:
        t = add_tangents(t, _ew.neg(_ew.mul(_ew.mul(ty, p), _sum_keep(g, axis))))
    return t


@log_softmax_grad_p.def_batch
def _log_softmax_grad_batch(args, dims, *, axis):
    (y, g), (dy, dg) = args, dims
    if dy == dg:
        return bind(log_softmax_grad_p, y, g, axis=axis + (axis >= dy)), dy
    size = batch_size(args, dims)
    return bind(log_softmax_grad_p, to_front(y, dy, size), to_front(g, dg, size),
                axis=axis + 1), 0


def _axis(axis: int, x: Any) -> int:
    """A negative ``axis`` counted from the end (the shape rule checks the range)."""
    axis = int(axis)
    return axis + ndim_of(x) if axis < 0 else axis


def softmax(x: Any, *, axis: int) -> Any:
    """``exp(x) / sum(exp(x), axis)``, stably (see the module docstring); ``axis`` is
    normalised to ``[0, x.ndim)``. ``functx.nn.softmax`` is the user-facing function.

    Example:
        >>> softmax(np.array([0.0, 0.0]), axis=0)
        array([0.5, 0.5])
    """
    return bind(softmax_p, x, axis=_axis(axis, x))


def log_softmax(x: Any, *, axis: int) -> Any:
    """``x - logsumexp(x, axis)``, stably (see the module docstring).

    Example:
        >>> log_softmax(np.array([0.0, 0.0]), axis=0)
        array([-0.69314718, -0.69314718])
    """
    return bind(log_softmax_p, x, axis=_axis(axis, x))


# -- gelu ------------------------------------------------------------------------------------

def _check_approximate(name: str, approximate: str) -> None:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"{name}: approximate must be 'none' or 'tanh', not {approximate!r}.")


def _gelu_aval(x: AbstractArray, *, approximate: str) -> AbstractArray:
    _check_real_float("gelu", x)
    _check_approximate("gelu", approximate)
    return AbstractArray(x.shape, x.dtype)


def _gelu_grad_aval(x: AbstractArray, g: AbstractArray, *, approximate: str) -> AbstractArray:
    _check_real_float("gelu_grad", x)
    _check_approximate("gelu_grad", approximate)
    if tuple(g.shape) != tuple(x.shape):
        raise ShapeError(f"gelu_grad: the cotangent g must have the shape of x ({x}) but it "
                         f"is {g}.")
    same_dtypes("gelu_grad", x, g)
    return AbstractArray(x.shape, x.dtype)


def _gelu_impl(xp: Any, x: Any, *, approximate: str) -> Any:
    dt = x.dtype
    (x,) = in_compute_dtype(x)
    if approximate == "none" and xp is np and x.dtype == np.float32:
        # one compiled pass, each element's float64 value rounded once (functx/primitives/
        # elementwise/_gelu32.py); float16 and bfloat16 through it, rounded once more
        return _gelu32.gelu32(x).astype(dt, copy=False)
    if approximate == "tanh":
        out = 0.5 * x * (1 + xp.tanh(GELU_C * (x + GELU_A * (x * x * x))))
    else:
        out = 0.5 * x * (1 + _ew.erf_impl(xp, x * _INV_SQRT2))
    return out.astype(dt, copy=False)


def _gelu_grad_impl(xp: Any, x: Any, g: Any, *, approximate: str) -> Any:
    dt = x.dtype
    x, g = in_compute_dtype(x, g)
    if approximate == "none" and xp is np and x.dtype == np.float32:
        return _gelu32.gelu_grad32(x, g).astype(dt, copy=False)  # one pass, as in _gelu_impl
    if approximate == "tanh":
        t = xp.tanh(GELU_C * (x + GELU_A * (x * x * x)))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (GELU_C * (1 + 3 * GELU_A * (x * x)))
    else:
        d = (0.5 * (1 + _ew.erf_impl(xp, x * _INV_SQRT2))
             + x * xp.exp(-0.5 * (x * x)) * _INV_SQRT_2PI)
    return (g * d).astype(dt, copy=False)


@in_float32
def _gelu_second(x: Any, approximate: str) -> Any:
    """``gelu''(x)`` in functx operations: ``phi(x) (2 - x^2)``, or for the tanh form
    ``(1 - t^2) (u' - x t u'^2 + x u'' / 2)`` with ``u = c (x + a x^3)``, ``t = tanh(u)``."""
    xx = _ew.mul(x, x)
    if approximate == "tanh":
        t = _ew.tanh(_ew.mul(GELU_C, _ew.add(x, _ew.mul(GELU_A, _ew.mul(xx, x)))))
        du = _ew.mul(GELU_C, _ew.add(1.0, _ew.mul(3 * GELU_A, xx)))
        half_x_ddu = _ew.mul(3 * GELU_C * GELU_A, xx)  # x u'' / 2 = 3 c a x^2
        inner = _ew.add(_ew.sub(du, _ew.mul(_ew.mul(x, t), _ew.mul(du, du))), half_x_ddu)
        return _ew.mul(_ew.sub(1.0, _ew.mul(t, t)), inner)
    phi = _ew.mul(_ew.exp(_ew.mul(xx, -0.5)), _INV_SQRT_2PI)
    return _ew.mul(phi, _ew.sub(2.0, xx))


gelu_p = Primitive("gelu")
gelu_p.def_abstract_eval(_gelu_aval)
gelu_p.def_impl(_gelu_impl)
gelu_p.def_impl(_cuda.gelu, backend="cuda")
gelu_p.def_vjp(lambda ct, ins, out, *, approximate: (
    bind(gelu_grad_p, ins[0], ct, approximate=approximate),), save_inputs=(0,))
gelu_p.def_jvp(lambda tangents, primals, out, *, approximate: None if tangents[0] is None
               else bind(gelu_grad_p, primals[0], tangents[0], approximate=approximate))
gelu_p.def_batch(unary_batch(gelu_p))

gelu_grad_p = Primitive("gelu_grad")
gelu_grad_p.def_abstract_eval(_gelu_grad_aval)
gelu_grad_p.def_impl(_gelu_grad_impl)
gelu_grad_p.def_impl(_cuda.gelu_grad, backend="cuda")


# compiler rules (functx.registry.scalar): the implementations' formulas, element by element
def _gelu_scalar(x: Any, *, approximate: str) -> Any:
    if approximate == "tanh":
        return 0.5 * x * (1 + call("tanh", GELU_C * (x + GELU_A * (x * x * x))))
    return 0.5 * x * (1 + call("erf", x * _INV_SQRT2))


def _gelu_grad_scalar(x: Any, g: Any, *, approximate: str) -> Any:
    if approximate == "tanh":
        t = call("tanh", GELU_C * (x + GELU_A * (x * x * x)))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (GELU_C * (1 + 3 * GELU_A * (x * x)))
    else:
        d = (0.5 * (1 + call("erf", x * _INV_SQRT2))
             + x * call("exp", -0.5 * (x * x)) * _INV_SQRT_2PI)
    return g * d


gelu_p.def_scalar(scalar_float(_gelu_scalar))
gelu_grad_p.def_scalar(scalar_float(_gelu_grad_scalar))


@gelu_grad_p.def_vjp(save_inputs=(0, 1), selective=True)
def _gelu_grad_vjp(ct, ins, out, *, approximate, needs):
    x, g = ins
    dx = _ew.mul(_ew.mul(ct, g), _gelu_second(x, approximate)) if needs[0] else None
    dg = bind(gelu_grad_p, x, ct, approximate=approximate) if needs[1] else None
    return dx, dg


@gelu_grad_p.def_jvp
def _gelu_grad_jvp(tangents, primals, out, *, approximate):
    (tx, tg), (x, g) = tangents, primals
    t = None if tg is None else bind(gelu_grad_p, x, tg, approximate=approximate)
    if tx is not None:
        t = add_tangents(t, _ew.mul(_ew.mul(tx, g), _gelu_second(x, approximate)))
    return t


@gelu_grad_p.def_batch
def _gelu_grad_batch(args, dims, *, approximate):
    (x, g), (dx, dg) = args, dims
    if dx == dg:
        return bind(gelu_grad_p, x, g, approximate=approximate), dx
    size = batch_size(args, dims)
    return bind(gelu_grad_p, to_front(x, dx, size), to_front(g, dg, size),
                approximate=approximate), 0


def gelu(x: Any, *, approximate: str = "none") -> Any:
    """The Gaussian error linear unit (see the module docstring); ``functx.nn.gelu`` is the
    user-facing function.

    Example:
        >>> gelu(np.array([1.0]), approximate="tanh")
        array([0.84119199])
    """
    return bind(gelu_p, x, approximate=str(approximate))


def gelu_grad(x: Any, g: Any, *, approximate: str = "none") -> Any:
    """``g * gelu'(x)``: the cotangent of gelu's input (see the module docstring)."""
    return bind(gelu_grad_p, x, g, approximate=str(approximate))


# -- relu --------------------------------------------------------------------------------------
# ``where(x > 0, x, 0)`` costs a select (slow with random masks on NumPy) and a VJP that
# builds both branches; ``maximum(x, 0)`` splits the gradient at 0. This one kernel has
# PyTorch's semantics: NaN stays NaN, -inf gives 0, and the derivative is ``x > 0``.

def _relu_aval(x: AbstractArray) -> AbstractArray:
    if not (np.dtype(x.dtype).kind in "iuf" or x.dtype.name == "bfloat16"):
        raise DTypeError(f"relu needs an integer or real floating-point operand but got {x}.")
    return x


def _relu_mask(x: Any) -> Any:
    """``1`` where ``x > 0``, else ``0``, in ``x``'s dtype (the derivative of relu)."""
    return _ew.convert_element_type(_ew.gt(x, _ew.scalar(x, 0)), new_dtype=np.dtype(x.dtype))


relu_p = Primitive("relu")
relu_p.def_abstract_eval(_relu_aval)
relu_p.def_impl(lambda xp, x: xp.maximum(x, x.dtype.type(0)))
relu_p.def_vjp(lambda ct, ins, out: (_ew.mul(ct, _relu_mask(out)),), save_output=True)
relu_p.def_jvp(lambda tangents, primals, out: None if tangents[0] is None
               else _ew.mul(tangents[0], _relu_mask(out)))
relu_p.def_batch(unary_batch(relu_p))
relu_p.def_scalar(scalar_float(lambda x: where((x > 0) | x.ne(x), x, 0)))


def relu(x: Any) -> Any:
    """``max(x, 0)`` elementwise (NaN stays NaN); the derivative is 1 where ``x > 0``, else 0."""
    return bind(relu_p, x)
