"""``python -m functx.registry``: print which rules every primitive has.

A program, not a library module: nothing imports it, so it sits above every layer (like
``functx/__init__.py``) and may import the whole library to load every primitive family.
"""
import functx  # noqa: F401  (loads every primitive family)
from functx.registry import REGISTRY


def main() -> None:
    """Print the coverage table of every built-in primitive."""
    print(REGISTRY.coverage_table())
    print(f"\n{len(REGISTRY)} primitives; missing required rules: "
          f"{REGISTRY.missing() or 'none'}")


if __name__ == "__main__":
    main()
