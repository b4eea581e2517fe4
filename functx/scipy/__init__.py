"""functx.scipy: ``jax.scipy``'s names over functx primitives.

Submodules: ``functx.scipy.linalg``, ``functx.scipy.special``, ``functx.scipy.stats``.
"""
from __future__ import annotations

from functx.scipy import linalg, special, stats  # noqa: E402,F401

__all__: list[str] = ["linalg", "special", "stats"]
