"""Transforms: each one a small interpreter of traces (see docs/design.md, section 6).

Importing this package registers the transforms that lower layers call through
``functx.registry.hooks``: ``vjp``, ``jvp`` and ``grad`` (the derivative rules of composite
primitives differentiate their composites with them).
"""
from functx.registry.hooks import register_hook as _register_hook
from functx.transforms.grad import grad as _grad
from functx.transforms.grad import vjp as _vjp
from functx.transforms.jvp import jvp as _jvp

_register_hook("vjp", _vjp)
_register_hook("jvp", _jvp)
_register_hook("grad", _grad)
