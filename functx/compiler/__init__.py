"""functx's compiler for ``jit``: trace optimisation passes, fusion clusters and code
generators (layer 5, beside the transforms; ``functx.transforms.jit`` uses it).

* :mod:`functx.compiler.passes`: CSE, constant folding, algebraic simplification, DCE;
* :mod:`functx.compiler.partition`: clusters of elementwise/broadcast ops with trailing
  reductions, decided from the registry's scalar rules (shared by both generators);
* :mod:`functx.compiler.program`: a cluster as a per-element program and a loop nest;
* :mod:`functx.compiler.cpu`: each cluster as one Numba loop nest (multi-threaded);
* :mod:`functx.compiler.cuda`: each cluster as one CUDA C kernel (NVRTC through CuPy),
  rendered by :mod:`functx.compiler.c_expr`;
* :mod:`functx.compiler.cuda_graph`: a jitted CUDA step replayed as one CUDA graph;
* :mod:`functx.compiler.memory`: buffer reuse from liveness, and ``donate_argnums``;
* :mod:`functx.compiler.lowering`: a jit signature's optimised trace with its kernels, and
  the fused trace the executor runs.

Which compiler ``jit`` uses: the environment variable ``FUNCTX_JIT_COMPILER`` (read at
import) or :func:`set_jit_compiler`, one of :data:`COMPILERS`:

* ``"numba"`` (the default): optimisation passes, then fused kernels: Numba loops on the
  CPU (if Numba is not installed, ``jit`` warns once and replays the optimised trace
  instead), generated CUDA C on CUDA;
* ``"none"``: no passes, no kernels: ``jit`` replays the traced function one primitive at a
  time, as before the compiler existed.

Example:
    >>> functx.compiler.set_jit_compiler("none")   # or FUNCTX_JIT_COMPILER=none
"""
from __future__ import annotations

import os

from functx.errors import FunctxError

__all__ = ["COMPILERS", "set_jit_compiler", "jit_compiler"]

COMPILERS = ("numba", "none")

_state = {"compiler": os.environ.get("FUNCTX_JIT_COMPILER", "numba").strip().lower() or "numba"}
if _state["compiler"] not in COMPILERS:
    raise FunctxError(f"FUNCTX_JIT_COMPILER={_state['compiler']!r} is not one of "
                      f"{', '.join(COMPILERS)}. Unset it or choose one of those.")


def set_jit_compiler(name: str) -> str:
    """Choose what ``jit`` does with a traced function from now on (signatures traced
    before keep what they had; ``jitted.clear_cache()`` re-traces).

    Args:
        name: ``"numba"`` (optimise and fuse into Numba kernels) or ``"none"`` (replay).

    Returns:
        The previous setting (to restore it).

    Raises:
        FunctxError: ``name`` is not one of :data:`COMPILERS`.
    """
    if name not in COMPILERS:
        raise FunctxError(f"set_jit_compiler: {name!r} is not one of {', '.join(COMPILERS)}.")
    old, _state["compiler"] = _state["compiler"], name
    return old


def jit_compiler() -> str:
    """The current setting of :func:`set_jit_compiler`."""
    return _state["compiler"]
