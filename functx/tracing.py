"""Tracing: tracers, trace builders, ``bind``, the transform preamble ``trace_function``,
``make_trace`` and ``eval_shape``.

Every operation goes through :func:`bind`. With no tracer among its arguments it runs the
primitive's implementation on the arguments' backend (eager mode). Otherwise it hands the
operation to the innermost active builder that owns one of the arguments
(``builder.process``); values from outer levels become constants of the inner trace, so
nested transforms compose.

The builder here, :class:`TraceBuilder`, is *abstract* (``make_trace``, ``eval_shape``,
``vmap``, ``jit``, ``checkpoint``): its tracers have only a shape and dtype; asking for
their value raises :class:`ConcretizationError`. The transforms subclass it: reverse mode's
concrete builder (``functx.transforms.reverse.ConcreteTraceBuilder``) also computes each
value as it records it and keeps the residuals each VJP rule declares; forward mode's
(``functx.transforms.jvp.JvpTraceBuilder``) carries tangents. This module does not know
them: a builder is anything with ``process(prim, args, params)``.

Eager binds and concrete tracing run a primitive's implementation directly, without its
abstract-eval rule (the hot path of eager ``grad``): ``functx.numpy`` validates and promotes
arguments before it binds, and a failing implementation's error is explained with the shape
rule. ``functx.tracing.CHECK_EAGER = True`` checks every eager bind against its shape rule
(the test suite sets it, and ``CHECK_TRACES = True``, which type-checks every finished
trace). Abstract tracing always checks shapes and dtypes at trace time.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Callable, Collection, NamedTuple, Sequence

import numpy as np

from functx import backends, tree
# (attach_source, leak_error, your_code: functx.errors' names, imported from here too)
from functx.errors import (ConcretizationError, FunctxError, MissingRuleError, attach_source,
                           leak_error, user_source, your_code)
from functx.ir import (INEXACT_DTYPES, AbstractArray, Eqn, Literal, SourceInfo, Trace, Var,
                       abstractify, typecheck)
from functx.registry import Primitive
from functx.registry.hooks import HOOKS

# ----------------------------------------------------------------------------------------
# Tracer methods and operators are functx.numpy's functions (``x + y`` is
# ``functx.numpy.add(x, y)``). functx.numpy sits above this layer, so it registers its namespace
# as the ``numpy`` hook of functx.registry.hooks when it is imported; the operators read
# ``HOOKS.numpy`` (an attribute of a fixed object: no dictionary lookup, no call).


class Tracer:
    """A value inside a trace: an abstract value, and (in concrete tracing) the value itself.

    Tracers behave like arrays: arithmetic, comparisons, ``@``, indexing, ``.T``, ``.shape``,
    ``.reshape``, ``.sum`` and friends all record operations. NumPy functions and ufuncs
    called on a tracer dispatch to ``functx.numpy`` where it has the same function.

    Conversions to Python values follow one rule: **a value that carries a derivative never
    leaves the trace silently.** Where the value is known (``grad``, ``vjp``, ``jvp``,
    ``linearize``), ``bool(x)`` works (Python control flow: a branch has no derivative), and
    ``float``, ``complex``, ``int``, ``__index__`` (indexing a list), ``.item()`` and
    ``.tolist()`` work on integer and boolean tracers (integers carry no derivative). On a
    floating-point or complex tracer they raise :class:`ConcretizationError`, as in JAX:
    the Python number would be a constant to the transform, silently dropping its part of
    the derivative (``grad(lambda x: x * float(x))(3.0)`` would give 3, not 6). Use the
    array itself, or ``float(functx.stop_gradient(x))`` where a constant is meant (a value
    with no derivative is not a tracer of these transforms). ``np.asarray(x)`` always
    raises; in abstract tracing (``make_trace``, ``eval_shape``, ``vmap``, ``jit``,
    ``checkpoint``) every conversion does (no value is known).
    """

    __slots__ = ("_builder", "_var", "_value", "_tangent")
    __array_priority__ = 1000

    def __init__(self, builder: "TraceBuilder", var: Var, value: Any = None,
                 tangent: Any = None) -> None:
        # (grad's hot path, ConcreteTraceBuilder.process, sets these four slots itself)
        self._builder = builder
        self._var = var
        self._value = value
        self._tangent = tangent  # forward mode: the tangent carried with the value

    # -- abstract value --
    @property
    def aval(self) -> AbstractArray:
        return self._var.aval

    @property
    def shape(self) -> tuple[int, ...]:
        return self._var.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self._var.aval.dtype

    @property
    def ndim(self) -> int:
        return len(self._var.aval.shape)

    @property
    def size(self) -> int:
        return self._var.aval.size

    @property
    def weak_type(self) -> bool:
        return self._var.aval.weak_type

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced value (a scalar) is undefined.")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("Iteration over a 0-d traced value (a scalar) is undefined.")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        if self._builder.concrete:
            return f"Tracer<{self.aval}>(value={self._value!r})"
        return f"Tracer<{self.aval}>"

    # -- conversion to Python values: only where the value is known --
    def _concrete(self, what: str) -> Any:
        b = self._builder
        if not b.active:
            raise leak_error(self)
        if b.concrete:
            v = self._value
            return v._concrete(what) if type(v) is Tracer else v
        raise ConcretizationError(
            f"{what} needs the value of a traced {self.aval} array, but inside "
            f"{b.transform} only its shape and dtype are known (the value is abstract).\n"
            "  What to do: use functx.numpy.where(cond, x, y) for an elementwise choice, "
            "make the argument static (static_argnums), or move the Python control flow "
            "outside the transformed function."
            + your_code())

    def _python_value(self, what: str, example: str) -> Any:
        """The value, for a conversion to a Python number or list (see the class docstring):
        refused for a floating-point or complex value that carries a derivative."""
        b = self._builder
        if b.active and b.concrete and INEXACT_DTYPES[self._var.aval.dtype]:
            raise ConcretizationError(
                f"{what} of a traced {self.aval} value inside {b.transform} would turn it "
                "into a Python value that leaves the trace: its derivative would be lost, "
                f"and {b.transform} would treat it as a constant (silently wrong "
                "derivatives).\n  What to do: keep computing with the array itself "
                "(functx.numpy functions and operators work on it), or, if a constant is "
                f"really meant, convert functx.stop_gradient(x) instead: {example}. "
                "Integer and boolean values carry no derivative and convert freely; bool() "
                "(an `if`) works too."
                + your_code())
        return self._concrete(what)

    def __bool__(self) -> bool:
        return bool(self._concrete("bool() (an `if`, `while`, `and`/`or` or `assert`)"))

    def __int__(self) -> int:
        return int(self._python_value("int()", "int(fx.stop_gradient(x))"))

    def __float__(self) -> float:
        return float(self._python_value("float()", "float(fx.stop_gradient(x))"))

    def __complex__(self) -> complex:
        return complex(self._python_value("complex()", "complex(fx.stop_gradient(x))"))

    def __index__(self) -> int:
        return int(self._python_value("Using a traced value as an index (__index__)",
                                      "fx.stop_gradient(x).astype(int)"))

    def item(self) -> Any:
        v = self._python_value(".item()", "fx.stop_gradient(x).item()")
        return v.item() if hasattr(v, "item") else np.asarray(v).item()  # (CuPy: no asarray)

    def tolist(self) -> Any:
        v = self._python_value(".tolist()", "fx.stop_gradient(x).tolist()")
        return v.tolist() if hasattr(v, "tolist") else np.asarray(v).tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise ConcretizationError(
            f"A traced {self.aval} value was converted to a NumPy array (np.asarray, "
            "np.array or a NumPy function functx.numpy does not mirror). That would drop "
            "it out of the trace and lose its gradient.\n  What to do: use the function of "
            "the same name from functx.numpy, or functx.stop_gradient(x) and return the "
            "value if you only need to inspect it. Indexing a NumPy array with a traced "
            "index (a[i] in a loop body) does this too: use functx.numpy.take(a, i, axis=0)."
            + your_code())

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        fn = getattr(HOOKS.numpy, ufunc.__name__, None) if method == "__call__" else None
        if fn is None or kwargs.get("out") is not None:
            raise TypeError(
                f"numpy.{ufunc.__name__}{'' if method == '__call__' else '.' + method} has no "
                "functx.numpy counterpart for traced values; use functx.numpy functions "
                "inside transformed functions.")
        return fn(*inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        fn = getattr(HOOKS.numpy, func.__name__, None)
        if fn is None or getattr(func, "__module__", "numpy") not in ("numpy", "numpy.core",
                                                                      "numpy._core"):
            raise TypeError(
                f"numpy.{func.__name__} has no functx.numpy counterpart for traced values; "
                "use functx.numpy functions inside transformed functions.")
        return fn(*args, **kwargs)

    # -- operators (NumPy semantics, implemented by functx.numpy) --
    def __neg__(self): return HOOKS.numpy.negative(self)
    def __pos__(self): return self
    def __abs__(self): return HOOKS.numpy.abs(self)
    def __invert__(self): return HOOKS.numpy.invert(self)
    def __add__(self, o): return HOOKS.numpy.add(self, o)
    def __radd__(self, o): return HOOKS.numpy.add(o, self)
    def __sub__(self, o): return HOOKS.numpy.subtract(self, o)
    def __rsub__(self, o): return HOOKS.numpy.subtract(o, self)
    def __mul__(self, o): return HOOKS.numpy.multiply(self, o)
    def __rmul__(self, o): return HOOKS.numpy.multiply(o, self)
    def __truediv__(self, o): return HOOKS.numpy.true_divide(self, o)
    def __rtruediv__(self, o): return HOOKS.numpy.true_divide(o, self)
    def __floordiv__(self, o): return HOOKS.numpy.floor_divide(self, o)
    def __rfloordiv__(self, o): return HOOKS.numpy.floor_divide(o, self)
    def __mod__(self, o): return HOOKS.numpy.remainder(self, o)
    def __rmod__(self, o): return HOOKS.numpy.remainder(o, self)
    def __pow__(self, o): return HOOKS.numpy.power(self, o)
    def __rpow__(self, o): return HOOKS.numpy.power(o, self)
    def __matmul__(self, o): return HOOKS.numpy.matmul(self, o)
    def __rmatmul__(self, o): return HOOKS.numpy.matmul(o, self)
    def __and__(self, o): return HOOKS.numpy.bitwise_and(self, o)
    def __rand__(self, o): return HOOKS.numpy.bitwise_and(o, self)
    def __or__(self, o): return HOOKS.numpy.bitwise_or(self, o)
    def __ror__(self, o): return HOOKS.numpy.bitwise_or(o, self)
    def __xor__(self, o): return HOOKS.numpy.bitwise_xor(self, o)
    def __rxor__(self, o): return HOOKS.numpy.bitwise_xor(o, self)
    def __eq__(self, o): return HOOKS.numpy.equal(self, o)  # type: ignore[override]
    def __ne__(self, o): return HOOKS.numpy.not_equal(self, o)  # type: ignore[override]
    def __lt__(self, o): return HOOKS.numpy.less(self, o)
    def __le__(self, o): return HOOKS.numpy.less_equal(self, o)
    def __gt__(self, o): return HOOKS.numpy.greater(self, o)
    def __ge__(self, o): return HOOKS.numpy.greater_equal(self, o)
    __hash__ = None  # type: ignore[assignment]

    def __getitem__(self, idx: Any) -> Any:
        return HOOKS.numpy.getitem(self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        raise TypeError("functx values are immutable: instead of x[idx] = y, write "
                        "x = x.at[idx].set(y).")

    @property
    def at(self) -> Any:
        """Functional updates: ``x.at[idx].set(y)``, ``.add(y)``, ``.mul(y)``, ``.get()``."""
        return HOOKS.numpy.at(self)

    # -- array methods (as NumPy's) --
    @property
    def T(self): return HOOKS.numpy.transpose(self)
    @property
    def mT(self): return HOOKS.numpy.swapaxes(self, -1, -2)
    def reshape(self, *shape, order="C"):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return HOOKS.numpy.reshape(self, shape, order=order)
    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return HOOKS.numpy.transpose(self, axes or None)
    def astype(self, dtype, copy=True): return HOOKS.numpy.astype(self, dtype)
    def sum(self, axis=None, dtype=None, keepdims=False):
        return HOOKS.numpy.sum(self, axis=axis, dtype=dtype, keepdims=keepdims)
    def mean(self, axis=None, dtype=None, keepdims=False):
        return HOOKS.numpy.mean(self, axis=axis, dtype=dtype, keepdims=keepdims)
    def var(self, axis=None, ddof=0, keepdims=False):
        return HOOKS.numpy.var(self, axis=axis, ddof=ddof, keepdims=keepdims)
    def std(self, axis=None, ddof=0, keepdims=False):
        return HOOKS.numpy.std(self, axis=axis, ddof=ddof, keepdims=keepdims)
    def prod(self, axis=None, keepdims=False):
        return HOOKS.numpy.prod(self, axis=axis, keepdims=keepdims)
    def max(self, axis=None, keepdims=False):
        return HOOKS.numpy.max(self, axis=axis, keepdims=keepdims)
    def min(self, axis=None, keepdims=False):
        return HOOKS.numpy.min(self, axis=axis, keepdims=keepdims)
    def argmax(self, axis=None, keepdims=False):
        return HOOKS.numpy.argmax(self, axis=axis, keepdims=keepdims)
    def argmin(self, axis=None, keepdims=False):
        return HOOKS.numpy.argmin(self, axis=axis, keepdims=keepdims)
    def cumsum(self, axis=None): return HOOKS.numpy.cumsum(self, axis=axis)
    def any(self, axis=None, keepdims=False):
        return HOOKS.numpy.any(self, axis=axis, keepdims=keepdims)
    def all(self, axis=None, keepdims=False):
        return HOOKS.numpy.all(self, axis=axis, keepdims=keepdims)
    def squeeze(self, axis=None): return HOOKS.numpy.squeeze(self, axis=axis)
    def ravel(self): return HOOKS.numpy.ravel(self)
    def flatten(self): return HOOKS.numpy.ravel(self)
    def swapaxes(self, a, b): return HOOKS.numpy.swapaxes(self, a, b)
    def clip(self, min=None, max=None): return HOOKS.numpy.clip(self, min, max)
    def dot(self, other): return HOOKS.numpy.dot(self, other)
    def round(self, decimals=0): return HOOKS.numpy.round(self, decimals)
    def __round__(self, ndigits=None): return HOOKS.numpy.round(self, ndigits or 0)
    def conj(self): return HOOKS.numpy.conj(self)
    def conjugate(self): return HOOKS.numpy.conj(self)
    @property
    def real(self): return HOOKS.numpy.real(self)
    @property
    def imag(self): return HOOKS.numpy.imag(self)


# The device functions (functx.backends, a lower layer) look through tracers and refuse them
# in device_put / to_numpy; they learn the tracer type here.
backends.register_tracer_type(Tracer, lambda t: t._value)


# ----------------------------------------------------------------------------------------
# Builders

_state = threading.local()


def _stack() -> list:
    s = getattr(_state, "stack", None)
    if s is None:
        s = _state.stack = []
    return s


def innermost_abstract_builder() -> "TraceBuilder | None":
    """The innermost active builder of this thread if it is abstract (``make_trace``,
    ``eval_shape``, ``jit``, ``vmap``, ``checkpoint``), else None (nothing traced, or a
    concrete builder innermost: ``grad``, ``vjp``, ``jvp``). ``functx.numpy``'s creation
    functions ask it: there they record a small equation with the builder's ``process``
    instead of allocating a constant of which only the shape is needed.
    """
    stack = getattr(_state, "stack", None)
    if stack:
        b = stack[-1]
        if b.active and not b.concrete:
            return b
    return None


class TraceBuilder:
    """Records equations into a trace with abstract tracers (see the module docstring)."""

    concrete = False

    def __init__(self, transform: str) -> None:
        self.transform = transform
        self.source = user_source(3)
        self.level = 0
        self.active = False
        self.eqns: list[Eqn] = []
        self.in_vars: list[Var] = []
        self.const_vars: list[Var] = []
        self.const_values: list[Any] = []
        self._const_ids: dict[int, tuple] = {}

    def __enter__(self) -> "TraceBuilder":
        stack = _stack()
        self.level = stack[-1].level + 1 if stack else 1
        stack.append(self)
        self.active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.active = False
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()
        else:  # pragma: no cover - stack discipline violated by a bug
            stack.remove(self)

    # -- inputs and constants --
    def new_input(self, x: Any) -> Tracer:
        """A tracer for a new input of the trace (``x`` is a value or an abstract value)."""
        var = Var(abstractify(x))
        self.in_vars.append(var)
        return Tracer(self, var, x if self.concrete else None)

    def lift(self, x: Any) -> Var | Literal:
        """The atom for a value that is not one of this builder's tracers: a literal for a
        scalar, else a constant variable (one per distinct object)."""
        hit = self._const_ids.get(id(x))
        if hit is not None:
            return hit[1]
        if type(x) is _ndarray and x.ndim == 0:  # (a snapshot of the caller's writeable one)
            atom = Literal(backends.owned_read_only(x), aval_of_value(x))
        elif type(x) is not Tracer and np.ndim(x) == 0:
            atom = Literal(x, abstractify(x))
        else:
            atom = Var(abstractify(x))
            self.const_vars.append(atom)
            self.const_values.append(x)
        self._const_ids[id(x)] = (x, atom)  # holding x keeps its id from being reused
        return atom

    def atom_of(self, x: Any) -> Var | Literal:
        """The atom standing for ``x`` (a tracer of this builder or any other value)."""
        if type(x) is Tracer and x._builder is self:
            if not self.active:
                raise leak_error(x)
            return x._var
        if type(x) is Tracer and not x._builder.active:
            raise leak_error(x)
        return self.lift(x)

    # -- recording --
    def abstract_eval(self, prim: Primitive, avals: list, params: dict,
                      source: SourceInfo | None) -> tuple:
        try:
            out = _abstract_eval_cached(prim, tuple(avals), params)
        except FunctxError as e:
            raise attach_source(e, source) from None
        return out

    def process(self, prim: Primitive, args: tuple, params: dict) -> Any:
        source = user_source(3)
        atoms = [self.atom_of(a) for a in args]
        out_avals = self.abstract_eval(prim, [a.aval for a in atoms], params, source)
        out_vars = tuple(Var(a) for a in out_avals)
        self.eqns.append(Eqn(prim, tuple(atoms), params, out_vars, source))
        outs = [Tracer(self, v) for v in out_vars]
        return outs if prim.multiple_results else outs[0]

    def build(self, outputs: Sequence[Any]) -> Trace:
        """The finished trace whose outputs are ``outputs`` (tracers or other values)."""
        atoms = tuple(self.atom_of(x) for x in outputs)
        trace = Trace(tuple(self.in_vars), tuple(self.const_vars), tuple(self.const_values),
                      tuple(self.eqns), atoms)
        if CHECK_TRACES:
            typecheck(trace)
        return trace


def aval_of_value(x: Any) -> AbstractArray:
    """The abstract value of a computed value (a tracer's, or the memoised one of an array)."""
    return x._var.aval if type(x) is Tracer else abstractify(x)


_AE_CACHE: dict = {}


def _abstract_eval_cached(prim: Primitive, avals: tuple, params: dict) -> tuple:
    """``prim.abstract_eval`` as a tuple of outputs, memoised on (avals, params)."""
    key = out = None
    if prim.cache_abstract_eval:
        try:
            key = (prim, avals, tuple(params.items()))
            out = _AE_CACHE.get(key)
        except TypeError:  # an unhashable parameter
            key = None
    if out is None:
        if prim.abstract_eval is None:
            raise MissingRuleError(f"Primitive {prim.name} has no abstract-eval (shape) rule; "
                                   f"register one with {prim.name}_p.def_abstract_eval(fn).")
        out = prim.abstract_eval(*avals, **params)
        out = tuple(out) if prim.multiple_results else (out,)
        if key is not None:
            if len(_AE_CACHE) > 100_000:
                _AE_CACHE.clear()
            _AE_CACHE[key] = out
    return out


# ----------------------------------------------------------------------------------------
# bind

CHECK_EAGER = False  # tests turn this on: eager results are checked against abstract eval
CHECK_TRACES = False  # tests turn this on: every finished trace is type-checked
_BY_TYPE = backends.BY_TYPE
_CPU = backends.CPU
_MIXED = backends.MIXED
_ndarray = np.ndarray


def bind(prim: Primitive, *args: Any, **params: Any) -> Any:
    """Apply ``prim`` to ``args``: eagerly, or by recording it into the innermost trace.

    This is the single entry point of every operation in functx. Without a tracer among
    ``args`` it runs the implementation for the arguments' backend (:func:`apply_eager`,
    the hot path of eager ``grad``).
    """
    impl = prim.cpu_arrays_impl
    for a in args:
        t = type(a)
        if t is not _ndarray:
            if t is not float and t is not int:
                break
            impl = None  # (Python scalars: the CPU impl, as in apply_eager)
    else:  # NumPy arrays only (eager grad's backward pass): apply_eager's hot path, inline
        impl = impl or prim._impl_cache.get("cpu") or prim.impl_for(_CPU)
        try:
            out = impl(*args, **params) if params else impl(*args)
        except FunctxError as e:
            raise attach_source(e, user_source(1)) from None
        except Exception as e:
            _explain_eager_failure(prim, args, params, _CPU, e, 2)
        if type(out) is _ndarray and out.base is None and not prim.multiple_results:
            for a in args:  # (as in apply_eager)
                if a is out:
                    out = backends.finalize_cpu(out, args)
                    break
            else:
                out.setflags(False)
        else:  # (a view, or several results: copies of what may change, see finalize_cpu)
            out = ([backends.finalize_cpu(o, args) for o in out] if prim.multiple_results
                   else backends.finalize_cpu(out, args))
        if CHECK_EAGER:
            _check_against_abstract_eval(prim, args, params, out)
        return out
    builder = None
    for a in args:
        if type(a) is Tracer:
            b = a._builder
            if builder is None or b.level > builder.level:
                builder = b
    if builder is None:
        return apply_eager(prim, args, params)
    if not builder.active:
        for a in args:
            if type(a) is Tracer and a._builder is builder:
                raise leak_error(a)
    return builder.process(prim, args, params)


def apply_eager(prim: Primitive, args: tuple | list, params: dict) -> Any:
    """Run ``prim``'s implementation on ``args`` (no tracers among them: the caller checked)
    on their backend; on the CPU the result is read-only. Concrete builders call it
    directly for the values they compute."""
    backend = _CPU
    impl = prim.cpu_arrays_impl
    for a in args:  # (NumPy arrays only, the hot path: one type test each)
        t = type(a)
        if t is not _ndarray:
            if t is float or t is int:  # (a Python scalar joins the CPU arrays' impl)
                impl = None
                continue
            backend, args = _eager_backend(prim, args)
            impl = prim._impl_cache.get(backend.name) or prim.impl_for(backend)
            break
    else:
        impl = impl or prim._impl_cache.get("cpu") or prim.impl_for(_CPU)
    try:
        out = impl(*args, **params) if params else impl(*args)
    except FunctxError as e:
        raise attach_source(e, user_source(2)) from None
    except Exception as e:
        _explain_eager_failure(prim, args, params, backend, e)
    if backend is _CPU:
        if type(out) is _ndarray and out.base is None and not prim.multiple_results:
            for a in args:  # a fresh result (it owns its data); but an impl may return an
                if a is out:  # input itself: the caller's writeable array, which must not
                    out = backends.finalize_cpu(out, args)  # change under the result: a copy
                    break
            else:  # setflags(write=False), positionally: out.flags.writeable = False
                out.setflags(False)  # makes a flags object, and a keyword costs a parse
        else:  # (a view, or several results: copies of what may change, see finalize_cpu)
            out = ([backends.finalize_cpu(o, args) for o in out] if prim.multiple_results
                   else backends.finalize_cpu(out, args))
    if CHECK_EAGER:
        _check_against_abstract_eval(prim, args, params, out)
    return out


def _eager_backend(prim: Primitive, args: tuple | list) -> tuple:
    """``(backend, args)`` of operands that are not all NumPy arrays: the backend of the
    arrays among them (the CPU for Python scalars alone), with 0-d host values moved to the
    device where operands are mixed (or an error)."""
    backend = None
    for a in args:
        t = type(a)
        if t is _ndarray:
            b = _CPU
        elif t is float or t is int:  # Python scalars join the other operands' device
            continue
        else:
            b = _BY_TYPE.get(t)
            if b is None:
                b = backends.backend_of(a)
                if b is None:
                    continue
        if backend is None:
            backend = b
        elif b is not backend:
            backend = _MIXED  # resolved below: 0-d host values join the device, or error
    if backend is None:
        return _CPU, args
    if backend is _MIXED:
        return backends.resolve_mixed(tuple(args), prim.name)
    return backend, args


def _explain_eager_failure(prim: Primitive, args: tuple, params: dict,
                           backend: backends.Backend, err: Exception, depth: int = 3) -> None:
    source = user_source(depth)
    avals = [abstractify(a) for a in args]
    try:
        _abstract_eval_cached(prim, tuple(avals), params)
    except FunctxError as e:
        raise attach_source(e, source) from None
    msg = (f"{prim.name} failed on the {backend.name} backend for inputs "
           f"{', '.join(map(str, avals))} with parameters {params}: "
           f"{type(err).__name__}: {err}")
    raise attach_source(FunctxError(msg), source) from err


def _check_against_abstract_eval(prim: Primitive, args: tuple, params: dict, out: Any) -> None:
    expected = _abstract_eval_cached(prim, tuple(abstractify(a) for a in args), params)
    got = tuple(out) if prim.multiple_results else (out,)
    for e, g in zip(expected, got):
        if tuple(e.shape) != tuple(g.shape) or e.dtype != g.dtype:
            raise FunctxError(f"Internal check failed: {prim.name}'s implementation returned "
                              f"{abstractify(g)} but its abstract-eval rule says {e}.")


# ----------------------------------------------------------------------------------------
# The transform preamble (trace_function), make_trace and eval_shape


def split_static(args: tuple, static_argnums: Sequence[int]) -> tuple[list[int], tuple]:
    """``(positions of the dynamic arguments, the dynamic arguments)``: ``args`` without the
    positions in ``static_argnums`` (taken modulo ``len(args)``, so negative ones count from
    the end)."""
    n = len(args)
    if not static_argnums or not n:  # (the common case: every call of a jitted function)
        return list(range(n)), tuple(args)
    static = {i % n for i in static_argnums}
    dyn_idx = [i for i in range(n) if i not in static]
    return dyn_idx, tuple(args[i] for i in dyn_idx)


def not_an_array_advice(x: Any, output: bool) -> str:
    """What to do about a leaf ``x`` that is not an array, for error messages: an argument
    (``output=False``) or part of a transformed function's result (``output=True``)."""
    if isinstance(x, Iterator):  # a generator, map, zip...: lazy, so no leaves to look at
        what = "returned" if output else "was passed"
        fix = ("return a tuple or list instead, e.g. tuple(g(x) for x in xs)" if output else
               "pass a tuple or list instead, e.g. tuple(xs)")
        return (f"A {type(x).__name__} (a lazy iterator, such as a generator expression or "
                f"a function with `yield`) {what} where arrays or a pytree of arrays (tuples, "
                f"lists, dicts) are needed, and functx cannot look inside it: {fix}.")
    if output:
        return ("Return arrays (or pytrees of them: tuples, lists, dicts of arrays); keep "
                "other values outside the transformed function.")
    return "Pass arrays (or Python scalars), or mark the argument static with static_argnums."


def check_leaf(x: Any, fname: str, where: str, output: bool = False) -> Any:
    """``x`` if it is an array leaf (an array, a tracer, an abstract value or a Python
    scalar); else a FunctxError naming ``fname`` and ``where`` the leaf is (``output``: the
    leaf is part of the function's result)."""
    if isinstance(x, (Tracer, AbstractArray, np.ndarray, np.generic, bool, int, float, complex)):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    raise FunctxError(f"{fname}: {where} contains a {type(x).__name__} ({x!r:.60}), which is "
                      f"not an array. {not_an_array_advice(x, output)}")


class FlatArgs(NamedTuple):
    """The arguments of a call, split into static and dynamic ones and flattened (see
    :func:`flatten_args`)."""

    args: tuple  # every positional argument, as passed
    dyn_idx: list  # the positions of the dynamic (traced) positional arguments
    leaves: list  # the checked leaves of (dynamic positional args, dynamic kwargs)
    in_tree: Any  # their structure
    static_kwargs: dict  # the keyword arguments passed as they are


def flatten_args(args: tuple, kwargs: dict, where: str, static_argnums: Sequence[int] = (),
                 static_argnames: Collection[str] = ()) -> FlatArgs:
    """Split off the static arguments and flatten ``(dynamic args, dynamic kwargs)``.

    Args:
        args, kwargs: the call's arguments.
        where: the transform's name, for error messages (``"jit(f)"``).
        static_argnums: positions passed as they are (see :func:`split_static`).
        static_argnames: keyword arguments passed as they are.

    Returns:
        A :class:`FlatArgs`.

    Raises:
        FunctxError: a dynamic leaf is not an array.
    """
    dyn_idx, dyn_args = split_static(args, static_argnums)
    if static_argnames:
        static_kwargs = {k: v for k, v in kwargs.items() if k in static_argnames}
        kwargs = {k: v for k, v in kwargs.items() if k not in static_argnames}
    else:
        static_kwargs = {}
    leaves, in_tree = tree.flatten((dyn_args, kwargs))
    leaves = [check_leaf(x, where, "an argument") for x in leaves]
    return FlatArgs(args, dyn_idx, leaves, in_tree, static_kwargs)


def trace_function(f: Callable, args: tuple, kwargs: dict, where: str, *,
                   static_argnums: Sequence[int] = (), static_argnames: Collection[str] = (),
                   flat: FlatArgs | None = None, in_avals: Sequence[Any] | None = None,
                   device_scope: bool = False) -> tuple[Trace, Any, FlatArgs]:
    """The preamble of the abstract transforms: trace ``f(*args, **kwargs)`` abstractly.

    Splits off the static arguments, flattens the dynamic ones, checks the leaves, and traces
    ``f`` as a function of the flat leaves (``make_trace``, ``eval_shape``, ``jit``,
    ``checkpoint`` and ``vmap`` all start this way).

    Args:
        f: the user's function; it returns a pytree of arrays.
        args, kwargs: the call's arguments.
        where: the transform's name, for error messages and the trace's builder.
        static_argnums, static_argnames: the arguments passed to ``f`` as they are.
        flat: ``flatten_args(args, kwargs, where, static_argnums, static_argnames)`` when the
            caller has it already (``jit`` keys its cache on it, ``vmap`` reads batch axes).
        in_avals: the abstract values to trace with, one per leaf (default: the leaves).
        device_scope: constants made while tracing go to the leaves' device
            (``backends.inputs_device_scope``).

    Returns:
        ``(trace, out_tree, flat)``: the trace of the flat function, the structure of ``f``'s
        output, and the flattened arguments.

    Raises:
        FunctxError: an argument or output leaf is not an array.
        ConcretizationError: ``f`` needs the value of a traced argument.

    Example:
        >>> trace, out_tree, _ = trace_function(lambda x: {"y": x * 2}, (np.ones(3),), {},
        ...                                     "make_trace")
    """
    if flat is None:
        flat = flatten_args(args, kwargs, where, static_argnums, static_argnames)
    out_tree_box: list = []
    in_tree, dyn_idx, static_kwargs = flat.in_tree, flat.dyn_idx, flat.static_kwargs

    def flat_f(*leaves: Any) -> list:
        d_args, d_kwargs = tree.unflatten(in_tree, list(leaves))
        full = list(flat.args)
        for i, a in zip(dyn_idx, d_args):
            full[i] = a
        out_leaves, out_tree = tree.flatten(f(*full, **static_kwargs, **d_kwargs))
        out_tree_box.append(out_tree)
        return [check_leaf(x, where, "the function's output", output=True) for x in out_leaves]

    avals = flat.leaves if in_avals is None else in_avals
    # The builder is entered here, not in a helper: each frame between the user's code and
    # an equation costs user_source a step for every equation recorded from a transform's
    # own code (a backward pass inside vmap).
    builder = TraceBuilder(where)
    if device_scope:
        with backends.inputs_device_scope(flat.leaves), builder:
            trace = builder.build(flat_f(*[builder.new_input(a) for a in avals]))
    else:
        with builder:
            trace = builder.build(flat_f(*[builder.new_input(a) for a in avals]))
    return trace, out_tree_box[0], flat


def make_trace(f: Callable, static_argnums: int | Sequence[int] = ()) -> Callable[..., Trace]:
    """Trace ``f`` abstractly into a :class:`Trace` that prints like a jaxpr.

    Args:
        f: a function of arrays (pytrees of arrays) returning arrays (a pytree of them).
        static_argnums: positions of arguments passed to ``f`` as they are, not traced.

    Returns:
        A function taking the same arguments as ``f`` (arrays, or anything with ``shape``
        and ``dtype`` such as :class:`functx.ShapeDtype`) and returning the Trace.

    Raises:
        FunctxError: an argument or output is not an array.

    Example:
        >>> print(fx.make_trace(lambda x: fnp.sin(x).sum())(np.ones(3)))
        { lambda ; a:f64[3]. let
            b:f64[3] = sin a
            c:f64[] = reduce_sum[axes=(0,)] b
          in (c,) }
    """
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    def traced(*args: Any, **kwargs: Any) -> Trace:
        return trace_function(f, args, kwargs, "make_trace", static_argnums=nums)[0]

    traced.__name__ = f"make_trace({getattr(f, '__name__', 'f')})"
    traced.__doc__ = f.__doc__
    return traced


def eval_shape(f: Callable, *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes ``f(*args)`` would return, without computing anything.

    Args:
        f: a function of arrays.
        *args, **kwargs: arrays or :class:`functx.ShapeDtype` values (pytrees of them).

    Returns:
        The output pytree with an :class:`AbstractArray` (``.shape``, ``.dtype``) per leaf.

    Example:
        >>> fx.eval_shape(lambda x: x @ x.T, fx.ShapeDtype((3, 4), np.float32))
        f32[3,3]
    """
    trace, out_tree, _ = trace_function(f, args, kwargs, "eval_shape")
    return tree.unflatten(out_tree, [a.aval for a in trace.outputs])
