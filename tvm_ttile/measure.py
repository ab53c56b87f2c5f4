"""Build and time IRModules through MetaSchedule's builder and runner.

Builds run in parallel worker processes; timing runs one at a time in the runner's single worker, so
builds never disturb a timing. The build function does not import `tvm.s_tir.tensor_intrin` (30-45 s
per worker here, see ENVIRONMENT.md): modules arrive already tensorized.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import statistics

from .errors import TTileError
from .progress import Progress
from .timing import flush_but_activations_name


def build_module(mod, target, _params=None):
    """MetaSchedule f_build: tvm.compile (module-level so worker processes can import it), without the
    weight-packing blocks, which run once at build time in a network (as MetaSchedule's own builder does)."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    from . import read_in_place

    read_in_place.install()  # a worker process builds records it did not schedule
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


def confirm_top_default() -> int:
    """3, or $TVM_TTILE_CONFIRM_TOP (e.g. 0 turns the re-timing off everywhere: quick experiments, the tests).
    Re-timing the 3 fastest instead of 5 lost 0.2% (geometric mean) over the 485 confirmations the results
    hold, from several CPUs (benchmarks/results/confirm_depth.md), and saves 2 builds and 6 timings per task
    (about 1.5 s on a 2-core Xeon, a tenth of a 16-trial task)."""
    value = os.environ.get("TVM_TTILE_CONFIRM_TOP", "3")
    if not value.isdigit():
        raise TTileError(f"TVM_TTILE_CONFIRM_TOP must be a whole number >= 0 (0: off), got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class MeasureSettings:
    number: int = 5
    repeat: int = 5
    min_repeat_ms: int = 20
    build_workers: int = 2
    timeout_sec: float = 60.0
    chunk: int = 32  # modules built per builder call, then timed before the next are built
    # Flush the CPU caches before every timed call (every argument but the first, the input): a layer meets its
    # weights cold in a network whose weights outgrow the last-level cache. One call per repeat then.
    cache_flush: bool = False
    # With cache_flush: the input and every argument shaped as the output (a residual an epilogue adds) stay
    # in cache; only the weights, the other small operands and the output are flushed. In a network the
    # previous layers have just written those activations, so the flush of everything but the input would
    # charge a residual's reads to memory that the network serves from cache (flush_but_activations).
    keep_activations: bool = False
    # After tuning, the fastest `confirm_top` records of a workload are timed again `confirm_rounds` times
    # round-robin and the build uses the fastest then (confirm.confirm_top: one slow repeat on a shared machine
    # can bury a good candidate). 0 turns it off.
    confirm_top: int = dataclasses.field(default_factory=confirm_top_default)
    confirm_rounds: int = 3

    def describe(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def flushes_weights_only(self) -> bool:
        """Whether timed calls keep the activations in cache (keep_activations means nothing without a flush)."""
        return self.cache_flush and self.keep_activations

    def with_confirm_top(self, top: int | None) -> "MeasureSettings":
        """These settings with `confirm_top` replaced (None: unchanged, e.g. a command line without --confirm-top)."""
        return self if top is None else dataclasses.replace(self, confirm_top=top)

    def evaluator_config(self):
        from tvm.s_tir import meta_schedule as ms

        if self.cache_flush:  # (time_evaluator flushes once per repeat: more calls per repeat would be hot)
            return ms.runner.EvaluatorConfig(number=1, repeat=self.repeat * self.number, min_repeat_ms=0,
                                             enable_cpu_cache_flush=True)
        return ms.runner.EvaluatorConfig(number=self.number, repeat=self.repeat, min_repeat_ms=self.min_repeat_ms,
                                         enable_cpu_cache_flush=False)


def run_evaluator_keeping_activations(rt_mod, device, evaluator_config, repeated_args) -> list:
    """MetaSchedule's default run evaluator (run_evaluator_common) with flush_but_activations before every
    repeat instead of its flush of every argument but the first. Runs on the runner's worker process, which
    registers the flush there on first use."""
    import itertools

    evaluator = rt_mod.time_evaluator(func_name=rt_mod.entry_name, dev=device, number=evaluator_config.number,
                                      repeat=evaluator_config.repeat, min_repeat_ms=evaluator_config.min_repeat_ms,
                                      f_preproc=flush_but_activations_name())
    costs = []
    for args in repeated_args:
        device.sync()
        costs.append(evaluator(*args).results)
    return [float(c) for c in itertools.chain.from_iterable(costs)]


def default_builder(settings: MeasureSettings):
    """A PooledBuilder with build_module, one per process for each worker count and timeout: its build processes
    serve every tuning call that follows (a new builder first starts one to check itself, about 1.3 s here)."""
    return _shared_builder(settings.build_workers, settings.timeout_sec)


@functools.cache
def _shared_builder(workers: int, timeout_sec: float):
    return _pooled_builder_class()(f_build=build_module, max_workers=workers, timeout_sec=timeout_sec,
                                   initializer=unpin_build_worker)


def __getattr__(name):
    if name == "PooledBuilder":  # made on first use: importing this module does not import TVM
        return _pooled_builder_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _pooled_builder_class():
    """MetaSchedule's LocalBuilder whose worker processes outlive a build() call. LocalBuilder starts a new pool
    for every batch (against a memory leak of long-lived workers), and each worker imports TVM first: about
    1.4 s per batch here for builds of 0.1 s, most of a small tuning run's time. Here each worker is replaced
    after `uses_per_worker` builds instead, which bounds the leak the same way; a worker that times out or
    dies is replaced at once (PopenPoolExecutor)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, LocalBuilder
    from tvm.s_tir.meta_schedule.builder.local_builder import _serialize_params, _worker_func
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    @derived_object
    class PooledBuilder(LocalBuilder._cls):
        def __init__(self, *, uses_per_worker: int = 32, **kwargs) -> None:
            self.uses_per_worker = uses_per_worker
            self._pool = None
            super().__init__(**kwargs)  # checks f_build on a worker of the pool, which stays for the builds

        def _workers(self):
            if self._pool is None:
                self._pool = PopenPoolExecutor(max_workers=self.max_workers, timeout=self.timeout_sec,
                                               initializer=self.initializer, maximum_process_uses=self.uses_per_worker)
            return self._pool

        def _sanity_check(self) -> None:
            self._workers().submit(_check_build_functions, self.f_build, self.f_export).result()

        def build(self, build_inputs):
            jobs = [(self.f_build, self.f_export, b.mod, b.target, _serialize_params(b.params)) for b in build_inputs]
            results = []
            for r in self._workers().map_with_error_catching(lambda job: _worker_func(*job), jobs):
                if r.status == StatusKind.COMPLETE:
                    results.append(BuilderResult(r.value, None))
                elif r.status == StatusKind.TIMEOUT:
                    results.append(BuilderResult(None, f"PooledBuilder: Timeout, killed after {self.timeout_sec} s"))
                else:
                    results.append(BuilderResult(None, f"PooledBuilder: An exception occurred\n{r.value}"))
            return results

    return PooledBuilder


def _check_build_functions(f_build, f_export) -> None:
    """On a build worker: f_build and f_export resolve there (LocalBuilder's sanity check)."""
    from tvm.s_tir.meta_schedule.utils import get_global_func_with_default_on_worker

    get_global_func_with_default_on_worker(name=f_build, default=None)
    get_global_func_with_default_on_worker(name=f_export, default=None)


def unpin_build_worker() -> None:
    """Let a build worker use every CPU the tuning process was given. TVM binds the main thread of a process to
    one core when it sizes its thread pool (1 thread: core 0), and worker processes started later inherit that
    mask, so without this the build workers all compile on the one core the runner times on. The CPUs come from
    $TVM_TTILE_CPUS (set when tvm_ttile is imported, before TVM binds anything), so a run confined with taskset
    stays on its CPUs; without it, every CPU. The runner's worker stays bound, as TVM binds it."""
    allowed = os.environ.get("TVM_TTILE_CPUS")
    try:
        os.sched_setaffinity(0, [int(c) for c in allowed.split(",")] if allowed else range(os.cpu_count() or 1))
    except (AttributeError, OSError, ValueError):  # not Linux, or a cpuset narrower than the CPUs counted
        pass


def default_runner(settings: MeasureSettings, threads: int = 1):
    """MetaSchedule's LocalRunner, one per process for each timing setting and thread count: its worker process
    (TVM's thread pool sized for `threads` when it starts) times the candidates of every tuning call that follows
    (a new runner first starts one to check itself, about 1.2 s here). A worker that dies or times out is
    replaced by the runner's pool."""
    from .cpu import use_threads

    use_threads(threads)  # the worker inherits the environment when it starts
    # Keyed by what the runner's timings depend on only: settings that differ in building or confirming share it.
    timing = dataclasses.replace(settings, build_workers=0, chunk=0, confirm_top=0, confirm_rounds=0)
    return _shared_runner(timing, threads)


@functools.cache
def _shared_runner(timing: MeasureSettings, threads: int):
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.LocalRunner(timeout_sec=timing.timeout_sec, evaluator_config=timing.evaluator_config(),
                                 f_run_evaluator=run_evaluator_keeping_activations if timing.flushes_weights_only
                                 else None)


def measure_modules(mods, target, settings: MeasureSettings = MeasureSettings(), progress=None, builder=None,
                    runner=None, rounds: int = 1) -> list:
    """Build all `mods` (parallel), then time them one by one, `rounds` times round-robin (each module built
    once), so that candidates compared with each other meet the same moments of a shared machine. Returns a
    Measurement per module (its seconds: every repeat of every round, in order); a failed build or run is
    reported in `error`, never dropped. The default builder and runner are one per process (default_builder,
    default_runner)."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    builder, runner = builder or default_builder(settings), runner or default_runner(settings)
    results = []
    bar = progress or Progress(len(mods) * rounds, "measuring")
    for start in range(0, len(mods), settings.chunk):
        chunk = mods[start:start + settings.chunk]
        built = builder.build([ms.builder.BuilderInput(m, target) for m in chunk])
        measured = [Measurement([], f"build failed: {b.error_msg}") if b.error_msg else Measurement([])
                    for b in built]
        for _ in range(rounds):
            for mod, b, m in zip(chunk, built, measured):
                if not m.error:
                    args = ArgInfo.from_entry_func(mod, remove_preproc=True)  # as build_module compiled it
                    (future,) = runner.run([ms.runner.RunnerInput(b.artifact_path, "cpu", args)])
                    res = future.result()
                    if res.error_msg:
                        m.seconds, m.error = [], f"run failed: {res.error_msg}"
                    else:
                        m.seconds += [float(s) for s in res.run_secs]
                bar.update()
        results += measured
    if progress is None:
        bar.close()
    return results
