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

from functx.lax._common import ControlFlowError, ReverseModeError
from functx.lax._cond import cond, cond_p, switch
from functx.lax._loops import associative_scan, fori_loop, map
from functx.lax._scan import scan, scan_p
from functx.lax._while import while_loop, while_p

__all__: list[str] = [
    # control flow
    "scan", "fori_loop", "while_loop", "cond", "switch", "map", "associative_scan",
    "ControlFlowError", "ReverseModeError",
    # the higher-order primitives (for users writing rules or reading traces)
    "scan_p", "while_p", "cond_p",
]
