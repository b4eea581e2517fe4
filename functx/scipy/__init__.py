"""functx.scipy: ``jax.scipy``'s names over functx primitives.

Submodules: ``functx.scipy.linalg``, ``functx.scipy.special``, ``functx.scipy.stats``.
"""
from __future__ import annotations

from functx.scipy import special, stats

__all__: list[str] = ["special", "stats"]
