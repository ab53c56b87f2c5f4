"""Time a network task's candidates where the network runs them: inside running inferences.

Tuning times a task alone, its weights and input hot in the caches. In a network a layer meets its input just
written by the layer before, and its weights evicted by every other layer since the last inference (ResNet-18's
46 MB of weights outgrow a 32 MB last-level cache): the schedule that is fastest hot need not be fastest there.

The VM calls an instrument hook before every function with that function's real arguments. There a candidate
of the task is called on those arguments and timed: the input exactly where the previous layer left it, the
output buffer the VM hands the function. Its weights are its own copy in its own packed layout (random
values), one copy per call site, allocated once and touched by nothing else, so they are as cold as the
network's own weights by the time it comes round again. The real function then runs as always and overwrites
the output, so the inference stays correct. Candidates take turns, one per inference and call site.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import statistics
import time

import numpy as np

from ..errors import TTileError
from ..workdir import WorkDir
from ..evaluation.stats import spearman
from ..timing import CACHE_MODES, kernel_timer, round_robin

# tune-model --in-network-top: off by default. On ResNet-18 (Zen 4, 1 and 2 threads) the builds of the in-network
# picks among each task's 5 best ran level with tuning's picks (benchmarks/results/in_network_zen4/NOTES.md): the
# top candidates are within the noise of each other in the network, and the least of 5 noisy medians is low
# by chance (the picks' predicted gain did not show in the whole network).
IN_NETWORK_TOP, IN_NETWORK_ROUNDS = 0, 5


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One tuning record of a task: the key of its trace, its scheme, its mean tuning time."""
    key: str
    scheme: str | None
    tuning_seconds: float


def trace_key(trace) -> str:
    return hashlib.sha1(str(trace).encode()).hexdigest()[:16]


def top_candidates(database, task_mod, k: int) -> list:
    """[(Candidate, scheduled IRModule, TuningRecord)]: the `k` fastest records of `task_mod` with distinct
    traces, fastest (mean tuning time) first; failed records left out."""
    import tvm

    from ..confirm import FAILED
    from ..lowering import scheme_of_schedule
    from ..metaschedule import records_of, schedule_of

    out, seen = [], set()
    for rec in records_of(database, task_mod, 4 * k + 8):
        secs = [float(s) for s in rec.run_secs or []]
        if not secs or statistics.fmean(secs) >= FAILED:
            continue
        key = trace_key(rec.trace)
        if key in seen:
            continue
        seen.add(key)
        sch = schedule_of(rec)
        out.append((Candidate(key, scheme_of_schedule(sch), statistics.fmean(secs)), sch.mod, rec))
        if len(out) == k:
            break
    return out


def build_all(mods, target, builder=None) -> list:
    """Runtime modules of `mods` as tuning builds them (build_module, in parallel workers); a failed build
    raises TTileError naming it."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from ..measure import MeasureSettings, default_builder

    builder = builder or default_builder(MeasureSettings())
    built = builder.build([ms.builder.BuilderInput(m, target) for m in mods])
    out = []
    for b in built:
        if b.error_msg:
            raise TTileError(f"a candidate failed to build again: {b.error_msg.splitlines()[-1]}")
        out.append(tvm.runtime.load_module(b.artifact_path))
        shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)
    return out


def _entry_name(lib) -> str:
    return getattr(lib, "entry_name", None) or "main"


def run_instrumented(vm, hook, x) -> None:
    """One inference of `vm` on `x` (a tvm tensor) with `hook` as its instrument, removed afterwards."""
    import tvm

    vm.set_instrument(tvm.runtime.convert(hook))
    try:
        vm["main"](x)
    finally:
        vm.set_instrument(None)


ALONE_STATES = CACHE_MODES  # the caches a function alone is timed in (timing.evaluator)


def task_symbol(calls: dict, task_name: str):
    """The key of a task's function among profile()["calls"] (build_network renames a function whose weights
    it prepacks: name_prepacked), or None."""
    return next((s for s in (task_name, task_name + "_prepacked") if s in calls), None)


@dataclasses.dataclass
class _Site:
    """One task's function in the network and its candidates."""
    funcs: list  # a callable per candidate
    weight_shapes: list  # per candidate: {parameter index: the shape of its (packed) weights}
    samples: list  # per candidate: seconds of every timed call
    symbol: str | None = None
    own: list = dataclasses.field(default_factory=list)  # per candidate: {index: [own weights per call site]}


