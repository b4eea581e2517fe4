"""Tests of fx.save / fx.load (functx/serialization.py).

* Round trips: nested dicts, lists, tuples, None, namedtuples and OrderedDicts; float16,
  bfloat16, float8, integer, bool and complex leaves, 0-d and empty arrays, NumPy scalars,
  Python numbers and strings; the types and key orders come back as they were.
* Templates: custom nodes (attrs classes, registered types) and unimported namedtuples come
  back through a template of arrays or ShapeDtypes; a mismatch in structure, shape or dtype
  is an error naming the first mismatching path.
* Safety: files holding pickled data (an object array, a pickle, a pickled header) or naming
  classes and dtypes they should not are refused with a FunctxError, and no code runs.
* Errors: a missing path, a directory, a file of another kind, traced values, leaves that
  cannot be saved.
* Devices: arrays of the fake device (tests/test_backends.py) are saved from the device and
  loaded onto a chosen one; the real CUDA round trip runs where CuPy sees a GPU.
"""
from __future__ import annotations

import collections
import io
import json
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import numpy as np
import pytest

import functx as fx
import functx.backends as B
from functx import tree
from functx.errors import DTypeError, FunctxError, ShapeError
from test_backends import FAKE, FakeArray

ml_dtypes = pytest.importorskip("ml_dtypes")


class Point(NamedTuple):
    x: Any
    y: Any


@attrs.define
class State:
    step: Any
    params: Any


class Box:
    """A registered pytree node type."""

    def __init__(self, items: list) -> None:
        self.items = items


tree.register_pytree_node(Box, lambda b: (b.items, None), lambda aux, cs: Box(list(cs)))


def assert_same(a: Any, b: Any, path: str = "") -> None:
    """``a`` and ``b`` are the same tree: same node types, keys (in order), leaf types,
    dtypes, shapes and values (NaNs equal)."""
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b), path
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), path
    elif isinstance(a, float) and a != a:
        assert b != b, path
    else:
        assert a == b, path


def rich_tree() -> dict:
    rng = np.random.default_rng(0)
    return {
        "params": {"w": rng.normal(size=(3, 4)).astype(np.float32),
                   "b": np.zeros(4, np.float16)},
        "layers": [{"bf16": (rng.normal(size=(2, 5))).astype(ml_dtypes.bfloat16),
                    "f8": np.arange(4, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn)},
                   (np.arange(6, dtype=np.int8).reshape(2, 3), None,
                    np.array([True, False, True]))],
        "complex": [np.array([1 + 2j, -3j], np.complex64), np.array(2.5 - 1j)],
        "ints": (np.array(7, np.int64), np.arange(3, dtype=np.uint32),
                 np.array(2**63 - 1, np.int64)),
        "point": Point(np.array(1.5), Point(None, np.ones((0, 3), np.float64))),
        "empty": np.zeros((4, 0, 2), np.float32),
        "zero_d": np.array(3.25, np.float32),
        "np_scalars": [np.float32(1.5), np.int16(-3), ml_dtypes.bfloat16(0.75), np.bool_(True)],
        "python": [1, 2**80, -0.5, float("nan"), float("inf"), True, 3 - 4j, "text", None],
        "ordered": collections.OrderedDict([("z", np.ones(1)), ("a", np.zeros(1))]),
        7: "int key",
        "nested_empty": {"l": [], "t": (), "d": {}},
    }


# -- round trips ---------------------------------------------------------------------------------

def test_round_trip_keeps_everything(tmp_path: Path) -> None:
    t = rich_tree()
    fx.save(tmp_path / "ckpt.npz", t)
    back = fx.load(tmp_path / "ckpt.npz")
    assert_same(back, t)
    assert back["layers"][0]["bf16"].dtype == ml_dtypes.bfloat16
    assert type(back["point"]) is Point and type(back["ordered"]) is collections.OrderedDict
    assert list(back) == list(t)  # the dict's insertion order


