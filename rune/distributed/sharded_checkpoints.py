"""Checkpoints of sharded state: each rank saves its blocks; a load reshards them.

`rune.save(path, tree)` of a tree holding blocks (a `FullyShard`, a `sharded`
optimizer's `ShardedState`) comes here on every rank. `path` becomes a folder:

    path/current                          the name of the complete save (one line)
    path/shards-<id>/manifest.json        the group size, each tensor's whole shape
    path/shards-<id>/rank-R-of-N.safetensors   rank R's tree (rune.save's format)

Every rank writes its own file into a new `shards-<id>` folder; the ranks then
agree that all of them succeeded, and only then does rank 0 point `current` at
the new folder (an atomic rename) and remove the older one. A rank that fails
makes every rank raise DistributedError naming it, the new folder is removed,
and `current` still names the previous save, whole.

`rune.load(path, like=template)` reads every rank's file of the current save and
builds this rank's blocks for the template's group: a block leaf's whole value
is the saved blocks concatenated in rank order (padding dropped), cut anew for
this group's size (so a run saved on 3 processes resumes on 2); a leaf every rank
holds whole comes from rank 0's file. Every rank reads the same files, so a
missing or damaged shard is the same DistributedError on every rank.
"""
import json
import os
import shutil
import uuid

import numpy as np

from .. import checkpoints, tree
from ..errors import DistributedError, RuneError, ShapeError, TreeError
from . import runtime
from .blocks import blocks
from .zero import FullyShard, ShardedState, block_layout

CURRENT = "current"


def holds_blocks(tree_):
    """Whether `tree_` holds sharded state (a FullyShard or a ShardedState)."""
    try:
        nodes = tree.leaves(tree_, is_leaf=lambda n: isinstance(n, (FullyShard, ShardedState)))
    except TreeError:   # a tree rune.tree cannot walk (dict keys 3 and "3"): checkpoints' own
        return False
    return any(isinstance(x, (FullyShard, ShardedState)) for x in nodes)


def is_sharded_checkpoint(path):
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, CURRENT))


def _rank_file(folder, rank, size):
    return os.path.join(folder, f"rank-{rank}-of-{size}.safetensors")


def _tensor_names(tree_):
    """Each leaf's (path, tensor name) in rune.save's file, in tree.leaves order."""
    structure = checkpoints._describe(tree_, "", 0, lambda node, where: {"t": "leaf"})
    return [(where, name) for where, _, name in checkpoints._leaf_entries(structure)]


def _exchange(group, value):
    """Every rank's `value` (small, picklable), in rank order."""
    return [value] if group.comm is None else group.ctl.allgather(value)


def save(path, tree_):
    """Save this rank's part of `tree_` into the sharded checkpoint folder `path` (every
    rank calls it; see the module's docstring)."""
    group = runtime.initialize()
    wholes, sizes = block_layout(tree_)
    if sizes is not None and sizes != {group.size}:
        raise DistributedError(f"rune.distributed: rank {group.rank} of {group.size} saves blocks made for "
                               f"{sorted(sizes)} processes; save sharded state in the group that made it")
    path = os.path.realpath(os.fspath(path))
    token = uuid.uuid4().hex[:12] if group.rank == 0 else None
    token = token if group.comm is None else group.ctl.bcast(token, root=0)
    folder = os.path.join(path, f"shards-{token}")
    error = None
    try:
        os.makedirs(folder, exist_ok=True)
        checkpoints.write(_rank_file(folder, group.rank, group.size), tree_)
        if group.rank == 0:
            names = [name for _, name in _tensor_names(tree_)]
            manifest = {"size": group.size, "whole": {n: (None if w is None else list(w))
                                                      for n, w in zip(names, wholes)}}
            _write_atomically(os.path.join(folder, "manifest.json"), json.dumps(manifest))
    except Exception as e:   # noqa: BLE001  (every rank must hear of it before any raises)
        error = f"{type(e).__name__}: {e}"
    errors = [(r, e) for r, e in enumerate(_exchange(group, error)) if e is not None]
    if errors:
        if group.rank == 0:
            shutil.rmtree(folder, ignore_errors=True)
        rank, what = errors[0]
        raise DistributedError(f"rune.distributed: saving {path} failed on rank {rank} of {group.size} ({what}); "
                               f"the previous save there is left whole")
    if group.rank == 0:
        previous = _current_folder(path)
        _write_atomically(os.path.join(path, CURRENT), os.path.basename(folder) + "\n")
        if previous is not None and previous != folder:
            shutil.rmtree(previous, ignore_errors=True)
    _exchange(group, None)   # nobody returns before `current` names the new save


def _write_atomically(target, text):
    temp = f"{target}.{os.getpid()}.tmp"
    with open(temp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, target)


