"""Pytrees: nested containers of leaves, taken apart and put back together.

A pytree is a leaf or a container of pytrees. The containers are tuple,
list, dict (children in sorted key order), None (a container with no
children), NamedTuples, and classes given to `register`. Everything else is
a leaf.

`flatten` splits a tree into its leaves and a `Structure` (the tree with the
leaves taken out); `Structure.unflatten` puts new leaves back in. jit uses
the structure as part of its cache key, so flattening and comparing
structures is kept cheap: a structure is a flat preorder tuple of nodes,
hashed once, so hashing and == run in C.
"""

import collections
import dataclasses

from .errors import TreeError

__all__ = [
    "Structure",
    "register",
    "register_dataclass",
    "flatten",
    "unflatten",
    "leaves",
    "structure",
    "map",
    "flatten_with_paths",
    "prefix_broadcast",
]


class _Handler:
    """How one container type splits into children and is rebuilt.

    flatten(obj) -> (children sequence, aux); unflatten(aux, children) -> obj;
    keys(aux, n) -> path fragments of the n children, such as "[0]" or ".w";
    show(aux, parts) -> the container written around its children's reprs.
    """

    __slots__ = ("type", "flatten", "unflatten", "keys", "show")

    def __init__(self, type_, flatten, unflatten, keys, show):
        self.type = type_
        self.flatten = flatten
        self.unflatten = unflatten
        self.keys = keys
        self.show = show


def _index_keys(aux, n):
    return [f"[{i}]" for i in range(n)]


def _show_tuple(aux, parts):
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _flatten_dict(d):
    try:
        keys = sorted(d)
    except TypeError as e:
        raise TreeError(f"dict keys in a pytree must be sortable, got {list(d)!r}") from e
    return [d[k] for k in keys], tuple(keys)


def _fields_handler(cls, names, flatten, unflatten, meta=()):
    """A handler for classes whose children are named attributes (`names`);
    the attributes in `meta` are the aux data, in that order."""
    keys = [f".{name}" for name in names]

    def show(aux, parts):
        shown = [f"{n}={p}" for n, p in zip(names, parts)] + [f"{n}={v!r}" for n, v in zip(meta, aux or ())]
        return f"{cls.__name__}(" + ", ".join(shown) + ")"

    return _Handler(cls, flatten, unflatten, lambda aux, n: keys, show)


def _namedtuple_handler(cls):
    return _fields_handler(cls, cls._fields, lambda t: (t, None), lambda aux, ch: cls(*ch))


def _attributes_handler(cls, data, meta):
    """Children are the attributes `data`, aux data those in `meta`; rebuilt by cls(**all of them)."""
    return _fields_handler(
        cls,
        data,
        lambda obj: ([getattr(obj, n) for n in data], tuple(getattr(obj, n) for n in meta)),
        lambda aux, ch: cls(**dict(zip(data, ch)), **dict(zip(meta, aux))),
        meta,
    )


# Exact type -> handler. flatten looks a node's type up here first; only on a
# miss does it check for a NamedTuple, whose handler is then added here.
_HANDLERS = {
    tuple: _Handler(
        tuple,
        lambda t: (t, None),
        lambda aux, ch: tuple(ch),
        _index_keys,
        _show_tuple,
    ),
    list: _Handler(
        list,
        lambda xs: (xs, None),
        lambda aux, ch: list(ch),
        _index_keys,
        lambda aux, parts: "[" + ", ".join(parts) + "]",
    ),
    dict: _Handler(
        dict,
        _flatten_dict,
        lambda aux, ch: dict(zip(aux, ch)),
        lambda aux, n: [f"[{k!r}]" for k in aux],
        lambda aux, parts: "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(aux, parts)) + "}",
    ),
    # An OrderedDict's order is part of its meaning: its children keep it (as in JAX).
    collections.OrderedDict: _Handler(
        collections.OrderedDict,
        lambda d: (list(d.values()), tuple(d)),
        lambda aux, ch: collections.OrderedDict(zip(aux, ch)),
        lambda aux, n: [f"[{k!r}]" for k in aux],
        lambda aux, parts: "OrderedDict({" + ", ".join(f"{k!r}: {p}" for k, p in zip(aux, parts)) + "})",
    ),
    type(None): _Handler(
        type(None),
        lambda _: ((), None),
        lambda aux, ch: None,
        _index_keys,
        lambda aux, parts: "None",
    ),
}


