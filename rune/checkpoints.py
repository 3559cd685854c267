"""Checkpoints: pytrees of arrays in safetensors files (rune.save / rune.load).

A tree is stored as one tensor per leaf, keyed by its path with "/" between
the steps (`params/layers/0/w`: dict keys, sequence indices, NamedTuple
fields), and its structure as JSON in the file's metadata under "rune.tree",
so `load` rebuilds the same containers. Every dtype is kept (bfloat16 as BF16,
bool as BOOL); Python scalars among the leaves come back as Python scalars.
Files from elsewhere (safetensors.numpy, PyTorch, Hugging Face) carry no
rune structure and load as a flat {key: array} dict.

Writes are atomic: the bytes go to a temporary file next to the target, are
flushed to disk, and then renamed over it, so a crash at any moment leaves
either the previous checkpoint or the new one, never a torn file.
"""
import dataclasses
import importlib
import json
import os
import tempfile

import ml_dtypes
import numpy as np

from . import nx
from .errors import DTypeError, RuneError, ShapeError, TreeError

STRUCTURE_KEY = "rune.tree"
FORMAT_VERSION = 1

# safetensors dtype codes <-> NumPy dtypes (bfloat16 through ml_dtypes).
_CODES = {"BOOL": np.dtype(bool), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
          "U16": np.dtype(np.uint16), "I16": np.dtype(np.int16), "U32": np.dtype(np.uint32),
          "I32": np.dtype(np.int32), "U64": np.dtype(np.uint64), "I64": np.dtype(np.int64),
          "F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16), "F32": np.dtype(np.float32),
          "F64": np.dtype(np.float64), "C64": np.dtype(np.complex64)}
_NAMES = {d: code for code, d in _CODES.items()}
_PY_SCALARS = {bool: ("bool", np.bool_), int: ("int", np.int64), float: ("float", np.float64)}
_PY_RESTORE = {"bool": bool, "int": int, "float": float}


# ---------------------------------------------------------------- walking trees

def _class_path(cls):
    return f"{cls.__module__}:{cls.__qualname__}"


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _children(node, path):
    """(kind, children as (step, child) pairs, JSON description without children)."""
    if node is None:
        return "none", [], {"t": "none"}
    if isinstance(node, dict):
        for k in node:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TreeError(f"save: dict keys must be str or int, got {k!r} at {path or 'the root'}")
        keys = sorted(node, key=lambda k: (isinstance(k, str), k))
        return "dict", [(str(k), node[k]) for k in keys], {"t": "dict", "k": keys}
    if _is_namedtuple(node):
        return "namedtuple", list(zip(type(node)._fields, node)), {"t": "namedtuple", "cls": _class_path(type(node))}
    if isinstance(node, (list, tuple)):
        return type(node).__name__, [(str(i), c) for i, c in enumerate(node)], {"t": type(node).__name__}
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        fields = [f.name for f in dataclasses.fields(node)]
        return "dataclass", [(f, getattr(node, f)) for f in fields], {"t": "dataclass", "cls": _class_path(type(node))}
    return None, None, None


def _join(path, step):
    return f"{path}/{step}" if path else step


def _describe(node, path, leaves):
    """The JSON structure of `node`, adding its leaves to `leaves` (path -> NumPy array)."""
    kind, children, desc = _children(node, path)
    if kind is None:
        leaves[path] = _to_numpy(node, path)
        scalar = _PY_SCALARS.get(type(node))
        return {"t": "leaf", "py": scalar[0] if scalar else None}
    desc["c"] = [_describe(child, _join(path, step), leaves) for step, child in children]
    return desc


