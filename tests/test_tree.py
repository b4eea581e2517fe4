"""Tests of functx.tree: flatten/unflatten round trips, leaf order, map, prefixes, errors."""

import collections
import gc
import typing
import weakref

import attrs
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from functx import tree

Point = collections.namedtuple("Point", ["x", "y"])


class Typed(typing.NamedTuple):
    a: typing.Any
    b: typing.Any


@attrs.define
class Params:
    w: typing.Any
    b: typing.Any


@attrs.define(kw_only=True)
class KwOnly:
    lr: typing.Any
    _state: typing.Any = None


@attrs.frozen
class Frozen:
    x: typing.Any
    _private: typing.Any
    derived: int = attrs.field(init=False, default=7)


class Pair:
    """A user node registered with register_pytree_node; aux is a hashable tag."""

    def __init__(self, a, b, tag="t"):
        self.a, self.b, self.tag = a, b, tag


tree.register_pytree_node(Pair, lambda p: ((p.a, p.b), p.tag),
                          lambda tag, cs: Pair(cs[0], cs[1], tag))


@tree.register_pytree_node_class
class Box:
    def __init__(self, items, name):
        self.items, self.name = items, name

    def tree_flatten(self):
        return list(self.items), self.name

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(list(children), aux)


class BadAux:
    def __init__(self, x):
        self.x = x


tree.register_pytree_node(BadAux, lambda o: ((o.x,), ["unhashable"]),
                          lambda aux, cs: BadAux(cs[0]))


# ----------------------------------------------------------------------------- helpers

