"""The core's layers (docs/architecture.md, "Layers"): every import of a globaltensor module, at
the top of a file or inside a function, goes to the same layer or one below; inside a layer the
imports form no cycle; nothing imports our modules by a name computed at run time. A failure
names the file and line."""
import ast
import functools
import importlib.machinery
import os

import globaltensor

ROOT = os.path.dirname(globaltensor.__file__)

# Bottom to top; a module belongs to the longest prefix that names it. Each prefix is a unit:
# inside a layer the units import each other without a cycle (test_units_of_a_layer_form_a_dag).
LAYERS = [
    ("L0 values", ["_native", "errors", "sbp", "layout", "dtype", "random", "scope", "hooks"]),
    ("L1 the job", ["env", "placement", "backends", "distributed", "ps"]),
    ("L2 tensor", ["tensor"]),
    ("L3 creation and conversion", ["creation", "tensor_types", "boxing", "generator"]),
    ("L4 autograd", ["autograd"]),
    ("L5 op registry", ["registry"]),
    ("L6 dispatch", ["dispatch"]),
    ("L7 ops", ["ops"]),
    ("L8 parallel training and graphs", ["grad_flat", "grad_buckets", "data_parallel", "pipeline", "amp", "graph", "zero",
                                           "zero_buckets"]),
    ("L9 libraries", ["linalg", "nn", "optim", "serialization", "debug", "utils", "memory", "jit", "comm", "unittest",
                      "support", "_oneflow_internal", "sysconfig", "printing", "framework", "_C", "ps", "fsdp", "fsdp_group",
                      "fsdp_api"]),
    ("L10 the package", ["", "_surface"]),
    ("L11 faces", ["paddle"]),
]

# Modules that import nothing of ours above L0 (the others build on them).
LEAVES = ["env"]


@functools.cache
def _modules():
    """{dotted name under globaltensor: path}; "" is the package, extension modules (_native) have no path."""
    found = {}
    for folder, _, files in os.walk(ROOT):
        for f in files:
            rel = os.path.relpath(os.path.join(folder, f), ROOT).replace(os.sep, ".")
            if f.endswith(".py"):
                name = rel[:-3]
                found[name[:-len(".__init__")] if name.endswith(".__init__") else name] = os.path.join(folder, f)
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                if f.endswith(suffix):
                    found[rel[:-len(suffix)]] = None
    found[""] = os.path.join(ROOT, "__init__.py")
    return {("" if k == "__init__" else k): v for k, v in found.items()}


def _unit(module):
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if module == p or (p and module.startswith(p + ".")):
                if best is None or len(p) > len(best[1]):
                    best = (i, p)
    assert best is not None, f"globaltensor.{module} is in no layer: add it to LAYERS"
    return best


def _layer(module):
    return _unit(module)[0]


