"""Pictures of traces: Trace._repr_html_ (coloured listing), Trace.to_dot (Graphviz source:
nodes, data-flow edges, clusters for checkpoint sub-traces, collapsed repeated runs) and
Trace.to_svg (with Graphviz's dot where installed, a clear error where not).

The DOT output is checked with a small parser written here (statements, balanced braces,
declared nodes, cluster nesting); where the dot program is installed it must also accept it.
"""
from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx._ir_render import STYLES
from functx.errors import FunctxError

HAVE_DOT = shutil.which("dot") is not None


def small_trace() -> fx.Trace:
    return fx.make_trace(lambda x, y: (fnp.sin(x) * y, x))(np.ones(3), np.ones(3))


def checkpoint_trace() -> fx.Trace:
    def f(x, y):
        z = fx.checkpoint(lambda a: fnp.sin(a) * 2.0)(x)
        w = fx.checkpoint(lambda a: fx.checkpoint(lambda b: fnp.exp(b) > 1.0)(a))(y)
        return fnp.sum(z), fnp.where(w, x, 1.0)

    return fx.make_trace(f)(np.ones(3), np.ones(3))


def chain_trace(steps: int) -> fx.Trace:
    def f(x):
        for _ in range(steps):
            x = fnp.sin(x) * 1.01
        return x

    return fx.make_trace(f)(np.ones(3))


# ----------------------------------------------------------------------------- DOT parser

TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(->)|([{}\[\];=,])'
                   r'|([A-Za-z_][A-Za-z0-9_.]*|-?[0-9.]+))')


def tokens(src: str) -> list[str]:
    out, i = [], 0
    while i < len(src):
        m = TOKEN.match(src, i)
        assert m and m.end() > i, f"cannot read DOT at {src[i:i + 40]!r}"
        out.append(m.group(m.lastindex))
        i = m.end()
        while i < len(src) and src[i].isspace():
            i += 1
    return out


def unquote(tok: str) -> str:
    if tok.startswith('"'):
        return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), tok[1:-1])
    return tok


def parse_dot(src: str) -> dict:
    """Parses the DOT subset to_dot writes; fails on anything unbalanced or unknown.

    Returns ``nodes`` (id -> attributes), ``edges`` ([(src, dst, attributes)]), ``clusters``
    (id -> parent cluster or None) and ``where`` (node id -> innermost cluster or None).
    """
    toks = tokens(src)
    assert toks[:3] == ["digraph", "trace", "{"] and toks[-1] == "}"
    depth = 0
    for t in toks:
        depth += {"{": 1, "}": -1}.get(t, 0)
        assert depth >= 0
    assert depth == 0
    nodes: dict = {}
    edges: list = []
    clusters: dict = {}
    where: dict = {}
    scope: list = []
    i = 3

    def attrs(j: int) -> tuple[dict, int]:
        out = {}
        if j < len(toks) and toks[j] == "[":
            j += 1
            while toks[j] != "]":
                key, eq, value = toks[j:j + 3]
                assert eq == "=", toks[j:j + 3]
                out[key] = unquote(value)
                j += 3
                if toks[j] == ",":
                    j += 1
            j += 1
        return out, j

    while i < len(toks) - 1:
        t = toks[i]
        if t == ";":
            i += 1
        elif t == "subgraph":
            name, brace = toks[i + 1:i + 3]
            assert brace == "{" and name.startswith("cluster")
            clusters[name] = scope[-1] if scope else None
            scope.append(name)
            i += 3
        elif t == "}":
            scope.pop()
            i += 1
        elif t in ("graph", "node", "edge"):
            _, i = attrs(i + 1)
        elif toks[i + 1] == "=":  # a graph attribute inside a subgraph
            i += 3
        elif toks[i + 1] == "->":
            a, b = t, toks[i + 2]
            at, i = attrs(i + 3)
            edges.append((a, b, at))
        else:
            assert re.fullmatch(r"[a-z_]+[0-9]+", t), t
            at, i = attrs(i + 1)
            assert t not in nodes, f"node {t} declared twice"
            nodes[t] = at
            where[t] = scope[-1] if scope else None
    assert not scope
    for a, b, _ in edges:
        assert a in nodes and b in nodes, (a, b)
    return {"nodes": nodes, "edges": edges, "clusters": clusters, "where": where}


def count_eqns(trace: fx.Trace) -> int:
    """Equations of a trace and of the traces in its equations' parameters."""
    n = 0
    todo = [trace]
    while todo:
        t = todo.pop()
        n += len(t.eqns)
        todo.extend(v for e in t.eqns for v in e.params.values() if isinstance(v, fx.Trace))
    return n


