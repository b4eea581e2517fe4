"""Hooks: operations a lower layer needs from a higher one, registered by the higher layer.

Imports run down the layers only (``errors``/``tree`` -> ``ir`` -> ``backends`` ->
``tracing`` + ``registry`` -> ``primitives`` -> ``transforms`` -> ``numpy`` -> ``nn``...): a
module never imports from a layer above its own, not even inside a function. A few
operations of the lower layers are nevertheless defined by the upper ones: a tracer's ``+`` is
``functx.numpy.add``, and the derivative rules of a composite primitive differentiate a
functx computation with ``vjp``/``jvp``. Those go through :data:`HOOKS`, one fixed object
whose attributes the upper layer fills in when it is imported:

==========  ============================  ===================================================
hook        registered by                 read by
==========  ============================  ===================================================
``numpy``   ``functx.numpy`` (the module) Tracer operators and methods (``functx.tracing``);
                                          rules that need NumPy-style functions
                                          (``ctc``'s composite ``log Z``, ``complex``'s
                                          ``asarray`` of Python sequences)
``vjp``     ``functx.transforms``         :func:`functx.registry.composite.composite_vjp`
            (``transforms.grad.vjp``)     (``Primitive.def_composite_rules``)
``jvp``     ``functx.transforms``         :func:`functx.registry.composite.composite_jvp`
            (``transforms.jvp.jvp``)
``grad``    ``functx.transforms``         rules that differentiate a composite twice
            (``transforms.grad.grad``)    (``ctc_posteriors``' Hessian product)
==========  ============================  ===================================================

The upper layer registers with :func:`register_hook` (``functx/numpy/__init__.py`` and
``functx/transforms/__init__.py`` do, so ``import functx`` registers every hook). A lower
layer reads ``HOOKS.<name>``: a plain attribute of a slotted object, as cheap as reading a
module global's attribute, which matters for the tracer operators (one per traced ``+``).
Until a hook is registered it holds a stand-in that raises :class:`MissingHookError` (naming
the hook and the package to import) when it is called or an attribute is read from it.

Example (what ``functx/transforms/__init__.py`` does)::

    from functx.registry.hooks import register_hook
    register_hook("vjp", vjp)
"""
from __future__ import annotations

from typing import Any

from functx.errors import FunctxError, MissingHookError

__all__ = ["HOOKS", "HOOK_PROVIDERS", "Hooks", "register_hook", "MissingHookError"]

# Every hook, with the package that registers it (named in the error for a missing one).
HOOK_PROVIDERS: dict[str, str] = {
    "numpy": "functx.numpy",
    "vjp": "functx.transforms",
    "jvp": "functx.transforms",
    "grad": "functx.transforms",
}


class _Unregistered:
    """Stands in for a hook nobody registered: any use raises MissingHookError."""

    __slots__ = ("_hook",)

    def __init__(self, hook: str) -> None:
        object.__setattr__(self, "_hook", hook)

    def _fail(self, what: str) -> MissingHookError:
        hook = object.__getattribute__(self, "_hook")
        provider = HOOK_PROVIDERS[hook]
        return MissingHookError(
            f"functx needs {what} from the {hook!r} hook, but {provider} has not registered "
            f"it. {provider} registers it when it is imported: run `import functx` (or "
            f"`import {provider}`) before using functx.")

    def __getattr__(self, name: str) -> Any:
        raise self._fail(f"{name!r}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._fail("a call")

    def __repr__(self) -> str:
        return f"<unregistered hook {object.__getattribute__(self, '_hook')!r}>"


class Hooks:
    """The registered hooks, one attribute each (see the module docstring).

    Attributes are set only through :func:`register_hook`; assigning one directly raises.
    """

    __slots__ = tuple(HOOK_PROVIDERS)

    def __init__(self) -> None:
        for name in HOOK_PROVIDERS:
            object.__setattr__(self, name, _Unregistered(name))

    def __setattr__(self, name: str, value: Any) -> None:
        raise FunctxError(f"Hooks are registered with functx.registry.hooks.register_hook("
                          f"{name!r}, value), not assigned.")

    def is_registered(self, name: str) -> bool:
        """Whether the hook ``name`` has been registered."""
        return not isinstance(getattr(self, name), _Unregistered)


HOOKS = Hooks()


def register_hook(name: str, value: Any) -> None:
    """Register the operation ``value`` as the hook ``name`` (a later registration replaces
    an earlier one, as when a module is reloaded).

    Args:
        name: one of ``HOOK_PROVIDERS`` (``"numpy"``, ``"vjp"``, ``"jvp"``, ``"grad"``).
        value: the operation: the ``functx.numpy`` module, or the transform function.

    Raises:
        FunctxError: ``name`` is not a known hook.

    Example:
        >>> register_hook("jvp", functx.transforms.jvp.jvp)
    """
    if name not in HOOK_PROVIDERS:
        raise FunctxError(f"register_hook: there is no hook called {name!r}; the hooks are "
                          f"{sorted(HOOK_PROVIDERS)} (add a new one to HOOK_PROVIDERS in "
                          "functx/registry/hooks.py).")
    object.__setattr__(HOOKS, name, value)