def test_template_round_trip_and_shape_dtype_templates(tmp_path: Path) -> None:
    t = rich_tree()
    fx.save(tmp_path / "ckpt.npz", t)
    assert_same(fx.load(tmp_path / "ckpt.npz", template=t), t)
    abstract = tree.map(lambda x: fx.ShapeDtype(np.shape(x), x.dtype)
                        if isinstance(x, (np.ndarray, np.generic)) else x, t)
    # tree.map rebuilt the template's dicts in functx.tree's (sorted) key order: so is the result
    assert_same(fx.load(tmp_path / "ckpt.npz", template=abstract), tree.map(lambda x: x, t))


def test_single_array_and_loaded_arrays_are_read_only_numpy(tmp_path: Path) -> None:
    fx.save(tmp_path / "a.npz", np.arange(5.0))
    x = fx.load(tmp_path / "a.npz")
    assert type(x) is np.ndarray and not x.flags.writeable
    np.testing.assert_array_equal(x, np.arange(5.0))


def test_the_file_is_a_plain_npz_named_as_given(tmp_path: Path) -> None:
    path = tmp_path / "no_extension"
    fx.save(str(path), {"w": np.ones(3)})
    assert path.exists() and not (tmp_path / "no_extension.npz").exists()
    with np.load(path, allow_pickle=False) as f:
        assert sorted(f.files) == ["__functx__", "leaf_0"]
        np.testing.assert_array_equal(f["leaf_0"], np.ones(3))
        meta = json.loads(f["__functx__"].tobytes())
    assert meta["format"] == "functx.save" and meta["version"] == 1


def test_save_replaces_a_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "c.npz"
    fx.save(path, [np.ones(2)])
    fx.save(path, [np.zeros(3)])
    np.testing.assert_array_equal(fx.load(path)[0], np.zeros(3))
    assert os.listdir(tmp_path) == ["c.npz"]


def test_round_trip_through_grad_outputs(tmp_path: Path) -> None:
    params = {"w": np.linspace(-1, 1, 6).reshape(2, 3), "b": np.zeros(3)}
    g = fx.grad(lambda p: (p["w"].sum() + p["b"] ** 2).sum())(params)
    fx.save(tmp_path / "g.npz", g)
    assert_same(fx.load(tmp_path / "g.npz"), tree.map(np.asarray, g))


# -- custom nodes and templates --------------------------------------------------------------------

def test_custom_nodes_need_a_template(tmp_path: Path) -> None:
    t = {"state": State(step=3, params={"w": np.ones(2)}), "box": Box([np.zeros(1), 2.0])}
    fx.save(tmp_path / "s.npz", t)
    with pytest.raises(FunctxError, match=r"State node at \['state'\].*template="):
        fx.load(tmp_path / "s.npz")
    back = fx.load(tmp_path / "s.npz", template=t)
    assert type(back["state"]) is State and back["state"].step == 3
    np.testing.assert_array_equal(back["state"].params["w"], np.ones(2))
    assert type(back["box"]) is Box and back["box"].items[1] == 2.0


def test_dict_with_other_keys_is_a_custom_node(tmp_path: Path) -> None:
    t = {(1, 2): np.ones(2), "a": np.zeros(1)}
    fx.save(tmp_path / "d.npz", t)
    with pytest.raises(FunctxError, match="template="):
        fx.load(tmp_path / "d.npz")
    back = fx.load(tmp_path / "d.npz", template=t)
    assert set(back) == set(t)  # rebuilt by functx.tree: its key order
    assert_same(back[(1, 2)], t[(1, 2)]) and assert_same(back["a"], t["a"])


def test_unimported_namedtuple_needs_a_template(tmp_path: Path) -> None:
    Local = collections.namedtuple("Local", ["u", "v"])  # not reachable by name
    t = {"nt": Local(np.ones(2), 5)}
    fx.save(tmp_path / "n.npz", t)
    with pytest.raises(FunctxError, match=r"namedtuple at \['nt'\].*Local.*template="):
        fx.load(tmp_path / "n.npz")
    back = fx.load(tmp_path / "n.npz", template=t)
    assert type(back["nt"]) is Local and back["nt"].v == 5