def _current_folder(path):
    try:
        with open(os.path.join(path, CURRENT)) as f:
            name = f.read().strip()
    except FileNotFoundError:
        return None
    return os.path.join(path, name)


def load(path, like, place):
    """This rank's tree like `like` from the sharded checkpoint folder `path`, resharded
    for the template's group (see the module's docstring). `place` makes a loaded
    NumPy value an array on the caller's device."""
    group = runtime.initialize()
    path = os.fspath(path)
    if like is None:
        raise RuneError(f"load: {path} is a sharded checkpoint (one file per rank): load it with "
                        f"like= a tree of this run's sharded state (fully_shard modules, a sharded "
                        f"optimizer's init), which says how to cut its blocks")
    folder = _current_folder(path)
    manifest = _manifest(path, folder, group)
    saved = manifest["size"]
    missing = [r for r in range(saved) if not os.path.isfile(_rank_file(folder, r, saved))]
    if missing:
        raise DistributedError(f"rune.distributed: rank {group.rank}: {path} was saved by {saved} processes, but "
                               f"the shards of rank(s) {missing} are missing "
                               f"({os.path.basename(_rank_file(folder, missing[0], saved))})")
    files = [_restored(_rank_file(folder, r, saved)) for r in range(saved)]
    wholes, _ = block_layout(like)
    values = []
    for (where, name), whole, template in zip(_tensor_names(like), wholes, tree.leaves(like)):
        values.append(_value(path, group, files, manifest, where, name, whole, template, place))
    return checkpoints._rebuild(like, "", iter(values))


def _restored(file):
    """{tensor name: value} of one rank's file, each as rune.load gives it (complex
    leaves from their pairs of floats, Python scalars as such)."""
    tensors, metadata = checkpoints._read(file)
    desc = checkpoints._structure(file, metadata)
    return {name: checkpoints._restore(file, where, leaf, tensors[name])
            for where, leaf, name in checkpoints._leaf_entries(desc) if name in tensors}


def _manifest(path, folder, group):
    try:
        with open(os.path.join(folder, "manifest.json")) as f:
            manifest = json.load(f)
        if not isinstance(manifest.get("size"), int) or not isinstance(manifest.get("whole"), dict):
            raise ValueError("no size or shapes")
    except (OSError, ValueError, TypeError) as e:
        raise DistributedError(f"rune.distributed: rank {group.rank}: {path} names the save {folder!r}, whose "
                               f"manifest cannot be read ({type(e).__name__}: {e})") from None
    return manifest


def _value(path, group, files, manifest, where, name, whole, template, place):
    """The leaf at `where` for this rank: whole, or this rank's block of the whole value."""
    saved_whole = manifest["whole"].get(name, "absent")
    if saved_whole == "absent" or name not in files[0]:
        raise DistributedError(f"rune.distributed: rank {group.rank}: {path} holds no leaf at "
                               f"{checkpoints._where(where)} (the template has one)")
    if saved_whole is None:
        value = files[0][name]
    else:
        parts = []
        for r, f in enumerate(files):
            if name not in f:
                raise DistributedError(f"rune.distributed: rank {group.rank}: the shard of rank {r} in {path} has "
                                       f"no block of the leaf at {checkpoints._where(where)}")
            parts.append(np.asarray(f[name]).reshape(-1))
        n = int(np.prod(saved_whole, dtype=np.int64))
        value = np.concatenate(parts)[:n].reshape(saved_whole)
    if whole is None:
        return _checked(path, where, value, template, place)
    if tuple(whole) != value.shape:
        raise ShapeError(f"load: {path}: the leaf at {checkpoints._where(where)} was saved whole as "
                         f"{value.shape}, the template's is {tuple(whole)}")
    flat = value.reshape(-1)
    b = blocks(flat.size, group.size)
    flat = np.concatenate([flat, np.zeros(b * group.size - flat.size, flat.dtype)])
    return _checked(path, where, flat[group.rank * b:(group.rank + 1) * b], template, place)


def _checked(path, where, value, template, place):
    if type(template) in checkpoints._PY_SCALARS:
        if type(value) is not type(template):
            raise ShapeError(f"load: {path}: the leaf at {checkpoints._where(where)} is {value!r}, the template's "
                             f"a Python {type(template).__name__}")
        return value
    shape, dtype = tuple(getattr(template, "shape", ())), getattr(template, "dtype", None)
    if value.shape != shape or (dtype is not None and value.dtype != np.dtype(dtype)):
        raise ShapeError(f"load: {path}: the leaf at {checkpoints._where(where)} is {value.dtype}{list(value.shape)}, "
                         f"the template's {np.dtype(dtype) if dtype is not None else ''}{list(shape)}")
    return place(value)


checkpoints.register_folder_format(checkpoints.FolderFormat(holds_blocks, save, is_sharded_checkpoint, load))