def _to_numpy(leaf, path):
    if type(leaf) in _PY_SCALARS:
        return np.asarray(leaf, _PY_SCALARS[type(leaf)][1])
    if isinstance(leaf, (nx.Array, np.ndarray, np.generic)):
        out = np.asarray(leaf, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        if out.dtype not in _NAMES:
            raise DTypeError(f"save: the leaf at {path or 'the root'} has dtype {out.dtype}, which "
                             f"safetensors cannot hold")
        return out
    raise TreeError(f"save: the leaf at {path or 'the root'} is a {type(leaf).__name__}; expected an "
                    f"array or a Python scalar (traced values cannot be saved: save outside jit)")


def _import(path):
    """The NamedTuple or dataclass a file names (module:qualname)."""
    module, qualname = path.split(":")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise TreeError(f"load: the checkpoint holds a {path}, which cannot be imported here ({e}); "
                        f"pass like= with the expected tree") from e
    return obj


def _steps(desc):
    """The path steps to the children of a described container."""
    kind = desc["t"]
    if kind == "dict":
        return [str(k) for k in desc["k"]]
    if kind == "namedtuple":
        return list(_import(desc["cls"])._fields)
    if kind == "dataclass":
        return [f.name for f in dataclasses.fields(_import(desc["cls"]))]
    return [str(i) for i in range(len(desc.get("c", [])))]


def _build(desc, path, leaf):
    """The tree described by `desc`, with leaf(path, py_type) at each leaf."""
    kind = desc["t"]
    if kind == "leaf":
        return leaf(path, desc.get("py"))
    if kind == "none":
        return None
    if kind == "dict":
        return {k: _build(c, _join(path, str(k)), leaf) for k, c in zip(desc["k"], desc["c"])}
    if kind in ("list", "tuple"):
        items = [_build(c, _join(path, str(i)), leaf) for i, c in enumerate(desc["c"])]
        return items if kind == "list" else tuple(items)
    values = {n: _build(c, _join(path, n), leaf) for n, c in zip(_steps(desc), desc["c"])}
    return _import(desc["cls"])(**values)


def _strip(desc):
    """A structure description without the Python-scalar tags (for comparing shapes of trees)."""
    if desc["t"] == "leaf":
        return {"t": "leaf"}
    return {**desc, "c": [_strip(c) for c in desc.get("c", [])]}


def _first_difference(a, b, path=""):
    if a.get("t") != b.get("t") or a.get("k") != b.get("k") or a.get("cls") != b.get("cls") \
            or len(a.get("c", [])) != len(b.get("c", [])):
        return path or "the root", _summary(a), _summary(b)
    steps = _steps(a)
    for step, ca, cb in zip(steps, a.get("c", []), b.get("c", [])):
        found = _first_difference(ca, cb, _join(path, step))
        if found:
            return found
    return None


def _summary(desc):
    kind = desc["t"]
    if kind == "dict":
        return f"a dict with keys {desc['k']}"
    if kind in ("list", "tuple"):
        return f"a {kind} of {len(desc['c'])}"
    if kind in ("namedtuple", "dataclass"):
        return f"a {desc['cls'].split(':')[1]}"
    return "None" if kind == "none" else "a leaf"


# ---------------------------------------------------------------- saving

def _safetensors():
    try:
        import safetensors
    except ImportError as e:
        raise RuneError("rune.save / rune.load need the safetensors package: pip install safetensors") from e
    return safetensors


def _spec(array):
    """One tensor for safetensors.serialize (its current API, or the older dict one)."""
    safetensors = _safetensors()
    if hasattr(safetensors, "TensorSpec"):
        return safetensors.TensorSpec(dtype=array.dtype.name, shape=array.shape,
                                      data_ptr=array.ctypes.data, data_len=array.nbytes)
    return {"dtype": _NAMES[array.dtype], "shape": list(array.shape), "data": array.tobytes()}


def save(path, tree):
    """Write `tree` (a pytree of arrays and Python scalars) to the safetensors file
    `path`, atomically: the previous file stays whole until the new one is."""
    safetensors = _safetensors()
    leaves = {}
    structure = _describe(tree, "", leaves)
    metadata = {STRUCTURE_KEY: json.dumps({"version": FORMAT_VERSION, "tree": structure})}
    data = bytes(safetensors.serialize({k: _spec(v) for k, v in leaves.items()}, metadata=metadata))
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    _sync_folder(folder)


def _sync_folder(folder):
    """Make the rename itself durable (where the platform lets a folder be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------- loading

def _read(path):
    """({key: NumPy array}, metadata dict) of a safetensors file."""
    safetensors = _safetensors()
    with safetensors.safe_open(path, framework="numpy") as f:
        metadata = f.metadata() or {}
    with open(path, "rb") as f:
        data = f.read()
    tensors = {}
    for key, info in safetensors.deserialize(data):
        dtype = _CODES.get(info["dtype"])
        if dtype is None:
            raise DTypeError(f"load: {path}: tensor {key!r} has dtype {info['dtype']}, which rune does not support")
        tensors[key] = np.frombuffer(info["data"], dtype).reshape(tuple(info["shape"]))
    return tensors, metadata


def load(path, device=None, like=None):
    """The tree saved in `path`, its arrays placed on `device` (the default device
    when None). A file without rune's structure (written by safetensors.numpy,
    PyTorch, ...) gives a flat {key: array} dict.

    like: an expected tree (arrays, or anything with .shape and .dtype, such as
    rune.Spec); the loaded tree must have its structure, shapes and dtypes, and
    a mismatch is an error naming the first path that differs.
    """
    tensors, metadata = _read(os.fspath(path))

    def array(key, py):
        value = tensors[key]
        return _PY_RESTORE[py](value.item()) if py else nx.asarray(value, device=device)

    stored = metadata.get(STRUCTURE_KEY)
    desc = json.loads(stored)["tree"] if stored is not None else None
    if like is None:
        if desc is None:
            return {k: array(k, None) for k in tensors}
        return _build(desc, "", array)
    return _load_like(path, tensors, desc, like, array)


def _load_like(path, tensors, desc, like, array):
    expected = {}
    like_desc = _describe_like(like, "", expected)
    if desc is not None:
        found = _first_difference(_strip(like_desc), _strip(desc))
        if found:
            where, want, got = found
            raise TreeError(f"load: {path} does not hold the expected tree: at {where} expected {want}, "
                            f"the file has {got}")
    else:
        missing = sorted(set(expected) - set(tensors))
        if missing:
            raise TreeError(f"load: {path} has no tensor {missing[0]!r} (expected by `like`)")
    for key, (shape, dtype) in expected.items():
        value = tensors[key]
        if np.dtype(dtype) != value.dtype:
            raise DTypeError(f"load: {path}: the leaf at {key or 'the root'} has dtype {value.dtype}, "
                             f"expected {np.dtype(dtype)}")
        if tuple(shape) != value.shape:
            raise ShapeError(f"load: {path}: the leaf at {key or 'the root'} has shape {value.shape}, "
                             f"expected {tuple(shape)}")
    return _build(like_desc, "", array)


def _describe_like(node, path, expected):
    """Like _describe, recording each leaf's expected (shape, dtype) instead of its data."""
    kind, children, desc = _children(node, path)
    if kind is None:
        scalar = _PY_SCALARS.get(type(node))
        if scalar:
            expected[path] = ((), scalar[1])
        elif hasattr(node, "shape") and hasattr(node, "dtype"):
            expected[path] = (tuple(node.shape), node.dtype)
        else:
            raise TreeError(f"load: the expected leaf at {path or 'the root'} is a {type(node).__name__}; "
                            f"expected an array, a rune.Spec or a Python scalar")
        return {"t": "leaf", "py": scalar[0] if scalar else None}
    desc["c"] = [_describe_like(child, _join(path, step), expected) for step, child in children]
    return desc