def _handler(cls):
    """The handler for containers of type cls, or None if cls is a leaf type."""
    handler = _HANDLERS.get(cls)
    if handler is None and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        handler = _HANDLERS[cls] = _namedtuple_handler(cls)
    return handler


def register(cls, flatten=None, unflatten=None, keys=None):
    """Make instances of cls pytree containers; returns cls, so it decorates.

    With flatten and unflatten: flatten(obj) -> (children sequence, aux_data)
    and unflatten(aux_data, children) -> obj. aux_data must be hashable and
    comparable: it is part of the structure. keys(aux_data, n), if given, are
    the path steps of the n children (".name" for an attribute; "[i]" by
    default): they name leaves in errors and tensors in checkpoints. Without
    flatten and unflatten cls must be a
    dataclass; its fields, in declaration order, are the children, except
    those marked static (see `register_dataclass`).

    Subclasses of cls are not containers unless registered themselves: the
    parent's unflatten would rebuild them as the parent.
    """
    if cls in _HANDLERS:
        raise TreeError(f"{cls.__name__} is already registered as a pytree container")
    if flatten is None and unflatten is None:
        if not dataclasses.is_dataclass(cls):
            raise TreeError(f"register({cls.__name__}) needs flatten and unflatten, or a dataclass")
        skipped = [f.name for f in dataclasses.fields(cls) if not f.init]
        if skipped:
            # Rebuilding calls the constructor, which cannot set these fields.
            raise TreeError(
                f"cannot register dataclass {cls.__name__}: fields {skipped} have init=False; "
                "use register_dataclass (which leaves them to the constructor) or pass flatten and unflatten"
            )
        register_dataclass(cls)
    elif flatten is None or unflatten is None:
        raise TreeError(f"register({cls.__name__}) needs both flatten and unflatten")
    else:

        def show(aux, parts):
            return cls.__name__ + ("" if aux is None else f"[{aux!r}]") + "(" + ", ".join(parts) + ")"

        _HANDLERS[cls] = _Handler(cls, flatten, unflatten, keys or _index_keys, show)
    return cls


def register_dataclass(cls, data_fields=None, meta_fields=None):
    """Make instances of cls pytree containers by their attributes (as JAX's
    register_dataclass); returns cls, so it decorates.

    data_fields name the children; meta_fields name attributes kept in the
    structure (hashable, compared by jit's cache: not traced). Instances are
    rebuilt by cls(**attributes). Give both lists, or neither: then cls must be
    a dataclass, and its init fields declared with
    `dataclasses.field(metadata=dict(static=True))` are the meta fields, the
    others the data fields.
    """
    if cls in _HANDLERS:
        raise TreeError(f"{cls.__name__} is already registered as a pytree container")
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(cls):
            raise TreeError(f"register_dataclass({cls.__name__}) needs data_fields and meta_fields, "
                            "or a dataclass")
        fields = [f for f in dataclasses.fields(cls) if f.init]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    elif data_fields is None or meta_fields is None:
        raise TreeError(f"register_dataclass({cls.__name__}) needs both data_fields and meta_fields, or neither")
    data, meta = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(cls):
        init = {f.name for f in dataclasses.fields(cls) if f.init}
        if set(data + meta) != init or len(data + meta) != len(init):
            raise TreeError(
                f"register_dataclass({cls.__name__}): data_fields {list(data)} and meta_fields "
                f"{list(meta)} must name each init field {sorted(init)} once"
            )
    _HANDLERS[cls] = _attributes_handler(cls, data, meta)
    return cls


# In a structure's node tuple a leaf is None (cheap to test, hash and count);
# a container is (handler, aux, number of children). Nodes are in preorder.


