"""Transforms: each one a small interpreter of traces (see DESIGN.md)."""
