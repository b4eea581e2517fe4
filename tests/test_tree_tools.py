"""Tests of the pytree tools: key paths (flatten_with_path, map_with_path, leaves_with_path,
keystr), reduce, all, transpose, register_dataclass, Partial, and
functx.flatten_util.ravel_pytree.

Expected values are written by hand; where JAX is importable, the key paths, their texts and
transpose results are also compared with jax.tree_util (those tests skip without JAX).
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import typing

import attrs
import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx import tree
from functx.errors import DTypeError, ShapeError
from functx.flatten_util import ravel_pytree
from functx.tree import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey

Point = collections.namedtuple("Point", ["x", "y"])


@attrs.define
class Adam:
    lr: typing.Any
    _mu: typing.Any


class Pair:
    """A node registered without keys: its children's paths are FlattenedIndexKey."""

    def __init__(self, a, b):
        self.a, self.b = a, b


tree.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda aux, cs: Pair(*cs))


class Named:
    """A node registered with flatten_with_keys_fn: its children's paths are GetAttrKey."""

    def __init__(self, left, right):
        self.left, self.right = left, right


tree.register_pytree_node(
    Named, lambda n: ((n.left, n.right), None), lambda aux, cs: Named(*cs),
    lambda n: ([(GetAttrKey("left"), n.left), (GetAttrKey("right"), n.right)], None))


@tree.register_dataclass
@dataclasses.dataclass
class Layer:
    w: typing.Any
    b: typing.Any
    act: str = dataclasses.field(default="relu", metadata=dict(static=True))


def texts(pairs):
    return [(tree.keystr(p), x) for p, x in pairs]


# ----------------------------------------------------------------------------- key entries

