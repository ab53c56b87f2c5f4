"""Build and time IRModules through MetaSchedule's builder and runner.

Builds run in parallel worker processes; timing runs one at a time in the runner's single worker, so
builds never disturb a timing. The build function does not import `tvm.s_tir.tensor_intrin` (30-45 s
per worker here, see ENVIRONMENT.md): modules arrive already tensorized.
"""
from __future__ import annotations

import dataclasses
import statistics

from .progress import Progress


def build_module(mod, target, _params=None):
    """MetaSchedule f_build: tvm.compile (module-level so worker processes can import it), without the
    weight-packing blocks, which run once at build time in a network (as MetaSchedule's own builder does)."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm.compile(mod, target=target).mod  # the runtime Module, which f_export can export


def timing_args(mod, seed: int = 0) -> list:
    """Random tensors for every parameter of mod's main as build_module compiles it (prepacked weights in
    their packed shape, the output included), for time_evaluator."""
    import numpy as np
    import tvm
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    rng = np.random.default_rng(seed)
    return [tvm.runtime.tensor(rng.standard_normal([int(x) for x in a.shape]).astype(a.dtype), tvm.cpu())
            for a in ArgInfo.from_entry_func(mod, remove_preproc=True)]


@dataclasses.dataclass
class Measurement:
    seconds: list  # one entry per repeat (each an average over `number` calls)
    error: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None


@dataclasses.dataclass(frozen=True)
class MeasureSettings:
    number: int = 5
    repeat: int = 5
    min_repeat_ms: int = 20
    build_workers: int = 2
    timeout_sec: float = 60.0
    chunk: int = 32  # builder pool restarts per chunk (MetaSchedule does so per batch)
    # Flush the CPU caches before every timed call (every argument but the first, the input): a layer meets its
    # weights cold in a network whose weights outgrow the last-level cache. One call per repeat then.
    cache_flush: bool = False

    def describe(self) -> dict:
        return dataclasses.asdict(self)

    def evaluator_config(self):
        from tvm.s_tir import meta_schedule as ms

        if self.cache_flush:  # (time_evaluator flushes once per repeat: more calls per repeat would be hot)
            return ms.runner.EvaluatorConfig(number=1, repeat=self.repeat * self.number, min_repeat_ms=0,
                                             enable_cpu_cache_flush=True)
        return ms.runner.EvaluatorConfig(number=self.number, repeat=self.repeat, min_repeat_ms=self.min_repeat_ms,
                                         enable_cpu_cache_flush=False)


def default_builder(settings: MeasureSettings):
    """MetaSchedule's LocalBuilder with build_module. Reuse one across tuning calls: each new builder (and
    runner) starts a worker process to check itself (about 4 s here)."""
    from tvm.s_tir import meta_schedule as ms

    return ms.builder.LocalBuilder(f_build=build_module, max_workers=settings.build_workers,
                                   timeout_sec=settings.timeout_sec)


def default_runner(settings: MeasureSettings, threads: int = 1):
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.LocalRunner(timeout_sec=settings.timeout_sec, evaluator_config=settings.evaluator_config())


def measure_modules(mods, target, settings: MeasureSettings = MeasureSettings(), progress=None, builder=None,
                    runner=None) -> list:
    """Build all `mods` (parallel), then time them one by one. Returns a Measurement per module;
    a failed build or run is reported in `error`, never dropped. Pass a builder and runner to reuse them
    across calls (default: new ones)."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    builder, runner = builder or default_builder(settings), runner or default_runner(settings)
    results = []
    bar = progress or Progress(len(mods), "measuring")
    for start in range(0, len(mods), settings.chunk):
        chunk = mods[start:start + settings.chunk]
        built = builder.build([ms.builder.BuilderInput(m, target) for m in chunk])
        for mod, b in zip(chunk, built):
            if b.error_msg:
                results.append(Measurement([], f"build failed: {b.error_msg}"))
            else:
                args = ArgInfo.from_entry_func(mod, remove_preproc=True)  # as build_module compiled it
                (future,) = runner.run([ms.runner.RunnerInput(b.artifact_path, "cpu", args)])
                res = future.result()
                if res.error_msg:
                    results.append(Measurement([], f"run failed: {res.error_msg}"))
                else:
                    results.append(Measurement([float(s) for s in res.run_secs]))
            bar.update()
    if progress is None:
        bar.close()
    return results
