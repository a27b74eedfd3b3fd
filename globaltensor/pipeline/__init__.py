"""Pipeline parallelism: stages on placements, micro-batches run in a schedule's order (SPEC §8)."""
from .engine import Pipeline, PipelineError
from .schedules import GPipe, Interleaved1F1B, OneFOneB, ScheduleError

__all__ = ["Pipeline", "PipelineError", "GPipe", "OneFOneB", "Interleaved1F1B", "ScheduleError"]
