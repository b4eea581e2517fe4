"""The table of primitive specs that drives the rule tests (tests/test_primitive_rules.py).

Every primitive family has a module here (``elementwise.py``, ``structural.py``, ...) whose
``SPECS`` list holds one :class:`PrimSpec` per primitive (or per distinct parameter setting).
``ALL_SPECS`` collects them all; the coverage test checks every registered primitive has one.
"""
from __future__ import annotations

from typing import Any, Callable

import attrs
from hypothesis import strategies as st


@attrs.frozen
class PrimSpec:
    """How to test one primitive.

    Attributes:
        name: the primitive's registry name (several specs may share a name).
        fn: ``fn(*args) -> array`` that binds the primitive (params are baked in, e.g. with
            a lambda). It must run eagerly on NumPy arrays and trace on tracers.
        ref: the NumPy reference, ``ref(*args) -> np.ndarray``.
        args: a hypothesis strategy drawing the tuple of arguments (float64 for the
            differentiable ones), already inside the primitive's smooth domain. Non-array
            arguments (e.g. a namespace of drawn parameters) are allowed: the harness holds
            them fixed (closed over) instead of tracing them.
        diff_argnums: indices of the arguments to differentiate; () = not differentiable
            (its VJP must then be the zero rule or give None/zeros).
        rtol, atol: tolerances for impl vs ref.
        fd_eps: step of the central finite differences; fd_rtol/fd_atol their tolerances.
        smooth: infinitely differentiable on its domain (used by higher-order checks).
        label: distinguishes several specs of one primitive in test ids.
        reverse: reverse mode applies. False for a primitive that is differentiable in
            forward mode only (``while``, whose VJP rule raises): the harness checks its
            JVP on ``diff_argnums`` and leaves out every VJP check.
        fd_fn: where the primitive's derivative is by definition not the derivative of
            ``fn`` along its own computation, the function (of the same arguments) whose
            finite differences the VJP and JVP must match. ``random_gamma``'s implicit
            reparameterization gradient is the derivative of the inverse CDF at the drawn
            quantile, not of the rejection sampler's arithmetic.
    """

    name: str
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    args: st.SearchStrategy
    diff_argnums: tuple[int, ...] = (0,)
    rtol: float = 1e-12
    atol: float = 1e-12
    fd_eps: float = 1e-6
    fd_rtol: float = 1e-5
    fd_atol: float = 1e-6
    smooth: bool = True
    label: str = ""
    reverse: bool = True
    fd_fn: Callable[..., Any] | None = None

    @property
    def id(self) -> str:
        return f"{self.name}[{self.label}]" if self.label else self.name


def all_specs() -> list[PrimSpec]:
    """Every spec of every family module in this package."""
    import importlib
    import pkgutil

    out: list[PrimSpec] = []
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if m.name.startswith("_"):
            continue
        out.extend(importlib.import_module(f"{__name__}.{m.name}").SPECS)
    return out