def _subtree_end(nodes, start):
    """The index just past the subtree that begins at nodes[start]."""
    i, pending = start, 1
    while pending:
        node = nodes[i]
        pending += -1 if node is None else node[2] - 1
        i += 1
    return i


def _walk(nodes):
    """Yield (path, node) for each node in preorder."""
    pending = [""]  # Paths of the nodes still to come, next one on top.
    for node in nodes:
        path = pending.pop()
        yield path, node
        if node is not None:
            handler, aux, n = node
            pending.extend(path + key for key in reversed(handler.keys(aux, n)))


def _fold(nodes, values, build):
    """Rebuild a tree bottom-up from its preorder nodes.

    Going backwards, every container comes after all its children, which are
    then the top entries of the stack, first child on top. Leaf slots take
    `values` last first; build(handler, aux, children) makes a container.
    """
    values = reversed(values)
    stack = []
    for node in reversed(nodes):
        if node is None:
            stack.append(next(values))
        else:
            handler, aux, n = node
            stack.append(build(handler, aux, [stack.pop() for _ in range(n)]))
    return stack.pop()


def _unflatten_node(handler, aux, children):
    return handler.unflatten(aux, children)


def _show_node(handler, aux, parts):
    return handler.show(aux, parts)


class Structure:
    """The shape of a pytree with its leaves taken out (a treedef).

    Made by `flatten` and `structure`. Hashable and comparable with ==;
    the hash is computed once because structures key jit's cache.
    """

    __slots__ = ("_nodes", "_hash", "num_leaves")

    def __init__(self, nodes):
        self._nodes = nodes
        self.num_leaves = nodes.count(None)
        try:
            self._hash = hash(nodes)
        except TypeError as e:
            raise TreeError(f"pytree aux data must be hashable: {e}") from e

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if not isinstance(other, Structure):
            return NotImplemented
        return self._hash == other._hash and self._nodes == other._nodes

    def __repr__(self):
        return f"Structure({_fold(self._nodes, ['*'] * self.num_leaves, _show_node)})"

    def unflatten(self, leaves):
        """Build the tree of this structure holding `leaves`, in flatten's order."""
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise TreeError(f"{self} expected {self.num_leaves} leaves, got {len(leaves)}")
        return _fold(self._nodes, leaves, _unflatten_node)

    def children(self):
        """The structures of the root's children; [] for a leaf."""
        root = self._nodes[0]
        if root is None:
            return []
        out, start = [], 1
        for _ in range(root[2]):
            end = _subtree_end(self._nodes, start)
            out.append(Structure(self._nodes[start:end]))
            start = end
        return out


def flatten(tree, is_leaf=None):
    """Split tree into (list of leaves, Structure).

    is_leaf(node) -> True stops at a container and makes it a leaf.
    """
    flat, nodes = [], []
    # Ids of the containers met so far. A tree that contains itself would
    # flatten forever; it must meet some container twice, and only then is
    # the (slower) exact check run. Sharing a subtree is fine, so once the
    # check passes, looking stops. Plain tuples are not tracked (the commonest
    # container, and immutable: every cycle also passes through a mutable one).
    seen = set()
    # An explicit stack instead of recursion: fewer calls, and no depth limit.
    stack = [tree]
    while stack:
        node = stack.pop()
        handler = _handler(type(node))
        if handler is None or (is_leaf is not None and is_leaf(node)):
            flat.append(node)
            nodes.append(None)
        else:
            children, aux = handler.flatten(node)
            if children and seen is not None and type(node) is not tuple:
                if id(node) in seen:
                    _check_acyclic(tree, is_leaf)
                    seen = None
                else:
                    seen.add(id(node))
            nodes.append((handler, aux, len(children)))
            stack.extend(reversed(children))  # First child on top: leaves come out in order.
    return flat, Structure(tuple(nodes))