@pytest.mark.parametrize("change, error, message", [
    (lambda t: t["params"].pop("b"), FunctxError,
     r"at \['params'\]: the file has keys .*missing from the file: \[\]; not in the "
     r"template: \['b'\]"),
    (lambda t: t["params"].update(extra=np.ones(1)), FunctxError,
     r"at \['params'\].*missing from the file: \['extra'\]"),
    (lambda t: t["layers"].append(None), FunctxError,
     r"at \['layers'\]: the file has a list of length 2, the template one of length 3"),
    (lambda t: t.update(layers=tuple(t["layers"])), FunctxError,
     r"at \['layers'\]: the file has a list, the template a tuple"),
    (lambda t: None, None, None),  # no change: it loads
    (lambda t: t["params"].update(w=np.ones((4, 3), np.float32)), ShapeError,
     r"at \['params'\]\['w'\] has shape \(3, 4\) in the file, but the template expects "
     r"\(4, 3\)"),
    (lambda t: t["layers"].__setitem__(
        1, (np.zeros((2, 3), np.int16), None, np.array([True, False, True]))), DTypeError,
     r"at \['layers'\]\[1\]\[0\] has dtype int8 in the file, but the template expects int16"),
    (lambda t: t.update(point=Point(1, 2)), FunctxError,
     r"at \['point'\]\.x: the file has an array, the template a Python value"),
    (lambda t: t["python"].__setitem__(0, 1.0), FunctxError,
     r"at \['python'\]\[0\]: the file has a Python int, the template a float"),
])
def test_template_mismatch_names_the_path(tmp_path: Path, change: Any, error: Any,
                                          message: str) -> None:
    t = rich_tree()
    fx.save(tmp_path / "m.npz", t)
    template = rich_tree()
    change(template)
    if error is None:
        assert_same(fx.load(tmp_path / "m.npz", template=template), t)
        return
    with pytest.raises(error, match=message):
        fx.load(tmp_path / "m.npz", template=template)


def test_template_leaves_must_have_shape_and_dtype(tmp_path: Path) -> None:
    fx.save(tmp_path / "t.npz", {"w": np.ones(2)})
    with pytest.raises(FunctxError, match=r"template's leaf at \['w'\] is a .*object"):
        fx.load(tmp_path / "t.npz", template={"w": object()})


# -- safety: no pickle, no code ------------------------------------------------------------------

class Boom:
    """Unpickling this creates ``marker``: evidence that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.mkdir, (self.marker,))


def write_npz(path: Path, entries: dict) -> None:
    """An npz archive written by hand (pickling allowed, as an attacker would)."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            with zf.open(f"{name}.npy", "w") as f:
                if isinstance(data, bytes):
                    f.write(data)
                else:
                    np.lib.format.write_array(f, data, allow_pickle=True)


def meta_array(tree_node: Any, **extra: Any) -> np.ndarray:
    meta = {"format": "functx.save", "version": 1, "tree": tree_node, **extra}
    return np.frombuffer(json.dumps(meta).encode(), np.uint8)


ARRAY_NODE = {"t": "array", "i": 0, "dtype": "float64", "shape": [1], "stored": "<f8",
              "np_scalar": False}


def test_object_array_entry_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = np.empty(1, dtype=object)
    payload[0] = Boom(str(marker))
    write_npz(tmp_path / "evil.npz", {"__functx__": meta_array(ARRAY_NODE), "leaf_0": payload})
    for template in (None, np.zeros(1)):
        with pytest.raises(FunctxError, match="not a valid functx.save file"):
            fx.load(tmp_path / "evil.npz", template=template)
    assert not marker.exists()


def test_pickled_header_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = np.empty((), dtype=object)
    payload[()] = Boom(str(marker))
    write_npz(tmp_path / "evil.npz", {"__functx__": payload})
    with pytest.raises(FunctxError, match="unreadable __functx__ entry"):
        fx.load(tmp_path / "evil.npz")
    assert not marker.exists()


