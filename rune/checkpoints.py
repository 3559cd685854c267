"""Checkpoints: pytrees of arrays in safetensors files (rune.save / rune.load).

A tree is stored as one tensor per leaf and its structure as JSON in the
file's metadata under "rune.tree". A tensor's name is its leaf's path with
"/" between the steps (`params/layers/0/w`: dict keys, sequence indices,
NamedTuple and dataclass fields); inside a step "~" is written "~0" and "/"
"~1" (as in a JSON Pointer), so `{"a/b": x}` and `{"a": {"b": y}}` stay two
tensors, and the rare paths that still meet (the int key 3 and the str key
"3" of one dict) are told apart by a "~2<n>" suffix that escaping never
makes. Every dtype is kept (bfloat16 as BF16, bool as BOOL, complex as pairs
of floats along a last axis of 2); Python scalars among the leaves come back
as Python scalars. Files from elsewhere (safetensors.numpy, PyTorch, Hugging
Face) carry no rune structure and load as a flat {key: array} dict.

Loading never imports a module or calls a class that the file names. The
metadata holds only dicts, lists, tuples, None and leaves; a NamedTuple,
dataclass or registered pytree node is saved as a tuple or dict tagged with
its class's name, and comes back only through a template (`like=`, whose own
containers are rebuilt) or a class the caller allows (`classes=`). Anything
a file holds that rune does not expect (a damaged header, malformed or too
deeply nested metadata, a newer format) is a RuneError naming the file.

Writes are atomic: the bytes go to a temporary file next to the target, are
flushed to disk, and then renamed over it, so a crash or an error at any
moment leaves either the previous checkpoint or the new one, never a torn file.
The temporary file is named `.<target>.rune-save-<host>-<pid>-<random>.tmp`:
a process killed mid-save cannot remove its own, so the next save or load of
that target removes those of this host whose process is gone. A target that is
a symbolic link is written through: the file it points to is replaced, the
link stays (as `open(path, "wb")` would).
"""
import collections
import dataclasses
import json
import os
import socket
import stat
import tempfile
import threading

import ml_dtypes
import numpy as np

from . import nx
from . import tree as pytree
from .errors import ArgumentError, DTypeError, ScalarOverflowError, ShapeError, TreeError, UsageError

STRUCTURE_KEY = "rune.tree"
FORMAT_VERSION = 2
MAX_DEPTH = 100   # containers within containers; deeper metadata is refused before anything recurses

# safetensors dtype codes <-> NumPy dtypes (bfloat16 through ml_dtypes; C64 only in files from elsewhere).
_CODES = {"BOOL": np.dtype(bool), "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
          "U16": np.dtype(np.uint16), "I16": np.dtype(np.int16), "U32": np.dtype(np.uint32),
          "I32": np.dtype(np.int32), "U64": np.dtype(np.uint64), "I64": np.dtype(np.int64),
          "F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16), "F32": np.dtype(np.float32),
          "F64": np.dtype(np.float64), "C64": np.dtype(np.complex64)}
_NAMES = {d: code for code, d in _CODES.items()}
_PY_SCALARS = {bool: ("bool", np.dtype(np.bool_)), int: ("int", np.dtype(np.int64)),
               float: ("float", np.dtype(np.float64)), complex: ("complex", np.dtype(np.complex128))}
_PY_TYPES = {name: (cls, dtype) for cls, (name, dtype) in _PY_SCALARS.items()}
# Complex leaves are stored as (..., 2) pairs of this float dtype: safetensors has no complex128.
_COMPLEX = {"complex64": np.dtype(np.float32), "complex128": np.dtype(np.float64)}
_INT64 = np.iinfo(np.int64)

# What each kind of node in the metadata may hold.
_FIELDS = {"leaf": {"t", "py", "dtype"}, "none": {"t"}, "list": {"t", "c"},
           "tuple": {"t", "c", "name", "f"}, "dict": {"t", "k", "c", "name"}}


def _where(path):
    return path or "the root"


