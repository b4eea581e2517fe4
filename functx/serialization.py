"""Saving and loading pytrees of arrays: :func:`save` and :func:`load` (``fx.save``,
``fx.load``).

The file is an ordinary ``.npz`` archive (``numpy.load`` reads it): one ``.npy`` entry per
array leaf (``leaf_0``, ``leaf_1``...) and ``__functx__``, a uint8 array holding UTF-8 JSON
that describes the tree::

    {"format": "functx.save", "version": 1, "tree": NODE}

where a NODE is ``null`` (None), ``{"t": "dict" | "odict", "keys": [...], "c": [NODE...]}``
(dict or OrderedDict with str/int/bool keys), ``{"t": "list" | "tuple", "c": [...]}``,
``{"t": "namedtuple", "cls": "module:QualName", "fields": [...], "c": [...]}``,
``{"t": "array", "i": 0, "dtype": "bfloat16", "shape": [3, 4], "stored": "<u2",
"np_scalar": false}`` (entry ``leaf_0``), ``{"t": "py", "type": "float", "v": 0.5}`` (Python
``bool``/``int``/``float``/``complex``/``str`` leaves, kept in the JSON) or
``{"t": "custom", "cls": "module:QualName", "leaves": [NODE...]}`` (any other pytree node:
an attrs class, a registered type, a dict with other keys; its leaves in
``functx.tree.flatten`` order).

Safety: nothing is ever unpickled (entries are read with ``allow_pickle=False`` and must
have a bool, integer, float or complex dtype), no module is imported and no class named by
the file is called except a namedtuple class that is already imported (found in
``sys.modules`` without running any attribute hooks) and has exactly the saved fields.
Other custom nodes are restored from a ``template`` only. Loading an untrusted file can
therefore fail, but cannot run code.

Dtypes: every NumPy bool, integer, float and complex dtype is stored as it is; dtypes of
``ml_dtypes`` (bfloat16, the float8 types...), which ``.npy`` cannot describe, are stored as
unsigned integers of the same width (bfloat16 as uint16) with their name in the JSON, and
viewed back on loading (which then needs ``ml_dtypes``).

Devices: device arrays (CuPy) are copied to the host to be saved; :func:`load` puts the
arrays on the device asked for (by default the default device, the CPU unless inside
``fx.default_device``). On the CPU they are read-only, like every array functx returns.
"""
from __future__ import annotations

import collections
import inspect
import json
import os
import re
import sys
import uuid
import zipfile
from typing import Any

import numpy as np

from functx import backends, tree
from functx.errors import DTypeError, FunctxError, ShapeError
from functx.tracing import Tracer

__all__ = ["save", "load"]

FORMAT = "functx.save"
VERSION = 1
META = "__functx__"
_PY_TYPES = {bool: "bool", int: "int", float: "float", complex: "complex", str: "str"}
_KEY_TYPES = (str, int, bool)
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


def _where(path: str) -> str:
    return f"at {path}" if path else "at the root"


def _describe(x: Any) -> str:
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__name__


def _cls_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def _kind(x: Any) -> str:
    """How a value is written: a node kind, "py" (a Python scalar or string), "leaf" (an
    array leaf of functx.tree) or "custom" (any other pytree node)."""
    t = type(x)
    if x is None:
        return "none"
    if t is dict or t is collections.OrderedDict:
        if all(type(k) in _KEY_TYPES for k in x):
            return "dict" if t is dict else "odict"
        return "custom"
    if t is list:
        return "list"
    if t is tuple:
        return "tuple"
    if _is_namedtuple(t):
        return "namedtuple"
    if t in _PY_TYPES:
        return "py"
    leaves = tree.leaves(x)
    return "leaf" if len(leaves) == 1 and leaves[0] is x else "custom"


def _child_path(path: str, key: Any, kind: str) -> str:
    return f"{path}.{key}" if kind == "namedtuple" else f"{path}[{key!r}]"


# ----------------------------------------------------------------------------------------
# Saving


