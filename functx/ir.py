"""The intermediate representation: abstract values, variables, equations and traces.

A :class:`Trace` is functx's jaxpr: a list of equations, each one primitive applied to
input atoms (variables or literals) with hashable parameters, producing output variables.
Everything here is immutable; a trace prints as a readable listing::

    { lambda ; a:f64[3]. let
        b:f64[3] = sin a
        c:f64[] = reduce_sum[axes=(0,)] b
      in (c,) }
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import attrs
import numpy as np

from functx import tree
# SourceInfo (where in the user's code an equation was recorded) lives in functx.errors, the
# lowest layer, so that every error can name the user's line; it is part of the IR too.
from functx.errors import FunctxError, SourceInfo

_SHORT_DTYPE = {
    "float16": "f16", "float32": "f32", "float64": "f64", "bfloat16": "bf16",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "bool": "bool", "complex64": "c64", "complex128": "c128",
}


def short_dtype(dtype: np.dtype) -> str:
    """The short name of a dtype used in listings (``f32``, ``i64``, ``bool``...)."""
    return _SHORT_DTYPE.get(dtype.name, dtype.name)


def _to_shape(shape: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


@attrs.frozen(slots=True, repr=False, cache_hash=True)
class AbstractArray:
    """The abstract value of an array: its shape, dtype and weak-type flag.

    ``weak_type`` marks values that came from Python scalars: they take the dtype of the
    other operand in binary operations, as in NumPy 2 and JAX.

    Example:
        >>> AbstractArray((3, 4), np.float32)
        f32[3,4]
    """

    shape: tuple[int, ...] = attrs.field(converter=_to_shape)
    dtype: np.dtype = attrs.field(converter=np.dtype)
    weak_type: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def update(self, **changes: Any) -> "AbstractArray":
        """A copy with some fields replaced."""
        return attrs.evolve(self, **changes)

    def str_short(self) -> str:
        weak = "~" if self.weak_type else ""
        return f"{weak}{short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"

    __repr__ = __str__ = str_short


ShapeDtype = AbstractArray
tree.register_leaf_type(AbstractArray)


class _InexactDTypes(dict):
    """dtype -> whether values of it carry cotangents (floating point and complex)."""

    def __missing__(self, dtype: Any) -> bool:
        dtype = np.dtype(dtype)
        self[dtype] = r = dtype.kind in "fc" or dtype.name == "bfloat16"
        return r


# dtype -> whether values of it carry derivatives (float/complex): forward and reverse mode,
# the Jacobians and custom derivatives ask it (functx.tracing exports it too).
INEXACT_DTYPES = _InexactDTypes()


_ARRAY_AVALS: dict = {}


# Array types of the non-CPU backends (cupy.ndarray...), added by functx.backends.
DEVICE_ARRAY_TYPES: set = set()


def abstractify(x: Any) -> AbstractArray:
    """The abstract value of an array, a Python scalar, or anything with shape and dtype."""
    if type(x) is np.ndarray or type(x) in DEVICE_ARRAY_TYPES:  # hot: memoised on (shape, dtype)
        key = (x.shape, x.dtype)
        aval = _ARRAY_AVALS.get(key)
        if aval is None:
            if len(_ARRAY_AVALS) > 10_000:
                _ARRAY_AVALS.clear()
            aval = _ARRAY_AVALS[key] = AbstractArray(x.shape, x.dtype)
        return aval
    aval = getattr(x, "aval", None)
    if isinstance(aval, AbstractArray):
        return aval
    if isinstance(x, AbstractArray):
        return x
    if type(x) in (bool, int, float, complex):  # not NumPy scalars: those are strong
        return AbstractArray((), np.asarray(x).dtype, weak_type=True)
    return AbstractArray(x.shape, x.dtype)


class Var:
    """A variable of a trace, compared by identity. Its name is given when printed."""

    __slots__ = ("aval",)

    def __init__(self, aval: AbstractArray) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return f"Var({self.aval})"


@attrs.frozen(slots=True, eq=False, repr=False)
class Literal:
    """A scalar constant written into a trace (from a Python scalar or 0-d array)."""

    value: Any
    aval: AbstractArray

    def value_str(self) -> str:
        """The value as written in listings (``2.0``, ``True``...)."""
        value = self.value  # .item() also reads a 0-d CuPy array, which np.asarray refuses
        return str(value.item() if hasattr(value, "item") else np.asarray(value).item())

    def __repr__(self) -> str:
        return f"{self.value_str()}:{self.aval}"


Atom = Var | Literal


class Eqn(NamedTuple):
    """One primitive applied to input atoms, producing output variables.

    An immutable record (a named tuple: cheap to build on the tracing hot path).
    ``params`` is a dict of hashable values; treat it as read-only.
    """

    prim: Any  # functx.registry.Primitive
    inputs: tuple
    params: dict
    outputs: tuple
    source: SourceInfo | None = None

    def __repr__(self) -> str:
        return Printer().eqn(self, "")


@attrs.frozen(slots=True, eq=False, repr=False)
class Trace:
    """A traced function: inputs, constants (with values), equations and outputs.

    ``const_values[i]`` is the value of ``const_vars[i]``; outputs may be variables or
    literals. Print it to read it; :func:`typecheck` verifies it.
    """

    in_vars: tuple
    const_vars: tuple
    const_values: tuple
    eqns: tuple
    outputs: tuple

    @property
    def in_avals(self) -> tuple[AbstractArray, ...]:
        return tuple(v.aval for v in self.in_vars)

    @property
    def out_avals(self) -> tuple[AbstractArray, ...]:
        return tuple(v.aval for v in self.outputs)

    def __str__(self) -> str:
        return Printer().trace(self, "")

    __repr__ = __str__

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython / notebooks
        p.text(str(self))

    def _repr_html_(self) -> str:
        """The listing as syntax-coloured HTML (Jupyter shows traces this way); the
        colours are inline styles, so no stylesheet is needed."""
        return _render().trace_html(self)

    def to_dot(self, *, collapse: bool = True, min_repeats: int = 4,
               max_param_chars: int = 40) -> str:
        """The data-flow graph of this trace as Graphviz DOT source.

        One node per input, constant and equation, and one for the outputs; edges follow
        the data. Traces held in equation parameters (``checkpoint``'s) are drawn as
        clusters. Runs of one block of equations repeated at least ``min_repeats`` times
        (a layer applied in a loop) show the first and last block and one
        "… N more sin/mul equations" node for the rest.

        Args:
            collapse: collapse repeated runs (False draws every equation).
            min_repeats: how many repetitions of a block make a run worth collapsing.
            max_param_chars: parameters in node labels are cut to this length.

        Returns:
            DOT source (``digraph trace { ... }``); variable names are those of
            ``str(trace)``.

        Raises:
            ValueError: ``min_repeats`` is below 3.

        Example:
            >>> dot = fx.make_trace(f)(x).to_dot()
            >>> open("f.dot", "w").write(dot)   # then: dot -Tsvg f.dot > f.svg
        """
        return _render().trace_dot(self, collapse=collapse, min_repeats=min_repeats,
                                   max_param_chars=max_param_chars)

    def to_svg(self, **dot_options: Any) -> str:
        """The graph of :meth:`to_dot` rendered as SVG by Graphviz.

        Args:
            **dot_options: passed to :meth:`to_dot`.

        Returns:
            The SVG document as text (``IPython.display.SVG(trace.to_svg())`` shows it).

        Raises:
            FunctxError: Graphviz's ``dot`` program is not installed (the message says how
                to install it), or it failed.
        """
        return _render().render_svg(self.to_dot(**dot_options))


def _render() -> Any:
    """The module functx._ir_render (HTML and Graphviz pictures of traces). It builds on
    this module (Printer, Trace), so it is imported on first use: a same-layer cycle."""
    from functx import _ir_render
    return _ir_render


def _names() -> Iterable[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            yield "".join(combo)


def _plain(kind: str | None, text: str) -> str:
    return text


class Printer:
    """Writes traces and equations as listings, naming variables ``a``, ``b``, ... ``z``,
    ``aa``... in order of first appearance (one printer per listing).

    ``markup(kind, text)`` sees every piece of the listing in order: tokens with a kind
    (``"prim"``, ``"var"``, ``"type"``, ``"literal"``, ``"kw"`` for ``lambda``/``let``/``in``,
    ``"key"`` for parameter names) and the text between them with kind None; the listing is
    the concatenation of what it returns. The default leaves text as it is (``str(trace)``);
    functx._ir_render escapes and colours it for HTML.

    Example:
        >>> Printer().trace(fx.make_trace(fnp.sin)(np.ones(3)), "")
        '{ lambda ; a:f64[3]. let\\n    b:f64[3] = sin a\\n  in (b,) }'
    """

    def __init__(self, markup: Callable[[str | None, str], str] | None = None) -> None:
        self.names: dict[int, str] = {}
        self.gen = _names()
        self.m = markup or _plain

    def name(self, v: Var) -> str:
        """The name of a variable (given on first use)."""
        name = self.names.get(id(v))
        if name is None:
            name = self.names[id(v)] = next(self.gen)
        return name

    def var(self, v: Any) -> str:
        m = self.m
        if isinstance(v, Literal):
            return m("literal", v.value_str()) + m(None, ":") + m("type", str(v.aval))
        return m("var", self.name(v))

    def binder(self, v: Var) -> str:
        return self.var(v) + self.m(None, ":") + self.m("type", str(v.aval))

    def param(self, value: Any, indent: str) -> str:
        if isinstance(value, Trace):
            return self.m(None, "\n") + self.trace(value, indent + "    ")
        if isinstance(value, (tuple, list)) and value and all(isinstance(t, Trace)
                                                              for t in value):
            # several sub-traces (switch's branches): each one nested, in a bracket
            return (self.m(None, "(\n") + self.m(None, ",\n").join(
                self.trace(t, indent + "    ") for t in value) + self.m(None, " )"))
        return self.m(None, param_text(value))

    def eqn(self, e: Eqn, indent: str) -> str:
        m = self.m
        outs = m(None, " ").join(self.binder(v) for v in e.outputs)
        params = ""
        if e.params:
            params = m(None, "[") + m(None, " ").join(
                m("key", k) + m(None, "=") + self.param(v, indent)
                for k, v in e.params.items()) + m(None, "]")
        args = m(None, " ").join(self.var(a) for a in e.inputs)
        # (an equation without outputs, an effect such as debug_callback, has no "=")
        line = (outs + m(None, " = ") if e.outputs else "") + m("prim", e.prim.name) + params
        return line + m(None, " ") + args if e.inputs else line

    def trace(self, t: Trace, indent: str) -> str:
        m = self.m
        consts = m(None, " ").join(self.binder(v) for v in t.const_vars)
        ins = m(None, " ").join(self.binder(v) for v in t.in_vars)
        lines = [m(None, indent + "{ ") + m("kw", "lambda") + m(None, " ") + consts
                 + m(None, " " if consts else "") + m(None, "; ") + ins + m(None, ". ")
                 + m("kw", "let")]
        lines += [m(None, indent + "    ") + self.eqn(e, indent + "    ") for e in t.eqns]
        outs = m(None, ", ").join(self.var(v) for v in t.outputs)
        lines.append(m(None, indent + "  ") + m("kw", "in") + m(None, " (") + outs
                     + m(None, "," if len(t.outputs) == 1 else "") + m(None, ") }"))
        return m(None, "\n").join(lines)


def param_text(value: Any) -> str:
    """How a (non-trace) equation parameter is written in listings."""
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value).name
    return repr(value)


def typecheck(trace: Trace) -> None:
    """Re-run abstract evaluation over ``trace`` and check every variable's type.

    Raises:
        FunctxError: a variable is used before it is defined, or an equation's output types
            differ from what its primitive's abstract-eval rule says.
    """
    defined = {id(v) for v in (*trace.in_vars, *trace.const_vars)}

    def check_atom(a: Any, where: str) -> AbstractArray:
        if isinstance(a, Var) and id(a) not in defined:
            raise FunctxError(f"Trace type error: {where} uses a variable of type {a.aval} "
                              "before it is defined.")
        return a.aval

    for e in trace.eqns:
        where = f"equation `{e!r}`"
        avals = [check_atom(a, where) for a in e.inputs]
        out = e.prim.abstract_eval(*avals, **e.params)
        out = tuple(out) if e.prim.multiple_results else (out,)
        got = tuple(v.aval for v in e.outputs)
        if tuple((a.shape, a.dtype) for a in out) != tuple((a.shape, a.dtype) for a in got):
            raise FunctxError(f"Trace type error: {where} declares outputs {list(got)} but "
                              f"the abstract-eval rule of {e.prim.name} gives {list(out)}.")
        defined.update(id(v) for v in e.outputs)
    for a in trace.outputs:
        check_atom(a, "the trace's output list")


def as_tuple(x: Any) -> tuple:
    """``x`` as a tuple (sequences are converted, anything else wrapped)."""
    return tuple(x) if isinstance(x, Sequence) and not isinstance(x, str) else (x,)
