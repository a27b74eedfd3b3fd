"""The core's layers (docs/architecture.md, "Layers"): every import of a globaltensor module, at
the top of a file or inside a function, goes to the same layer or one below. An upward edge
fails here, with the file and line."""
import ast
import os

import globaltensor

ROOT = os.path.dirname(globaltensor.__file__)

# Bottom to top; a module belongs to the longest prefix that names it.
LAYERS = [
    ("L0 values", ["_C", "sbp", "layout", "dtype", "random", "hooks"]),
    ("L1 the job", ["env", "placement", "backends", "distributed"]),
    ("L2 tensor", ["tensor"]),
    ("L3 creation and conversion", ["creation", "boxing"]),
    ("L4 autograd", ["autograd"]),
    ("L5 op registry", ["ops.registry", "ops.rules", "ops.keywords"]),
    ("L6 dispatch", ["dispatch"]),
    ("L7 ops", ["ops"]),
    ("L8 parallel training and graphs", ["grad_buckets", "data_parallel", "pipeline", "graph"]),
    ("L9 libraries", ["nn", "optim", "serialization", "debug", "utils", "memory", "jit"]),
    ("L10 the package", [""]),
    ("L11 faces", ["paddle"]),
]

def _modules():
    found = {}
    for folder, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), ROOT)[:-3].replace(os.sep, ".")
                found[rel[:-len(".__init__")] if rel.endswith("__init__") else rel] = os.path.join(folder, f)
    found["_C"] = None
    found[""] = os.path.join(ROOT, "__init__.py")
    return {("" if k == "__init__" else k): v for k, v in found.items()}


def _layer(module):
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if module == p or (p and module.startswith(p + ".")):
                if best is None or len(p) > best[1]:
                    best = (i, len(p))
    assert best is not None, f"globaltensor.{module} is in no layer: add it to LAYERS"
    return best[0]


def _imports(module, path, modules):
    """(imported module, line) for every globaltensor import in the file, nested ones too."""
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = parts[:len(parts) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").startswith("globaltensor"):
                target = node.module[len("globaltensor") + 1:]
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                yield (sub if sub in modules else target), node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("globaltensor."):
                    yield alias.name[len("globaltensor."):], node.lineno


def _upward_edges():
    modules = _modules()
    edges = {}
    for module, path in modules.items():
        if path is None:
            continue
        for target, line in _imports(module, path, modules):
            if target not in modules or target == module or target.startswith(module + "."):
                continue
            if _layer(target) > _layer(module):
                edges.setdefault((module, target), []).append(line)
    return edges


def test_no_import_goes_up_a_layer():
    edges = _upward_edges()
    assert not edges, "imports that go up a layer (file: line): " + "; ".join(
        f"globaltensor/{a.replace('.', '/')}.py:{lines} imports {b} ({LAYERS[_layer(b)][0]} above "
        f"{LAYERS[_layer(a)][0]})" for (a, b), lines in sorted(edges.items()))



# Inside L7, each op family imports only families to its left (cross-family calls further right
# go through Tensor methods, bound once every family has loaded).
OP_FAMILIES = ["ops._front", "ops.elementwise", "ops.bitwise", "ops.shape", "ops.concat_split", "ops.slicing",
               "ops.triangles", "ops.reduction", "ops.reduction_composites", "ops.activations", "ops.linalg",
               "ops.gather_scatter", "ops.gather_scatter_nd", "ops.data_dependent", "ops.sorting", "ops.indexing",
               "ops.norms", "ops.linear_layer", "ops.embedding_lookup", "ops.losses", "ops.attention_heads", "ops.conv",
               "ops.attention", "ops.random_ops", "ops.inplace", "ops.conversion"]


def test_op_families_import_leftward():
    modules = _modules()
    assert set(OP_FAMILIES) <= set(modules)
    assert {m for m in modules if m.startswith("ops.") and _layer(m) == _layer("ops")} <= set(OP_FAMILIES), \
        "a new op family: give it its place in OP_FAMILIES"
    rightward = [f"globaltensor/{m.replace('.', '/')}.py:{line} imports {target}"
                 for m in OP_FAMILIES for target, line in _imports(m, modules[m], modules)
                 if target == "ops" or (target in OP_FAMILIES and OP_FAMILIES.index(target) > OP_FAMILIES.index(m))]
    assert not rightward, "op families importing to their right: " + "; ".join(rightward)