def _dtype_entry(name: str, path: str, dt: np.dtype) -> tuple[str, np.dtype]:
    """The dtype name written to the JSON and the dtype the array is stored with."""
    if dt.kind in "biufc" and dt.fields is None:
        native = dt.newbyteorder("=")
        return native.name, native
    if dt.type.__module__.startswith("ml_dtypes") and _NAME.match(dt.name):
        return dt.name, np.dtype(f"u{dt.itemsize}")
    raise DTypeError(f"{name}: cannot save the array {_where(path)}: its dtype {dt} is not a "
                     "bool, integer, float or complex dtype (nor an ml_dtypes one such as "
                     "bfloat16). Convert it first, or leave it out of the saved tree.")


def _encode_leaf(name: str, x: Any, path: str, arrays: list) -> dict:
    if isinstance(x, Tracer):
        raise FunctxError(f"{name}: the leaf {_where(path)} is a traced value ({x.aval}); "
                          "save concrete arrays, outside jit/grad/vmap (return the values "
                          "from the transformed function and save those).")
    if type(x) in _PY_TYPES:
        t = _PY_TYPES[type(x)]
        return {"t": "py", "type": t, "v": [x.real, x.imag] if t == "complex" else x}
    backend = backends.backend_of(x)
    if backend is None:
        raise FunctxError(f"{name}: cannot save the leaf {_where(path)}, a {_describe(x)}: "
                          "leaves must be arrays (NumPy, CuPy), NumPy scalars, Python "
                          "numbers or strings.")
    host = np.asarray(x) if backend is backends.CPU else backend.to_host(x)
    dtype_name, stored = _dtype_entry(name, path, np.dtype(host.dtype))
    host = host.view(stored) if host.dtype.kind == "V" else host.astype(stored, copy=False)
    arrays.append(host)
    return {"t": "array", "i": len(arrays) - 1, "dtype": dtype_name,
            "shape": list(host.shape), "stored": stored.str,
            "np_scalar": isinstance(x, np.generic)}


def _encode(x: Any, path: str, arrays: list) -> Any:
    """The JSON node of ``x``; its arrays are appended to ``arrays`` (host copies)."""
    kind = _kind(x)
    if kind == "none":
        return None
    if kind in ("dict", "odict"):
        keys = list(x)  # insertion order, kept on loading
        return {"t": kind, "keys": keys,
                "c": [_encode(x[k], _child_path(path, k, kind), arrays) for k in keys]}
    if kind in ("list", "tuple"):
        return {"t": kind, "c": [_encode(c, f"{path}[{i}]", arrays) for i, c in enumerate(x)]}
    if kind == "namedtuple":
        fields = list(type(x)._fields)
        return {"t": kind, "cls": _cls_name(type(x)), "fields": fields,
                "c": [_encode(c, f"{path}.{f}", arrays) for f, c in zip(fields, x)]}
    if kind == "custom":
        return {"t": "custom", "cls": _cls_name(type(x)),
                "leaves": [_encode_leaf("functx.save", c, f"{path}<leaf {i}>", arrays)
                           for i, c in enumerate(tree.leaves(x))]}
    return _encode_leaf("functx.save", x, path, arrays)