def labels(g: dict, kind: str) -> dict[str, str]:
    return {nid: at["label"] for nid, at in g["nodes"].items() if nid.startswith(kind)}


def check_with_graphviz(dot: str) -> None:
    if HAVE_DOT:
        proc = subprocess.run(["dot", "-Tsvg"], input=dot.encode(), capture_output=True)
        assert proc.returncode == 0 and b"<svg" in proc.stdout, proc.stderr
        assert b"Warning" not in proc.stderr and b"Error" not in proc.stderr, proc.stderr


# ----------------------------------------------------------------------------- HTML

def test_html_is_the_escaped_listing_with_colour_spans():
    t = checkpoint_trace()
    page = t._repr_html_()
    assert page.startswith('<pre class="fx-trace" style="') and page.endswith("</pre>")
    # Tags removed and entities unescaped, it is the listing itself.
    assert html.unescape(re.sub(r"<[^>]+>", "", page)) == str(t)
    # The parameter name='<lambda>' is escaped, never raw HTML.
    assert "name</span>=&#x27;&lt;lambda&gt;&#x27;" in page and "<lambda>" not in page
    for kind, style in STYLES.items():
        assert f'<span class="fx-{kind}" style="{style}">' in page, kind
    span = '<span class="fx-{}" style="{}">{}</span>'.format
    assert span("prim", STYLES["prim"], "sin") in page
    assert span("kw", STYLES["kw"], "lambda") in page and span("kw", STYLES["kw"], "let") in page
    literal = span("literal", STYLES["literal"], "2.0")
    assert literal + ":" + span("type", STYLES["type"], "f64[]") in page
    assert span("var", STYLES["var"], "a") + ":" + span("type", STYLES["type"], "f64[3]") in page
    assert span("key", STYLES["key"], "policy") + "=nothing_saveable" in page


def test_listing_text_is_unchanged():
    """The printer gained a markup hook; the plain listing is as before (hand-written)."""
    assert str(small_trace()) == ("{ lambda ; a:f64[3] b:f64[3]. let\n"
                                  "    c:f64[3] = sin a\n"
                                  "    d:f64[3] = mul c b\n"
                                  "  in (d, a) }")
    t = fx.make_trace(lambda: 1.0)()
    assert str(t) == "{ lambda ; . let\n  in (1.0:~f64[],) }"
    assert t._repr_html_().count("fx-literal") == 1


# ----------------------------------------------------------------------------- DOT

def test_dot_small_trace_nodes_and_data_flow():
    t = small_trace()
    dot = t.to_dot()
    g = parse_dot(dot)
    eqns, ins, outs = labels(g, "eqn"), labels(g, "in"), labels(g, "out")
    assert sorted(eqns.values()) == ["mul c b\nd:f64[3]", "sin a\nc:f64[3]"]
    assert sorted(ins.values()) == ["a:f64[3]", "b:f64[3]"]
    assert list(outs.values()) == ["out: (d, a)"]
    everything = {**eqns, **ins, **outs}
    by_label = {lab.split("\n")[0].split(":")[0]: nid for nid, lab in everything.items()}
    named = {nid: name for name, nid in by_label.items()}
    got = sorted((named[a], named[b]) for a, b, _ in g["edges"])
    assert got == sorted([("a", "sin a"), ("sin a", "mul c b"), ("b", "mul c b"),
                          ("mul c b", "out"), ("a", "out")])
    assert not g["clusters"]
    check_with_graphviz(dot)


def test_dot_one_node_per_equation_and_clusters_for_checkpoint():
    t = checkpoint_trace()
    dot = t.to_dot()
    g = parse_dot(dot)
    eqn_nodes = labels(g, "eqn")
    assert len(eqn_nodes) == count_eqns(t) == len(t.eqns) + 2 + 1 + 2
    # Three checkpoints: three clusters, the inner one nested in the second.
    assert len(g["clusters"]) == 3
    nested = [c for c, parent in g["clusters"].items() if parent is not None]
    assert len(nested) == 1 and g["clusters"][nested[0]] is not None
    inner = [lab for nid, lab in eqn_nodes.items() if g["where"][nid] == nested[0]]
    assert sorted(lab.split("\n")[0].split(" ")[0] for lab in inner) == ["exp", "gt"]
    top = [lab for nid, lab in eqn_nodes.items() if g["where"][nid] is None]
    assert len(top) == len(t.eqns)
    assert sum(lab.startswith("checkpoint[trace=<trace: ") for lab in eqn_nodes.values()) == 3
    # Each cluster is linked to its equation by a dashed edge.
    dashed = [(a, b) for a, b, at in g["edges"] if at.get("style") == "dashed"]
    assert len(dashed) == 3
    assert all(eqn_nodes[b].startswith("checkpoint") for _, b in dashed)
    # Names are those of the listing: every binder in the picture appears in str(t).
    listing = str(t)
    for lab in eqn_nodes.values():
        for binder in lab.split("\n")[1].split(" "):
            assert binder in listing
    check_with_graphviz(dot)


