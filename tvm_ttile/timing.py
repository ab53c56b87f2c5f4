"""(TVM) The one timer of side-by-side comparisons: contenders taken in turn, one timing each per round, so that a
disturbed moment of this shared machine hits every contender alike; and the time evaluators it times compiled
functions with, in the cache states tuning knows.

    timers = {"a": kernel_timer(lib_a, args_a), "b": kernel_timer(lib_b, args_b)}
    seconds = round_robin(timers, rounds=3)      # {"a": [s, s, s], "b": [s, s, s]}
"""
from __future__ import annotations

import statistics

# The caches a compiled function is timed in: hot (calls repeated for at least 2 ms per repeat); one call per
# repeat with every argument but the first (the input) flushed, as tune-model --cache-flush on; one call per
# repeat with only the weights and the output flushed, the input and residuals kept (--cache-flush weights).
CACHE_MODES = ("hot", "flushed", "weights_flushed")


def round_robin(timers, rounds: int):
    """Each timer (a callable returning one timing) called once per round, in turn, `rounds` rounds. `timers` is
    a dict or a list; returns the same shape holding each timer's timings in round order."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    named = timers if isinstance(timers, dict) else dict(enumerate(timers))
    out = {key: [] for key in named}
    for _ in range(rounds):
        for key, timer in named.items():
            out[key].append(timer())
    return out if isinstance(timers, dict) else [out[i] for i in range(len(timers))]


def medians(samples):
    """The median of each timer's timings (round_robin's output, dict or list)."""
    if isinstance(samples, dict):
        return {key: statistics.median(v) for key, v in samples.items()}
    return [statistics.median(v) for v in samples]


def evaluator(lib, symbol: str = "main", *, state: str = "hot", number: int = 1, repeat: int = 5,
              min_repeat_ms: int | None = None):
    """TVM's time evaluator of `symbol` in `lib` (a runtime module or VM) in cache `state` (CACHE_MODES)."""
    import tvm

    if state == "hot":
        return lib.time_evaluator(symbol, tvm.cpu(), number=number, repeat=repeat,
                                  min_repeat_ms=2 if min_repeat_ms is None else min_repeat_ms)
    if state == "flushed":
        return lib.time_evaluator(symbol, tvm.cpu(), number=1, repeat=repeat, f_preproc="cache_flush_cpu_non_first_arg")
    if state == "weights_flushed":
        return lib.time_evaluator(symbol, tvm.cpu(), number=1, repeat=repeat, f_preproc=flush_but_activations_name())
    raise ValueError(f"unknown cache state {state!r}; one of {', '.join(CACHE_MODES)}")


def kernel_timer(lib, args, symbol: str = "main", **options):
    """A callable returning one timing in seconds of `symbol` on `args`: the median of an evaluator's repeats
    (`options` as evaluator's)."""
    f = evaluator(lib, symbol, **options)
    return lambda: statistics.median(f(*args).results)


FLUSH_BUT_ACTIVATIONS = "tvm_ttile.cache_flush_but_activations"  # time_evaluator's f_preproc, by name


def flushed_arguments(args) -> list:
    """What flush_but_activations flushes: every argument but the first (the input) and those shaped as the last
    (the output: a residual an epilogue adds), and the output itself."""
    out = tuple(args[-1].shape)
    return [a for a in args[1:-1] if tuple(a.shape) != out] + [args[-1]]


def flush_but_activations(*args) -> None:
    """time_evaluator's f_preproc for keep_activations: TVM's cache_flush_cpu_non_first_arg on flushed_arguments."""
    import tvm

    tvm.get_global_func("cache_flush_cpu_non_first_arg")(args[0], *flushed_arguments(args))


def flush_but_activations_name() -> str:
    """FLUSH_BUT_ACTIVATIONS, registered in this process (time_evaluator finds its f_preproc by name)."""
    import tvm

    if tvm.get_global_func(FLUSH_BUT_ACTIVATIONS, allow_missing=True) is None:
        tvm.register_global_func(FLUSH_BUT_ACTIVATIONS, flush_but_activations)
    return FLUSH_BUT_ACTIVATIONS
