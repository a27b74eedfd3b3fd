"""Graph mode: capture a step once per input signature, plan it whole, replay it (SPEC §9)."""
from .capture import CaptureError
from .config import GraphConfig
from .graph import Graph, Traced, trace
from .program import Instr, Program, Reg
from .rebuild import ProgramState
from .saved import LoadedProgram, export, load, runnable, save

__all__ = ["CaptureError", "Graph", "GraphConfig", "Instr", "LoadedProgram", "Program", "ProgramState", "Reg",
           "Traced", "export", "load", "runnable", "save", "trace"]
