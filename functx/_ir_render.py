"""Pictures of traces for notebooks: a syntax-coloured HTML listing and a Graphviz graph.

``Trace._repr_html_``, ``Trace.to_dot`` and ``Trace.to_svg`` (functx/ir.py) call this module.

* HTML: the listing of ``str(trace)``, escaped, with primitives, variables, types, literals,
  keywords and parameter names in ``<span class="fx-KIND" style="...">``. The styles are
  inline (a notebook needs no stylesheet); the classes let a page restyle them.
* DOT: one node per input (ellipse), constant (dashed box) and equation (box labelled with
  the primitive, its parameters and arguments, then its outputs), one node for the outputs,
  and edges from each variable's producer to its users. A trace held in an equation
  parameter (``checkpoint``'s ``trace``) is drawn as a cluster, linked to its equation by a
  dashed edge. Runs of one block of equations repeated at least ``min_repeats`` times in a
  row (same primitives, parameters and types; blocks of up to 8 equations) keep their first
  and last block and put the rest in one "… N more sin/mul equations" node, so a
  1000-step loop stays a small picture. Names match ``str(trace)``.
* SVG: the DOT source run through Graphviz's ``dot`` program (found on PATH, or through
  the ``graphviz`` Python package); without it, a FunctxError says what to install.
"""
from __future__ import annotations

import html
import itertools
import shutil
import subprocess
from typing import Any

from functx.errors import FunctxError
from functx.ir import Eqn, Literal, Printer, Trace, param_text

__all__ = ["trace_html", "trace_dot", "render_svg", "STYLES"]

# Inline styles of the listing's token kinds (GitHub-like light colours).
STYLES: dict[str, str] = {
    "prim": "color:#0550ae;font-weight:bold",
    "var": "color:#953800",
    "type": "color:#6639ba",
    "literal": "color:#116329",
    "kw": "color:#cf222e;font-weight:bold",
    "key": "color:#57606a",
}
_PRE_STYLE = ("font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;"
              "font-size:12px;line-height:1.4;background:#f6f8fa;color:#24292f;"
              "padding:8px;border-radius:6px;overflow-x:auto")


def _html_markup(kind: str | None, text: str) -> str:
    escaped = html.escape(text, quote=True)
    if kind is None:
        return escaped
    return f'<span class="fx-{kind}" style="{STYLES[kind]}">{escaped}</span>'


def trace_html(trace: Trace) -> str:
    """``str(trace)`` as syntax-coloured HTML in a ``<pre>`` block.

    Args:
        trace: the trace.

    Returns:
        HTML text; with its tags removed and entities unescaped it is ``str(trace)``.

    Example:
        >>> from IPython.display import HTML
        >>> HTML(trace_html(fx.make_trace(f)(x)))   # what Jupyter shows for a Trace
    """
    body = Printer(markup=_html_markup).trace(trace, "")
    return f'<pre class="fx-trace" style="{_PRE_STYLE}">{body}</pre>'


# ----------------------------------------------------------------------------------------
# Graphviz DOT

_MAX_PERIOD = 8  # the longest repeated block looked for


