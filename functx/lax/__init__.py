"""functx.lax: JAX's ``jax.lax`` names over functx primitives.

Structured control flow (``scan``, ``fori_loop``, ``while_loop``, ``cond``, ``switch``,
``map``, ``associative_scan``), the lax-level array operations users call with them
(``dynamic_slice``, ``dynamic_update_slice``, ``select``, ...), sorting (``sort``,
``top_k``) and collectives. Code written against ``jax.lax`` ports by changing the import.

Each submodule is private; this namespace is the curated public API.
"""
from __future__ import annotations

from functx.lax._common import ControlFlowError, ReverseModeError
from functx.lax._scan import scan

__all__: list[str] = ["scan", "ControlFlowError", "ReverseModeError"]