class InNetworkTimer:
    """Candidates of a built network's tasks, timed inside inferences of that network (see the module doc).

        timer = InNetworkTimer(vm)
        timer.add("fused_conv2d9_add7_relu41", task_mod, [scheduled_mod1, ...], [lib1, ...])
        samples = timer.run(x, rounds=7)  # {task name: [[seconds of every timed call] per candidate]}
    """

    def __init__(self, vm):
        self.vm = vm
        self.sites = {}

    def add(self, task_name: str, task_mod, scheduled_mods: list, libs: list) -> None:
        """Time `libs` (the built `scheduled_mods`, candidates of `task_mod`) where the network calls the task's
        function (task_name, or task_name_prepacked when build_network prepacked its weights)."""
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        attrs = task_mod["main"].attrs or {}
        layout_free = sorted(int(i) for i in attrs.get("layout_free_buffers", []))
        shapes = []
        for m in scheduled_mods:
            infos = ArgInfo.from_entry_func(m, remove_preproc=True)  # as build_module compiled it
            shapes.append({i: [int(d) for d in infos[i].shape] for i in layout_free})
        self.sites[task_name] = _Site([lib[_entry_name(lib)] for lib in libs], shapes, [[] for _ in libs])

    def _call_counts(self, x) -> dict:
        """{symbol: calls in one inference}."""
        counts = {}

        def count(func, symbol, before_run, ret, *args):
            if before_run:
                counts[symbol] = counts.get(symbol, 0) + 1
            return 0

        run_instrumented(self.vm, count, x)
        return counts

    def _bind(self, x) -> dict:
        """{network symbol: _Site}, each candidate given its own weights for every call of the symbol."""
        import tvm


        counts = self._call_counts(x)
        rng = np.random.default_rng(0)
        bound = {}
        for name, site in self.sites.items():
            site.symbol = task_symbol(counts, name)
            if site.symbol is None:
                raise TTileError(f"the network never calls task {name}")
            site.own = [{i: [tvm.runtime.tensor((0.1 * rng.standard_normal(shape)).astype("float32"), tvm.cpu())
                             for _ in range(counts[site.symbol])]
                         for i, shape in shapes.items()} for shapes in site.weight_shapes]
            bound[site.symbol] = site
        return bound

    def run(self, x, rounds: int = 7) -> dict:
        """Time every candidate `rounds` times at every call site (a round: as many inferences as the most
        candidates of a task; in inference j, candidate j of each task runs). Returns {task name: [[seconds of
        every timed call] per candidate]} (a task called twice per inference gives two per round)."""
        import tvm

        x = tvm.runtime.tensor(np.ascontiguousarray(x), tvm.cpu())
        bound = self._bind(x)
        state = {"j": 0, "timing": False}
        call_no = {}
        clock = time.perf_counter

        def instrument(func, symbol, before_run, ret, *args):
            site = bound.get(symbol) if before_run else None
            if site is None or state["j"] >= len(site.funcs):
                return 0
            j, n = state["j"], call_no.get(symbol, 0)
            call_no[symbol] = n + 1
            own = site.own[j]
            call_args = [own[i][n] if i in own else a for i, a in enumerate(args)]
            start = clock()
            site.funcs[j](*call_args)
            elapsed = clock() - start
            if state["timing"]:
                site.samples[j].append(elapsed)
            return 0  # the real function runs next and writes the real output

        width = max(len(s.funcs) for s in bound.values())
        for r in range(rounds + 1):  # round 0 warms every candidate up (code, page faults), untimed
            state["timing"] = r > 0
            for j in range(width):
                state["j"] = j
                call_no.clear()
                run_instrumented(self.vm, instrument, x)
        return {name: [list(s) for s in site.samples] for name, site in self.sites.items()}