def test_key_entries_print_compare_hash_and_match():
    assert str(DictKey("w")) == "['w']" and str(DictKey(3)) == "[3]"
    assert str(SequenceKey(2)) == "[2]" and str(GetAttrKey("lr")) == ".lr"
    assert str(FlattenedIndexKey(1)) == "[<flat index 1>]"
    assert repr(DictKey("w")) == "DictKey(key='w')"
    assert repr(SequenceKey(0)) == "SequenceKey(idx=0)"
    assert repr(GetAttrKey("x")) == "GetAttrKey(name='x')"
    assert repr(FlattenedIndexKey(0)) == "FlattenedIndexKey(key=0)"
    assert DictKey("a") == DictKey("a") and hash(DictKey("a")) == hash(DictKey("a"))
    assert SequenceKey(1) != DictKey(1) and SequenceKey(1) != FlattenedIndexKey(1)
    assert len({SequenceKey(0), SequenceKey(0), DictKey(0)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        SequenceKey(0).idx = 1

    def bare(k):
        match k:
            case DictKey(key=v) | SequenceKey(idx=v) | GetAttrKey(name=v):
                return v
        return None

    assert [bare(k) for k in (DictKey("a"), SequenceKey(4), GetAttrKey("z"))] == ["a", 4, "z"]


def test_keystr_forms():
    path = (DictKey("layers"), SequenceKey(0), GetAttrKey("w"), FlattenedIndexKey(1))
    assert tree.keystr(path) == "['layers'][0].w[<flat index 1>]"
    assert tree.keystr(path, simple=True, separator="/") == "layers/0/w/1"
    assert tree.keystr(path, separator=" ") == "['layers'] [0] .w [<flat index 1>]"
    assert tree.keystr(()) == "" and tree.keystr([DictKey(1)]) == "[1]"
    assert tree.keystr(("a", 1), separator=".") == "a.1"  # anything printable


# ----------------------------------------------------------------------------- paths

def _mixed():
    return {"layers": [(1, Point(2, None)), Adam(3, [4])],
            "od": collections.OrderedDict([("z", 5), ("a", 6)]),
            "dd": collections.defaultdict(int, {"q": 7, "p": 8}),
            "pair": Pair(9, {"k": 10}), "named": Named(11, (12,)),
            "dc": Layer(13, 14, act="tanh"), "none": None}


MIXED_PATHS = [
    ("['dc'].w", 13), ("['dc'].b", 14),
    ("['dd']['p']", 8), ("['dd']['q']", 7),
    ("['layers'][0][0]", 1), ("['layers'][0][1].x", 2),
    ("['layers'][1].lr", 3), ("['layers'][1]._mu[0]", 4),
    ("['named'].left", 11), ("['named'].right[0]", 12),
    ("['od']['z']", 5), ("['od']['a']", 6),
    ("['pair'][<flat index 0>]", 9), ("['pair'][<flat index 1>]['k']", 10),
]


def test_flatten_with_path_every_node_kind():
    t = _mixed()
    pairs, td = tree.flatten_with_path(t)
    assert texts(pairs) == MIXED_PATHS
    assert td == tree.structure(t) and [x for _, x in pairs] == tree.leaves(t)
    assert pairs[0][0] == (DictKey("dc"), GetAttrKey("w"))
    assert pairs[5][0] == (DictKey("layers"), SequenceKey(0), SequenceKey(1), GetAttrKey("x"))
    assert pairs[12][0] == (DictKey("pair"), FlattenedIndexKey(0))
    assert all(type(p) is tuple for p, _ in pairs)
    assert tree.leaves_with_path(t) == pairs
    # A leaf at the root has the empty path; None and empty containers have no leaves.
    assert tree.flatten_with_path(5) == ([((), 5)], tree.structure(5))
    assert tree.leaves_with_path([None, (), {}]) == []


def test_path_functions_with_is_leaf():
    t = {"a": (1, 2), "b": [3, (4, 5)]}
    got = tree.leaves_with_path(t, is_leaf=lambda x: isinstance(x, tuple))
    assert texts(got) == [("['a']", (1, 2)), ("['b'][0]", 3), ("['b'][1]", (4, 5))]
    # is_leaf_takes_path: stop at the second level whatever is there.
    got = tree.leaves_with_path(t, is_leaf=lambda p, x: len(p) == 2, is_leaf_takes_path=True)
    assert texts(got) == [("['a'][0]", 1), ("['a'][1]", 2), ("['b'][0]", 3), ("['b'][1]", (4, 5))]
    _, td = tree.flatten_with_path(t, is_leaf=lambda p, x: len(p) == 2, is_leaf_takes_path=True)
    assert td.num_leaves == 4
    out = tree.map_with_path(lambda p, x: tree.keystr(p), t,
                             is_leaf=lambda x: isinstance(x, tuple))
    assert out == {"a": "['a']", "b": ["['b'][0]", "['b'][1]"]}


def test_map_with_path_several_trees_and_mismatch():
    a = {"w": [1, 2], "b": 3}
    b = {"w": [10, 20], "b": 30}
    out = tree.map_with_path(lambda p, x, y: (tree.keystr(p, simple=True, separator="/"), x + y),
                             a, b)
    assert out == {"w": [("w/0", 11), ("w/1", 22)], "b": ("b", 33)}
    assert tree.map_with_path(lambda p, x: len(p), Layer([1], 2)) == Layer([2], 1)
    with pytest.raises(ValueError, match=r"map_with_path\(\).*tree number 2 does not.*"
                                         r"differ at \['w'\]: \[\*, \*\] vs \[\*\]"):
        tree.map_with_path(lambda p, x, y: x, a, {"w": [1], "b": 3})


DEEP = 2000


def _deep_chain(depth):
    """{'k': [depth-1, {'k': [depth-2, ... {'k': [0, 'end']} ...]}]}, built without recursion."""
    t = "end"
    for i in range(depth):
        t = {"k": [i, t]}
    return t


def test_path_functions_at_depth_2000():
    t = _deep_chain(DEEP)
    pairs, td = tree.flatten_with_path(t)
    assert td == tree.structure(t) and len(pairs) == DEEP + 1
    assert [x for _, x in pairs] == list(range(DEEP - 1, -1, -1)) + ["end"]
    assert tree.keystr(pairs[0][0]) == "['k'][0]"
    assert tree.keystr(pairs[1][0]) == "['k'][1]['k'][0]"
    assert tree.keystr(pairs[-1][0]) == "['k'][1]" * DEEP
    assert [len(p) for p, _ in pairs] == [2 * (i + 1) for i in range(DEEP)] + [2 * DEEP]
    assert tree.leaves_with_path(t) == pairs
    depths = tree.map_with_path(lambda p, x: len(p), t)
    assert tree.leaves(depths) == [len(p) for p, _ in pairs]
    # is_leaf_takes_path at depth: cut the chain at path length 1000.
    cut = tree.leaves_with_path(t, is_leaf=lambda p, x: len(p) == 1000, is_leaf_takes_path=True)
    assert len(cut) == 500 + 1 and tree.keystr(cut[-1][0]) == "['k'][1]" * 500
    assert cut[-1][1] is not None and tree.leaves(cut[-1][1])[0] == DEEP - 501


# ----------------------------------------------------------------------------- reduce, all

def test_reduce():
    t = {"a": 1, "b": (2, [3, None]), "c": 4}
    assert tree.reduce(lambda acc, x: acc + x, t) == 10
    assert tree.reduce(lambda acc, x: acc + [x], t, []) == [1, 2, 3, 4]
    assert tree.reduce(lambda acc, x: acc * x, [], 7) == 7
    assert tree.reduce(lambda acc, x: acc + (x,), t, (), is_leaf=lambda x: isinstance(x, list)) \
        == (1, 2, [3, None], 4)
    with pytest.raises(TypeError, match="no leaves, needs an initializer"):
        tree.reduce(lambda acc, x: acc + x, {"a": None})


def test_all():
    assert tree.all({"a": True, "b": (1, None, [2.5])}) is True
    assert tree.all([True, (1, 0)]) is False
    assert tree.all([]) is True and tree.all(None) is True  # None is a node, not a leaf
    assert tree.all([[], [1]], is_leaf=lambda x: x == []) is False
    assert tree.all([np.float64(0.0)]) is False


# ----------------------------------------------------------------------------- transpose

def test_transpose_and_compose():
    outer, inner = tree.structure([0, 0, 0]), tree.structure((0, 0))
    assert tree.transpose(outer, inner, [(1, 2), (3, 4), (5, 6)]) == ([1, 3, 5], [2, 4, 6])
    # Inner structure inferred from the first element; dict inner trees.
    got = tree.transpose(tree.structure({"x": 0, "y": 0}), None,
                         {"x": {"m": 1, "v": 2}, "y": {"m": 3, "v": 4}})
    assert got == {"m": {"x": 1, "y": 3}, "v": {"x": 2, "y": 4}}
    # Transposing twice gives the tree back.
    t = [(1, 2), (3, 4), (5, 6)]
    assert tree.transpose(inner, outer, tree.transpose(outer, inner, t)) == t
    assert repr(outer.compose(inner)) == "PyTreeDef([(*, *), (*, *), (*, *)])"
    assert tree.structure([0, None]).compose(tree.structure({"a": 0})) == \
        tree.structure([{"a": 0}, None])
    assert outer.compose(inner).num_leaves == 6
    with pytest.raises(TypeError, match=r"has 5 leaves.*needs 6: expected "
                                        r"PyTreeDef\(\[\(\*, \*\), \(\*, \*\), \(\*, \*\)\]\)"):
        tree.transpose(outer, inner, [(1, 2), (3, 4), (5,)])
    with pytest.raises(ValueError, match="prefix structure"):
        tree.transpose(outer, None, [(1, 2), (3, 4)])


def test_transpose_of_per_example_records():
    """The usual use: a list of per-step dicts into a dict of lists (hand-written)."""
    steps = [{"loss": 0.5, "acc": 0.1}, {"loss": 0.25, "acc": 0.2}]
    got = tree.transpose(tree.structure([0, 0]), tree.structure({"loss": 0, "acc": 0}), steps)
    assert got == {"acc": [0.1, 0.2], "loss": [0.5, 0.25]}


# ----------------------------------------------------------------------------- register_dataclass

def test_register_dataclass_decorator_infers_static_fields():
    layer = Layer(np.ones(2), 0.5, act="tanh")
    leaves, td = tree.flatten(layer)
    assert leaves[1] == 0.5 and np.array_equal(leaves[0], np.ones(2))
    assert repr(td) == "PyTreeDef(CustomNode(Layer[('tanh',)], [*, *]))"
    assert td != tree.structure(Layer(1, 2))  # meta fields are part of the structure
    back = td.unflatten([3, 4])
    assert back == Layer(3, 4, act="tanh")
    assert texts(tree.leaves_with_path([layer])) == [("[0].w", leaves[0]), ("[0].b", 0.5)]
    # Transforms see only the data fields.
    g = fx.grad(lambda l: fnp.sum(l.w * l.b) if l.act == "tanh" else 0.0)(
        Layer(np.array([1.0, 2.0]), np.array(3.0), act="tanh"))
    assert type(g) is Layer and g.act == "tanh"
    np.testing.assert_allclose(g.w, [3.0, 3.0])
    np.testing.assert_allclose(g.b, 3.0)


def test_register_dataclass_explicit_fields_and_drop_fields():
    @dataclasses.dataclass(frozen=True)
    class Opt:
        lr: float
        state: typing.Any
        name: str = "sgd"
        cache: typing.Any = None

    assert tree.register_dataclass(Opt, data_fields=["state"], meta_fields=["lr"],
                                   drop_fields=["name", "cache"]) is Opt
    leaves, td = tree.flatten(Opt(0.1, [1, 2], name="x", cache="c"))
    assert leaves == [1, 2]
    assert td.unflatten([5, 6]) == Opt(0.1, [5, 6])  # dropped fields take their defaults

    class Plain:  # not a dataclass: built from keywords
        def __init__(self, *, a, k):
            self.a, self.k = a, k

    tree.register_dataclass(Plain, data_fields=("a",), meta_fields=("k",))
    p = tree.map(lambda x: x * 10, Plain(a=(1, 2), k="key"))
    assert type(p) is Plain and p.a == (10, 20) and p.k == "key"
    assert texts(tree.leaves_with_path(Plain(a=[7], k=0))) == [(".a[0]", 7)]


def test_register_dataclass_errors():
    @dataclasses.dataclass
    class D:
        x: int
        y: int

    with pytest.raises(TypeError, match="give both data_fields and meta_fields"):
        tree.register_dataclass(D, data_fields=["x", "y"])
    with pytest.raises(TypeError, match="not a dataclass"):
        tree.register_dataclass(type("NotDC", (), {}))
    with pytest.raises(ValueError, match=r"missing \['y'\], unexpected \[\]"):
        tree.register_dataclass(D, data_fields=["x"], meta_fields=[])
    with pytest.raises(ValueError, match=r"missing \[\], unexpected \['z'\]"):
        tree.register_dataclass(D, data_fields=["x", "y"], meta_fields=["z"])

    class K:
        def __init__(self, x):
            self.x = x

    with pytest.raises(ValueError, match=r"overlap in \['x'\]"):
        tree.register_dataclass(K, data_fields=["x"], meta_fields=["x"])
    tree.register_dataclass(D)
    with pytest.raises(ValueError, match="already registered"):
        tree.register_dataclass(D)


# ----------------------------------------------------------------------------- Partial

def test_partial_is_a_pytree():
    def f(x, y, z=0):
        return x * y + z

    p = tree.Partial(f, 2.0, z=1.0)
    assert isinstance(p, functools.partial) and p(3.0) == 7.0
    leaves, td = tree.flatten(p)
    assert leaves == [2.0, 1.0]
    assert texts(tree.leaves_with_path(p)) == [("[<flat index 0>][0]", 2.0),
                                               ("[<flat index 1>]['z']", 1.0)]
    q = td.unflatten([5.0, 0.0])
    assert type(q) is tree.Partial and q.func is f and q(3.0) == 15.0
    assert tree.structure(tree.Partial(f, 1.0, z=2.0)) == td
    assert tree.structure(tree.Partial(f, 1.0)) != td
    # A Partial goes through grad as an argument; its bound values are differentiated.
    g = fx.grad(lambda p, x: p(x))(tree.Partial(f, np.array(2.0), z=np.array(1.0)), 3.0)
    assert type(g) is tree.Partial
    np.testing.assert_allclose(g.args[0], 3.0)
    np.testing.assert_allclose(g.keywords["z"], 1.0)


def test_partial_of_a_partial_keeps_its_own_arguments():
    inner = functools.partial(lambda a, b, c: (a, b, c), "a")
    p = tree.Partial(inner, "b")
    assert p("c") == ("a", "b", "c")
    assert tree.leaves(p) == ["b"]  # "a" belongs to the inner partial, not to the pytree
    assert p.func.func is inner.func and p.func.args == ("a",)
    assert tree.structure(p).unflatten(["B"])("C") == ("a", "B", "C")


# ----------------------------------------------------------------------------- ravel_pytree

def test_ravel_pytree_single_dtype():
    params = {"w": np.array([[1.0, 2.0], [3.0, 4.0]]), "b": np.array([5.0, 6.0]), "s": 7.0}
    flat, unravel = ravel_pytree(params)
    np.testing.assert_array_equal(flat, [5.0, 6.0, 7.0, 1.0, 2.0, 3.0, 4.0])  # b, s, w
    assert flat.dtype == np.float64 and flat.shape == (7,)
    back = unravel(np.arange(7.0))
    np.testing.assert_array_equal(back["b"], [0.0, 1.0])
    np.testing.assert_array_equal(back["s"], 2.0)
    np.testing.assert_array_equal(back["w"], [[3.0, 4.0], [5.0, 6.0]])
    assert back["s"].shape == () and tree.structure(back) == tree.structure(params)
    # One dtype: unravel keeps the vector's dtype (as in JAX).
    assert unravel(np.arange(7, dtype=np.float32))["w"].dtype == np.float32
    assert hash(unravel) == hash(ravel_pytree(params)[1]) and unravel == ravel_pytree(params)[1]


def test_ravel_pytree_mixed_dtypes_promote_and_cast_back():
    t = [np.array([1, 2], np.int32), np.array([0.5], np.float32), np.array([True])]
    flat, unravel = ravel_pytree(t)
    assert flat.dtype == np.float64  # NumPy 2 promotion of int32 with float32
    np.testing.assert_array_equal(flat, [1.0, 2.0, 0.5, 1.0])
    back = unravel(np.array([3.0, 4.0, 0.25, 0.0]))
    assert [b.dtype for b in back] == [np.int32, np.float32, np.bool_]
    np.testing.assert_array_equal(back[0], [3, 4])
    np.testing.assert_array_equal(back[1], [0.25])
    np.testing.assert_array_equal(back[2], [False])
    with pytest.raises(DTypeError, match="dtype float32, but the leaves were raveled to float64"):
        unravel(np.zeros(4, np.float32))
    # A weak Python scalar does not widen float32 leaves.
    flat32, _ = ravel_pytree({"a": np.ones(2, np.float32), "b": 2.0})
    assert flat32.dtype == np.float32


def test_ravel_pytree_errors_and_empty():
    _, unravel = ravel_pytree({"a": np.ones(3)})
    with pytest.raises(ShapeError, match=r"expects a vector of shape \(3,\).*got shape \(2,\)"):
        unravel(np.ones(2))
    with pytest.raises(ShapeError, match=r"got shape \(3, 1\)"):
        unravel(np.ones((3, 1)))
    flat, unravel = ravel_pytree({"a": None, "b": []})
    assert flat.shape == (0,) and flat.dtype == np.float64
    assert unravel(np.zeros(0)) == {"a": None, "b": []}


def test_ravel_pytree_is_differentiable_both_ways():
    params = {"w": np.array([1.0, -2.0]), "b": np.array(0.5)}
    flat, unravel = ravel_pytree(params)  # [b, w0, w1]

    # Through unravel: d/dv of sum(w**2) * b at v = [0.5, 1, -2] is [5, 1, -2].
    def loss_flat(v):
        p = unravel(v)
        return fnp.sum(p["w"] ** 2) * p["b"]

    np.testing.assert_allclose(fx.grad(loss_flat)(flat), [5.0, 1.0, -2.0])
    # Through ravel: d/dparams of sum(c * ravel(params)).
    c = np.array([3.0, 4.0, 5.0])
    g = fx.grad(lambda p: fnp.sum(c * ravel_pytree(p)[0]))(params)
    np.testing.assert_allclose(g["b"], 3.0)
    np.testing.assert_allclose(g["w"], [4.0, 5.0])
    # Mixed dtypes: the float32 piece is cast back, and the cast is differentiated.
    _, unravel_mixed = ravel_pytree({"h": np.ones(2, np.float32), "d": np.ones(1)})
    gm = fx.grad(lambda v: fnp.sum(unravel_mixed(v)["h"] * 2.0) + unravel_mixed(v)["d"][0])(
        np.ones(3))
    np.testing.assert_allclose(gm, [1.0, 2.0, 2.0])
    # Forward mode and vmap go through too.
    _, tangent = fx.jvp(loss_flat, (flat,), (np.array([1.0, 0.0, 0.0]),))
    np.testing.assert_allclose(tangent, 5.0)
    batched = fx.vmap(unravel)(np.stack([flat, 2 * flat]))
    np.testing.assert_allclose(batched["w"], [[1.0, -2.0], [2.0, -4.0]])


def test_ravel_pytree_with_scipy_optimize():
    scipy_optimize = pytest.importorskip("scipy.optimize")
    target = {"w": np.array([1.0, -3.0]), "b": np.array(2.0)}

    def loss(p):
        return fnp.sum((p["w"] - target["w"]) ** 2) + (p["b"] - target["b"]) ** 2

    x0, unravel = ravel_pytree({"w": np.zeros(2), "b": np.array(0.0)})
    res = scipy_optimize.minimize(lambda v: float(loss(unravel(v))), x0,
                                  jac=lambda v: np.asarray(fx.grad(lambda u: loss(unravel(u)))(v)),
                                  method="L-BFGS-B")
    best = unravel(res.x)
    np.testing.assert_allclose(best["w"], [1.0, -3.0], atol=1e-6)
    np.testing.assert_allclose(best["b"], 2.0, atol=1e-6)


# ----------------------------------------------------------------------------- against JAX

def _jax_tree_util():
    pytest.importorskip("jax")
    from jax import tree_util
    return tree_util


def _entries(path):
    """A key path as (class name, bare key) pairs, comparable between functx and JAX."""
    out = []
    for k in path:
        name = type(k).__name__
        bare = {"DictKey": "key", "SequenceKey": "idx", "GetAttrKey": "name",
                "FlattenedIndexKey": "key"}[name]
        out.append((name, getattr(k, bare)))
    return out


def _jax_compatible_tree(jtu):
    """A tree with every node kind both libraries know (no attrs class: JAX sees a leaf)."""
    def f(a, b=0):
        return a + b

    return {"layers": [(1, Point(2, None)), [3, {"k": 4}]],
            "od": collections.OrderedDict([("z", 5), ("a", 6)]),
            "dd": collections.defaultdict(int, {"q": 7, "p": 8}), "none": None,
            "ints": {2: "two", 1: "one"},
            "partial": (tree.Partial(f, 9, b=10), jtu.Partial(f, 9, b=10))}


def test_paths_and_keystr_match_jax():
    jtu = _jax_tree_util()
    t = _jax_compatible_tree(jtu)
    ours = {"ours": {k: v for k, v in t.items() if k != "partial"}, "p": t["partial"][0]}
    theirs = {"ours": {k: v for k, v in t.items() if k != "partial"}, "p": t["partial"][1]}
    mine, _ = tree.flatten_with_path(ours)
    jaxs, _ = jtu.tree_flatten_with_path(theirs)
    assert [_entries(p) for p, _ in mine] == [_entries(p) for p, _ in jaxs]
    assert [x for _, x in mine] == [x for _, x in jaxs]
    assert [tree.keystr(p) for p, _ in mine] == [jtu.keystr(p) for p, _ in jaxs]
    assert [tree.keystr(p, simple=True, separator="/") for p, _ in mine] == \
        [jtu.keystr(p, simple=True, separator="/") for p, _ in jaxs]
    assert [str(k) for p, _ in mine for k in p] == [str(k) for p, _ in jaxs for k in p]
    assert [repr(k) for p, _ in mine for k in p] == [repr(k) for p, _ in jaxs for k in p]
    # map_with_path and leaves_with_path, with and without is_leaf.
    fmt = lambda p, x: f"{tree.keystr(p)}={x}"  # noqa: E731
    jfmt = lambda p, x: f"{jtu.keystr(p)}={x}"  # noqa: E731
    plain = {"a": [1, (2, 3)], "b": {"c": 4}}
    assert tree.leaves(tree.map_with_path(fmt, plain)) == \
        jtu.tree_leaves(jtu.tree_map_with_path(jfmt, plain))
    is_tuple = lambda x: isinstance(x, tuple)  # noqa: E731
    assert [(tree.keystr(p), x) for p, x in tree.leaves_with_path(plain, is_leaf=is_tuple)] == \
        [(jtu.keystr(p), x) for p, x in jtu.tree_leaves_with_path(plain, is_leaf=is_tuple)]


def test_dataclass_paths_and_structure_match_jax():
    jtu = _jax_tree_util()

    @jtu.register_dataclass
    @dataclasses.dataclass
    class JLayer:
        w: typing.Any
        b: typing.Any
        act: str = dataclasses.field(default="relu", metadata=dict(static=True))

    mine, td = tree.flatten_with_path([Layer(1, [2], act="tanh")])
    jaxs, jtd = jtu.tree_flatten_with_path([JLayer(1, [2], act="tanh")])
    assert [_entries(p) for p, _ in mine] == [_entries(p) for p, _ in jaxs]
    assert [tree.keystr(p) for p, _ in mine] == [jtu.keystr(p) for p, _ in jaxs]
    assert repr(td).replace("Layer", "JLayer") == repr(jtd)


def test_transpose_reduce_all_match_jax():
    jtu = _jax_tree_util()
    cases = [
        ([0, 0, 0], (0, 0), [(1, 2), (3, 4), (5, 6)]),
        ({"x": 0, "y": 0}, {"m": 0, "v": 0}, {"x": {"m": 1, "v": 2}, "y": {"m": 3, "v": 4}}),
        ((0, [0, 0]), {"a": 0}, ({"a": 1}, [{"a": 2}, {"a": 3}])),
        ([0, 0], (0, 0), [(1, 2), [3, 4]]),  # only the number of leaves is checked
    ]
    for outer, inner, t in cases:
        want = jtu.tree_transpose(jtu.tree_structure(outer), jtu.tree_structure(inner), t)
        got = tree.transpose(tree.structure(outer), tree.structure(inner), t)
        assert got == want, (outer, inner, t)
        want_none = jtu.tree_transpose(jtu.tree_structure(outer), None, t)
        assert tree.transpose(tree.structure(outer), None, t) == want_none
    t = {"a": 1, "b": (2, [3, None]), "c": 4}
    assert tree.reduce(lambda a, x: a * 10 + x, t) == jtu.tree_reduce(lambda a, x: a * 10 + x, t)
    for x in ([True, (1, None)], [], [1, 0], {"a": None}):
        assert tree.all(x) == jtu.tree_all(x)


def test_ravel_pytree_matches_jax_float32():
    pytest.importorskip("jax")
    from jax.flatten_util import ravel_pytree as jax_ravel

    t = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2, np.float32),
         "n": [np.float32(7.0), None]}
    flat, unravel = ravel_pytree(t)
    jflat, junravel = jax_ravel(t)
    assert flat.dtype == jflat.dtype == np.float32
    np.testing.assert_array_equal(flat, np.asarray(jflat))
    v = np.linspace(0, 1, flat.size).astype(np.float32)
    for a, b in zip(tree.leaves(unravel(v)), tree.leaves(junravel(v))):
        np.testing.assert_array_equal(a, np.asarray(b))
