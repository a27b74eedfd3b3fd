"""A captured program: registers (the values a step holds) and instructions over them, and its text.

The contract other layers (graph/serialize.py, graph/blocks.py, Paddle's static mode) rely on:
a program is data. An `op` instruction's `name` is the registered op name
(globaltensor.registry.REGISTRY) and its `detail` the op's static attributes (a dict); its `fn` is
rebuilt from (name, detail, the input and output registers' layouts, the rank) by
graph/rebuild.py. A `box` instruction's plan is replanned from its input and output layouts; a
`reduce`'s detail is its mesh axes; `read`/`set`/`grad`/`scalar` name state; `update` is a
registered update op with its attributes; `send`/`recv` carry {"peer", "tag"}. `fn` is a cache
of what the data says (replay binds it), never the only record of an instruction: a program
built as data (Reg(i, kind, layout, None, local_shape, dtype), Instr(kind, name, None, ...))
gets every fn from graph.rebuild.rebuild(program, ProgramState(...), rank). `plain=False` is
always right for an op (its call returns a tuple); True only when the kernel returns its array.
"""
import copy
import math

import numpy as np

from .. import layout as layout_lib
from ..boxing.planning import _text as sbp_text
from . import serialize
from .blocks import Block

# Instruction kinds. Each reads registers `ins` and defines registers `outs`.
#   input    (no instruction: the call's tensors)       read   a state tensor's piece (parameter, buffer)
#   const    a value made during capture (factories)    op     a kernel on local pieces
#   box      a boxing plan (collectives)                 random a draw of the generator (advances it)
#   host     a step outside the dispatcher (a copy)      grad   leaf.grad takes a register
#   set      a state tensor takes a register (in-place)  step   the optimizer's update (and zero_grad)
#   reduce   a leaf's partial gradient summed (all_reduce over the mesh axes where it is partial)
#   start    a bucket's all_reduce starts (async), or   wait   it lands: one register per gradient
#            a parameter's all_gather (name says which)         (or the gathered parameter)
#   scalar   a number read at each replay (lr, step)    update an optimizer's update op, in place
#   send     a piece sent to a peer rank (detail: peer, tag)  recv  a piece received from one
EFFECTS = frozenset({"random", "grad", "set", "step", "start", "wait", "update", "send", "recv"})  # never removed


class Reg:
    """One value of the program: its global layout (None when local), this rank's piece shape
    and dtype, where it comes from, and (during planning only) the array capture saw."""

    __slots__ = ("index", "kind", "layout", "local_shape", "dtype", "array", "escapes", "note", "root", "owns",
                 "numpy", "contiguous", "device")

    def __init__(self, index, kind, layout, array, local_shape=None, dtype=None):
        self.index, self.kind, self.layout, self.array = index, kind, layout, array
        if array is None:  # a register rebuilt from data (graph.load)
            self.local_shape, self.dtype = tuple(local_shape), np.dtype(dtype)
        else:
            self.local_shape, self.dtype = tuple(array.shape), array.dtype
        self.escapes = False  # returned to the caller or kept by a tensor: its buffer is never reused
        self.note = ""
        # buffer facts the passes read (kept when the arrays go): the first register sharing this
        # one's memory, whether the array is no view (base None), and a C-contiguous numpy array
        self.root = index
        self.owns = array is not None and getattr(array, "base", None) is None
        self.numpy = array is None or type(array) is np.ndarray
        self.contiguous = self.numpy and (array is None or array.flags.c_contiguous)
        self.device = "cpu" if array is None or isinstance(array, (np.ndarray, np.generic)) else "cuda"

    @property
    def nbytes(self):
        return math.prod(self.local_shape) * self.dtype.itemsize

    def global_text(self):
        if self.kind == "handle":
            return "pending"
        if self.layout is None:
            return f"{self.local_shape} {self.dtype.name} local"
        lay = self.layout
        return f"{lay.shape} {lay.dtype.name} {sbp_text(lay.sbp)}"

    def local_text(self, rank):
        """The piece shape on `rank` (from the layout: every rank's program has the same steps)."""
        if self.kind == "handle":
            return "pending"
        if self.layout is None:
            return f"{self.local_shape} {self.dtype.name}"
        lay = self.layout
        coord = lay.placement.mesh_coord(rank)
        if coord is None:
            return f"(no piece) {self.dtype.name}"
        return f"{layout_lib.local_shape(lay.shape, lay.placement.hierarchy, lay.sbp, coord)} {self.dtype.name}"