def time_alone(libs, scheduled_mods, rounds: int = 7, state: str = "hot") -> list:
    """[[seconds per round] per candidate]: each candidate alone on random arguments, `rounds` round-robin
    rounds of a median of 5, in the caches of `state` (one of ALONE_STATES, timing.evaluator)."""
    from ..measure import timing_args

    return round_robin([kernel_timer(lib, timing_args(m), _entry_name(lib), state=state, repeat=5)
                        for lib, m in zip(libs, scheduled_mods)], rounds)


def captured_calls(executable, vm, x, copy: bool = False, first_only: bool = False) -> list:
    """[(symbol, compiled function, arguments)]: every call of a compiled function in one inference of `vm`
    (running `executable`) on `x`, in order (with `first_only`, each function's first call only). The arguments
    are the VM's own tensors (the activations where the network writes them, the constant weights), or with
    `copy` copies of them as they were at the call."""
    import tvm

    lib = executable.mod.imports[0]  # the compiled PrimFuncs the VM calls
    calls, seen = [], set()

    def capture(func, symbol, before_run, ret, *a):
        if before_run and lib.implements_function(symbol) and not (first_only and symbol in seen):
            seen.add(symbol)
            calls.append((symbol, lib[symbol], [tvm.runtime.tensor(t.numpy(), tvm.cpu()) if copy and
                                                hasattr(t, "numpy") else t for t in a]))
        return 0

    run_instrumented(vm, capture, tvm.runtime.tensor(np.ascontiguousarray(x), tvm.cpu()))
    return calls


def alone_times(executable, vm, x, repeat: int = 15) -> dict:
    """{symbol: {"hot_s", "flushed_s", "weights_flushed_s"}}: every compiled function the network `vm` (running
    `executable`) calls, timed alone on copies of the arguments it gets in an inference (its first call), in each
    of ALONE_STATES (timing.evaluator), medians of `repeat` calls. With the same functions timed inside the network
    (network.profile), the difference splits into what cold operands cost and the rest."""
    lib = executable.mod.imports[0]
    args = {symbol: a for symbol, _, a in captured_calls(executable, vm, x, copy=True, first_only=True)}
    out = {}
    for symbol, a in args.items():
        out[symbol] = {f"{state}_s": kernel_timer(lib, a, symbol, state=state, repeat=repeat)() for state in ALONE_STATES}
    return out


IN_NETWORK_DIR = WorkDir.IN_NETWORK  # in a work dir: a MetaSchedule database of the in-network picks
IN_NETWORK_LOG = WorkDir.IN_NETWORK_LOG  # every candidate timed in the network, alone hot and alone flushed


def picks_path(work_dir: str) -> str:
    return WorkDir(work_dir).in_network


def forget_picks(work_dir: str) -> None:
    """Drop the in-network picks (their candidates were the fastest records of a database that has changed since)."""
    shutil.rmtree(picks_path(work_dir), ignore_errors=True)


def picks_database(work_dir: str):
    """The in-network picks of `work_dir` as a JSONDatabase, or None when there are none."""
    from ..metaschedule.database import existing_database

    return existing_database(picks_path(work_dir))


