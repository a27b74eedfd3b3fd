"""What a OneFlow test file says about its tests before running them: ids, the job shape each needs, and whether it needs a GPU or is off in OneFlow itself."""
import ast
import re

SHAPE = re.compile(r"skip_unless_(\d)n(\d)d")
# Device words in a test's code and the module-level helpers it calls. `.cpu()` is left out of CPU:
# CUDA tests call it to read results back.
CUDA = re.compile(r"""["']cuda|\.cuda\(|cuda_placement|gpu_device|random_gpu|flow\.cuda\.|device_type=["']cuda""")
CPU = re.compile(r"""["']cpu|all_placement\(|random_placement\(|all_cpu_placement|random_cpu_placement|random_device\(|cpu_device\(""")
GPU_MARK = "ONEFLOW_TEST_CPU_ONLY"
EXPECTS = re.compile(r"assertRaises(?:Regex)?\(\s*(?:\w+\.)*(\w+)")  # the exception classes a test expects


def _decorators(node, source):
    return [ast.get_source_segment(source, d) or "" for d in getattr(node, "decorator_list", [])]


def _disabled(decorators):
    """OneFlow's own switch-off: @unittest.skip(...) or skipIf(True, ...)."""
    for d in decorators:
        if re.match(r"(unittest\.)?skip\(", d) or re.match(r"(unittest\.)?skipIf\(\s*True", d):
            m = re.search(r"""["'](.*?)["']""", d)
            return f"disabled in OneFlow: {m.group(1) if m else d}"
    return None


def _called_names(node):
    return {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _closure_text(node, functions, source, depth=3):
    """The source of a test and of the module-level functions it calls, `depth` calls deep."""
    seen, frontier, texts = set(), [node], []
    for _ in range(depth + 1):
        nxt = []
        for fn in frontier:
            texts.append(ast.get_source_segment(source, fn) or "")
            for name in _called_names(fn):
                if name in functions and name not in seen:
                    seen.add(name)
                    nxt.append(functions[name])
        frontier = nxt
    return "\n".join(texts)


def _needs_gpu(decorators, text):
    if any(GPU_MARK in d for d in decorators):
        return "OneFlow marks it CUDA-only (skipIf ONEFLOW_TEST_CPU_ONLY)"
    body = re.sub(r"#.*", "", text)
    if CUDA.search(body) and not CPU.search(body):
        return "uses only CUDA devices"
    return None


def tests_of(path, name):
    """[{id, shape: (nodes, devices) or None, gpu, disabled: why or None, expects: [exception classes]}] for every test in the file."""
    source = open(path).read()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found = []

    def add(test_id, node, outer):
        decorators = outer + _decorators(node, source)
        shapes = [tuple(map(int, m.groups())) for d in decorators for m in [SHAPE.search(d)] if m]
        text = _closure_text(node, functions, source)
        found.append({"id": test_id, "shape": shapes[-1] if shapes else None, "gpu": _needs_gpu(decorators, text),
                      "disabled": _disabled(decorators), "expects": sorted(set(EXPECTS.findall(text)))})

    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):  # a name defined again: the last
            found[:] = [t for t in found if t["id"].split("::")[1] != node.name]  # one is the module's (pytest's)
        if isinstance(node, ast.ClassDef):
            outer = _decorators(node, source)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    add(f"{name}::{node.name}::{item.name}", item, outer)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            add(f"{name}::{node.name}", node, [])
    return found