def share_roots(regs):
    """Set each register's root while the arrays are alive: registers sharing memory (a view and
    its base) share the first one's index, so liveness hands out neither buffer."""
    roots = {}
    for reg in regs:
        array = reg.array
        while getattr(array, "base", None) is not None:
            array = array.base
        reg.root = roots.setdefault(id(array), reg.index)


class Instr:
    """One prepared call: fn(*ins) -> outs (a bare array when `plain`, else a tuple)."""

    __slots__ = ("kind", "name", "fn", "ins", "outs", "plain", "detail", "reuse", "drops", "target", "hints")

    def __init__(self, kind, name, fn, ins, outs, plain=False, detail=None, target=None, hints=None):
        self.kind, self.name, self.fn, self.ins, self.outs = kind, name, fn, list(ins), list(outs)
        self.plain, self.detail, self.target = plain, detail, target
        self.hints = hints  # an op's layout hints for its kernel ({"order": "F"}: a column-major piece)
        self.reuse = None  # a register whose dead buffer this op writes into (liveness pass)
        self.drops = []  # registers whose last use is here (liveness pass)

    def __repr__(self):
        return f"Instr({self.kind} {self.name} {self.ins} -> {self.outs})"


class Program:
    """The registers and instructions of one captured signature, with what planning reported."""

    def __init__(self, regs, instrs, inputs, outputs, label, rank=None, roles=None):
        self.regs, self.instrs, self.inputs, self.outputs = regs, instrs, inputs, outputs
        self.label = label
        self.report = {}  # pass name -> what it did (counts, bytes)
        self.fn = self.source = None  # the replay function and its source (replay.compile_program)
        self.rank = rank  # the rank whose pieces the registers describe (None: this process's)
        self.roles = roles  # split_by_role: {role: [ranks]}; None for an SPMD program
        self.captured = None  # the program before planning (passes change a program in place)
        self.tree = None  # the output tree of the call captured (graph.py), None: a tuple of outputs

    def copy(self, label=None):
        """A copy that passes may change: new instructions and registers (fns are shared)."""
        regs = [copy.copy(reg) for reg in self.regs]
        instrs = [Instr(i.kind, i.name, i.fn, i.ins, i.outs, i.plain, _copied(i.detail), i.target, i.hints)
                  for i in self.instrs]
        out = Program(regs, instrs, list(self.inputs), list(self.outputs), label or self.label, self.rank,
                      self.roles)
        out.tree = self.tree
        return out

    def unplanned(self):
        """The program as captured, before the planning passes (what save and the program passes take)."""
        return self.captured if self.captured is not None else self

    def save(self, path, state=None):
        """Write the program (its captured form) and the pieces of the state it reads to directory
        `path`, this rank's part (graph/serialize.py; every rank calls it). `state`: {name: tensor}
        in place of the tensors its reads name."""
        serialize.export(self, state, path)

    def global_block(self):
        """Paddle's view: the block of ops (graph/blocks.py)."""
        return Block(self)

    def uses(self):
        """{register: [instruction positions that read it]}."""
        found = {}
        for i, ins in enumerate(self.instrs):
            for r in ins.ins:
                found.setdefault(r, []).append(i)
        return found

    def count(self, kind=None, name=None):
        return sum(1 for ins in self.instrs if (kind is None or ins.kind == kind) and (name is None or ins.name == name))

    def collectives(self):
        """The collectives one replay runs on this rank, in order (kind names)."""
        found = []
        for ins in self.instrs:
            if ins.kind == "box":
                found += [s.kind.collective for s in ins.detail.steps if s.kind.collective]
            elif ins.kind == "start":
                found.append(ins.name)  # a bucket's all_reduce, a prefetched all_gather
            elif ins.kind == "reduce":
                found.append("all_reduce")
            elif ins.kind in ("send", "recv"):
                found.append(ins.kind)
        return found

    # --- text ---------------------------------------------------------------------------------
    def text(self, rank=None):
        """The serial program (global shapes and SBPs), or rank's (piece shapes, collectives,
        buffer reuse, frees) when rank is given."""
        regs = self.regs
        head = f"program {self.label}: {len(self.inputs)} inputs, {len(self.instrs)} steps"
        if rank is not None:
            head += f", rank {rank}"
            if "liveness" in self.report:
                rep = self.report["liveness"]
                head += f", peak {rep['peak_bytes']} bytes ({rep['peak_bytes_without_reuse']} without buffer reuse)"
        lines = [head]
        shape = (lambda r: regs[r].global_text()) if rank is None else (lambda r: regs[r].local_text(rank))
        for j, r in enumerate(self.inputs):
            lines.append(f"  %{r} = input {j}: {shape(r)}")
        for ins in self.instrs:
            args = ", ".join(f"%{r}" for r in ins.ins)
            outs = ", ".join(f"%{r}" for r in ins.outs)
            lhs = f"{outs} = " if outs else ""
            what = _describe(ins, args)
            typed = "; ".join(shape(r) for r in ins.outs)
            line = f"  {lhs}{what}" + (f" : {typed}" if typed else "")
            if rank is not None:
                if ins.reuse is not None:
                    line += f"  [in the buffer of %{ins.reuse}]"
                if ins.drops:
                    line += "  [free " + ", ".join(f"%{r}" for r in ins.drops) + "]"
            lines.append(line)
        lines.append("  return " + ", ".join(f"%{r}" for r in self.outputs))
        if self.report:
            lines.append("  passes: " + "; ".join(f"{k}: {_report_text(v)}" for k, v in self.report.items()))
        return "\n".join(lines)