def _join(path, step):
    return f"{path}/{step}" if path else step


def _class_name(cls):
    return f"{cls.__module__}:{cls.__qualname__}"


# ---------------------------------------------------------------- containers of live trees

def _container(node, path, template=False):
    """How a live tree's node is stored: None for a leaf, else (description without
    children, child steps, children, rebuild(children) -> a node like this one).
    In a template anything with a shape and a dtype is a leaf (rune.Spec is a
    pytree node without children elsewhere)."""
    if template and hasattr(node, "shape") and hasattr(node, "dtype"):
        return None
    if node is None:
        return {"t": "none"}, [], [], lambda values: None
    if isinstance(node, dict):
        for k in node:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TreeError(f"save: dict keys must be str or int, got {k!r} at {_where(path)}")
        keys = sorted(node, key=lambda k: (isinstance(k, str), k))
        if isinstance(node, collections.OrderedDict):   # its order is part of it (as in rune.tree)
            rebuild = lambda values: collections.OrderedDict((k, dict(zip(keys, values))[k]) for k in node)
        else:
            rebuild = lambda values: dict(zip(keys, values))
        return {"t": "dict", "k": keys}, [str(k) for k in keys], [node[k] for k in keys], rebuild
    cls = type(node)
    if isinstance(node, tuple) and hasattr(cls, "_fields"):
        fields = list(cls._fields)
        return ({"t": "tuple", "name": _class_name(cls), "f": fields}, fields, list(node),
                lambda values: cls(*values))
    if isinstance(node, (list, tuple)):
        kind = list if isinstance(node, list) else tuple
        return {"t": kind.__name__}, [str(i) for i in range(len(node))], list(node), kind
    handler = pytree._handler(cls)
    if handler is not None:   # registered with rune.tree: its own flatten decides the children
        children, aux = handler.flatten(node)
        children = list(children)
        keys = handler.keys(aux, len(children))
        rebuild = lambda values: handler.unflatten(aux, values)
        if keys and all(k.startswith(".") for k in keys):
            names = [k[1:] for k in keys]
            return {"t": "dict", "k": names, "name": _class_name(cls)}, names, children, rebuild
        return {"t": "tuple", "name": _class_name(cls)}, [str(i) for i in range(len(children))], children, rebuild
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        names = [f.name for f in dataclasses.fields(node) if f.init]
        return ({"t": "dict", "k": names, "name": _class_name(cls)}, names, [getattr(node, n) for n in names],
                lambda values: dataclasses.replace(node, **dict(zip(names, values))))
    return None


def _describe(node, path, depth, leaf, template=False):
    """The metadata of a live tree; leaf(node, path) -> the description of each leaf."""
    if depth > MAX_DEPTH:
        raise TreeError(f"save: the tree is nested more than {MAX_DEPTH} containers deep at {_where(path)} "
                        f"(or contains itself)")
    found = _container(node, path, template)
    if found is None:
        return leaf(node, path)
    desc, steps, children, _ = found
    if desc["t"] != "none":
        desc["c"] = [_describe(c, _join(path, s), depth + 1, leaf, template) for s, c in zip(steps, children)]
    return desc


def _rebuild(node, path, values):
    """A tree like the template `node`, its leaves taken in order from the iterator `values`."""
    found = _container(node, path, template=True)
    if found is None:
        return next(values)
    _, steps, children, rebuild = found
    return rebuild([_rebuild(c, _join(path, s), values) for s, c in zip(steps, children)])


# ---------------------------------------------------------------- paths and tensor names

def _steps(desc):
    """The path steps to the children of a described container."""
    if desc["t"] == "dict":
        return [str(k) for k in desc["k"]]
    if "f" in desc:
        return list(desc["f"])
    return [str(i) for i in range(len(desc.get("c", ())))]


