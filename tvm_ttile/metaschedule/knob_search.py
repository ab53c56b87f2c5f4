"""G-BFS and N-A2C (strategies.SEARCHES) as a MetaSchedule search strategy over a design space's knobs: each
SamplePerfectTile decision of the design space's trace is a Tile coordinate, each SampleCategorical one a Category
coordinate (strategies.neighbours.KnobLandscape). A state is replayed on the trace with its decisions and the space
generator's postprocessors, as MetaSchedule's own replay does. Made for the AutoTVM-style templates
(baselines/templates.py), whose knobs are exactly these decisions; it takes any design space with one trace."""
from __future__ import annotations

import statistics

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.search_strategy import MeasureCandidate, PySearchStrategy

from ..errors import TTileError
from .database import records_of

KNOBS = ("SamplePerfectTile", "SampleCategorical")


def knob_insts(trace) -> list:
    return [inst for inst in trace.insts if inst.kind.name in KNOBS]


def knob_landscape(trace):
    """(KnobLandscape, the sampling instructions in order) of a design space's trace."""
    from ..strategies.neighbours import Category, KnobLandscape, Tile

    insts, coords = knob_insts(trace), []
    for inst in insts:
        decision = trace.decisions[inst]
        if inst.kind.name == "SamplePerfectTile":
            extent = 1
            for f in decision:
                extent *= int(f)
            coords.append(Tile(extent, int(inst.attrs[0]), max(int(inst.attrs[1]), 0)))
        else:
            coords.append(Category(len(inst.attrs[0])))
    return KnobLandscape(coords), insts


def state_of(trace, n: int):
    """The knob values of a measured record's trace (its first n sampling instructions)."""
    out = []
    for inst in knob_insts(trace)[:n]:
        d = trace.decisions[inst]
        out.append(tuple(int(f) for f in d) if inst.kind.name == "SamplePerfectTile" else int(d))
    return tuple(out) if len(out) == n else None


def replay(mod, trace, insts, state, postprocs=()):
    """The design space's `trace` with the knob values of `state` (one per sampling instruction of `insts`) applied
    to `mod`, then `postprocs`; None when a postprocessor rejects it."""
    for inst, value in zip(insts, state):
        trace = trace.with_decision(inst, list(value) if isinstance(value, tuple) else value, True)
    sch = tvm.s_tir.Schedule(mod)
    trace.apply_to_schedule(sch, remove_postproc=True)
    sch.enter_postproc()
    for post in postprocs:
        if not post.apply(sch):
            return None
    return sch


@derived_object
class KnobSearch(PySearchStrategy):
    """search: "gbfs" or "na2c"; options: the search's (strategies.SEARCHES[search].OPTIONS). Records of the
    workload already in the database resume the search: none is measured again."""

    def __init__(self, search: str = "gbfs", seed: int = 0, options: dict | None = None):
        from ..strategies import SEARCHES

        if search not in SEARCHES:
            raise TTileError(f"unknown search {search!r}; choose from {', '.join(SEARCHES)}")
        self.search_name, self.seed, self.search_options = search, seed, dict(options or {})
        unknown = set(self.search_options) - set(SEARCHES[search].OPTIONS)
        if unknown:
            raise TTileError(f"search {search!r} has no option(s) {sorted(unknown)}; it has "
                             f"{sorted(SEARCHES[search].OPTIONS)}")

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod
        self.postprocs = list(context.space_generator.postprocs or [])

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        from ..strategies import SEARCHES

        if len(design_spaces) != 1:
            raise TTileError(f"{self.search_name} walks one design space's knobs; got {len(design_spaces)} spaces")
        self.trace = design_spaces[0].trace
        self.land, self.insts = knob_landscape(self.trace)
        self.search = SEARCHES[self.search_name](self.land, self.seed, **self.search_options)
        measured = []
        for rec in records_of(database, self.mod):
            state = state_of(rec.trace, len(self.insts))
            if state is not None and rec.run_secs:
                measured.append((state, statistics.median(float(s) for s in rec.run_secs)))
        self.search.resume(measured)
        self.per_iter, self.left = num_trials_per_iter, max_trials
        self.pending = []

    def schedule(self, state):
        """The schedule of a state, postprocessed; None when a postprocessor rejects it."""
        return replay(self.mod, self.trace, self.insts, state, self.postprocs)

    def generate_measure_candidates(self):
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        batch, self.pending = [], []
        while not batch and self.left > 0:
            states = self.search.ask(min(self.per_iter, self.left))
            if not states:
                break
            for state in states:
                sch = self.schedule(state)
                if sch is None:  # outside the space (the paper's J = 0): told at once, never built
                    self.search.tell([state], [None])
                    continue
                self.pending.append(state)
                batch.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
        self.left -= len(batch)
        return batch or None

    def notify_runner_results(self, measure_candidates, results) -> None:
        seconds = []
        for res in results:
            secs = [float(x) for x in res.run_secs] if res.run_secs else []
            ok = bool(secs) and res.error_msg is None and min(secs) < 1e9
            seconds.append(statistics.median(secs) if ok else None)
        self.search.tell(self.pending[:len(seconds)], seconds)

    def post_tuning(self) -> None:
        import logging

        for note in self.search.notes:  # restarts: the walk found no unvisited neighbour left
            logging.getLogger(__name__).warning("%s: %s", self.search_name, note)

    def clone(self):
        return KnobSearch(self.search_name, self.seed, self.search_options)