def _copied(detail):
    """A dict or list detail copied (passes may change it); a plan is shared (boxing fusion keys on its identity)."""
    return copy.copy(detail) if isinstance(detail, (dict, list)) else detail


_FORMS = {  # how an instruction reads, by kind (ops and conversions are written out below)
    "read": "state {name}", "const": "constant {name}", "grad": "{name}.grad = {args}", "set": "{name} <- {args}",
    "step": "{name}()", "scalar": "scalar {name}", "reduce": "all_reduce({args}) over mesh axes {detail}",
    "start": "{name}_start({args}) [{detail}]", "wait": "{name}_wait({args})",
    "send": "send({args}) [{detail}]", "recv": "recv() [{detail}]", "random": "{name}()",
}


def _describe(ins, args):
    form = _FORMS.get(ins.kind)
    if form is not None:
        return form.format(name=ins.name, args=args, detail=ins.detail)
    if ins.kind == "box":
        p = ins.detail
        what = f"to_global({args}) {sbp_text(p.src_sbp)} -> {sbp_text(p.dst_sbp)}"
        if p.dst_placement != p.src_placement:
            what += f" on {p.dst_placement}"
        steps = [s.kind.name + ("" if s.mesh_dim is None else f"@{s.mesh_dim}") for s in p.steps]
        return what + (f" [{', '.join(steps)}]" if steps else "")
    static = ins.detail or {}
    extra = "".join(f", {k}={_short(v)}" for k, v in static.items()) if isinstance(static, dict) else ""
    return f"{ins.name}({args}{extra})"


def _short(value):
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."


def _report_text(value):
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)