def _leaf_entries(desc):
    """(path, leaf description, tensor name) of each leaf, in order."""
    out, taken = [], set()

    def visit(d, path, name):
        if d["t"] == "leaf":
            unique, n = name, 1
            while unique in taken:
                n += 1
                unique = f"{name}~2{n}"
            taken.add(unique)
            out.append((path, d, unique))
            return
        for step, child in zip(_steps(d), d.get("c", ())):
            escaped = step.replace("~", "~0").replace("/", "~1")
            visit(child, _join(path, step), _join(name, escaped))

    visit(desc, "", "")
    return out


def _summary(desc):
    kind, name = desc["t"], desc.get("name")
    label = name.rpartition(":")[2] if name else None
    if kind == "dict":
        keys = desc["k"]
        return f"a {label} with fields {keys}" if label else f"a dict with keys {keys}"
    if kind in ("list", "tuple"):
        return f"a {label} of {len(desc['c'])}" if label else f"a {kind} of {len(desc['c'])}"
    return "None" if kind == "none" else "a leaf"


def _first_difference(want, got, path=""):
    """(path, want, got) where the template's structure and the file's first differ (class
    names aside: the template's classes are the ones rebuilt), or None."""
    if want["t"] != got["t"] or want.get("k") != got.get("k") \
            or len(want.get("c", ())) != len(got.get("c", ())) \
            or ("f" in want and "f" in got and want["f"] != got["f"]):
        return _where(path), _summary(want), _summary(got)
    for step, a, b in zip(_steps(want), want.get("c", ()), got.get("c", ())):
        found = _first_difference(a, b, _join(path, step))
        if found:
            return found
    return None


# ---------------------------------------------------------------- saving

class FolderFormat(collections.namedtuple("FolderFormat", "claims save holds load")):
    """A checkpoint kept as a folder of files, which the package that makes such trees
    registers (rune.distributed: each rank's blocks of sharded state in a file of its
    own, rune/distributed/sharded_checkpoints.py). claims(tree): whether `save` hands
    it the tree; save(path, tree); holds(path): whether `load` hands it the path;
    load(path, like, place) -> the tree, `place` making a NumPy value an array on
    load's device."""


_FOLDER_FORMATS = []


def register_folder_format(folder_format):
    """Add a FolderFormat that save and load consult before their own single file."""
    _FOLDER_FORMATS.append(folder_format)


def _safetensors():
    try:
        import safetensors
    except ImportError as e:
        raise ArgumentError("rune.save / rune.load need the safetensors package: pip install safetensors") from e
    return safetensors


def _leaf_to_numpy(leaf, path):
    """(the NumPy array stored for a leaf, the tags of its description)."""
    scalar = _PY_SCALARS.get(type(leaf))
    if scalar is not None:
        if type(leaf) is int and not _INT64.min <= leaf <= _INT64.max:
            raise ScalarOverflowError(f"save: the Python int at {_where(path)} is {leaf}, outside int64 "
                                      f"[{_INT64.min}, {_INT64.max}]: store it as a string or split it")
        array, tags = np.asarray(leaf, scalar[1]), {"py": scalar[0]}
    elif isinstance(leaf, (nx.Array, np.ndarray, np.generic)):
        array, tags = np.asarray(leaf, order="C"), {}   # (ascontiguousarray would make 0-d arrays 1-d)
    else:
        raise TreeError(f"save: the leaf at {_where(path)} is a {type(leaf).__name__}; expected an array or a "
                        f"Python scalar (traced values cannot be saved: save outside jit)")
    if array.dtype.name in _COMPLEX:
        tags["dtype"] = array.dtype.name
        array = np.stack([array.real, array.imag], axis=-1)
    if array.dtype not in _NAMES:
        raise DTypeError(f"save: the leaf at {_where(path)} has dtype {array.dtype}, which safetensors "
                         f"cannot hold")
    return array, tags


def _spec(array):
    """One tensor for safetensors.serialize (its current API, or the older dict one)."""
    safetensors = _safetensors()
    if hasattr(safetensors, "TensorSpec"):
        return safetensors.TensorSpec(dtype=array.dtype.name, shape=array.shape,
                                      data_ptr=array.ctypes.data, data_len=array.nbytes)
    return {"dtype": _NAMES[array.dtype], "shape": list(array.shape), "data": array.tobytes()}


