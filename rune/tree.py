"""Pytrees: nested containers of leaves, taken apart and put back together.

A pytree is a leaf or a container of pytrees. The containers are tuple,
list, dict (children in sorted key order), None (a container with no
children), NamedTuples, and classes given to `register`. Everything else is
a leaf.

`flatten` splits a tree into its leaves and a `Structure` (the tree with the
leaves taken out); `Structure.unflatten` puts new leaves back in. jit uses
the structure as part of its cache key, so flattening and comparing
structures is kept cheap: a structure is a flat preorder tuple of nodes,
hashed once, so hashing and == run in C. A structure used again is rebuilt
by straight lines compiled for it, and `Structure.matcher` compiles the
flatten-and-compare of a tree against it, for the trees jit sees every call.
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

    __slots__ = ("type", "flatten", "unflatten", "keys", "show", "items", "specialize")

    def __init__(self, type_, flatten, unflatten, keys, show, items=False):
        self.type = type_
        self.flatten = flatten
        self.unflatten = unflatten
        self.keys = keys
        self.show = show
        # The children are the container's own items, in order (tuple, list,
        # NamedTuple), and it is rebuilt from them alone: compiled code
        # (`Structure.matcher`, `_builder`) unpacks and rebuilds it inline.
        self.items = items
        # specialize(aux) -> (match, rebuild), if set (`_specialize`): flatten and
        # unflatten for the containers with this aux data, made once for compiled code.
        self.specialize = None


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


def _fields_handler(cls, names, flatten, unflatten, meta=(), items=False):
    """A handler for classes whose children are named attributes (`names`);
    the attributes in `meta` are the aux data, in that order."""
    keys = [f".{name}" for name in names]

    def show(aux, parts):
        shown = [f"{n}={p}" for n, p in zip(names, parts)] + [f"{n}={v!r}" for n, v in zip(meta, aux or ())]
        return f"{cls.__name__}(" + ", ".join(shown) + ")"

    return _Handler(cls, flatten, unflatten, lambda aux, n: keys, show, items)


def _namedtuple_handler(cls):
    return _fields_handler(cls, cls._fields, lambda t: (t, None), lambda aux, ch: cls(*ch), items=True)


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
        items=True,
    ),
    list: _Handler(
        list,
        lambda xs: (xs, None),
        lambda aux, ch: list(ch),
        _index_keys,
        lambda aux, parts: "[" + ", ".join(parts) + "]",
        items=True,
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


def _specialize(cls, specialize):
    """Give the registered container type cls flatten and unflatten specialized
    to one aux data, for the code compiled for a structure (`_builder`,
    `_matcher`): specialize(aux) -> (match, rebuild), where match(obj) gives
    obj's children as flatten does when its aux data equals `aux` (as
    structures compare it), else None, and rebuild(children) is
    unflatten(aux, children)."""
    _HANDLERS[cls].specialize = specialize


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

    __slots__ = ("_nodes", "_hash", "num_leaves", "_unflattens", "_build", "_matches", "_matcher")

    def __init__(self, nodes):
        self._nodes = nodes
        self.num_leaves = nodes.count(None)
        # A structure used again and again (jit's outputs and arguments, every
        # call) gets straight lines compiled for it (`_builder`, `_matcher`) once
        # it has been used about as often as compiling costs (`_worth_compiling`).
        self._unflattens = self._matches = 0
        self._build = None
        self._matcher = None  # (leaf type, `matcher`'s function)
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
        if type(leaves) is not list:
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise TreeError(f"{self} expected {self.num_leaves} leaves, got {len(leaves)}")
        build = self._build
        if build is None:
            self._unflattens += 1
            if not _worth_compiling(self._unflattens, self._nodes):
                return _fold(self._nodes, leaves, _unflatten_node)
            build = self._build = _builder(self._nodes)
        return build(leaves)

    def matcher(self, leaf_type):
        """A function of a tree: its leaves (a list, in flatten's order) when the
        tree has this structure and each leaf is exactly a `leaf_type`, else None.
        The same answer as flattening the tree (no is_leaf) and comparing structures, as
        straight lines compiled for this structure: no walk and no Structure
        built (jit matches the arguments of each call this way).
        None itself until asked for often enough to pay for compiling it."""
        made = self._matcher
        if made is None or made[0] is not leaf_type:
            if _handler(leaf_type) is not None:
                raise TreeError(f"matcher: {leaf_type.__name__} is a pytree container, not a leaf type")
            self._matches += 1
            if not _worth_compiling(self._matches, self._nodes):
                return None
            made = self._matcher = (leaf_type, _matcher(self._nodes, leaf_type))
        return made[1]

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


def _worth_compiling(uses, nodes):
    """Whether a structure used `uses` times gets compiled code: compiling costs
    about fifty walks of it, so a large one waits for as many uses."""
    return uses >= 2 + len(nodes) // 50


def _compiled(name, lines, names):
    exec(compile("\n".join(lines), f"<rune tree {name}>", "exec"), names)
    return names[name]


def _builder(nodes):
    """`_fold(nodes, leaves, _unflatten_node)` as a function of the leaves written
    out for these nodes: one line per container, tuples, lists, NamedTuples and
    None rebuilt inline, other containers by their handler's unflatten."""
    names, lines, stack = {}, [], []
    leaf = nodes.count(None)
    for i in range(len(nodes) - 1, -1, -1):  # backwards, as `_fold`: children before their container
        node = nodes[i]
        if node is None:
            leaf -= 1
            stack.append(f"L[{leaf}]")
            continue
        handler, aux, n = node
        children = ", ".join([stack.pop() for _ in range(n)])
        cls = handler.type
        if cls is tuple:
            made = f"({children}{',' if n == 1 else ''})"
        elif cls is list:
            made = f"[{children}]"
        elif cls is type(None):
            made = "None"
        elif handler.items:  # a NamedTuple
            names[f"T{i}"] = cls
            made = f"T{i}({children})"
        elif handler.specialize is not None:
            names[f"R{i}"] = handler.specialize(aux)[1]
            made = f"R{i}([{children}])"
        else:
            names[f"U{i}"], names[f"A{i}"] = handler.unflatten, aux
            made = f"U{i}(A{i}, [{children}])"
        lines.append(f"    n{i} = {made}")
        stack.append(f"n{i}")
    return _compiled("build", ["def build(L):"] + lines + [f"    return {stack.pop()}"], names)


def _matcher(nodes, leaf_type):
    """The function `Structure.matcher` gives: the preorder walk of `flatten`
    unrolled for these nodes, each container's type, length and aux data
    checked (aux compared as the structures' == compares it)."""
    names, lines, leaves = {"Leaf": leaf_type}, [], []
    pending, count = ["t"], 0  # the variables holding the nodes still to visit, next one on top
    for i, node in enumerate(nodes):
        var = pending.pop()
        if node is None:
            lines.append(f"    if type({var}) is not Leaf: return None")
            leaves.append(var)
            continue
        handler, aux, n = node
        names[f"T{i}"] = handler.type
        lines.append(f"    if type({var}) is not T{i}: return None")
        children = [f"c{count + k}" for k in range(n)]
        count += n
        if handler.items:
            lines.append(f"    if len({var}) != {n}: return None")
            source = var
        elif handler.type is type(None):
            continue
        elif handler.specialize is not None:
            names[f"M{i}"] = handler.specialize(aux)[0]
            lines.append(f"    kids = M{i}({var})")
            lines.append("    if kids is None: return None")
            source = "kids"
        else:
            names[f"F{i}"], names[f"A{i}"] = handler.flatten, aux
            lines.append(f"    kids, aux = F{i}({var})")
            # (aux,) != (A,) is tuple comparison: identity first, then ==, as in Structure.__eq__
            lines.append(f"    if len(kids) != {n} or (aux,) != (A{i},): return None")
            source = "kids"
        if n:
            lines.append(f"    {', '.join(children)}, = {source}")
        pending.extend(reversed(children))
    return _compiled("match", ["def match(t):"] + lines + [f"    return [{', '.join(leaves)}]"], names)


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