def pick_in_network(vm, tasks, database, target, x, work_dir: str, top: int = 5, rounds: int = 5, builder=None,
                    progress=None) -> dict:
    """For every tvm_ttile task of the network `vm` runs, time its `top` fastest records (by tuning time) inside
    the running network, and alone hot and alone flushed (`rounds` rounds each), and store the fastest in the
    network in work_dir's picks database (build_executable prefers it). Returns {task name: entry} with each
    candidate's median seconds per call in each state and the index picked."""
    from tvm.s_tir import meta_schedule as ms

    from ..progress import Silent
    from ..workdir import append_journal
    from .policy import create as create_policy

    bar = progress or Silent()
    timer, found = InNetworkTimer(vm), {}
    for t in tasks:
        if not create_policy(t.policy).picks_in_network:
            continue
        cands = top_candidates(database, t.mod, top)
        if len(cands) >= 2:
            mods = [m for _, m, _ in cands]
            libs = build_all(mods, target, builder)
            timer.add(t.name, t.mod, mods, libs)
            found[t.name] = (t, cands, mods, libs)
        bar.update()
    if not found:
        return {}
    samples = timer.run(x, rounds)
    tmp = picks_path(work_dir) + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    picks = ms.database.JSONDatabase(work_dir=tmp, module_equality="structural")
    out = {}
    for name, (t, cands, mods, libs) in found.items():
        alone = {state: time_alone(libs, mods, rounds, state) for state in ALONE_STATES}
        net = [statistics.median(s) for s in samples[name]]
        best = min(range(len(cands)), key=net.__getitem__)
        entry = {"task": name, "calls": t.weight, "picked": best, "weight_bytes": weight_bytes(t.mod), "candidates": [
            {"key": c.key, "scheme": c.scheme, "tuning_s": c.tuning_seconds,
             **{f"alone_{state}_s": statistics.median(alone[state][i]) for state in ALONE_STATES},
             "in_network_s": n, "in_network_samples": len(s)}
            for i, ((c, _, _), n, s) in enumerate(zip(cands, net, samples[name]))]}
        _, _, rec = cands[best]
        workload = picks.commit_workload(t.mod)
        picks.commit_tuning_record(ms.database.TuningRecord(rec.trace, workload, [float(v) for v in samples[name][best]],
                                                            rec.target, rec.args_info))
        out[name] = entry
    append_journal(WorkDir(work_dir).in_network_log, {"date": time.strftime("%Y-%m-%d %H:%M:%S"),
                                                            "rounds": rounds, "top": top, "tasks": out})
    forget_picks(work_dir)
    os.replace(tmp, picks_path(work_dir))
    return out


def weight_bytes(task_mod) -> int:
    """Bytes of the task's constant (layout-free) parameters: what it streams from memory in a cold network."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    func = task_mod["main"]
    infos = ArgInfo.from_prim_func(func)
    total = 0
    for i in (func.attrs or {}).get("layout_free_buffers", []):
        info = infos[int(i)]
        total += int(np.prod([int(d) for d in info.shape])) * np.dtype(str(info.dtype)).itemsize
    return total


STATES = ("tuning_s", *(f"alone_{state}_s" for state in ALONE_STATES))  # the rankings compared with in_network_s


def ranking_summary(picks: dict) -> dict:
    """How well each way of timing candidates alone ranks them as the network does: for STATES and in_network_s,
    the network's time (ms, calls x in-network time per call, summed over tasks) if each task took that
    ranking's fastest, the tasks where it picks the in-network fastest, and the mean rank correlation with the
    in-network times."""
    out = {}
    for state in (*STATES, "in_network_s"):
        if not all(state in c for e in picks.values() for c in e["candidates"]):
            continue  # (picks timed before that state was)
        ms, agree, rhos = 0.0, 0, []
        for e in picks.values():
            c = e["candidates"]
            pick = min(range(len(c)), key=lambda i: c[i][state])
            ms += 1e3 * e["calls"] * c[pick]["in_network_s"]
            agree += pick == e["picked"]
            rho = spearman([x[state] for x in c], [x["in_network_s"] for x in c])
            if rho == rho:
                rhos.append(rho)
        out[state] = {"network_ms": ms, "agrees": agree, "tasks": len(picks),
                      "spearman": statistics.fmean(rhos) if rhos else float("nan")}
    return out