def save(path, tree):
    """Write `tree` (a pytree of arrays and Python scalars) to the safetensors file
    `path`, atomically: the previous file stays whole until the new one is.

    A tree holding sharded state (rune.distributed's fully_shard modules or a
    sharded optimizer's state) is saved by every rank into the folder `path`, each
    rank its own blocks, and loads with `load(path, like=...)` in a group of any
    size (rune/distributed/sharded_checkpoints.py)."""
    for folder_format in _FOLDER_FORMATS:
        if folder_format.claims(tree):
            return folder_format.save(path, tree)
    return write(path, tree)


def write(path, tree):
    """`save` into one file, whatever the tree holds (a rank's part of a sharded save)."""
    safetensors = _safetensors()
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ArgumentError(f"save: {path} is a folder; expected the path of a file to write")
    arrays = []

    def leaf(node, where):
        array, tags = _leaf_to_numpy(node, where)
        arrays.append(array)
        return {"t": "leaf", **tags}

    structure = _describe(tree, "", 0, leaf)
    names = [name for _, _, name in _leaf_entries(structure)]
    metadata = {STRUCTURE_KEY: json.dumps({"version": FORMAT_VERSION, "tree": structure})}
    # `arrays` keeps every buffer alive while safetensors reads it through its pointer.
    data = bytes(safetensors.serialize({n: _spec(a) for n, a in zip(names, arrays)}, metadata=metadata))
    path = os.path.realpath(path)   # a link is written through, and the temporary goes beside its target
    folder = os.path.dirname(path)
    _remove_stale_temporaries(path)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f"{_temporary_prefix(path)}{os.getpid()}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600, and the rename keeps that: give it the mode of the
        # file it replaces, or of a file opened anew, so a save never narrows who can read it
        os.chmod(temp, _file_mode(path))
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    _sync_folder(folder)


def _temporary_prefix(target):
    """The start of the names of this host's temporary files for `target` (the pid,
    a random part and ".tmp" follow)."""
    host = socket.gethostname()[:32].replace(os.sep, "_")
    return f".{os.path.basename(target)}.rune-save-{host}-"


def _process_gone(pid):
    """Whether no process `pid` runs on this host (never guessed: False when unsure)."""
    if os.name != "posix" or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)   # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except OSError:       # it exists (another user's) or cannot be asked
        return False
    return False


def _remove_stale_temporaries(target):
    """Remove the temporary files of saves of `target` whose process died before
    renaming them (killed mid-save). Those of other hosts (a shared folder) and of
    live processes (a save under way) are left alone; failing to remove is no error."""
    folder, prefix = os.path.dirname(target), _temporary_prefix(target)
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].partition("-")[0]
        if pid.isdigit() and _process_gone(int(pid)):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


_UMASK_LOCK = threading.Lock()