def test_plain_pickle_file_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "evil.npz").write_bytes(pickle.dumps({"w": Boom(str(marker))}))
    with pytest.raises(FunctxError, match="not a file written by functx.save"):
        fx.load(tmp_path / "evil.npz")
    assert not marker.exists()
    # A .npy file holding a pickle (what np.save writes for object arrays) is refused too.
    buf = io.BytesIO()
    np.save(buf, np.array([Boom(str(marker))], dtype=object), allow_pickle=True)
    (tmp_path / "evil.npy").write_bytes(buf.getvalue())
    with pytest.raises(FunctxError, match="not a file written by functx.save"):
        fx.load(tmp_path / "evil.npy")
    assert not marker.exists()


def test_file_naming_functions_or_odd_dtypes_is_refused(tmp_path: Path) -> None:
    ok = np.ones(1)
    cases = [
        # A "namedtuple" that is a function of an imported module: never called.
        ({"t": "namedtuple", "cls": "os:system", "fields": ["x"], "c": [None]},
         "no such class is imported"),
        ({"t": "namedtuple", "cls": "builtins:eval", "fields": [], "c": []},
         "no such class is imported"),
        ({**ARRAY_NODE, "dtype": "object", "stored": "|O"}, "not bool, integer, float"),
        ({**ARRAY_NODE, "dtype": "__import__('os')"}, "invalid dtype name"),
        ({**ARRAY_NODE, "dtype": "testing", "stored": "<u8"}, "unknown dtype 'testing'"),
        ({**ARRAY_NODE, "dtype": "bfloat16", "stored": "<u8"}, "unknown dtype 'bfloat16'"),
        ({**ARRAY_NODE, "dtype": "float32"}, "dtype 'float32' stored as float64"),
        ({**ARRAY_NODE, "shape": [2]}, "described as float64\\[2\\]"),
        ({**ARRAY_NODE, "i": 5}, "missing entry leaf_5"),
        ({"t": "pickle", "v": "..."}, "an unknown node"),
        ({"t": "py", "type": "int", "v": "1"}, "invalid Python value"),
    ]
    for node, message in cases:
        write_npz(tmp_path / "odd.npz", {"__functx__": meta_array(node), "leaf_0": ok})
        with pytest.raises(FunctxError, match=message):
            fx.load(tmp_path / "odd.npz")


def test_wrong_header_or_newer_version(tmp_path: Path) -> None:
    write_npz(tmp_path / "v.npz", {"__functx__": meta_array(None, version=99)})
    with pytest.raises(FunctxError, match="version 99.*up to 1"):
        fx.load(tmp_path / "v.npz")
    write_npz(tmp_path / "j.npz", {"__functx__": np.frombuffer(b"{not json", np.uint8)})
    with pytest.raises(FunctxError, match="not JSON"):
        fx.load(tmp_path / "j.npz")
    np.savez(tmp_path / "plain.npz", a=np.ones(2))
    with pytest.raises(FunctxError, match="has no __functx__ entry"):
        fx.load(tmp_path / "plain.npz")


# -- other errors ----------------------------------------------------------------------------------

def test_missing_path_directory_and_other_files(tmp_path: Path) -> None:
    with pytest.raises(FunctxError, match="there is no file .*nope.npz"):
        fx.load(tmp_path / "nope.npz")
    with pytest.raises(FunctxError, match="is a directory"):
        fx.load(tmp_path)
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(FunctxError, match="not a file written by functx.save"):
        fx.load(tmp_path / "text.npz")
    with pytest.raises(FunctxError, match="cannot write"):
        fx.save(tmp_path / "no_such_dir" / "x.npz", {"w": np.ones(1)})


def test_leaves_that_cannot_be_saved(tmp_path: Path) -> None:
    with pytest.raises(FunctxError, match=r"leaf at \['f'\], a function: leaves must be"):
        fx.save(tmp_path / "x.npz", {"f": lambda: 0})
    with pytest.raises(DTypeError, match=r"at \['s'\]\[1\]: its dtype <U3"):
        fx.save(tmp_path / "x.npz", {"s": [np.ones(1), np.array(["abc"])]})
    with pytest.raises(DTypeError, match="its dtype object"):
        fx.save(tmp_path / "x.npz", np.array([None, 1], dtype=object))
    assert not (tmp_path / "x.npz").exists() and os.listdir(tmp_path) == []


