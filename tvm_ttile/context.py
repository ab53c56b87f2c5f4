"""The one value a tuning run is made in: the CPU, the thread count and the target they give, the precision, the
timing settings, the seed, weight prepacking and the work dir. The CLI and the public entry points make it once
(`Context.make`) and pass it down; everything a work dir's timings depend on is in its `key`."""
from __future__ import annotations

import dataclasses
import functools

from . import cpu as cpu_mod
from . import precision as precision_mod
from .errors import TTileError
from .measure import MeasureSettings
from .workdir import WorkDir, claim, work_key

# The precisions a run can ask for (precision.PRECISIONS); one the CPU lacks is refused in one line
# (Context.make), never faked.
PRECISIONS = tuple(precision_mod.PRECISIONS)


@dataclasses.dataclass(frozen=True)
class Context:
    cpu: cpu_mod.CPUModel
    threads: int = 1
    precision: str = "fp32"
    settings: MeasureSettings = dataclasses.field(default_factory=MeasureSettings)
    seed: int = 0
    prepack: bool = True
    work_dir: str | None = None

    @classmethod
    def make(cls, *, cpu=None, threads: int = 1, precision: str = "fp32", settings: MeasureSettings | None = None,
             seed: int = 0, prepack: bool = True, work_dir: str | None = None) -> "Context":
        """A context on `cpu` (the host's by default), refused in one line when the thread count is not a whole
        number >= 1 or the precision is unknown; TVM's thread pool is sized for `threads` here (it is sized once
        per process). Code for another CPU can be compiled in it; `check_runs_here` before measuring."""
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise TTileError(f"threads must be a whole number >= 1, got {threads!r}")
        if precision not in PRECISIONS:
            raise TTileError(f"precision {precision!r} is not supported; choose from {', '.join(PRECISIONS)}")
        cpu = cpu or cpu_mod.detect_host()
        precision_mod.require(precision, cpu)
        cpu_mod.use_threads(threads)
        return cls(cpu, threads, precision, settings or MeasureSettings(), int(seed), bool(prepack),
                   None if work_dir is None else str(work_dir))

    @functools.cached_property
    def dot(self) -> precision_mod.DotProduct:
        """The instruction this context's precision is computed with on its CPU."""
        return precision_mod.require(self.precision, self.cpu)

    @functools.cached_property
    def target(self):
        """The TVM target of this CPU and thread count, with what the precision's instruction needs."""
        return self.cpu.target(self.threads, self.dot.mattr)

    def check_runs_here(self) -> None:
        """Refuse in one line when this host cannot run the context's code (so it cannot be measured here)."""
        cpu_mod.check_runs_here(self.cpu)

    @property
    def dirs(self) -> WorkDir:
        """The work dir's file names."""
        if self.work_dir is None:
            raise TTileError("this run has no work dir")
        return WorkDir(self.work_dir)

    def key(self) -> dict:
        """Everything the work dir's timings depend on (workdir.claim compares it). fp32 is left out, so that
        work dirs tuned before precisions existed keep their keys."""
        return work_key(self.target, self.threads, self.settings, self.cpu, self.precision)

    def claim(self) -> None:
        """Make the work dir this context's, or refuse in one line when it holds timings for another."""
        claim(self.dirs.path, self.key())

    def replace(self, **changes) -> "Context":
        return dataclasses.replace(self, **changes)


def resolve(context: Context | None = None, defaults: dict | None = None, **given) -> Context:
    """`context` with the options a caller passed one by one (None: not given) put in; without a context, one
    made from them over `defaults` (Context.make). What public functions call first, so that loose options
    still work."""
    given = {k: v for k, v in given.items() if v is not None}
    if context is None:
        return Context.make(**{**(defaults or {}), **given})
    if not isinstance(context, Context):
        raise TTileError(f"expected a tvm_ttile Context, got {type(context).__name__}: pass cpu= for a CPU model")
    return context.replace(**given) if given else context