def _check_acyclic(tree, is_leaf):
    """Raise a TreeError naming the path where a container of tree holds itself."""
    on_path = {}  # id -> path, for the containers from the root down to the node visited
    stack = [(tree, "", False)]  # (node, path, leaving): leaving takes a node off the path
    while stack:
        node, path, leaving = stack.pop()
        if leaving:
            del on_path[id(node)]
            continue
        handler = _handler(type(node))
        if handler is None or (is_leaf is not None and is_leaf(node)):
            continue
        children, aux = handler.flatten(node)
        if not children:
            continue
        if id(node) in on_path:
            raise TreeError(
                f"the pytree contains itself: the container at {path} is the one at "
                f"{on_path[id(node)] or 'the root'} (a cycle); a pytree must be a tree"
            )
        on_path[id(node)] = path
        stack.append((node, path, True))
        keys = handler.keys(aux, len(children))
        stack.extend((child, path + key, False) for child, key in zip(reversed(children), reversed(keys)))


def unflatten(structure, leaves):
    """Build the tree of `structure` holding `leaves`; the inverse of flatten."""
    return structure.unflatten(leaves)


def leaves(tree, is_leaf=None):
    """The leaves of tree, in flatten's order."""
    return flatten(tree, is_leaf)[0]


def structure(tree, is_leaf=None):
    """The Structure of tree."""
    return flatten(tree, is_leaf)[1]


def _difference(a, b):
    """The path of the first node where two unequal structures differ."""
    path = next(path for (path, node), other in zip(_walk(a._nodes), b._nodes) if node != other)
    return path or "the root"


def map(f, tree, *rest, is_leaf=None):
    """A tree like `tree` whose leaves are f(leaf, *matching leaves of rest).

    The trees in rest must have the same structure as tree.
    """
    flat, struct = flatten(tree, is_leaf)
    if not rest:
        return struct.unflatten([f(x) for x in flat])
    columns = [flat]
    for i, other in enumerate(rest, 1):
        other_flat, other_struct = flatten(other, is_leaf)
        if other_struct != struct:
            raise TreeError(
                f"map: tree {i} has structure {other_struct}, but tree 0 has {struct}; "
                f"they differ at {_difference(struct, other_struct)}"
            )
        columns.append(other_flat)
    return struct.unflatten([f(*xs) for xs in zip(*columns)])


def flatten_with_paths(tree, is_leaf=None):
    """Like flatten, but each leaf comes as (path, leaf).

    A path reads like Python indexing from the root, e.g. "[0]['w']" or
    ".bias"; the root itself is "".
    """
    flat, struct = flatten(tree, is_leaf)
    paths = [path for path, node in _walk(struct._nodes) if node is None]
    return list(zip(paths, flat)), struct


def _is_none(x):
    return x is None


def prefix_broadcast(prefix, tree, what):
    """One entry of prefix per leaf of tree.

    prefix is a tree prefix of tree: each of its leaves stands for the whole
    subtree of tree at the same place (as vmap's in_axes do). None in prefix
    is such a leaf, not an empty container. `what` names prefix in errors.
    """
    values, pstruct = flatten(prefix, is_leaf=_is_none)
    tstruct = structure(tree)
    if pstruct._nodes[0] is None:  # The common case: one value for everything.
        return values * tstruct.num_leaves
    if pstruct == tstruct:
        return values
    out, values = [], iter(values)
    pnodes, tnodes = pstruct._nodes, tstruct._nodes
    t = 0  # Where in tnodes the prefix node being visited sits.
    for p, (path, node) in enumerate(_walk(pnodes)):
        if node is None:
            end = _subtree_end(tnodes, t)
            out.extend([next(values)] * tnodes[t:end].count(None))
            t = end
        elif node == tnodes[t]:
            t += 1
        else:
            psub = Structure(pnodes[p : _subtree_end(pnodes, p)])
            tsub = Structure(tnodes[t : _subtree_end(tnodes, t)])
            raise TreeError(
                f"{what} must be a tree prefix of {tstruct}, but at {path or 'the root'} "
                f"{what} is {psub} where the tree is {tsub}"
            )
    return out