def test_traced_values_cannot_be_saved(tmp_path: Path) -> None:
    def f(x: Any) -> Any:
        fx.save(tmp_path / "x.npz", {"x": x})
        return x

    with pytest.raises(FunctxError, match=r"leaf at \['x'\] is a traced value"):
        fx.make_trace(f)(np.ones(2))


def test_exported_at_the_top() -> None:
    assert {"save", "load"} <= set(fx.__all__)


# -- devices ---------------------------------------------------------------------------------------

@pytest.fixture
def fake_device() -> Any:
    registered = B._BACKENDS.get("fakegpu") is FAKE
    B.register_backend(FAKE)
    try:
        yield fx.Device("fakegpu", 0)
    finally:
        if not registered:
            B._BACKENDS.pop("fakegpu", None)
            B.BY_TYPE.pop(FakeArray, None)


def test_device_arrays_are_saved_from_the_device_and_loaded_onto_one(
        tmp_path: Path, fake_device: fx.Device) -> None:
    host = {"w": np.arange(6.0).reshape(2, 3), "n": [np.int32(4), np.array([1, 2], np.int64)]}
    on = fx.device_put(host, fake_device)
    assert type(on["w"]) is FakeArray
    fx.save(tmp_path / "d.npz", on)
    with np.load(tmp_path / "d.npz", allow_pickle=False) as f:  # host arrays in the file
        stored = [f[name] for name in f.files if name != "__functx__"]
    assert all(type(a) is np.ndarray for a in stored)
    assert any(a.shape == (2, 3) and np.array_equal(a, host["w"]) for a in stored)
    back = fx.load(tmp_path / "d.npz", device="fakegpu")
    assert type(back["w"]) is FakeArray and type(back["n"][1]) is FakeArray
    assert fx.device_of(back["w"]) == fake_device
    np.testing.assert_array_equal(np.asarray(back["w"]), host["w"])
    assert type(back["n"][0]) is FakeArray and back["n"][0].dtype == np.int32  # 0-d
    with fx.default_device(fake_device):  # the default: the default device
        assert type(fx.load(tmp_path / "d.npz")["w"]) is FakeArray
    assert type(fx.load(tmp_path / "d.npz", device="cpu")["w"]) is np.ndarray
    with pytest.raises(DTypeError, match="float16 cannot live on fakegpu:0"):
        fx.save(tmp_path / "h.npz", np.ones(2, np.float16))
        fx.load(tmp_path / "h.npz", device=fake_device)


def test_unknown_device_is_an_error(tmp_path: Path) -> None:
    fx.save(tmp_path / "d.npz", np.ones(2))
    with pytest.raises(fx.DeviceError):
        fx.load(tmp_path / "d.npz", device="nodevice")


@pytest.mark.skipif("cuda" not in B.backends(), reason="needs CuPy and a GPU")
def test_cuda_round_trip(tmp_path: Path) -> None:
    import cupy

    params = {"w": cupy.arange(12, dtype=cupy.float32).reshape(3, 4),
              "b": cupy.zeros(4, cupy.float16), "step": 3}
    fx.save(tmp_path / "g.npz", params)
    back = fx.load(tmp_path / "g.npz", device="cuda")
    assert isinstance(back["w"], cupy.ndarray) and back["w"].dtype == np.float32
    np.testing.assert_array_equal(cupy.asnumpy(back["w"]), cupy.asnumpy(params["w"]))
    assert back["b"].dtype == np.float16 and back["step"] == 3
    host = fx.load(tmp_path / "g.npz", device="cpu")
    assert type(host["w"]) is np.ndarray
    back = fx.load(tmp_path / "g.npz", template=params, device=fx.Device("cuda", 0))
    assert isinstance(back["b"], cupy.ndarray)
