"""docs/paddle.md's account of Paddle's API index (docs/targets/paddle-api-index.txt): every name,
where globaltensor.paddle has it, or why not. The reasons are data here; the table is written
between the markers in docs/paddle.md, and tests/faces/test_paddle_index.py checks it is current.

    python docs/paddle_index.py            # rewrite the table
    python docs/paddle_index.py --check    # exit 1 when the table is stale
"""
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INDEX = os.path.join(HERE, "targets", "paddle-api-index.txt")
DOC = os.path.join(HERE, "paddle.md")
START, END = "<!-- paddle-index:start -->", "<!-- paddle-index:end -->"

# where a section's names are looked for, in order (the index's sections, split by '-' lines)
SECTIONS = [
    ("paddle (the top level)", ["paddle", "paddle.fluid"]),
    ("fluid layers and dygraph (Paddle 1.x)", ["paddle", "paddle.nn.functional", "paddle.nn", "paddle.static.nn",
                                               "paddle.fluid.layers"]),
    ("paddle.nn.functional, paddle.nn and paddle.static", ["paddle.nn.functional", "paddle.nn", "paddle.static",
                                                           "paddle"]),
    ("paddle.vision.transforms", []),
]

FLUID = ("Paddle 1.x fluid.layers / dygraph name, superseded in Paddle 2.0 by paddle.* and paddle.nn; "
         "not built under this name")
VISION = ("image transforms (paddle.vision) are not part of a tensor runtime: transform with numpy/PIL before the "
          "DataLoader")
STATIC_INTERNALS = ("Paddle's static-graph executor internals: a static program here is graph instructions run "
                    "by graph replay (see Static mode)")
LOD = "LoD tensors and the fluid data feeders (Paddle 1.x) are not built: feed numpy arrays"
RNN = "recurrent layers (RNN, LSTM, GRU and their cells) are not built"
TRANSFORMER = ("not built under Paddle's conventions (batch first, bool masks whose True keeps a position): "
               "gt.nn's TransformerEncoderLayer and friends are PyTorch's")
NOT_YET = "not built yet"

REASONS = {
    "flops": "FLOP counting is not built (paddle.summary is)",
    "Model": "the high-level API (paddle.Model: fit / evaluate / predict) is not built: write the loop (tutorial 11)",
    "XPUPlace": "no Baidu XPU support (cpu and cuda placements)",
    "cuda_pinned_places": LOD, "create_lod_tensor": LOD, "create_random_int_lodtensor": LOD, "DataFeedDesc": LOD,
    "DataFeeder": LOD,
    **{n: RNN for n in ("GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCellBase", "SimpleRNN", "SimpleRNNCell",
                        "gather_tree")},
    **{n: TRANSFORMER for n in ("Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
                                "TransformerEncoderLayer")},
    **{n: STATIC_INTERNALS for n in ("append_backward", "BuildStrategy", "CompiledProgram", "create_global_var",
                                     "create_parameter", "deserialize_persistables", "deserialize_program",
                                     "ExecutionStrategy", "global_scope", "gradients", "InputSpec", "load_from_file",
                                     "load_inference_model", "load_program_state", "name_scope", "ParallelExecutor",
                                     "py_func", "save_inference_model", "save_to_file", "scope_guard",
                                     "serialize_persistables", "serialize_program", "set_program_state")},
    **{n: "1-D and 3-D pooling and convolution, and transposed convolutions, are not built (2-D pooling, Conv1D "
          "and Conv2D are)"
       for n in ("adaptive_avg_pool1d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
                 "adaptive_max_pool3d", "avg_pool1d", "avg_pool3d", "conv1d_transpose", "conv2d_transpose", "conv3d",
                 "conv3d_transpose", "max_pool1d", "max_pool3d", "MaxPool1D", "MaxPool3D")},
    **{n: "resampling and padding layers are not built" for n in (
        "affine_grid", "grid_sample", "interpolate", "upsample", "Upsample", "UpsamplingBilinear2D",
        "UpsamplingNearest2D", "pad", "Pad1D", "Pad2D", "Pad3D", "pixel_shuffle", "PixelShuffle", "unfold",
        "temporal_shift")},
    **{n: "instance, local-response and spectral normalization are not built (BatchNorm, LayerNorm and GroupNorm are)"
       for n in ("instance_norm", "InstanceNorm1D", "InstanceNorm2D", "InstanceNorm3D", "local_response_norm",
                 "LocalResponseNorm", "SpectralNorm", "WeightNormParamAttr")},
}


def names_by_section():
    sections, current = [], []
    for line in open(INDEX):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line == "-":
            sections.append(current)
            current = []
        else:
            current.append(line)
    return sections + [current]


def where(name, modules):
    """The first module (as paddle.x) that has `name`, else None."""
    for module in modules:
        found = importlib.import_module("globaltensor.paddle" + module[len("paddle"):])
        if hasattr(found, name):
            return f"{module}.{name}"
    return None


def status(section, name):
    """(found, text): where the name is, or why it is absent."""
    title, modules = SECTIONS[section]
    found = where(name, modules)
    if found:
        return True, f"`{found}`"
    reason = REASONS.get(name) or {1: FLUID, 3: VISION}.get(section) or NOT_YET
    return False, "absent: " + reason


def table():
    lines = []
    for section, names in enumerate(names_by_section()):
        rows = [(name,) + status(section, name) for name in names]
        have = sum(found for _, found, _ in rows)
        lines += ["", f"### {SECTIONS[section][0]}: {have} of {len(rows)} names", "", "| name | here |", "|---|---|"]
        lines += [f"| `{name}` | {text} |" for name, _, text in rows]
    return "\n".join(lines) + "\n"


def render(doc):
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table()}{END}{tail}"


def main(argv):
    sys.path.insert(0, os.path.dirname(HERE))
    doc = open(DOC).read()
    new = render(doc)
    if "--check" in argv:
        return 0 if new == doc else 1
    with open(DOC, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