def _umask():
    """The process's umask, read without changing it where /proc shows it (os.umask
    can only read it by setting it, which another thread could see: hence the lock)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0)
        os.umask(mask)
    return mask


def _file_mode(path):
    """The permission bits a save gives `path`: those of the file it replaces, else
    those open() would give a new file (0o666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


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


# ---------------------------------------------------------------- reading a file

def _read(path):
    """({name: NumPy array}, metadata dict) of a safetensors file."""
    safetensors = _safetensors()
    if os.path.isdir(path):
        raise ArgumentError(f"load: {path} is a folder; expected a checkpoint file")
    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = safetensors.deserialize(data)
    except safetensors.SafetensorError as e:
        raise ArgumentError(f"load: {path} is not a readable safetensors file ({len(data)} bytes): {e}") from e
    # deserialize checked the header (its length and its JSON): reading it again is safe.
    header = json.loads(bytes(data[8:8 + int.from_bytes(data[:8], "little")]))
    tensors = {}
    for key, info in entries:
        dtype = _CODES.get(info["dtype"])
        if dtype is None:
            raise DTypeError(f"load: {path}: tensor {key!r} has dtype {info['dtype']}, which rune does not support")
        tensors[key] = np.frombuffer(info["data"], dtype).reshape(tuple(info["shape"]))
    return tensors, header.get("__metadata__") or {}


def _structure(path, metadata):
    """The file's tree description, checked node by node; None for files without one."""
    stored = metadata.get(STRUCTURE_KEY)
    if stored is None:
        return None
    try:
        doc = json.loads(stored)
    except (ValueError, RecursionError) as e:
        raise TreeError(f"load: {path}: its {STRUCTURE_KEY!r} metadata is not readable JSON "
                        f"({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(doc, dict) or "version" not in doc or "tree" not in doc:
        raise TreeError(f"load: {path}: its {STRUCTURE_KEY!r} metadata should be an object with 'version' and "
                        f"'tree', got {stored[:80]!r}")
    version = doc["version"]
    if version != FORMAT_VERSION or isinstance(version, bool):
        newer = isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION
        raise TreeError(f"load: {path} is in checkpoint format version {version!r}"
                        f"{' (written by a newer rune: upgrade rune to read it)' if newer else ''}; "
                        f"this rune reads version {FORMAT_VERSION}")
    _check_description(path, doc["tree"])
    return doc["tree"]


def _check_description(path, desc):
    """Refuse metadata rune would not write (checked without recursion: depth is one of its faults)."""
    stack = [(desc, "", 0)]
    while stack:
        node, where, depth = stack.pop()

        def bad(what):
            return TreeError(f"load: {path}: the tree in its metadata is malformed at {_where(where)}: {what}")

        if depth > MAX_DEPTH:
            raise bad(f"nested more than {MAX_DEPTH} containers deep")
        # type checks before each membership test: a list or dict there is unhashable
        if not isinstance(node, dict) or not isinstance(node.get("t"), str) or node["t"] not in _FIELDS:
            raise bad(f"expected a node {{'t': one of {sorted(_FIELDS)}, ...}}, got {str(node)[:80]}")
        kind = node["t"]
        extra = set(node) - _FIELDS[kind]
        if extra:
            raise bad(f"a {kind} node has unknown entries {sorted(extra)}")
        if kind == "leaf":
            py, dtype = node.get("py", "int"), node.get("dtype", "complex64")
            if not (isinstance(py, str) and py in _PY_TYPES and isinstance(dtype, str) and dtype in _COMPLEX):
                raise bad(f"unknown leaf tags {node}")
            continue
        if kind == "none":
            continue
        children = node.get("c")
        if not isinstance(children, list):
            raise bad(f"a {kind} node needs a list of children 'c', got {str(children)[:80]}")
        name = node.get("name")
        if name is not None and not (isinstance(name, str) and ":" in name):
            raise bad(f"a class name must read 'module:qualname', got {name!r}")
        labels = node.get("k") if kind == "dict" else node.get("f")
        if kind == "dict" or labels is not None:
            ok = isinstance(labels, list) and all(
                isinstance(k, (str, int)) and not isinstance(k, bool) for k in labels)
            if not ok or len(set(labels)) != len(labels) or (kind != "dict" and not all(
                    isinstance(k, str) for k in labels)):
                raise bad(f"keys or fields must be distinct strings or ints, got {str(labels)[:80]}")
            if len(labels) != len(children):
                raise bad(f"{len(labels)} keys or fields but {len(children)} children")
        steps = [str(k) for k in labels] if labels is not None else [str(i) for i in range(len(children))]
        stack.extend((c, _join(where, s), depth + 1) for s, c in zip(steps, children))


def _restore(path, where, leaf, raw):
    """A stored tensor as the value its leaf description says (checked against it)."""
    complex_name = leaf.get("dtype")
    if complex_name is not None:
        parts = _COMPLEX[complex_name]
        if raw.dtype != parts or raw.ndim == 0 or raw.shape[-1] != 2:
            raise DTypeError(f"load: {path}: the {complex_name} leaf at {_where(where)} should be stored as "
                             f"{parts.name} pairs (shape (..., 2)), but the tensor is {raw.dtype}{list(raw.shape)}")
        raw = np.ascontiguousarray(raw).view(complex_name)[..., 0]
    py = leaf.get("py")
    if py is None:
        return raw
    cls, dtype = _PY_TYPES[py]
    if raw.shape != () or raw.dtype != dtype:
        raise DTypeError(f"load: {path}: the Python {py} at {_where(where)} should be a 0-d {dtype.name} "
                         f"tensor, got {raw.dtype}{list(raw.shape)}")
    return cls(raw.item())


def _stored_values(path, desc, tensors):
    """The leaves of the file's tree in order (NumPy arrays and Python scalars), with their paths."""
    entries = _leaf_entries(desc)
    missing = [(where, name) for where, _, name in entries if name not in tensors]
    if missing:
        where, name = missing[0]
        raise TreeError(f"load: {path}: its tree has a leaf at {_where(where)}, but the file holds no tensor "
                        f"{name!r} ({len(missing)} missing)")
    unplaced = sorted(set(tensors) - {name for _, _, name in entries})
    if unplaced:
        raise TreeError(f"load: {path} holds tensors its tree does not place: {unplaced[:5]}"
                        f"{' ...' if len(unplaced) > 5 else ''}")
    return [_restore(path, where, leaf, tensors[name]) for where, leaf, name in entries], \
        [where for where, _, _ in entries]


# ---------------------------------------------------------------- loading

def _allowed_classes(classes):
    """{module:qualname or qualname: class} of the classes load may rebuild."""
    if isinstance(classes, type):
        classes = (classes,)
    try:
        classes = tuple(classes)
    except TypeError:
        raise UsageError(f"load: classes= takes a tuple of NamedTuple or dataclass types, got {classes!r}") from None
    allowed, by_qualname = {}, {}
    for cls in classes:
        if not isinstance(cls, type) or not (issubclass(cls, tuple) and hasattr(cls, "_fields")
                                             or dataclasses.is_dataclass(cls)):
            raise UsageError(f"load: classes= takes NamedTuple and dataclass types, got {cls!r}")
        allowed[_class_name(cls)] = cls
        by_qualname.setdefault(cls.__qualname__, []).append(cls)
    # A class saved from a script (module __main__) is found by its qualified name alone,
    # when the caller allowed exactly one class of that name (_construct uses these
    # entries only for names saved from __main__).
    for qualname, found in by_qualname.items():
        if len(found) == 1:
            allowed.setdefault(qualname, found[0])
    return allowed


def _construct(path, where, desc, children, allowed):
    """The container a named node describes, built only from a class the caller allowed."""
    name = desc["name"]
    module, _, qualname = name.rpartition(":")
    # a script's classes are __main__'s when it saves and its importer's when a module
    # loads: only for them is the qualified name alone enough; any other class must
    # match by module too, so a same-named class of another library is never rebuilt
    cls = allowed.get(name) or (allowed.get(qualname) if module == "__main__" else None)
    if cls is None:
        raise TreeError(f"load: {path}: at {_where(where)} the file holds a {qualname} ({name}); rune.load never "
                        f"imports or calls a class a file names: pass like= (a tree with the types to rebuild) "
                        f"or classes=({qualname},)")
    if desc["t"] == "tuple":
        fields = desc.get("f")
        if not (issubclass(cls, tuple) and hasattr(cls, "_fields")) or fields != list(cls._fields):
            raise TreeError(f"load: {path}: at {_where(where)} the file holds a {qualname} of "
                            f"{len(children)} with fields {fields}, which {cls.__qualname__} "
                            f"{'(not a NamedTuple) ' if fields is None else ''}cannot rebuild; pass like=")
        return cls(*children)
    init = [f.name for f in dataclasses.fields(cls) if f.init] if dataclasses.is_dataclass(cls) else None
    if init is None or set(init) != set(desc["k"]):
        raise TreeError(f"load: {path}: at {_where(where)} the file holds a {qualname} with fields {desc['k']}, "
                        f"but {cls.__qualname__} takes {init}; pass like=")
    return cls(**dict(zip(desc["k"], children)))


def _build(path, desc, where, values, allowed):
    """The tree a checked description holds, its leaves taken in order from `values`."""
    kind = desc["t"]
    if kind == "leaf":
        return next(values)
    if kind == "none":
        return None
    children = [_build(path, c, _join(where, s), values, allowed) for s, c in zip(_steps(desc), desc["c"])]
    if desc.get("name") is not None:
        return _construct(path, where, desc, children, allowed)
    if kind == "dict":
        return dict(zip(desc["k"], children))
    return children if kind == "list" else tuple(children)


def load(path, like=None, device=None, *, classes=()):
    """The tree saved in `path`, its arrays placed on `device` (the default device
    when None). A file without rune's structure (written by safetensors.numpy,
    PyTorch, ...) gives a flat {key: array} dict.

    like: a template tree (arrays, or anything with .shape and .dtype, such as
    rune.Spec): the result has its containers (its NamedTuples, dataclasses and
    registered classes), and the file must hold the same structure, shapes and
    dtypes; a mismatch is an error naming the first path that differs.
    classes: NamedTuple and dataclass types the file's tree may name (matched by
    module and qualified name; a class saved from a script, module `__main__`,
    matches by qualified name alone when exactly one allowed class has it, since
    importing the script gives it another module); without like= or these, a file
    naming a class is an error. Loading never imports a module or calls a class a file names.
    """
    path = os.fspath(path)
    allowed = _allowed_classes(classes)

    def place(value):
        return value if type(value) in _PY_SCALARS else nx.asarray(value, device=device)

    for folder_format in _FOLDER_FORMATS:
        if folder_format.holds(path):
            return folder_format.load(path, like, place)
    tensors, metadata = _read(path)
    _remove_stale_temporaries(os.path.realpath(path))
    desc = _structure(path, metadata)
    if like is not None:
        return _load_like(path, tensors, desc, like, place)
    if desc is None:
        return {k: place(v) for k, v in tensors.items()}
    values, _ = _stored_values(path, desc, tensors)
    return _build(path, desc, "", iter([place(v) for v in values]), allowed)


def _load_like(path, tensors, desc, like, place):
    expected = []

    def leaf(node, where):
        scalar = _PY_SCALARS.get(type(node))
        if scalar:
            expected.append((where, (), scalar[1], type(node)))
        elif hasattr(node, "shape") and hasattr(node, "dtype"):
            expected.append((where, tuple(node.shape), np.dtype(node.dtype), None))
        else:
            raise TreeError(f"load: the template's leaf at {_where(where)} is a {type(node).__name__}; "
                            f"expected an array, a rune.Spec or a Python scalar")
        return {"t": "leaf"}

    template = _describe(like, "", 0, leaf, template=True)
    if desc is not None:
        found = _first_difference(template, desc)
        if found:
            where, want, got = found
            raise TreeError(f"load: {path} does not hold the expected tree: at {where} expected {want}, "
                            f"the file has {got}")
        values, _ = _stored_values(path, desc, tensors)
    else:   # a file from elsewhere: the template's paths name its tensors
        names = [name for _, _, name in _leaf_entries(template)]
        missing = [n for n in names if n not in tensors]
        if missing:
            raise TreeError(f"load: {path} has no tensor {missing[0]!r} (expected by `like`)")
        values = [tensors[n] for n in names]
    out = []
    for (where, shape, dtype, py), value in zip(expected, values):
        got = np.asarray(value)
        if got.dtype != dtype:
            raise DTypeError(f"load: {path}: the leaf at {_where(where)} has dtype {got.dtype}, expected {dtype}")
        if got.shape != shape:
            raise ShapeError(f"load: {path}: the leaf at {_where(where)} has shape {got.shape}, expected {shape}")
        out.append(py(got.item()) if py else place(got))
    return _rebuild(like, "", iter(out))
