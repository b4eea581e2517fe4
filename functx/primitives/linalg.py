"""dot_general: contraction of two arrays over chosen axes, with batch axes (XLA semantics).

``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``. The
output holds the batch axes (in ``lhs_batch`` order), then ``x``'s free axes, then ``y``'s
free axes, each in their original order. Both operands need one dtype.

``precision`` (a parameter only where it is not the default): ``"tensorfloat32"`` lets
float32 and complex64 products on CUDA use TF32 tensor cores; it is the resolved value of
the ``precision=`` argument or of ``fx.config``'s ``default_matmul_precision`` (see
functx/config.py), read when the primitive is bound. The CPU ignores it. Derivative and
batching rules pass it on to the products they make.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np
import scipy.linalg.blas

from functx import config
from functx.backends._blas import run_small
from functx.errors import ShapeError
from functx.ir import AbstractArray
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import add_tangents
from functx.primitives._util import ndim_of, same_dtypes
from functx.primitives.cuda import linalg as _cuda
from functx.registry import Primitive
from functx.registry.rewrite import Rewrite
from functx.tracing import bind

_MATMUL = (((1,), (0,)), ((), ()))
_IDENTITY = [tuple(range(n)) for n in range(33)]  # the identity permutation of each rank


def _free_axes(ndim: int, contract: Sequence[int], batch: Sequence[int]) -> tuple[int, ...]:
    taken = set(contract) | set(batch)
    return tuple(i for i in range(ndim) if i not in taken)


dot_general_p = Primitive("dot_general")


@dot_general_p.def_abstract_eval
def _dot_general_aval(x: AbstractArray, y: AbstractArray, *, dimension_numbers: tuple,
                      precision: str | None = None) -> AbstractArray:
    (xc, yc), (xb, yb) = dimension_numbers
    dtype = same_dtypes("dot_general", x, y)

    def fail(problem: str) -> ShapeError:
        return ShapeError(f"dot_general of {x} and {y} with dimension_numbers="
                          f"{dimension_numbers}: {problem}")

    if len(xc) != len(yc) or len(xb) != len(yb):
        raise fail("x and y need as many contracting axes as each other, and as many batch "
                   "axes as each other.")
    for name, aval, axes in (("x", x, xc + xb), ("y", y, yc + yb)):
        if any(not 0 <= a < aval.ndim for a in axes) or len(set(axes)) != len(axes):
            raise fail(f"the contracting and batch axes of {name} must be distinct axes in "
                       f"[0, {aval.ndim}).")
    for kind, xa, ya in (("contracting", xc, yc), ("batch", xb, yb)):
        for i, j in zip(xa, ya):
            if x.shape[i] != y.shape[j]:
                raise fail(f"{kind} axis {i} of x has size {x.shape[i]} but {kind} axis {j} "
                           f"of y has size {y.shape[j]}; paired axes need equal sizes.")
    shape = (tuple(x.shape[i] for i in xb)
             + tuple(x.shape[i] for i in _free_axes(x.ndim, xc, xb))
             + tuple(y.shape[i] for i in _free_axes(y.ndim, yc, yb)))
    return AbstractArray(shape, dtype, x.weak_type and y.weak_type)


@functools.lru_cache(maxsize=4096)
def _contraction_plan(x_shape: tuple, y_shape: tuple, dimension_numbers: tuple) -> tuple:
    """How the generic impl computes a dot_general of these shapes (memoised: it is the
    hottest primitive, and this bookkeeping cost as much as a small product):
    ``(x_perm, y_perm, (b, m, k, n), out_shape)`` with the permutations None where they are
    the identity."""
    (xc, yc), (xb, yb) = dimension_numbers
    xf, yf = _free_axes(len(x_shape), xc, xb), _free_axes(len(y_shape), yc, yb)
    b, m = math.prod([x_shape[i] for i in xb]), math.prod([x_shape[i] for i in xf])
    k, n = math.prod([x_shape[i] for i in xc]), math.prod([y_shape[i] for i in yf])
    x_perm, y_perm = xb + xf + xc, yb + yc + yf
    out_shape = (tuple(x_shape[i] for i in xb) + tuple(x_shape[i] for i in xf)
                 + tuple(y_shape[i] for i in yf))
    return (None if x_perm == _IDENTITY[len(x_shape)] else x_perm,
            None if y_perm == _IDENTITY[len(y_shape)] else y_perm, (b, m, k, n), out_shape)


@dot_general_p.def_impl
def _dot_general_impl(xp, x, y, *, dimension_numbers, precision=None):
    # (precision: NumPy's BLAS has no TF32 mode; float32 is computed in float32)
    if x.dtype.kind == "V" and x.dtype.name == "bfloat16":
        # No BLAS for bfloat16 (ml_dtypes' matmul returns float32): accumulate in float32
        # and round once to the bfloat16 result the shape rule promises.
        return _dot_general_impl(xp, x.astype(np.float32), y.astype(np.float32),
                                 dimension_numbers=dimension_numbers).astype(x.dtype)
    (xc, yc), (xb, yb) = dimension_numbers
    if x.ndim == 2 and y.ndim == 2 and len(xc) == 1 and not xb:
        # A plain (possibly transposed) matrix product: BLAS takes the transposed views.
        return _matmul_2d(xp, x if xc[0] == 1 else x.T, y if yc[0] == 0 else y.T)
    # General case: x as (batch, free, contract), y as (batch, contract, free), then one
    # batched matmul on 3-D views (reshape copies only where the layout needs it).
    x_perm, y_perm, (b, m, k, n), out_shape = _contraction_plan(x.shape, y.shape,
                                                                dimension_numbers)
    x3 = (x if x_perm is None else x.transpose(x_perm)).reshape((b, m, k))
    y3 = (y if y_perm is None else y.transpose(y_perm)).reshape((b, k, n))
    if b == 1:
        # No batch: a 2-D product, which BLAS takes on transposed views (NumPy's stacked
        # matmul falls back to a slow loop for non-contiguous operands).
        return _matmul_2d(xp, x3[0], y3[0]).reshape(out_shape)
    if k == 1:
        # Batched outer products (per-example weight gradients under vmap): einsum's
        # sum-of-products loop, 2x a broadcast multiply and far faster than a stack of
        # rank-1 matrix products.
        return xp.einsum("bi,bj->bij", x3[:, :, 0], y3[:, 0, :]).reshape(out_shape)
    if xp is np:
        return run_small(b * m * k * n, np.matmul, x3, y3).reshape(out_shape)
    return xp.matmul(x3, y3).reshape(out_shape)


# Big double-precision products (m * n * k >= 2^25) go through SciPy's BLAS, the library of
# functx's LAPACK calls (factorisations and triangular solves,
# functx/primitives/decompositions.py). NumPy's and SciPy's wheels each bundle an OpenBLAS
# with its own thread pool, whose threads spin for ~0.1 s after a call: a factorisation, then
# a product in its gradient, then a triangular solve made the two pools fight over the cores
# (on 2 cores the gradient of slogdet + solve at 1024 took 120 ms instead of 80;
# benchmarks/README.md, session 8). Smaller products stay with NumPy's matmul, whose OpenBLAS
# was up to 1.7x faster on some mid-sized shapes (an MLP's 784 x 128 x 256), and so does
# single precision, which the convolution and attention kernels use too.
_SCIPY_GEMM_MIN_FLOPS = 1 << 25
_SCIPY_GEMM = {np.dtype(np.float64): "dgemm", np.dtype(np.complex128): "zgemm"}


def _matmul_2d(xp, x, y):
    """``x @ y`` for 2-D operands (see ``_SCIPY_GEMM_MIN_FLOPS``)."""
    if xp is not np:
        return xp.matmul(x, y)
    name = _SCIPY_GEMM.get(x.dtype)
    macs = x.shape[0] * x.shape[1] * y.shape[1]
    if name is None or macs < _SCIPY_GEMM_MIN_FLOPS or y.dtype != x.dtype:
        return run_small(macs, np.matmul, x, y)  # (one BLAS thread for a small product)
    # BLAS is column-major: compute the Fortran array (x y)^T = y^T x^T, whose transpose is
    # the C-ordered product. An operand that is C-contiguous is passed as its (Fortran)
    # transpose with the transpose flag, so no operand is copied.
    gemm = getattr(scipy.linalg.blas, name)
    a, ta = (y.T, 0) if y.flags.c_contiguous else (y, 1)
    b, tb = (x.T, 0) if x.flags.c_contiguous else (x, 1)
    return gemm(1.0, a, b, trans_a=ta, trans_b=tb).T


# CUDA: cuBLAS strided-batched GEMM on the operands' own layouts (no float16 upcast copy).
dot_general_p.def_impl(_cuda.dot_general, backend="cuda")
dot_general_p.def_impl_out(_cuda.dot_general_out, backend="cuda")  # into planned buffers
dot_general_p.def_accumulate(_cuda.dot_general_accumulate, backend="cuda")  # beta = 1


@dot_general_p.def_step_sum
def _dot_general_step_sum(stacked, x, y, *, dimension_numbers, precision=None):
    """``sum_t x_t . y_t``: the steps' axis becomes one more contracting axis of both (one
    product with ``K`` = steps x the contracted sizes); with one operand stacked, that one
    is summed first (the product is linear in it)."""
    (xc, yc), (xb, yb) = dimension_numbers
    extra = _precision_param(precision)
    if not stacked[1]:
        return bind(dot_general_p, _red.reduce_sum(x, (0,)), y,
                    dimension_numbers=dimension_numbers, **extra)
    if not stacked[0]:
        return bind(dot_general_p, x, _red.reduce_sum(y, (0,)),
                    dimension_numbers=dimension_numbers, **extra)
    up = lambda axes: tuple(a + 1 for a in axes)  # noqa: E731
    dims = (((0,) + up(xc), (0,) + up(yc)), (up(xb), up(yb)))
    return bind(dot_general_p, x, y, dimension_numbers=dims, **extra)


@functools.lru_cache(maxsize=1024)
def _transpose_plan(dimension_numbers: tuple, x_ndim: int, y_ndim: int) -> tuple:
    """The dimension numbers and permutations of both cotangents of a dot_general.

    Both cotangents are dot_generals of ct with the other operand (so the rule is
    differentiable to any order), followed by a transpose into the operand's layout. The
    operand order is chosen so that the plain matrix product needs no transpose: ct @ y.T
    for x, and x.T @ ct for y (as jax.lax's transpose rules, mirrored for y).
    """
    (xc, yc), (xb, yb) = dimension_numbers
    xk, yk = _free_axes(x_ndim, xc, xb), _free_axes(y_ndim, yc, yb)
    nb, nxk = len(xb), len(xk)
    ct_b = tuple(range(nb))
    ct_xk = tuple(range(nb, nb + nxk))
    ct_yk = tuple(range(nb + nxk, nb + nxk + len(yk)))
    # ct_x holds x's batch, x's free axes, then y's contracting axes in y's order.
    x_dims = ((ct_yk, yk), (ct_b, yb))
    x_layout = xb + xk + tuple(xc[j] for j in np.argsort(yc))
    # ct_y holds y's batch, x's contracting axes in x's order, then y's free axes.
    y_dims = ((xk, ct_xk), (xb, ct_b))
    y_layout = yb + tuple(yc[j] for j in np.argsort(xc)) + yk
    return (x_dims, tuple(np.argsort(x_layout).tolist()),
            y_dims, tuple(np.argsort(y_layout).tolist()))


@dot_general_p.def_vjp(save_inputs=(0, 1), selective=True)
def _dot_general_vjp(ct, ins, out, *, dimension_numbers, needs=(True, True),
                     precision=None):
    x, y = ins
    x_dims, x_perm, y_dims, y_perm = _transpose_plan(dimension_numbers, x.ndim, y.ndim)
    extra = _precision_param(precision)
    ct_x = ct_y = None
    if needs[0]:
        ct_x = _shape.transpose_if_needed(
            bind(dot_general_p, ct, y, dimension_numbers=x_dims, **extra), x_perm)
    if needs[1]:
        ct_y = _shape.transpose_if_needed(
            bind(dot_general_p, x, ct, dimension_numbers=y_dims, **extra), y_perm)
    return ct_x, ct_y


def _precision_param(precision: str | None) -> dict:
    """The parameters that carry a (resolved) precision: none for the default float32."""
    return {} if precision is None or precision == config.FLOAT32 else {"precision": precision}


@dot_general_p.def_jvp
def _dot_general_jvp(tangents, primals, out, *, dimension_numbers, precision=None):
    # Bilinear: d(x . y) = tx . y + x . ty, skipping zero (None) tangents.
    (tx, ty), (x, y) = tangents, primals
    extra = _precision_param(precision)
    dot = lambda a, b: bind(dot_general_p, a, b, dimension_numbers=dimension_numbers, **extra)
    return add_tangents(None if tx is None else dot(tx, y), None if ty is None else dot(x, ty))


@dot_general_p.def_simplify
def _dot_general_simplify(args, out, *, dimension_numbers, precision=None):
    """An operand that is a transpose is read through its input instead, with the
    dimension numbers permuted (the transpose's copy disappears), where the free axes keep
    their order (else the output's layout would change)."""
    (xc, yc), (xb, yb) = dimension_numbers
    ops, changed = list(args), False
    dims = [[xc, xb], [yc, yb]]
    for i, op in enumerate(args):
        prod = op.producer
        if prod is None or prod.prim is not _shape.transpose_p:
            continue
        perm = prod.params["permutation"]
        c, b = dims[i]
        free = [perm[a] for a in _free_axes(len(perm), c, b)]
        if free != sorted(free):
            continue
        dims[i] = [tuple(perm[a] for a in c), tuple(perm[a] for a in b)]
        ops[i], changed = prod.args[0], True
    if not changed:
        return None
    new = ((dims[0][0], dims[1][0]), (dims[0][1], dims[1][1]))
    return Rewrite(dot_general_p, tuple(ops),
                   {"dimension_numbers": new, **_precision_param(precision)})


def _shift(axes: Sequence[int], d: int) -> tuple[int, ...]:
    """An example's axes as axes of the batched operand whose batch axis is ``d``."""
    return tuple(a + (a >= d) for a in axes)


@dot_general_p.def_batch
def _dot_general_batch(args, dims, *, dimension_numbers, precision=None):
    # The batch axes are folded into the dimension numbers; no operand moves. Both batched:
    # one more dot_general batch axis, the output's first. One batched: a free axis of that
    # operand, placed by the output layout (batch axes, x's free axes, y's free axes).
    (x, y), (dx, dy) = args, dims
    (xc, yc), (xb, yb) = dimension_numbers
    if dx is not None and dy is not None:
        new = ((_shift(xc, dx), _shift(yc, dy)), ((dx,) + _shift(xb, dx), (dy,) + _shift(yb, dy)))
        return bind(dot_general_p, x, y, dimension_numbers=new,
                    **_precision_param(precision)), 0
    if dx is not None:
        xc, xb = _shift(xc, dx), _shift(xb, dx)
        out_dim = len(xb) + _free_axes(ndim_of(x), xc, xb).index(dx)
    else:
        yc, yb = _shift(yc, dy), _shift(yb, dy)
        out_dim = (len(xb) + len(_free_axes(ndim_of(x), xc, xb))
                   + _free_axes(ndim_of(y), yc, yb).index(dy))
    return bind(dot_general_p, x, y, dimension_numbers=((xc, yc), (xb, yb)),
                **_precision_param(precision)), out_dim


def dot_general(x: Any, y: Any, *, dimension_numbers: Any = _MATMUL,
                precision: Any = None) -> Any:
    """The contraction of ``x`` and ``y`` described by ``dimension_numbers``.

    Args:
        x, y: arrays of one dtype.
        dimension_numbers: ``((x_contracting, y_contracting), (x_batch, y_batch))``, each a
            sequence of axes (negative axes count from the end). The default is the matrix
            product of two 2-D arrays.
        precision: for float32/complex64 operands on CUDA, ``"float32"``/``"highest"`` or
            ``"tensorfloat32"``/``"high"`` (TF32 tensor cores), JAX's names (see
            functx/config.py); None: ``fx.config``'s ``default_matmul_precision``
            (float32 unless set). No effect on the CPU or on other dtypes.

    Returns:
        An array with the batch axes, then ``x``'s free axes, then ``y``'s free axes.

    Example:
        >>> dot_general(a, b, dimension_numbers=(((2,), (1,)), ((0,), (0,))))  # a @ b, batched
    """
    nx, ny = ndim_of(x), ndim_of(y)
    try:
        dims = _normalized_dims(dimension_numbers, nx, ny)
    except TypeError:  # lists instead of tuples: not hashable, so not memoised
        dims = _normalized_dims.__wrapped__(dimension_numbers, nx, ny)
    if precision is None and config.default_precision() == config.FLOAT32:
        return bind(dot_general_p, x, y, dimension_numbers=dims)  # (the common case)
    return bind(dot_general_p, x, y, dimension_numbers=dims,
                **_precision_param(config.matmul_precision(precision)))


@functools.lru_cache(maxsize=1024)
def _normalized_dims(dimension_numbers: Any, nx: int, ny: int) -> tuple:
    """Dimension numbers as tuples of non-negative Python ints (negative axes count from
    the end; out-of-range axes are left for the shape rule to report)."""
    (xc, yc), (xb, yb) = dimension_numbers
    norm = lambda axes, n: tuple(int(a) % n if n and -n <= int(a) < 0 else int(a) for a in axes)
    return ((norm(xc, nx), norm(yc, ny)), (norm(xb, nx), norm(yb, ny)))