def _q(text: str) -> str:
    """A DOT quoted string (``\\n`` starts a new label line)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _sub_traces(params: dict) -> list[tuple[str, Trace]]:
    """The traces held in an equation's parameters, with the parameter's name."""
    out = []
    for k, v in params.items():
        if isinstance(v, Trace):
            out.append((k, v))
        elif isinstance(v, (tuple, list)) and v and all(isinstance(x, Trace) for x in v):
            out.extend((f"{k}[{i}]", x) for i, x in enumerate(v))
    return out


def _find_runs(sigs: list[int], min_repeats: int) -> list[tuple[int, int, int]]:
    """``(start, period, repeats)`` of the runs where a block of ``period`` signatures
    repeats at least ``min_repeats`` times; greedy from the left, longest cover first."""
    n, i, runs = len(sigs), 0, []
    while i < n:
        best_p = best_reps = 0
        for p in range(1, _MAX_PERIOD + 1):
            if i + p * min_repeats > n:
                break
            if sigs[i + p] != sigs[i]:
                continue
            block = sigs[i:i + p]
            reps = 1
            while sigs[i + reps * p:i + (reps + 1) * p] == block:
                reps += 1
            if reps >= min_repeats and reps * p > best_reps * best_p:
                best_p, best_reps = p, reps
        if best_p:
            runs.append((i, best_p, best_reps))
            i += best_p * best_reps
        else:
            i += 1
    return runs


class _DotWriter:
    """Writes the DOT statements of a trace and the traces in its parameters."""

    def __init__(self, collapse: bool, min_repeats: int, max_param_chars: int) -> None:
        self.printer = Printer()
        self.collapse, self.min_repeats = collapse, min_repeats
        self.max_param_chars = max_param_chars
        self.lines: list[str] = []
        self.src: dict[int, str] = {}  # id(var) -> the node that produces it
        self.ids = itertools.count()
        self.sigs: dict[tuple, int] = {}

    def new_id(self, kind: str) -> str:
        return f"{kind}{next(self.ids)}"

    def binder(self, v: Any) -> str:
        return f"{self.printer.name(v)}:{v.aval}"

    def atom(self, a: Any) -> str:
        return repr(a) if isinstance(a, Literal) else self.printer.name(a)

    def short(self, value: Any) -> str:
        if isinstance(value, Trace):
            return f"<trace: {len(value.eqns)} eqns>"
        if isinstance(value, (tuple, list)) and value and all(isinstance(x, Trace) for x in value):
            return f"<{len(value)} traces>"
        text = param_text(value)
        limit = max(self.max_param_chars, 1)
        return text if len(text) <= limit else text[:limit - 1] + "…"

    def signature(self, e: Eqn) -> int:
        params = tuple((k, "<trace>" if _sub_traces({k: v}) else param_text(v))
                       for k, v in e.params.items())
        key = (e.prim.name, params,
               tuple(repr(a) if isinstance(a, Literal) else str(a.aval) for a in e.inputs),
               tuple(str(v.aval) for v in e.outputs))
        return self.sigs.setdefault(key, len(self.sigs))

    def plan(self, eqns: tuple) -> list[tuple]:
        """The equations to draw: ``("eqn", e)`` or ``("more", hidden_eqns, label)``."""
        if not self.collapse or len(eqns) < 2 * self.min_repeats:
            return [("eqn", e) for e in eqns]
        items: list[tuple] = []
        i = 0
        for start, p, reps in _find_runs([self.signature(e) for e in eqns], self.min_repeats):
            items.extend(("eqn", e) for e in eqns[i:start + p])
            hidden = eqns[start + p:start + (reps - 1) * p]
            names = "/".join(dict.fromkeys(e.prim.name for e in eqns[start:start + p]))
            items.append(("more", hidden, f"… {len(hidden)} more {names} equations"))
            items.extend(("eqn", e) for e in eqns[start + (reps - 1) * p:start + reps * p])
            i = start + reps * p
        items.extend(("eqn", e) for e in eqns[i:])
        return items

    def edge(self, a: Any, dst: str, indent: str, extra: str = "") -> None:
        src = self.src.get(id(a)) if not isinstance(a, Literal) else None
        if src is not None:
            self.lines.append(f"{indent}{src} -> {dst}{extra};")

    def trace(self, t: Trace, indent: str) -> str:
        """Writes ``t``'s statements; returns the id of its outputs node."""
        out = self.lines
        for v in t.const_vars:
            nid = self.src[id(v)] = self.new_id("const")
            out.append(f'{indent}{nid} [label={_q(self.binder(v) + chr(10) + "const")} '
                       'shape=box style="rounded,dashed"];')
        for v in t.in_vars:
            nid = self.src[id(v)] = self.new_id("in")
            out.append(f'{indent}{nid} [label={_q(self.binder(v))} shape=ellipse '
                       'style=filled fillcolor="#ddf4ff"];')
        for item in self.plan(t.eqns):
            if item[0] == "eqn":
                self.eqn(item[1], indent)
            else:
                self.more(item[1], item[2], indent)
        nid = self.new_id("out")
        outs = ", ".join(self.atom(a) for a in t.outputs)
        out.append(f'{indent}{nid} [label={_q(f"out: ({outs})")} shape=ellipse '
                   'style=filled fillcolor="#dafbe1"];')
        for a in t.outputs:
            self.edge(a, nid, indent)
        return nid

    def eqn(self, e: Eqn, indent: str) -> None:
        nid = self.new_id("eqn")
        outs = " ".join(self.binder(v) for v in e.outputs)  # named first, as in str(trace)
        params = ""
        if e.params:
            params = "[" + " ".join(f"{k}={self.short(v)}" for k, v in e.params.items()) + "]"
        args = " ".join(self.atom(a) for a in e.inputs)  # defined earlier: already named
        label = f"{e.prim.name}{params}" + (f" {args}" if args else "") + "\n" + outs
        self.lines.append(f'{indent}{nid} [label={_q(label)} shape=box style="rounded,filled" '
                          'fillcolor="#f6f8fa"];')
        for a in e.inputs:
            self.edge(a, nid, indent)
        for name, sub in _sub_traces(e.params):
            cluster = self.new_id("cluster_")
            self.lines.append(f"{indent}subgraph {cluster} {{")
            self.lines.append(f"{indent}  label={_q(f'{e.prim.name}: {name}')}; style=dashed; "
                              'color="#8c959f";')
            sub_out = self.trace(sub, indent + "  ")
            self.lines.append(f"{indent}}}")
            self.lines.append(f'{indent}{sub_out} -> {nid} [style=dashed ltail={cluster} '
                              f'label={_q(name)}];')
        for v in e.outputs:
            self.src[id(v)] = nid

    def more(self, hidden: tuple, label: str, indent: str) -> None:
        nid = self.new_id("more")
        self.lines.append(f'{indent}{nid} [label={_q(label)} shape=box style="dashed,rounded"];')
        seen: set[str] = set()
        for e in hidden:
            self.printer.eqn(e, "")  # names its variables, keeping names as in str(trace)
            for a in e.inputs:
                src = None if isinstance(a, Literal) else self.src.get(id(a))
                if src is not None and src != nid and src not in seen:
                    seen.add(src)
                    self.lines.append(f"{indent}{src} -> {nid};")
            for v in e.outputs:
                self.src[id(v)] = nid


