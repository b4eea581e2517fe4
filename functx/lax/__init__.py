"""functx.lax: JAX's ``jax.lax`` names over functx primitives.

Structured control flow (``scan``, ``fori_loop``, ``while_loop``, ``cond``, ``switch``,
``map``, ``associative_scan``), the lax-level array operations users call with them
(``dynamic_slice``, ``dynamic_update_slice``, ``select``, ...), sorting (``sort``,
``top_k``) and collectives. Code written against ``jax.lax`` ports by changing the import.

``scan``, ``while_loop`` and ``cond``/``switch`` are higher-order primitives (``scan_p``,
``while_p``, ``cond_p``) holding their bodies as sub-traces, with every rule; see
docs/design.md ("Higher-order primitives and control flow").

Each submodule is private; this namespace is the curated public API.
"""
from __future__ import annotations

# -- control flow (_scan, _while, _cond, _loops) --
from functx.lax._common import ControlFlowError, ReverseModeError
from functx.lax._cond import cond, cond_p, switch
from functx.lax._loops import associative_scan, fori_loop, map
from functx.lax._scan import scan, scan_p
from functx.lax._while import while_loop, while_p

# -- lax-level array operations (_ops) and host callbacks (_callback) --
from functx.lax._callback import pure_callback
from functx.lax._ops import (
    abs, acos, add, argmax, argmin, asin, atan, atan2, bitwise_and, bitwise_not, bitwise_or,
    bitwise_xor, broadcast, broadcast_in_dim, ceil, clamp, concatenate, conj,
    convert_element_type, cos, cosh, div, dot_general, dynamic_index_in_dim,
    dynamic_slice, dynamic_slice_in_dim, dynamic_update_index_in_dim, dynamic_update_slice,
    dynamic_update_slice_in_dim, eq, erf, exp, expand_dims, expm1, floor, full, full_like, ge,
    gt, imag, index_in_dim, integer_pow, iota, is_finite, le, log, log1p, logistic, lt, max,
    min, mul, ne, neg, pad, pow, real, reduce_max, reduce_min, reduce_prod, reduce_sum, rem,
    reshape, rev, round, rsqrt, select, shift_left, shift_right_arithmetic,
    shift_right_logical, sign, sin, sinh, slice, slice_in_dim, sqrt, square, squeeze,
    stop_gradient, sub, tan, tanh, transpose)
from functx.lax._sorting import (cumlogsumexp, cummax, cummin, cumprod, cumsum, sort,
                                 sort_key_val, top_k)
from functx.lax._windows import conv_general_dilated, reduce_window

# -- collectives over named axes (_parallel) --
from functx.lax._parallel import (all_gather, all_to_all, axis_index, axis_size, pmax, pmean,
                                  pmin, ppermute, psum, psum_scatter)

__all__: list[str] = [
    # control flow
    "scan", "fori_loop", "while_loop", "cond", "switch", "map", "associative_scan",
    "ControlFlowError", "ReverseModeError",
    # the higher-order primitives (for users writing rules or reading traces)
    "scan_p", "while_p", "cond_p",
    # lax-level array operations and host callbacks
    "dynamic_slice", "dynamic_update_slice", "dynamic_index_in_dim", "dynamic_slice_in_dim",
    "dynamic_update_index_in_dim", "dynamic_update_slice_in_dim", "select", "stop_gradient",
    "clamp", "add", "sub", "mul", "div", "rem", "neg", "abs", "sign", "max", "min", "pow",
    "integer_pow", "square", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos",
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "logistic", "erf",
    "floor", "ceil", "round", "is_finite", "eq", "ne", "lt", "le", "gt", "ge",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "real", "imag", "conj",
    "convert_element_type", "dot_general", "broadcast_in_dim", "broadcast", "reshape",
    "transpose", "squeeze", "expand_dims", "rev", "concatenate", "slice", "slice_in_dim",
    "index_in_dim", "pad", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
    "argmax", "argmin", "iota", "full", "full_like", "conv_general_dilated",
    "reduce_window", "pure_callback",
    # sorting and cumulative operations (_sorting)
    "sort", "sort_key_val", "top_k", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
    # collectives over named axes
    "psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "all_to_all", "ppermute",
    "axis_index", "axis_size",
]
