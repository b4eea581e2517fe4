"""Indexing primitives: gather, scatter-add, dynamic_slice (filled in below)."""