def trace_dot(trace: Trace, *, collapse: bool = True, min_repeats: int = 4,
              max_param_chars: int = 40) -> str:
    """The data-flow graph of ``trace`` as Graphviz DOT source (see ``Trace.to_dot``).

    Args:
        trace: the trace.
        collapse: collapse runs of a repeated block of equations.
        min_repeats: repetitions that make a run (at least 3: the first and last blocks
            stay visible).
        max_param_chars: parameter values in labels are cut to this length.

    Returns:
        The DOT source of a ``digraph``.

    Raises:
        ValueError: ``min_repeats`` is below 3.

    Example:
        >>> print(trace_dot(fx.make_trace(fnp.sin)(np.ones(3))))
        digraph trace { ... }
    """
    if min_repeats < 3:
        raise ValueError(f"to_dot(min_repeats={min_repeats}): a collapsed run keeps its first "
                         "and last block, so min_repeats must be at least 3.")
    w = _DotWriter(collapse, min_repeats, max_param_chars)
    w.trace(trace, "  ")
    head = ["digraph trace {",
            '  graph [rankdir=TB compound=true fontname="monospace" fontsize=10];',
            '  node [fontname="monospace" fontsize=10];',
            '  edge [fontname="monospace" fontsize=9 color="#57606a"];']
    return "\n".join(head + w.lines + ["}"]) + "\n"


_INSTALL = ("Install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install "
            "graphviz; conda: conda install -c conda-forge graphviz); the graphviz Python "
            "package (pip install graphviz) drives that same program. Trace.to_dot() gives "
            "the DOT source without it.")


def render_svg(dot: str) -> str:
    """Runs Graphviz's ``dot`` on DOT source and returns the SVG.

    Args:
        dot: DOT source, e.g. from ``Trace.to_dot()``.

    Returns:
        The SVG document as text.

    Raises:
        FunctxError: the ``dot`` program is not installed (on PATH, or found by the
            ``graphviz`` Python package), or it failed on the source.

    Example:
        >>> svg = render_svg(trace.to_dot())
    """
    exe = shutil.which("dot")
    if exe is None:
        try:
            import graphviz  # optional; it finds and runs the same dot program
        except ImportError:
            graphviz = None
        if graphviz is not None:
            try:
                return graphviz.Source(dot).pipe(format="svg", encoding="utf-8")
            except Exception as e:  # graphviz.ExecutableNotFound, CalledProcessError...
                raise FunctxError(f"Trace.to_svg: the graphviz Python package could not run "
                                  f"Graphviz's dot program ({type(e).__name__}: {e}). "
                                  + _INSTALL) from None
        raise FunctxError("Trace.to_svg needs Graphviz's dot program, which is not on PATH "
                          "(and the graphviz Python package is not installed). " + _INSTALL)
    proc = subprocess.run([exe, "-Tsvg"], input=dot.encode("utf-8"), capture_output=True,
                          timeout=300)
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise FunctxError(f"Trace.to_svg: Graphviz's dot failed (exit {proc.returncode}): "
                          f"{err[:500]}")
    return proc.stdout.decode("utf-8")