def assert_same(a, b):
    """Same node types all the way down, and the very same leaf objects."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()) or type(a) is dict and set(a) == set(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (Params, Frozen)):
        for f in attrs.fields(type(a)):
            assert_same(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, Pair):
        assert a.tag == b.tag
        assert_same(a.a, b.a)
        assert_same(a.b, b.b)
    elif isinstance(a, Box):
        assert a.name == b.name
        assert_same(a.items, b.items)
    elif a is None:
        assert b is None
    else:
        assert a is b


def ref_leaves(t):
    """Independent reference for the leaf order."""
    if t is None:
        return []
    if type(t) in (tuple, list, Point, Typed):
        return [x for c in t for x in ref_leaves(c)]
    if type(t) is dict:
        return [x for k in sorted(t) for x in ref_leaves(t[k])]
    if type(t) is collections.OrderedDict:
        return [x for v in t.values() for x in ref_leaves(v)]
    if type(t) is Params:
        return ref_leaves(t.w) + ref_leaves(t.b)
    if type(t) is Frozen:
        return ref_leaves(t.x) + ref_leaves(t._private)
    if type(t) is Pair:
        return ref_leaves(t.a) + ref_leaves(t.b)
    if type(t) is Box:
        return [x for c in t.items for x in ref_leaves(c)]
    return [t]


leaf_st = st.one_of(
    st.integers(), st.floats(allow_nan=False), st.text(max_size=3),
    hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=3)),
)
keys_st = st.text(alphabet="abcxyz", max_size=2)


def extend(children):
    return st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.lists(children, max_size=3),
        st.dictionaries(keys_st, children, max_size=3),
        st.dictionaries(keys_st, children, max_size=3).map(collections.OrderedDict),
        st.builds(Point, children, children),
        st.builds(Typed, children, children),
        st.builds(Params, children, children),
        st.builds(Frozen, children, children),
        st.builds(Pair, children, children, st.sampled_from(["p", "q"])),
        st.builds(Box, st.lists(children, max_size=2), st.sampled_from(["m", "n"])),
    )


trees = st.recursive(st.one_of(leaf_st, st.none()), extend, max_leaves=12)


# ----------------------------------------------------------------------------- round trips

@settings(max_examples=300, deadline=None)
@given(trees)
def test_round_trip_and_leaf_order(t):
    flat, td = tree.flatten(t)
    assert len(flat) == td.num_leaves
    ref = ref_leaves(t)
    assert len(flat) == len(ref) and all(a is b for a, b in zip(flat, ref))
    back = tree.unflatten(td, flat)
    assert_same(t, back)
    assert tree.structure(back) == td
    assert hash(tree.structure(back)) == hash(td)
    assert [a is b for a, b in zip(tree.leaves(t), flat)] == [True] * len(flat)


@settings(max_examples=100, deadline=None)
@given(trees)
def test_map_identity_and_two_trees(t):
    assert_same(tree.map(lambda x: x, t), t)
    flat, td = tree.flatten(t)
    idx = tree.unflatten(td, range(len(flat)))
    assert tree.structure(tree.map(lambda x: 1, t)) == td
    assert tree.leaves(tree.map(lambda i, x: i * 2, idx, t)) == [2 * i for i in range(len(flat))]
    assert_same(tree.map(lambda x, i: x, t, idx), t)


@settings(max_examples=100, deadline=None)
@given(trees)
def test_flatten_up_to_own_structure_and_root(t):
    flat, td = tree.flatten(t)
    up = tree.flatten_up_to(td, t)
    assert len(up) == len(flat) and all(a is b for a, b in zip(up, flat))
    assert tree.flatten_up_to(tree.structure(0), t)[0] is t
    assert tree.broadcast_prefix(5, t) == [5] * len(flat)
    indexed = tree.unflatten(td, range(len(flat)))
    assert tree.broadcast_prefix(indexed, t) == list(range(len(flat)))


def test_dict_keys_sorted_and_ordereddict_kept():
    d = {"w": 1, "b": 2, "a": 3}
    flat, td = tree.flatten(d)
    assert flat == [3, 2, 1]
    assert list(td.unflatten([10, 20, 30]).keys()) == ["a", "b", "w"]
    o = collections.OrderedDict([("w", 1), ("b", 2)])
    flat, td = tree.flatten(o)
    assert flat == [1, 2]
    back = td.unflatten(["x", "y"])
    assert type(back) is collections.OrderedDict and list(back.items()) == [("w", "x"),
                                                                            ("b", "y")]
    assert tree.structure(o) != tree.structure(dict(o))


def test_defaultdict_and_unorderable_keys():
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    flat, td = tree.flatten(dd)
    back = td.unflatten(flat)
    assert flat == [2, 1] and type(back) is collections.defaultdict
    assert back.default_factory is list and back == dd
    mixed = {1: "one", "x": "ex"}
    flat, td = tree.flatten(mixed)
    assert td.unflatten(flat) == mixed
    assert tree.flatten({"x": "ex", 1: "one"})[0] == flat


def test_none_is_a_node_and_other_leaves():
    flat, td = tree.flatten((None, "abc", np.float32(1.0)))
    assert flat == ["abc", np.float32(1.0)] and td.num_leaves == 2
    assert tree.leaves(None) == []
    assert tree.leaves(None, is_leaf=lambda x: x is None) == [None]
    # Subclasses of list/dict and tuple subclasses without _fields are leaves, as in JAX.
    class MyList(list):
        pass

    class MyTuple(tuple):
        pass

    ml, mt = MyList([1, 2]), MyTuple((1, 2))
    assert tree.leaves([ml, mt]) == [ml, mt]


def test_namedtuple_and_attrs_nodes():
    p = Point(1, Typed(2, 3))
    assert tree.leaves(p) == [1, 2, 3]
    back = tree.structure(p).unflatten(["a", "b", "c"])
    assert back == Point("a", Typed("b", "c"))
    assert tree.structure(Point(1, 2)) != tree.structure((1, 2))
    f = Frozen(x=np.ones(2), private=[1, 2])
    flat, td = tree.flatten(f)
    assert len(flat) == 3 and flat[1:] == [1, 2]
    g = td.unflatten([0, 5, 6])
    assert type(g) is Frozen and g.x == 0 and g._private == [5, 6] and g.derived == 7
    assert repr(td) == "PyTreeDef(Frozen(x=*, _private=[*, *]))"
    assert tree.map(lambda v: v * 2, Params(w=1, b=2)) == Params(w=2, b=4)
    k = tree.map(lambda v: v + 1, KwOnly(lr=1, state=(2, 3)))
    assert type(k) is KwOnly and k.lr == 2 and k._state == (3, 4)


def test_is_leaf_stops_recursion():
    t = {"a": (1, 2), "b": [(3, 4)]}
    flat, td = tree.flatten(t, is_leaf=lambda x: isinstance(x, tuple))
    assert flat == [(1, 2), (3, 4)]
    assert repr(td) == "PyTreeDef({'a': *, 'b': [*]})"
    assert tree.flatten(t, is_leaf=lambda x: x is t)[0] == [t]


# ----------------------------------------------------------------------------- user nodes

def test_user_nodes_both_ways():
    t = Pair([1, Box([2, (3,)], "m")], {"k": Pair(4, 5, "inner")}, "outer")
    flat, td = tree.flatten(t)
    assert flat == [1, 2, 3, 4, 5]
    back = td.unflatten([10, 20, 30, 40, 50])
    assert type(back) is Pair and back.tag == "outer"
    assert back.a[0] == 10 and type(back.a[1]) is Box and back.a[1].name == "m"
    assert back.a[1].items == [20, (30,)] and back.b["k"].tag == "inner"
    assert (back.b["k"].a, back.b["k"].b) == (40, 50)
    assert repr(tree.structure(Pair(1, 2, "z"))) == "PyTreeDef(CustomNode(Pair['z'], [*, *]))"
    # Aux data is part of the structure.
    assert tree.structure(Pair(1, 2, "p")) != tree.structure(Pair(1, 2, "q"))
    assert tree.structure(Box([1], "m")) == tree.structure(Box([7], "m"))


def test_register_twice_and_bad_registrations():
    with pytest.raises(ValueError, match="Pair.*already registered"):
        tree.register_pytree_node(Pair, lambda p: ((), None), lambda a, c: None)
    with pytest.raises(ValueError, match="tuple.*already registered"):
        tree.register_pytree_node(tuple, lambda p: ((), None), lambda a, c: None)
    with pytest.raises(ValueError, match="Box"):
        tree.register_pytree_node_class(Box)
    with pytest.raises(TypeError, match="expects a class"):
        tree.register_pytree_node(Pair(1, 2), lambda p: ((), None), lambda a, c: None)


def test_registering_overrides_auto_detection_of_later_types():
    class Late:
        pass

    obj = Late()
    assert tree.leaves([obj]) == [obj]  # cached as a leaf type first
    tree.register_pytree_node(Late, lambda o: ((1, 2), None), lambda aux, cs: Late())
    assert tree.leaves([obj]) == [1, 2]


def test_unhashable_aux_gives_clear_error():
    td = tree.structure(BadAux(1))
    assert td.num_leaves == 1
    with pytest.raises(TypeError, match="unhashable.*hashable aux data"):
        hash(td)


# ----------------------------------------------------------------------------- PyTreeDef

def test_treedef_equality_hash_and_attributes():
    a = tree.structure({"w": np.ones(3), "b": (1, [2, 3])})
    b = tree.structure({"b": ("x", ["y", "z"]), "w": 0})
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a != tree.structure({"w": 0, "b": (1, (2, 3))})
    assert a != tree.structure({"w": 0, "c": (1, [2, 3])})
    assert tree.structure(None) != tree.structure(0)
    assert tree.structure([None]) != tree.structure([0])
    assert a != "not a treedef"
    assert a.num_leaves == 4
    assert a.num_nodes == 7  # dict, tuple, list and the 4 leaves (leaves count, as in JAX)
    assert repr(a) == "PyTreeDef({'b': (*, [*, *]), 'w': *})"
    assert [repr(c) for c in a.children()] == ["PyTreeDef((*, [*, *]))", "PyTreeDef(*)"]
    assert [c.num_leaves for c in a.children()] == [3, 1]
    assert tree.structure(5).children() == [] and tree.structure(5).num_nodes == 1
    assert repr(tree.structure((1, [2, 3], None))) == "PyTreeDef((*, [*, *], None))"
    assert repr(tree.structure((1,))) == "PyTreeDef((*,))"
    with pytest.raises(AttributeError):
        a._node = None


def test_unflatten_wrong_count():
    td = tree.structure((1, [2, 3]))
    with pytest.raises(ValueError, match=r"expects 3 leaves but 2 were given"):
        tree.unflatten(td, [1, 2])
    with pytest.raises(ValueError, match=r"expects 3 leaves but 4 were given"):
        td.unflatten(iter([1, 2, 3, 4]))
    assert tree.unflatten(td, iter("abc")) == ("a", ["b", "c"])


# ----------------------------------------------------------------------------- map

def test_map_several_trees():
    x = {"a": 1, "b": (2, None, [3])}
    y = {"b": (20, None, [30]), "a": 10}
    z = {"a": 100, "b": (200, None, [300])}
    assert tree.map(lambda p, q, r: p + q + r, x, y, z) == {"a": 111, "b": (222, None, [333])}
    arrays = tree.map(np.asarray, x)
    assert isinstance(arrays["b"][2][0], np.ndarray)


def test_map_mismatch_messages():
    with pytest.raises(ValueError) as e:
        tree.map(lambda a, b: a, {"a": 1, "b": 2}, {"a": 1, "c": 2})
    msg = str(e.value)
    assert "tree number 2" in msg
    assert "PyTreeDef({'a': *, 'b': *})" in msg and "PyTreeDef({'a': *, 'c': *})" in msg
    with pytest.raises(ValueError) as e:
        tree.map(lambda a, b, c: a, (1, [2, 3]), (1, [2, 3]), (1, [2]))
    msg = str(e.value)
    assert "tree number 3" in msg and "first differ at [1]: [*, *] vs [*]" in msg
    with pytest.raises(ValueError, match=r"differ at \[0\]\['k'\]: \* vs \(\*, \*\)"):
        tree.map(lambda a, b: a, [{"k": 1}], [{"k": (1, 2)}])
    with pytest.raises(ValueError, match=r"differ at the root: \(\*, \*\) vs \[\*, \*\]"):
        tree.map(lambda a, b: a, (1, 2), [1, 2])


# ----------------------------------------------------------------------------- prefixes

def test_flatten_up_to_in_axes_example():
    x, y, z = np.zeros(2), np.ones(3), np.full(4, 2.0)
    in_axes = (0, None, {"a": 1})
    args = (x, {"p": y}, {"a": z})
    prefix = tree.structure(in_axes, is_leaf=lambda v: v is None)
    assert prefix.num_leaves == 3
    subtrees = tree.flatten_up_to(prefix, args)
    assert subtrees[0] is x and subtrees[1] == {"p": y} and subtrees[2] is z
    assert tree.broadcast_prefix(in_axes, args, is_leaf=lambda v: v is None) == [0, None, 1]
    args2 = (x, {"p": y, "q": (y, y)}, {"a": z})
    assert tree.broadcast_prefix(in_axes, args2, is_leaf=lambda v: v is None) == [
        0, None, None, None, 1]
    # Without is_leaf, None in the prefix is a node that matches only None.
    assert tree.broadcast_prefix((0, None), (x, None)) == [0]
    with pytest.raises(ValueError, match=r"differ at \[1\]: None vs \{'p': \*\}"):
        tree.broadcast_prefix(in_axes, args)


def test_flatten_up_to_mismatch_messages():
    prefix = tree.structure({"a": 0, "b": 0})
    with pytest.raises(ValueError) as e:
        tree.flatten_up_to(prefix, {"a": 1, "c": [2, 3]})
    msg = str(e.value)
    assert "PyTreeDef({'a': *, 'b': *})" in msg and "PyTreeDef({'a': *, 'c': [*, *]})" in msg
    with pytest.raises(ValueError, match=r"differ at \[1\]: \(\*, \*\) vs \*"):
        tree.flatten_up_to(tree.structure([0, (0, 0)]), [1, 2])
    with pytest.raises(ValueError, match=r"differ at the root: \(\*, \*\) vs \(\*,\)"):
        tree.broadcast_prefix((0, 0), (np.ones(1),))
    with pytest.raises(ValueError, match=r"differ at \.y"):
        tree.flatten_up_to(tree.structure(Point(0, [0])), Point(1, (2,)))
    # A prefix leaf may stand for a whole subtree; a deeper prefix may not.
    assert tree.flatten_up_to(tree.structure([0, 0]), [(1, 2), {"k": 3}]) == [(1, 2),
                                                                                {"k": 3}]


def test_broadcast_prefix_dicts_and_custom_nodes():
    full = {"enc": {"w": 1, "b": 2}, "dec": Pair(3, [4, 5])}
    prefix = {"enc": 0, "dec": Pair(None, 1)}
    got = tree.broadcast_prefix(prefix, full, is_leaf=lambda v: v is None)
    # Leaves of full in order: dec.a=3, dec.b=[4, 5], enc.b=2, enc.w=1.
    assert got == [None, 1, 1, 0, 0]
    assert len(got) == len(tree.leaves(full))


# ----------------------------------------------------------------------------- depth and memory

DEEP = 2000  # well past Python's default recursion limit (1000)


def _deep(depth, leaf):
    """[leaf_0, {"k": (leaf_1, {"k": ( ... Point(leaf_d, None) ... )})}]-like chain."""
    t = Point(leaf(depth), None)
    for i in reversed(range(depth)):
        t = [leaf(i), {"k": (t,)}] if i % 2 else (leaf(i), Pair(t, None, "p"))
    return t


def _walk_deep(t):
    """The leaves of a ``_deep`` chain, read without recursion (an independent reference)."""
    out = []
    while not isinstance(t, Point):
        if isinstance(t, list):
            out.append(t[0])
            t = t[1]["k"][0]
        else:
            assert type(t) is tuple and type(t[1]) is Pair and t[1].tag == "p"
            out.append(t[0])
            t = t[1].a
    assert t.y is None
    return out + [t.x]


def test_deep_trees_flatten_unflatten_map_and_compare():
    t = _deep(DEEP, lambda i: i)
    leaves, td = tree.flatten(t)
    assert leaves == list(range(DEEP + 1)) == _walk_deep(t)
    assert tree.leaves(t) == leaves and td.num_leaves == DEEP + 1
    assert _walk_deep(tree.unflatten(td, [x * 2 for x in leaves])) == [2 * x for x in leaves]
    assert _walk_deep(tree.map(lambda a, b: a + b, t, t)) == [2 * x for x in leaves]
    other = tree.structure(_deep(DEEP, lambda i: -i))
    assert td == other and hash(td) == hash(other) and td == tree.structure(t)
    text = "Point(x=*, y=None)"
    for i in reversed(range(DEEP)):
        text = (f"[*, {{'k': ({text},)}}]" if i % 2
                else f"(*, CustomNode(Pair['p'], [{text}, None]))")
    assert repr(td) == f"PyTreeDef({text})"
    assert td.num_nodes > 3 * DEEP and [c.num_leaves for c in td.children()] == [1, DEEP]
    # The prefix functions and their mismatch messages walk the whole depth too.
    assert tree.flatten_up_to(td, t) == leaves
    assert tree.broadcast_prefix(t, t) == leaves
    changed = _deep(DEEP, lambda i: (i, i) if i == DEEP else i)
    path = r"\[1\]\[0\]\[1\]\['k'\]\[0\]" * (DEEP // 2) + r"\.x"
    with pytest.raises(ValueError, match=r"tree number 2 does not.* differ at " + path
                                         + r": \* vs \(\*, \*\)\.$"):
        tree.map(lambda a, b: a, t, changed)
    assert tree.flatten_up_to(td, changed)[-1] == (DEEP, DEEP)


def test_dynamically_created_classes_can_be_garbage_collected():
    def use_once():
        Dyn = collections.namedtuple("Dyn", ["u", "v"])
        DynAttrs = attrs.define(type("DynAttrs", (), {"__annotations__": {"w": typing.Any}}))
        Opaque = type("Opaque", (), {})  # a leaf type
        t = {"a": Dyn(1.0, DynAttrs(2.0)), "b": Opaque()}
        leaves, td = tree.flatten(t)
        assert leaves[:2] == [1.0, 2.0] and type(leaves[2]) is Opaque
        back = tree.unflatten(td, leaves)
        assert type(back["a"]) is Dyn and back["a"].v.w == 2.0
        assert tree.flatten_up_to(td, t) == leaves
        tree.map(lambda x: x, t)
        return [weakref.ref(Dyn), weakref.ref(DynAttrs), weakref.ref(Opaque)]

    refs = use_once()
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_treedef_keeps_its_classes_and_new_classes_are_classified_afresh():
    def make(fields):
        cls = collections.namedtuple("Rec", fields)
        return tree.structure(cls(*range(len(fields))))

    td = make(["keep", "me"])
    gc.collect()
    back = td.unflatten([1, 2])  # the class lives on in the treedef
    assert back._fields == ("keep", "me") and tuple(back) == (1, 2)
    # Many short-lived classes: a new class (possibly at a freed class's address) never
    # gets a stale handler.
    for i in range(300):
        fields = [f"f{i}_{j}" for j in range(i % 3 + 1)]
        assert repr(make(fields)) == (
            "PyTreeDef(Rec(" + ", ".join(f"{f}=*" for f in fields) + "))")
        if i % 50 == 0:
            gc.collect()