def _write_npy(zf: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
    with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
        np.lib.format.write_array(f, np.asarray(array), allow_pickle=False)


def save(path: str | os.PathLike, tree: Any) -> None:
    """Write a pytree of arrays to ``path`` (an ``.npz`` archive; no pickle).

    Arrays on a device (CuPy) are copied to the host. The file is written next to ``path``
    under a temporary name and then renamed, so an interrupted save leaves any previous
    file intact. ``path`` is used as given (no extension is added; ``.npz`` is customary).

    Args:
        path: the file to write (replaced if it exists).
        tree: a pytree: dicts, lists, tuples, None, namedtuples, OrderedDicts, and other
            pytree nodes (attrs classes, registered types: these load only with a
            ``template``), whose leaves are arrays, NumPy scalars, Python numbers or
            strings. Any dtype that is bool, integer, float or complex, and bfloat16 and the
            other ``ml_dtypes`` types.

    Returns:
        None.

    Raises:
        FunctxError: a leaf is a traced value or not an array, number or string; the file
            cannot be written.
        DTypeError: an array's dtype cannot be saved (object, string, structured...).

    Example:
        >>> params = {"w": np.ones((3, 4), np.float32), "layers": [{"b": np.zeros(4)}]}
        >>> fx.save("ckpt.npz", params)
        >>> fx.load("ckpt.npz")["layers"][0]["b"]
        array([0., 0., 0., 0.])
    """
    p = os.fspath(path)
    arrays: list[np.ndarray] = []
    try:
        node = _encode(tree, "", arrays)
    except RecursionError:
        raise FunctxError("functx.save: the tree is nested too deeply to be saved (Python's "
                          "recursion limit); flatten it first (functx.tree.flatten) and save "
                          "the list of leaves.") from None
    meta = json.dumps({"format": FORMAT, "version": VERSION, "tree": node}).encode("utf-8")
    tmp = f"{p}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "xb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
            _write_npy(zf, META, np.frombuffer(meta, np.uint8))
            for i, a in enumerate(arrays):
                _write_npy(zf, f"leaf_{i}", a)
        os.replace(tmp, p)
    except OSError as e:
        raise FunctxError(f"functx.save: cannot write {p!r}: {e}.") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# ----------------------------------------------------------------------------------------
# Loading


def _bad(path: str, what: str) -> FunctxError:
    return FunctxError(f"functx.load: the file is not a valid functx.save file: {what} "
                       f"{_where(path)}. It may be damaged, or not written by functx.save.")


def _field(node: Any, key: str, typ: type | tuple, path: str) -> Any:
    value = node.get(key)
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise _bad(path, f"a node without a valid {key!r} field")
    return value


def _resolve_dtype(name: Any, stored: np.dtype, path: str) -> np.dtype:
    """The dtype named in the file (a NumPy or ml_dtypes name; never anything else)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise _bad(path, f"an invalid dtype name {name!r:.40}")
    try:
        dt = np.dtype(name)  # parses the name only: runs nothing
    except TypeError:
        dt = None
    if dt is not None and dt.kind in "biufc":
        if dt != stored:
            raise _bad(path, f"dtype {name!r} stored as {stored}")
        return dt
    if stored.kind != "u":
        raise _bad(path, f"an unknown dtype {name!r}")
    try:  # an ml_dtypes type, stored as unsigned integers of its width
        import ml_dtypes  # third-party and optional: only files with such dtypes need it
    except ImportError:
        raise FunctxError(f"functx.load: the array {_where(path)} has dtype {name}, which "
                          "needs the ml_dtypes package: pip install ml_dtypes.") from None
    cls = inspect.getattr_static(ml_dtypes, name, None)
    if (isinstance(cls, type) and issubclass(cls, np.generic)
            and np.dtype(cls).itemsize == stored.itemsize):
        return np.dtype(cls)
    raise _bad(path, f"an unknown dtype {name!r}")


class _Reader:
    """Reads the archive's arrays, checked against the JSON, and places them."""

    def __init__(self, zf: zipfile.ZipFile, device: Any) -> None:
        self.zf, self.device = zf, device

    def array(self, node: dict, path: str) -> Any:
        i = _field(node, "i", int, path)
        try:
            with self.zf.open(f"leaf_{i}.npy") as f:
                arr = np.lib.format.read_array(f, allow_pickle=False)
        except KeyError:
            raise _bad(path, f"a missing entry leaf_{i}") from None
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
            raise _bad(path, f"an unreadable array ({e})") from None
        stored = _stored(node, path)
        if arr.dtype != stored or list(arr.shape) != node["shape"]:
            raise _bad(path, f"an array of {arr.dtype}{list(arr.shape)} described as "
                       f"{stored}{node['shape']}")
        dt = _resolve_dtype(node["dtype"], stored, path)
        if dt != stored:
            arr = arr.view(dt)
        if node.get("np_scalar") is True and arr.ndim == 0:
            return arr[()]
        arr.flags.writeable = False  # so that device_put on the CPU does not copy it
        return backends.device_put(arr, self.device)


def _stored(node: dict, path: str) -> np.dtype:
    s = _field(node, "stored", str, path)
    try:
        dt = np.dtype(s)
    except TypeError:
        raise _bad(path, f"an invalid stored dtype {s!r:.40}") from None
    if dt.kind not in "biufc":
        raise _bad(path, f"a stored dtype {s!r:.40} that is not bool, integer, float or "
                   "complex")
    return dt


def _leaf_aval(node: dict, path: str) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of an array node (validated)."""
    shape = _field(node, "shape", list, path)
    if not all(type(d) is int and d >= 0 for d in shape):
        raise _bad(path, "an invalid shape")
    return tuple(shape), _resolve_dtype(node.get("dtype"), _stored(node, path), path)


def _py_value(node: dict, path: str) -> Any:
    t, v = node.get("type"), node.get("v")
    ok = {"bool": bool, "int": int, "float": (float, int), "str": str}
    if t == "complex" and isinstance(v, list) and len(v) == 2 and all(
            type(p) in (int, float) for p in v):
        return complex(v[0], v[1])
    if t in ok and isinstance(v, ok[t]) and not (t in ("int", "float") and type(v) is bool):
        return float(v) if t == "float" else v
    raise _bad(path, "an invalid Python value")


def _children(node: dict, path: str, n: int | None = None) -> list:
    c = _field(node, "c", list, path)
    if n is not None and len(c) != n:
        raise _bad(path, "a node whose children do not match its keys")
    return c


def _node(node: Any, path: str) -> str:
    """The kind of a JSON node (validated)."""
    if node is None:
        return "none"
    if not isinstance(node, dict) or node.get("t") not in (
            "dict", "odict", "list", "tuple", "namedtuple", "custom", "array", "py"):
        raise _bad(path, "an unknown node")
    return node["t"]


def _find_namedtuple(node: dict, path: str) -> type:
    """An already-imported namedtuple class with the saved name and fields (or an error)."""
    name, fields = _field(node, "cls", str, path), _field(node, "fields", list, path)
    module, _, qualname = name.partition(":")
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        if obj is None or not part.isidentifier():
            obj = None
            break
        obj = inspect.getattr_static(obj, part, None)
    if isinstance(obj, type) and _is_namedtuple(obj) and list(obj._fields) == fields:
        return obj
    raise FunctxError(
        f"functx.load: the namedtuple {_where(path)} is {name.replace(':', '.')} with fields "
        f"{tuple(fields)}, and no such class is imported (functx.load never imports modules "
        "named by a file). Import its module before loading, or pass template= (a tree of "
        "the same structure, e.g. the initial parameters).")


def _build(node: Any, path: str, read: _Reader) -> Any:
    """The tree a JSON node describes, without a template."""
    kind = _node(node, path)
    if kind == "none":
        return None
    if kind in ("dict", "odict"):
        keys = _field(node, "keys", list, path)
        if not all(type(k) in _KEY_TYPES for k in keys):
            raise _bad(path, "a dict key of an unsupported type")
        cs = [_build(c, _child_path(path, k, kind), read)
              for k, c in zip(keys, _children(node, path, len(keys)))]
        return (dict if kind == "dict" else collections.OrderedDict)(zip(keys, cs))
    if kind in ("list", "tuple"):
        cs = [_build(c, f"{path}[{i}]", read) for i, c in enumerate(_children(node, path))]
        return cs if kind == "list" else tuple(cs)
    if kind == "namedtuple":
        cls = _find_namedtuple(node, path)
        return cls(*[_build(c, f"{path}.{f}", read)
                     for f, c in zip(cls._fields, _children(node, path, len(cls._fields)))])
    if kind == "custom":
        name = _field(node, "cls", str, path).replace(":", ".")
        raise FunctxError(
            f"functx.load: the tree holds a {name} node {_where(path)}, which functx.load "
            "cannot rebuild from the file alone (only dicts, lists, tuples, None and "
            "imported namedtuples are). Pass template= (a tree of the same structure, e.g. "
            "the initial parameters or functx.eval_shape of the function making them).")
    if kind == "py":
        return _py_value(node, path)
    _leaf_aval(node, path)
    return read.array(node, path)


def _template_aval(t: Any, path: str) -> tuple[tuple[int, ...], np.dtype]:
    shape, dtype = getattr(t, "shape", None), getattr(t, "dtype", None)
    if shape is None or dtype is None:
        raise FunctxError(f"functx.load: the template's leaf {_where(path)} is a "
                          f"{_describe(t)}; template leaves must be arrays, ShapeDtypes (or "
                          "anything with .shape and .dtype), Python numbers or strings.")
    return tuple(shape), np.dtype(dtype)


def _mismatch(path: str, file_has: str, template_has: str) -> FunctxError:
    return FunctxError(f"functx.load: the file's tree does not match the template "
                       f"{_where(path)}: the file has {file_has}, the template {template_has}.")


_KIND_NAMES = {"none": "None", "dict": "a dict", "odict": "an OrderedDict", "list": "a list",
               "tuple": "a tuple", "namedtuple": "a namedtuple", "custom": "a custom node",
               "array": "an array", "py": "a Python value", "leaf": "an array"}


def _with_template(node: Any, t: Any, path: str, read: _Reader | None) -> Any:
    """The tree of ``node`` in the structure of the template ``t``, checked against it
    (``read`` None: check only)."""
    kind, tkind = _node(node, path), _kind(t)
    tkind = "array" if tkind == "leaf" else tkind
    if kind != tkind:
        file_has = _KIND_NAMES[kind]
        if kind in ("custom", "namedtuple"):
            file_has += f" ({_field(node, 'cls', str, path).replace(':', '.')})"
        raise _mismatch(path, file_has, f"{_KIND_NAMES[tkind]} ({_describe(t)})")
    if kind == "none":
        return None
    if kind in ("dict", "odict"):
        keys = _field(node, "keys", list, path)
        cs = dict(zip(map(_freeze, keys), _children(node, path, len(keys))))
        missing = [k for k in t if _freeze(k) not in cs]
        extra = [k for k in keys if _freeze(k) not in {_freeze(k2) for k2 in t}]
        if missing or extra:
            raise _mismatch(path, f"keys {sorted(map(repr, keys))}",
                            f"keys {sorted(map(repr, t))} (missing from the file: "
                            f"{missing}; not in the template: {extra})")
        return type(t)((k, _with_template(cs[_freeze(k)], t[k], _child_path(path, k, kind),
                                          read)) for k in t)
    if kind in ("list", "tuple", "namedtuple"):
        cs = _children(node, path)
        if len(cs) != len(t):
            raise _mismatch(path, f"{_KIND_NAMES[kind]} of length {len(cs)}",
                            f"one of length {len(t)}")
        if kind == "namedtuple":
            fields = _field(node, "fields", list, path)
            name = _field(node, "cls", str, path).partition(":")[2]
            if fields != list(t._fields) or name != type(t).__qualname__:
                raise _mismatch(path, f"namedtuple {name}{tuple(fields)}",
                                f"{type(t).__qualname__}{tuple(t._fields)}")
            paths = [f"{path}.{f}" for f in fields]
        else:
            paths = [f"{path}[{i}]" for i in range(len(cs))]
        out = [_with_template(c, tc, p, read) for c, tc, p in zip(cs, t, paths)]
        return out if kind == "list" else tuple(out) if kind == "tuple" else type(t)(*out)
    if kind == "custom":
        name = _field(node, "cls", str, path)
        tleaves = tree.leaves(t)
        cs = _field(node, "leaves", list, path)
        if name.partition(":")[2] != type(t).__qualname__ or len(cs) != len(tleaves):
            raise _mismatch(path, f"a {name.replace(':', '.')} node with {len(cs)} leaves",
                            f"a {_cls_name(type(t)).replace(':', '.')} node with "
                            f"{len(tleaves)} leaves")
        out = [_with_template(c, tc, f"{path}<leaf {i}>", read)
               for i, (c, tc) in enumerate(zip(cs, tleaves))]
        return None if read is None else tree.unflatten(tree.structure(t), out)
    if kind == "py":
        value = _py_value(node, path)
        if type(value) is not type(t):
            raise _mismatch(path, f"a Python {type(value).__name__}",
                            f"a {type(t).__name__}")
        return value
    shape, dtype = _leaf_aval(node, path)
    tshape, tdtype = _template_aval(t, path)
    if shape != tshape:
        raise ShapeError(f"functx.load: the array {_where(path)} has shape {shape} in the "
                         f"file, but the template expects {tshape}.")
    if dtype != tdtype:
        raise DTypeError(f"functx.load: the array {_where(path)} has dtype {dtype} in the "
                         f"file, but the template expects {tdtype}.")
    return None if read is None else read.array(node, path)


def _freeze(k: Any) -> tuple:
    """A dict key with its type, so that 1, True and 1.0 stay apart."""
    return (type(k).__name__, k)


def _open(p: str) -> zipfile.ZipFile:
    if not os.path.exists(p):
        raise FunctxError(f"functx.load: there is no file {p!r}.")
    if os.path.isdir(p):
        raise FunctxError(f"functx.load: {p!r} is a directory, not a file written by "
                          "functx.save.")
    try:
        return zipfile.ZipFile(p)
    except (zipfile.BadZipFile, OSError) as e:
        raise FunctxError(f"functx.load: {p!r} is not a file written by functx.save (not an "
                          f".npz archive: {e}).") from None


def _read_meta(zf: zipfile.ZipFile, p: str) -> Any:
    try:
        with zf.open(f"{META}.npy") as f:
            raw = np.lib.format.read_array(f, allow_pickle=False)
    except KeyError:
        raise FunctxError(f"functx.load: {p!r} is an .npz archive but not one written by "
                          f"functx.save (it has no {META} entry).") from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise _bad("", f"an unreadable {META} entry ({e})") from None
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise _bad("", f"a {META} entry of dtype {raw.dtype}")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _bad("", f"a {META} entry that is not JSON") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _bad("", "no functx.save header")
    version = meta.get("version")
    if type(version) is not int or version > VERSION:
        raise FunctxError(f"functx.load: {p!r} is in version {version!r} of the format; this "
                          f"functx reads versions up to {VERSION}. Upgrade functx.")
    return meta.get("tree")


def load(path: str | os.PathLike, template: Any = None, device: Any = None) -> Any:
    """Read a pytree written by :func:`save`.

    Args:
        path: the file.
        template: optional; a pytree of the expected structure whose leaves are arrays or
            ``functx.ShapeDtype`` (anything with ``shape`` and ``dtype``; Python numbers
            and strings for such leaves). The file's tree must match it (the same nodes,
            dict keys, lengths, shapes and dtypes), and the result is built with the
            template's node types: this restores custom nodes (attrs classes, registered
            types) and namedtuples that are not imported.
        device: where the arrays go (a ``functx.Device`` or a string such as ``"cuda"``);
            default: the default device (``functx.get_default_device()``). NumPy scalars
            and Python values stay as they are.

    Returns:
        The tree, its arrays on ``device`` (read-only NumPy arrays on the CPU).

    Raises:
        FunctxError: there is no such file, it is not a functx.save file (or is damaged,
            or holds pickled data), the tree holds a node that only a template can rebuild,
            or the tree does not match ``template`` (the message names the first
            mismatching path).
        ShapeError, DTypeError: a leaf's shape or dtype differs from the template's (both
            are FunctxErrors).
        DeviceError: ``device`` is not available.

    Example:
        >>> fx.save("ckpt.npz", {"w": w, "opt": (m, v)})
        >>> state = fx.load("ckpt.npz", template={"w": w, "opt": (m, v)}, device="cuda")
    """
    p = os.fspath(path)
    if device is not None:
        device = backends.as_device(device)
    with _open(p) as zf:
        node = _read_meta(zf, p)
        read = _Reader(zf, device)
        try:
            if template is None:
                return _build(node, "", read)
            _with_template(node, template, "", None)  # check everything before reading
            return _with_template(node, template, "", read)
        except RecursionError:
            raise _bad("", "a tree nested too deeply") from None
