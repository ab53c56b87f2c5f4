"""The design space handed to MetaSchedule, and which tasks are tvm_ttile's (the contractions recognize.py reads)."""
from __future__ import annotations

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.space_generator import PySpaceGenerator

from ..lowering import problem_of


def ttile_problem(mod, target):
    """(Problem, None) when tvm_ttile can tune `mod` (a conv2d, grouped conv2d, matmul or batch matmul,
    recognized from its computation; e.g. a Relax task), else (None, the one-line reason)."""
    from ..cpu import from_target
    from ..errors import TTileError

    cpu = from_target(target)
    try:
        return problem_of(mod["main"], cpu.isa.name, cpu.lanes, cpu), None
    except TTileError as e:
        return None, str(e)


@derived_object
class TTileSpaceGenerator(PySpaceGenerator):
    """The design space is the unscheduled function: TTile's structure is drawn by TTileSearch. For whole
    networks (tune_relax) keep MetaSchedule's default post-order-apply space instead: TTileSearch ignores the
    design spaces of tvm_ttile tasks, and the other tasks' evolutionary search needs that space's rules."""

    def __init__(self):
        self.sch_rules, self.postprocs, self.mutator_probs = [], [], {}

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def generate_design_space(self, mod):
        return [tvm.s_tir.Schedule(mod)]

    def clone(self):
        return TTileSpaceGenerator()


class _FinishedSchedules(PySpaceGenerator):
    """Design spaces that are finished schedules of the task, for its target's CPU and cores, each measured once
    by DesignSpacesOnce."""

    def __init__(self):
        self.sch_rules, self.postprocs, self.mutator_probs = [], [], {}

    def _initialize_with_tune_context(self, context) -> None:
        from ..cpu import from_target

        self.cpu = from_target(context.target)
        self.threads = int(context.target.attrs.get("num-cores", 1) or 1)


@derived_object
class MemoryBoundSpace(_FinishedSchedules):
    """memory_bound.schedules of the task."""

    def generate_design_space(self, mod):
        from ..memory_bound import schedules

        return [sch for _, sch in schedules(mod, self.cpu.lanes, self.threads)]

    def clone(self):
        return MemoryBoundSpace()


@derived_object
class WinogradSpace(_FinishedSchedules):
    """winograd.schedules of a task holding a Winograd convolution."""

    def generate_design_space(self, mod):
        from ..winograd import schedules

        return [sch for _, sch in schedules(mod, self.cpu.lanes, self.cpu.vector_registers, self.threads)]

    def clone(self):
        return WinogradSpace()


@derived_object
class AttentionSpace(_FinishedSchedules):
    """attention.schedules of a fused attention task."""

    def generate_design_space(self, mod):
        from ..attention import schedules

        return [sch for _, sch in schedules(mod, self.cpu.lanes, self.threads)]

    def clone(self):
        return AttentionSpace()
