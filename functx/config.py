"""Global configuration: ``fx.config.update(name, value)`` and the precision of matmuls.

One option so far, as in JAX:

``default_matmul_precision``
    The precision of float32 (and complex64) matrix products whose ``precision=`` argument
    is None: ``dot_general`` and everything built on it (``fnp.matmul``, ``dot``,
    ``einsum``, ``tensordot``, ``inner``, ``vdot``, ``lax.dot_general``, the ``@``
    operator...). Values (JAX's names, canonicalised to two precisions):

    * ``"float32"`` (also ``"highest"``): full float32 products. **The default** (unlike
      JAX on the GPU, functx does not use TF32 unless asked);
    * ``"tensorfloat32"`` (also ``"high"``, ``"bfloat16_3x"``, ``"default"``,
      ``"fastest"``, ``"bfloat16"``): on CUDA, cuBLAS may round the float32 operands to
      TF32 (10-bit mantissa) and use tensor cores, accumulating in float32 (about 8x the
      float32 rate on an H100, with relative errors near 1e-3). functx has no bfloat16-pass
      mode: the faster names mean TF32 too.

    None restores the default. On the CPU the precision changes nothing (NumPy's BLAS
    computes in float32); float64, float16 and bfloat16 products are never affected (16-bit
    products always run on tensor cores with float32 accumulation on CUDA). Only
    ``dot_general`` reads it: the GEMMs inside the CUDA convolution and fused attention
    kernels stay float32.

The precision is read when a ``dot_general`` is *bound* (eagerly: at the call; under a
transform: when the function is traced) and stored in the equation's parameters
(``precision="tensorfloat32"``; nothing is stored for float32, so traces made with the
default are unchanged). ``fx.jit`` keys its cache on :func:`trace_context` as JAX does, so a
change of the option retraces instead of replaying a trace made under the old value.

Functions (``fx.config`` is this module): :func:`update`, :func:`get` (the current value),
:func:`default_matmul_precision` (a thread-local context manager, also
``fx.default_matmul_precision``), :func:`matmul_precision`, :func:`canonical_precision` and
:func:`trace_context`. This module is the lowest layer (it imports only
:mod:`functx.errors`).

Example:
    >>> fx.config.update("default_matmul_precision", "tensorfloat32")   # every matmul
    >>> with fx.default_matmul_precision("float32"):                    # a block of code
    ...     y = x @ w
    >>> y = fnp.matmul(x, w, precision="highest")                        # one product
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from functx.errors import ArgumentError

__all__ = ["update", "get", "default_matmul_precision", "default_precision",
           "matmul_precision", "canonical_precision", "trace_context", "FLOAT32",
           "TENSORFLOAT32", "PRECISION_NAMES"]

FLOAT32 = "float32"
TENSORFLOAT32 = "tensorfloat32"

# Every accepted name (JAX's config values and lax.Precision names) -> its precision.
PRECISION_NAMES: dict[str, str] = {
    "float32": FLOAT32, "highest": FLOAT32,
    "tensorfloat32": TENSORFLOAT32, "high": TENSORFLOAT32, "bfloat16_3x": TENSORFLOAT32,
    "default": TENSORFLOAT32, "fastest": TENSORFLOAT32, "bfloat16": TENSORFLOAT32,
}

_OPTIONS = ("default_matmul_precision",)
_global = [FLOAT32]  # the global default precision (update)
_blocks = [0]  # how many default_matmul_precision blocks are open, in all threads
_blocks_lock = threading.Lock()
_local = threading.local()  # .precision: this thread's stack of block values


def canonical_precision(precision: Any) -> str | None:
    """``precision`` as ``"float32"``, ``"tensorfloat32"`` or None (not given).

    Accepts JAX's spellings: the names of :data:`PRECISION_NAMES` (any case), a
    ``jax.lax.Precision``-like enum (its ``name``: ``HIGHEST``, ``HIGH``, ``DEFAULT``), or
    a pair of them (one per operand, as ``lax.dot_general`` takes; the more precise one
    wins).

    Raises:
        ArgumentError: an unknown precision.

    Example:
        >>> canonical_precision("highest")
        'float32'
    """
    if precision is None:
        return None
    if isinstance(precision, (tuple, list)) and len(precision) == 2:
        pair = [canonical_precision(p) for p in precision]
        if FLOAT32 in pair:
            return FLOAT32
        return TENSORFLOAT32 if TENSORFLOAT32 in pair else None
    name = getattr(precision, "name", precision)  # an enum member (lax.Precision.HIGHEST)
    if isinstance(name, str):
        out = PRECISION_NAMES.get(name.lower())
        if out is not None:
            return out
    raise ArgumentError(
        f"Unknown matmul precision {precision!r}: use one of "
        f"{sorted(PRECISION_NAMES)} (or None for the default, float32 unless "
        "fx.config.update('default_matmul_precision', ...) says otherwise).")


def _option_name(name: str) -> str:
    key = name[4:] if name.startswith("jax_") else name
    if key not in _OPTIONS:
        raise ArgumentError(f"Unknown functx config option {name!r}; the options are "
                            f"{list(_OPTIONS)}.")
    return key


def update(name: str, value: Any) -> None:
    """Set a global option (for every thread; :func:`default_matmul_precision` overrides
    it in a block).

    Args:
        name: ``"default_matmul_precision"`` (JAX's ``"jax_default_matmul_precision"`` is
            accepted too).
        value: a precision name (see the module docstring), or None for the default.

    Raises:
        ArgumentError: an unknown option or value.

    Example:
        >>> fx.config.update("default_matmul_precision", "tensorfloat32")
    """
    _option_name(name)
    _global[0] = canonical_precision(value) or FLOAT32


def get(name: str) -> Any:
    """The current value of an option (a block's :func:`default_matmul_precision` first,
    then :func:`update`'s value); for the precision, ``"float32"`` or
    ``"tensorfloat32"``.

    Example:
        >>> fx.config.get("default_matmul_precision")
        'float32'
    """
    _option_name(name)
    return default_precision()


def default_precision() -> str:
    """The default matmul precision now (this thread's innermost
    :func:`default_matmul_precision` block, else the global option): ``"float32"`` or
    ``"tensorfloat32"``. Cheap (read on every ``dot_general``)."""
    if _blocks[0]:  # some thread is inside a block: is this one?
        stack = getattr(_local, "precision", None)
        if stack:
            return stack[-1]
    return _global[0]


def matmul_precision(precision: Any = None) -> str:
    """The precision a product with this ``precision=`` argument uses: the argument,
    canonicalised, else the configured default (``"float32"`` or ``"tensorfloat32"``)."""
    out = canonical_precision(precision)
    return default_precision() if out is None else out


@contextlib.contextmanager
def default_matmul_precision(precision: Any) -> Iterator[None]:
    """A block of code whose matrix products use ``precision`` by default (this thread
    only), as ``jax.default_matmul_precision``.

    Args:
        precision: a precision name (``"float32"``, ``"tensorfloat32"``, ``"highest"``...).

    Raises:
        ArgumentError: an unknown precision.

    Example:
        >>> with fx.default_matmul_precision("tensorfloat32"):
        ...     loss, g = step(params, x, y)   # jit retraces for the new precision
    """
    value = canonical_precision(precision)
    stack = getattr(_local, "precision", None)
    if stack is None:
        stack = _local.precision = []
    stack.append(value if value is not None else _global[0])
    with _blocks_lock:
        _blocks[0] += 1
    try:
        yield
    finally:
        with _blocks_lock:
            _blocks[0] -= 1
        stack.pop()


def trace_context() -> tuple:
    """The options that change what a trace records (a hashable tuple): part of
    ``fx.jit``'s cache key, so that a cached trace is not replayed under another value."""
    return (default_precision(),)