def test_dot_quotes_and_escapes_labels():
    t = checkpoint_trace()
    dot = t.to_dot(max_param_chars=8)
    g = parse_dot(dot)
    cp = [lab for lab in labels(g, "eqn").values() if lab.startswith("checkpoint")]
    assert cp and all("name='<lambd…]" in lab for lab in cp)  # 7 characters and …
    assert "policy=nothing…" in cp[0]


def test_dot_collapses_a_1000_op_chain():
    t = chain_trace(500)
    assert len(t.eqns) == 1000
    dot = t.to_dot()
    g = parse_dot(dot)
    assert len(g["nodes"]) < 100
    more = labels(g, "more")
    assert list(more.values()) == ["… 996 more sin/mul equations"]
    assert len(labels(g, "eqn")) == 4  # the first and last sin/mul blocks
    (m,) = more
    assert [a for a, b, _ in g["edges"] if b == m] and [b for a, b, _ in g["edges"] if a == m]
    # The output keeps its name from the listing: the 1001st name (a...z, aa...zz, aaa...).
    assert str(t).endswith("in (alm,) }") and list(labels(g, "out").values()) == ["out: (alm)"]
    # Without collapsing every equation is drawn.
    full = parse_dot(t.to_dot(collapse=False))
    assert len(labels(full, "eqn")) == 1000 and not labels(full, "more")
    check_with_graphviz(dot)


def test_dot_collapse_periods_thresholds_and_sub_traces():
    def f(x):
        for _ in range(5):
            x = fnp.cos(fnp.sin(x)) * 3.0
        return fnp.sum(x)

    t = fx.make_trace(f)(np.ones(2))
    g = parse_dot(t.to_dot())
    assert list(labels(g, "more").values()) == ["… 9 more sin/cos/mul equations"]
    assert len(labels(g, "eqn")) == 3 + 3 + 1
    assert not labels(parse_dot(t.to_dot(min_repeats=6)), "more")
    with pytest.raises(ValueError, match="min_repeats must be at least 3"):
        t.to_dot(min_repeats=2)
    # A loop of checkpointed blocks: only the first and last clusters are drawn.
    block = fx.checkpoint(lambda a: fnp.tanh(a) * 0.5)

    def g_(x):
        for _ in range(10):
            x = block(x)
        return x

    tc = fx.make_trace(g_)(np.ones(2))
    gc = parse_dot(tc.to_dot())
    assert list(labels(gc, "more").values()) == ["… 8 more checkpoint equations"]
    assert len(gc["clusters"]) == 2
    # Equations that do not repeat are never collapsed.
    assert not labels(parse_dot(small_trace().to_dot()), "more")


def test_dot_of_a_gradient_trace_is_valid():
    def loss(w, x):
        h = fx.checkpoint(lambda a: fnp.tanh(a @ w))(x)
        return fnp.sum(h ** 2)

    t = fx.make_trace(fx.grad(loss))(np.ones((3, 3)), np.ones((2, 3)))
    g = parse_dot(t.to_dot(collapse=False))
    assert len(labels(g, "eqn")) == count_eqns(t)
    assert len(labels(g, "const")) == len(t.const_vars)
    check_with_graphviz(t.to_dot())


# ----------------------------------------------------------------------------- SVG

@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's dot program is not installed")
def test_to_svg_with_graphviz():
    svg = checkpoint_trace().to_svg()
    assert "<svg" in svg and "checkpoint: trace" in svg
    assert "<svg" in chain_trace(50).to_svg(collapse=False)


def test_to_svg_without_graphviz_says_what_to_install(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz -> ImportError
    with pytest.raises(FunctxError, match=r"needs Graphviz's dot program.*apt-get install "
                                          r"graphviz.*pip install graphviz.*to_dot\(\)"):
        small_trace().to_svg()
