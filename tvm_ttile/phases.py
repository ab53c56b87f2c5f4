"""Where a run's wall time goes, by phase. Phases are timed exclusively: one entered inside another pauses the
outer one, so the phases of a run add up to its wall time (what no phase claims is reported as untracked).

    with recording() as clock:            # a whole run, e.g. tune_model
        with phase("import"):
            ...
    clock.to_json()                       # {"phases": {"import": 1.2, ...}, "wall_seconds": ..., ...}

Code deep in the run (a catalog measured on first use) names its phase with `phase(...)` without being handed
the clock; outside a recording it costs nothing.
"""
from __future__ import annotations

import contextlib
import contextvars
import time

# Every phase a run records, in the order a network's run meets them, with what it holds (the report's legend).
PHASES = {
    "import": "reading the model and preparing it (layouts, quantized and bf16 rewrites)",
    "extraction": "extracting the tasks (and their Winograd forms)",
    "peaks": "measuring the CPU's peaks and bandwidth (cached per CPU; measured again once per process)",
    "catalogs": "measuring microkernel catalogs (cached per CPU: only a first run, or a new microkernel)",
    "record library": "looking records up in the per-CPU record library and adding the run's to it",
    "tuning tvm_ttile": "building and timing the candidates of conv2d / matmul tasks",
    "tuning winograd": "building and timing the Winograd forms' schedules",
    "tuning attention": "building and timing the fused attention's schedules",
    "tuning metaschedule": "building and timing the memory-bound tasks' schedules (and MetaSchedule's search)",
    "tuning automcl": "AutoMCL's dense layers",
    "zero-trial picks": "ranking each task's schemes and lowering the top one, nothing timed",
    "confirm-top": "re-timing each task's fastest candidates together",
    "verification": "checking each task's best against the untuned function",
    "winograd choice": "choosing direct or Winograd per layer",
    "final build": "building the network with the records",
    "in-network picks": "timing each task's top candidates inside the running network",
    "reference build": "building and running the untuned network (the correctness reference)",
    "metaschedule network": "MetaSchedule's own tuning of the network (when asked)",
    "profile": "timing the built network call by call, and its functions alone",
    "library timings": "the libraries' outputs and every system's latency, each in its own process",
    "fp32 agreement": "the build and the libraries against the fp32 model over many inputs",
    "report": "writing the report",
}


# The phases that check and compare a finished build (tune-model's correctness reference, the libraries, the
# report), not needed to make it: a run's time to a tuned build leaves them out (build_seconds).
COMPARISONS = frozenset({"reference build", "metaschedule network", "profile", "library timings", "fp32 agreement",
                         "report"})


def build_seconds(breakdown: dict) -> float:
    """The wall seconds of a run (PhaseClock.to_json) up to its tuned build: all but COMPARISONS."""
    return round(breakdown.get("wall_seconds", 0.0) - sum(v for k, v in breakdown.get("phases", {}).items()
                                                          if k in COMPARISONS), 3)


class PhaseClock:
    """Wall seconds by phase, exclusive of the phases entered inside each."""

    def __init__(self):
        self.seconds: dict = {}
        self._open: list = []  # [phase, since] of every phase entered and not left, innermost last
        self._started = time.perf_counter()

    @contextlib.contextmanager
    def phase(self, name: str):
        if name not in PHASES:
            raise KeyError(f"unknown phase {name!r}; known: {', '.join(PHASES)}")
        now = time.perf_counter()
        if self._open:
            self._charge(now)
        self._open.append([name, now])
        try:
            yield
        finally:
            now = time.perf_counter()
            self._charge(now)
            self._open.pop()
            if self._open:
                self._open[-1][1] = now

    def _charge(self, now: float) -> None:
        name, since = self._open[-1]
        self.seconds[name] = self.seconds.get(name, 0.0) + now - since
        self._open[-1][1] = now

    @property
    def wall_seconds(self) -> float:
        return time.perf_counter() - self._started

    def to_json(self) -> dict:
        """The phases in PHASES' order, the wall time since the clock started and what no phase holds."""
        wall = self.wall_seconds
        phases = {name: round(self.seconds[name], 3) for name in PHASES if name in self.seconds}
        out = {"phases": phases, "wall_seconds": round(wall, 3),
               "untracked_seconds": round(wall - sum(self.seconds.values()), 3)}
        return {**out, "build_seconds": build_seconds(out)}


_CLOCK: contextvars.ContextVar = contextvars.ContextVar("tvm_ttile_phase_clock", default=None)


@contextlib.contextmanager
def recording(clock: PhaseClock | None = None):
    """Make `clock` (a new one by default) the run's clock for the duration; a recording already open is kept
    (a tune_network inside a tune_model charges the same clock)."""
    held = _CLOCK.get()
    if held is not None:
        yield held
        return
    clock = clock or PhaseClock()
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


def active() -> PhaseClock | None:
    """The clock of the run being recorded, or None."""
    return _CLOCK.get()


def phase(name: str):
    """A context charging its wall time to phase `name` of the run being recorded (none: nothing)."""
    clock = _CLOCK.get()
    if clock is None:
        if name not in PHASES:
            raise KeyError(f"unknown phase {name!r}; known: {', '.join(PHASES)}")
        return contextlib.nullcontext()
    return clock.phase(name)


def format_phases(breakdown: dict) -> list:
    """Markdown lines of a run's phases (PhaseClock.to_json), longest first, with their shares of the wall."""
    wall = breakdown.get("wall_seconds") or 0.0
    rows = sorted(breakdown.get("phases", {}).items(), key=lambda kv: -kv[1])
    rows.append(("untracked", breakdown.get("untracked_seconds", 0.0)))
    lines = ["| phase | seconds | share of the run | what it is |", "|---|---:|---:|---|"]
    for name, secs in rows:
        share = f"{100 * secs / wall:.1f}%" if wall else "-"
        lines.append(f"| {name} | {secs:.1f} | {share} | {PHASES.get(name, 'time no phase claims')} |")
    lines.append(f"| **run** | **{wall:.1f}** | 100% | |")
    built = build_seconds(breakdown)
    lines.append(f"| to the tuned build | {built:.1f} | {100 * built / wall if wall else 0:.1f}% | the run without "
                 f"checking and comparing it ({', '.join(sorted(COMPARISONS))}) |")
    return lines