def _statements(tree):
    """(import statement, whether it sits inside a function) for every import in the file."""
    def walk(node, deferred):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, deferred
            yield from walk(child, deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    return walk(tree, False)


def _imports(module, path, modules):
    """(imported module, line, deferred) for every globaltensor import in the file, nested ones too
    (deferred: inside a function, run on the first call rather than when the module loads)."""
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node, deferred in _statements(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = parts[:len(parts) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module == "globaltensor" or (node.module or "").startswith("globaltensor."):
                target = node.module[len("globaltensor") + 1:]
            else:
                continue
            for alias in node.names:  # `from .. import _native` imports the module _native, not the package
                sub = f"{target}.{alias.name}" if target else alias.name
                yield (sub if sub in modules else target), node.lineno, deferred
        else:
            for alias in node.names:
                if alias.name == "globaltensor" or alias.name.startswith("globaltensor."):
                    yield alias.name[len("globaltensor") + 1:], node.lineno, deferred


@functools.cache
def _edges():
    """{(importer, imported): [(line, deferred), ...]} over every module of the package."""
    modules = _modules()
    edges = {}
    for module, path in modules.items():
        if path is None:
            continue
        for target, line, deferred in _imports(module, path, modules):
            if target in modules and target != module:
                edges.setdefault((module, target), []).append((line, deferred))
    return edges


def _where(module, lines):
    path = "__init__.py" if module == "" else module.replace(".", "/") + (
        "/__init__.py" if _modules()[module].endswith("__init__.py") else ".py")
    return f"globaltensor/{path}:{','.join(str(line) for line in sorted({line for line, _ in lines}))}"


def _packages_run(importer, target):
    """The packages whose __init__ importing `target` runs first (those not loading already)."""
    parts = target.split(".")
    for i in range(1, len(parts)):
        package = ".".join(parts[:i])
        if not (importer == package or importer.startswith(package + ".")):
            yield package


def _upward_edges():
    return {(a, b): lines for (a, b), lines in _edges().items() if _layer(b) > _layer(a)}


def test_no_import_goes_up_a_layer():
    edges = _upward_edges()
    assert not edges, "imports that go up a layer (file: line): " + "; ".join(
        f"{_where(a, lines)} imports {b} ({LAYERS[_layer(b)][0]} above {LAYERS[_layer(a)][0]})"
        for (a, b), lines in sorted(edges.items()))


# (importer, package whose __init__ its import runs, in a higher layer): none. The registry (L5)
# once lived in the L7 package ops, so dispatch's import of it ran every op family; it is a
# package of its own now. Exact, as FACE_CYCLES below: a new case fails, so does a stale entry.
PACKAGES_RUN_FROM_BELOW = set()


def test_no_import_runs_a_package_above():
    found = {}
    for (a, b), lines in sorted(_edges().items()):
        for package in _packages_run(a, b):
            if _layer(package) > _layer(a):
                found.setdefault((a, package), f"{_where(a, lines)} imports {b}, which runs {package}/__init__.py "
                                               f"({LAYERS[_layer(package)][0]} above {LAYERS[_layer(a)][0]})")
    new = [why for edge, why in found.items() if edge not in PACKAGES_RUN_FROM_BELOW]
    assert not new, "imports that run a package's __init__ in a higher layer: " + "; ".join(new)
    assert set(found) >= PACKAGES_RUN_FROM_BELOW, \
        f"PACKAGES_RUN_FROM_BELOW lists what no longer happens: {PACKAGES_RUN_FROM_BELOW - set(found)}"


def test_leaves_import_only_values():
    below = [f"{_where(a, lines)} imports {b} ({LAYERS[_layer(b)][0]})"
             for (a, b), lines in sorted(_edges().items()) if a in LEAVES and _layer(b) > 0]
    assert not below, f"modules meant to be leaves ({LEAVES}) import more than L0 values: " + "; ".join(below)


# -- no cycles inside a layer ---------------------------------------------------------------------
# An import inside a function counts: it runs later, but the module still needs the other, and a
# deferred import is the usual way to hide a cycle from the loader. Importing a.b.c also runs the
# __init__ of a and a.b first (unless the importer is inside them: they are loading already), and
# a package's __init__ importing its own modules is an edge like any other.

# Cycles in the Paddle face (L11, outside the core: it imports anything and nothing imports it),
# each through the face's own package __init__ files; the core (L0-L10) has none. The list is
# exact: a new cycle fails the test, and so does an edge here that closes none any more.
# (importer, imported) as in _edges: without these edges the face's imports form a DAG.
FACE_CYCLES = {
    ("paddle.distributed.auto_parallel.api", "paddle"),  # inside a function: from ... import to_tensor
    # inside functions: Fleet's PS mode runs static programs (static's collective update uses fleet.utils)
    ("paddle.distributed.fleet.ps_runtime", "paddle.static"),
    ("paddle.distributed.fleet.ps_runtime", "paddle.static.ps"),  # its glue (job_spec, attach): runs paddle.static
}


def _cycle(graph):
    """One cycle of `graph` ({node: {successor: why}}) as a list of nodes, first = last, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _cycles(graph):
    """Cycles of `graph` as [(importer, imported, why), ...]: each one found is reported and its
    last edge cut, until none is left (so every cycle shares an edge with a reported one)."""
    graph = {a: dict(b) for a, b in graph.items()}
    found = []
    while (cycle := _cycle(graph)) is not None:
        found.append([(a, b, graph[a][b]) for a, b in zip(cycle, cycle[1:])])
        del graph[cycle[-2]][cycle[-1]]
    return found


def _describe(cycle):
    return " -> ".join(f"{a} imports {b} ({why})" for a, b, why in cycle)


def _why(importer, imported, lines, package=None):
    how = "inside a function" if all(deferred for _, deferred in lines) else "when it loads"
    return _where(importer, lines) + f", {how}" + (f", which runs {package}/__init__.py" if package else "")


def _module_graph(skip=()):
    modules = _modules()
    graph = {}
    for (a, b), lines in _edges().items():
        if (a, b) in skip:
            continue
        for target in [b, *_packages_run(a, b)]:
            if target in modules and target != a and _layer(target) == _layer(a):
                why = _why(a, b, lines, None if target == b else target.replace(".", "/"))
                graph.setdefault(a, {}).setdefault(target, why)
    return graph


def test_modules_of_a_layer_form_a_dag():
    cycles = _cycles(_module_graph(skip=FACE_CYCLES))
    assert not cycles, "import cycles inside a layer (file:line): " + "; ".join(map(_describe, cycles))
    edges = _edges()
    stale = [edge for edge in sorted(FACE_CYCLES) if edge not in edges or _layer(edge[0]) != _layer("paddle")]
    assert not stale, f"FACE_CYCLES lists edges that are gone or in the core: {stale}"
    closing = [edge for edge in sorted(FACE_CYCLES)
               if not _cycles(_module_graph(skip=FACE_CYCLES - {edge}))]
    assert not closing, f"FACE_CYCLES lists edges that close no cycle any more (take them out): {closing}"


def test_units_of_a_layer_form_a_dag():
    graph = {}
    for (a, b), lines in sorted(_edges().items()):
        (la, ua), (lb, ub) = _unit(a), _unit(b)
        if la == lb and ua != ub:
            graph.setdefault(ua, {}).setdefault(ub, _why(a, b, lines))
    cycles = _cycles(graph)
    assert not cycles, "units of one layer (LAYERS' entries) importing each other in a cycle: " + "; ".join(
        map(_describe, cycles))


# -- no imports by computed names -----------------------------------------------------------------
# importlib.import_module, __import__, importlib.util.find_spec ... hide an edge from the tests
# above. Third-party modules may be imported that way (cupy, found lazily); ours may not, and a
# name that is not a literal could be ours.

_IMPORTERS = {"import_module", "__import__", "find_spec", "find_loader", "spec_from_file_location",
              "spec_from_loader", "reload", "run_module"}  # each takes the module (or its name) first


def _called(node):
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _literal(node):
    """The string a module-name argument spells, the literal head of an f-string + "*", or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value + "*"
    return None


def _ours(name):
    """Whether a module name (or an f-string's head, ending in "*") is or could be one of ours;
    a relative name (".world") is taken to be ours."""
    if name.endswith("*"):
        head = name[:-1]
        return head.startswith(".") or ("." not in head and "globaltensor".startswith(head)) or _ours(head)
    return name.startswith(".") or name.split(".")[0] == "globaltensor"


def _is_sys_modules(node):
    return isinstance(node, ast.Attribute) and node.attr == "modules" and \
        isinstance(node.value, ast.Name) and node.value.id == "sys"


def _dynamic_imports(path):
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Call) and _called(node) in _IMPORTERS:
            if not node.args:
                yield node.lineno, f"{_called(node)}() without a positional module name"
                continue
            name = _literal(node.args[0])
            if name is None:
                yield node.lineno, f"{_called(node)}({ast.unparse(node.args[0])}): a name computed at run time"
            elif _ours(name):
                yield node.lineno, f"{_called(node)}({ast.unparse(node.args[0])}) imports our own module"
        else:  # sys.modules["globaltensor..."] or sys.modules.get("globaltensor..."): a module by name
            if isinstance(node, ast.Subscript) and _is_sys_modules(node.value):
                key = node.slice
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and \
                    _is_sys_modules(node.func.value):
                key = node.args[0]
            else:
                continue
            name = _literal(key)
            if name is not None and _ours(name):
                yield node.lineno, f"sys.modules[{ast.unparse(key)}] reaches our own module around the imports"


def test_no_dynamic_import_of_our_modules():
    found = [f"{os.path.relpath(path, os.path.dirname(ROOT))}:{line}: {what}"
             for module, path in sorted(_modules().items()) if path is not None
             for line, what in _dynamic_imports(path)]
    assert not found, "imports that the layer tests cannot see (import it with an import statement, or " \
                      "register it from above): " + "; ".join(found)


def test_the_rules_see_what_they_forbid(tmp_path):
    """The checks above on a few lines written to break them."""
    bad = tmp_path / "bad.py"
    bad.write_text("import importlib, importlib.util\n"
                   "def f(name):\n"
                   "    importlib.import_module(f'globaltensor.distributed.{name}')\n"
                   "    importlib.import_module(name)\n"
                   "    __import__('globaltensor.env')\n"
                   "    importlib.util.find_spec('cupy')\n"
                   "    importlib.import_module('.world', 'globaltensor.distributed')\n"
                   "    import sys; sys.modules['globaltensor.env']; sys.modules.get('cupy')\n")
    assert [line for line, _ in _dynamic_imports(str(bad))] == [3, 4, 5, 7, 8]
    assert _cycles({"a": {"b": "a.py:1"}, "b": {"c": "b.py:2"}, "c": {"a": "c.py:3"}}) == [
        [("a", "b", "a.py:1"), ("b", "c", "b.py:2"), ("c", "a", "c.py:3")]]
    assert list(_packages_run("backends.devices", "distributed.world")) == ["distributed"]
    assert list(_packages_run("distributed.group", "distributed.world")) == []
    assert "_native" in _modules() and _layer("_native") == 0


# Inside L7, each op family imports only families to its left (cross-family calls further right
# go through Tensor methods, bound once every family has loaded).
OP_FAMILIES = ["ops._front", "ops.edge_kernels", "ops.elementwise", "ops.elementwise_extras", "ops.complex_ops",
               "ops.bitwise", "ops.shape", "ops.rearrange", "ops.concat_split", "ops.meshgrid", "ops.slicing",
               "ops.triangles", "ops.reduction", "ops.reduction_composites", "ops.activations", "ops.linalg",
               "ops.gather_scatter", "ops.gather_scatter_nd", "ops.data_dependent", "ops.sorting", "ops.indexing",
               "ops.norms", "ops.batch_norm_train", "ops.linear_layer", "ops.row_grad", "ops.embedding_lookup", "ops.losses", "ops.attention_heads", "ops.conv_patches", "ops.conv",
               "ops.attention", "ops.random_ops", "ops.everyday", "ops.everyday_shape", "ops.einsum", "ops.tensor_methods",
               "ops.oneflow_only", "ops.sampling", "ops.adaptive_mean", "ops.resize", "ops.pooling", "ops.conv3d", "ops.extras", "ops.setitem", "ops.inplace",
               "ops.conversion", "ops.oneflow_functional", "ops.oneflow_losses"]


def test_op_families_import_leftward():
    modules = _modules()
    assert set(OP_FAMILIES) <= set(modules)
    assert {m for m in modules if m.startswith("ops.") and _layer(m) == _layer("ops")} <= set(OP_FAMILIES), \
        "a new op family: give it its place in OP_FAMILIES"
    rightward = [f"globaltensor/{m.replace('.', '/')}.py:{line} imports {target}"
                 for m in OP_FAMILIES for target, line, _ in _imports(m, modules[m], modules)
                 if target == "ops" or (target in OP_FAMILIES and OP_FAMILIES.index(target) > OP_FAMILIES.index(m))]
    assert not rightward, "op families importing to their right: " + "; ".join(rightward)
