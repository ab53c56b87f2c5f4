"""CPU model: ISA, vector lanes, register file, caches, and the measured single-thread fp32 peak.

The first stage of the data flow (CPU -> microkernels -> space -> ...). Everything later reads the
register count and lanes from here, and reports performance as a percentage of `peak_gflops`.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import platform
import re
import time
from pathlib import Path

from . import limits
from .cache import cache_key, cache_root, measuring, read_json, write_json
from .errors import UnsupportedISAError
from .phases import phase
from .timing import evaluator


@dataclasses.dataclass(frozen=True)
class ISA:
    name: str
    lanes: int  # fp32 lanes of one vector register
    vector_registers: int
    target: dict  # the TVM llvm target that selects this ISA (ISA level, generic scheduling model)


# x86 targets use the ISA *levels* rather than the host's own mcpu: with mcpu=znver3 LLVM unrolled the
# reduction loop of a 12x1 microkernel and spilled (64 GFLOPS against 110 with x86-64-v3, measured here).
ISAS = {
    "avx2": ISA("avx2", 8, 16, {"kind": "llvm", "mcpu": "x86-64-v3"}),
    "avx512": ISA("avx512", 16, 32, {"kind": "llvm", "mcpu": "x86-64-v4"}),
    "neon": ISA("neon", 4, 32, {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"]}),
}


def get_isa(name: str) -> ISA:
    try:
        return ISAS[name]
    except KeyError:
        raise UnsupportedISAError(f"ISA {name!r} is not supported; choose one of {sorted(ISAS)}") from None


@dataclasses.dataclass(frozen=True)
class CPUModel:
    name: str
    isa: ISA
    flags: tuple = ()
    l1d_bytes: int = 32 * 1024
    l2_bytes: int = 512 * 1024
    l3_bytes: int = 32 * 1024 * 1024
    fma_units: int = 2  # nominal; the peak below is measured, not derived from this
    num_cores: int = 1
    target_override: dict | None = None
    # The dot-product extensions the CPU has beyond its ISA (DOT_FLAGS; precision.py says which instruction
    # each precision uses). Not in the cache key: fp32 code does not depend on them.
    extensions: tuple = ()

    @property
    def lanes(self) -> int:
        return self.isa.lanes

    @property
    def vector_registers(self) -> int:
        return self.isa.vector_registers

    def target_dict(self, num_cores: int = 1, mattr: tuple = ()) -> dict:
        """The TVM target as a dict; `mattr`: LLVM attributes added to the ISA's (a precision's instruction)."""
        t = dict(self.target_override or self.isa.target)
        t["num-cores"] = num_cores
        if mattr:
            t["mattr"] = [*t.get("mattr", []), *(m for m in mattr if m not in t.get("mattr", []))]
        return t

    def target(self, num_cores: int = 1, mattr: tuple = ()):
        import tvm

        return tvm.target.Target(self.target_dict(num_cores, mattr))

    @property
    def cache_dir(self) -> Path:
        extra = repr(sorted((self.target_override or {}).items()))
        return cache_root() / cache_key(self.name, self.isa.name, self.flags, extra)

    def describe(self) -> dict:
        return {
            "cpu": self.name,
            "isa": self.isa.name,
            "lanes_fp32": self.lanes,
            "vector_registers": self.vector_registers,
            "fma_units_nominal": self.fma_units,
            "l1d_bytes": self.l1d_bytes,
            "l2_bytes": self.l2_bytes,
            "l3_bytes": self.l3_bytes,
            "cores": self.num_cores,
            "target": self.target_dict(),
        }


def _read_cpuinfo():
    name, flags = platform.processor() or platform.machine(), ()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "model name" and name in ("", platform.machine(), platform.processor()):
                    name = val.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = tuple(val.split())
    except OSError:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        fam = [ln.split(":")[1].strip() for ln in info.splitlines() if ln.startswith("cpu family")]
        mod = [ln.split(":")[1].strip() for ln in info.splitlines() if ln.startswith("model\t")]
        if fam and mod:  # "AMD EPYC" alone does not tell Zen 3 from Zen 5
            name = f"{name} (family {fam[0]} model {mod[0]})"
    except OSError:
        pass
    return name, flags


def _read_caches():
    sizes = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for idx in sorted(os.listdir(base)):
            d = os.path.join(base, idx)
            try:
                level = open(os.path.join(d, "level")).read().strip()
                ctype = open(os.path.join(d, "type")).read().strip()
                size = open(os.path.join(d, "size")).read().strip()
            except OSError:
                continue
            mult = {"K": 1024, "M": 1024 * 1024}.get(size[-1], 1)
            value = int(size.rstrip("KM")) * mult
            if ctype in ("Data", "Unified"):
                sizes[int(level)] = value
    except OSError:
        pass
    return sizes


# Only the flags that change what code can run; the full list would make the cache key fragile.
_RELEVANT_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "asimd", "neon", "sve")
# The reduced-precision dot products (CPUModel.extensions).
DOT_FLAGS = ("avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")
LLVM_FEATURES = {"avx512_vnni": "avx512vnni", "avx_vnni": "avxvnni", "avx512_bf16": "avx512bf16",
                 "amx_int8": "amx-int8", "amx_bf16": "amx-bf16"}


def detect_host(isa: str | None = None) -> CPUModel:
    """The host CPU. `isa` forces a narrower ISA (e.g. 'avx2' on an AVX-512 machine)."""
    name, flags = _read_cpuinfo()
    machine = platform.machine().lower()
    if isa is None:
        if machine in ("aarch64", "arm64"):
            isa = "neon"
        elif "avx512f" in flags:
            isa = "avx512"
        elif "avx2" in flags and "fma" in flags:
            isa = "avx2"
        else:
            raise UnsupportedISAError(
                f"host CPU {name!r} has neither AVX2+FMA, AVX-512 nor NEON; tvm_ttile needs one of them"
            )
    isa_obj = get_isa(isa)
    if not _host_supports(isa, flags, machine):
        raise UnsupportedISAError(f"host CPU {name!r} cannot run {isa} code; use --target to compile for it")
    caches = _read_caches()
    return CPUModel(
        name=name,
        isa=isa_obj,
        flags=tuple(f for f in flags if f in _RELEVANT_FLAGS),
        l1d_bytes=caches.get(1, 32 * 1024),
        l2_bytes=caches.get(2, 512 * 1024),
        l3_bytes=caches.get(3, 32 * 1024 * 1024),
        num_cores=os.cpu_count() or 1,
        extensions=tuple(f for f in DOT_FLAGS if f in flags),
    )


def from_target(target) -> CPUModel:
    """A CPU model whose ISA follows a TVM llvm target (dict, JSON string or tvm.target.Target)."""
    import json

    import tvm
    from tvm.target import codegen

    if isinstance(target, str):
        try:
            target = json.loads(target)
        except ValueError:
            raise UnsupportedISAError(
                f"target {target!r} must be a JSON dict such as "
                '\'{"kind": "llvm", "mcpu": "x86-64-v3"}\' (TVM 0.27 rejects the string form)'
            ) from None
    try:
        tgt = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    except Exception as e:  # TVM's own error (unknown kind, bad attribute) after a C++ backtrace: its last line
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise UnsupportedISAError(f"TVM does not accept the target {json.dumps(target) if isinstance(target, dict) else target!r}: "
                                  f"{first}; e.g. '{{\"kind\": \"llvm\", \"mcpu\": \"x86-64-v3\"}}'") from None
    if tgt.kind.name != "llvm":
        raise UnsupportedISAError(f"target kind {tgt.kind.name!r} is not supported; tvm_ttile targets CPUs (llvm)")
    attrs = dict(tgt.attrs)
    triple = str(attrs.get("mtriple", ""))
    if triple.startswith("aarch64") or bool(attrs.get("feature.is_aarch64", False)):
        isa = "neon"
    elif codegen.target_has_features("avx512f", tgt):
        isa = "avx512"
    elif codegen.target_has_features("avx2", tgt) and codegen.target_has_features("fma", tgt):
        isa = "avx2"
    else:
        raise UnsupportedISAError(f"target {tgt} has neither AVX2+FMA, AVX-512 nor NEON")
    host = detect_host(isa) if _runs_here(isa) else None
    override = {k: (list(v) if isinstance(v, (list, tuple)) or type(v).__name__ == "Array" else v)
                for k, v in attrs.items() if k in ("mcpu", "mtriple", "mattr")}
    override["kind"] = "llvm"
    base = host or CPUModel(name=f"target:{tgt}", isa=get_isa(isa))
    if override == get_isa(isa).target:  # the ISA's own target: share its cache (peak, catalogs)
        return base
    # A dot-product extension is the target's to give: code for a CPU without VNNI runs on one with it, and the
    # precision then takes the instruction that CPU has (precision.dot_product)
    given = tuple(f for f in DOT_FLAGS if codegen.target_has_features(LLVM_FEATURES[f], tgt))
    extensions = tuple(f for f in base.extensions if f in given) if host else given
    return dataclasses.replace(base, target_override=override, extensions=extensions)


def _host_supports(isa: str, flags, machine: str) -> bool:
    if isa == "neon":
        return machine in ("aarch64", "arm64")
    if isa == "avx512":
        return "avx512f" in flags
    return "avx2" in flags and "fma" in flags


def runs_here(cpu: CPUModel) -> bool:
    """Whether code for `cpu` can run (and be measured) on this host."""
    return _runs_here(cpu.isa.name)


def _runs_here(isa: str) -> bool:
    _, flags = _read_cpuinfo()
    return _host_supports(isa, flags, platform.machine().lower())


# --- measured peak ---------------------------------------------------------------------------------

def _peak_primfunc(lanes: int, n_acc: int, iters: int, threads: int = 1, dot=None, precision=None):
    """n_acc independent FMA chains over `iters` steps: enough ILP to keep every FMA unit busy; one set of
    chains per thread, under a parallel loop when threads > 1. With `dot` (a precision.DotProduct of the reduced
    `precision`, a precision.Precision), chains of that instruction instead, its accumulators of the precision's
    type and its operands read from X's bytes."""
    import tvm.tirx as tir
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script import builder as T

    import contextlib

    dtype = "float32" if dot is None else precision.accumulator
    vec = f"{dtype}x{lanes}"
    width = n_acc * lanes
    with IRBuilder() as ib:
        with T.prim_func(s_tir=True):
            T.func_name("fma_peak")
            px = T.arg("px", T.handle())
            po = T.arg("po", T.handle())
            X = T.match_buffer(px, (2 * lanes,), dtype)
            O = T.match_buffer(po, (threads * width,), dtype)
            # noalias lets LLVM keep the accumulators in registers (as te.create_prim_func sets it).
            T.func_attr({"tirx.noalias": True})
            # (no parallel loop at one thread: its first launch would size this process's thread pool)
            loop = T.parallel(0, threads) if threads > 1 else T.serial(0, 1)
            with T.sblock("root"), loop as t, T.sblock("fma_chains"):
                T.reads(X[0 : 2 * lanes], O[t * width : (t + 1) * width])
                T.writes(O[t * width : (t + 1) * width])
                acc = T.alloc_buffer((n_acc,), vec, scope="local")
                for i in range(n_acc):
                    T.buffer_store(acc, O.vload([t * width + i * lanes], vec), [i])
                with (contextlib.nullcontext() if dot is None else dot.imports()), T.serial(0, iters):
                    for i in range(n_acc):
                        if dot is None:
                            step = T.fma(acc[i], X.vload([0], vec), X.vload([lanes], vec))
                        else:
                            weights = tir.reinterpret(f"{precision.weight}x{precision.group * lanes}",
                                                      X.vload([lanes], vec))
                            step = dot.step(acc[i], X[0], dot.peak_operand(weights, acc[i]))
                        T.buffer_store(acc, step, [i])
                for i in range(n_acc):
                    T.buffer_store(O, acc[i], [tir.Ramp(t * width + i * lanes, 1, lanes)])
    return ib.get()


def stream_primfunc(lanes: int, elements: int, threads: int):
    """B = A + 1 over `elements` floats, one contiguous slice per thread: the memory bandwidth the cores get
    together (read + write), far beyond the last-level cache."""
    import tvm
    from tvm import te

    a = te.placeholder((elements,), "float32", name="A")
    b = te.compute((elements,), lambda i: a[i] + 1.0, name="B")
    sch = tvm.s_tir.Schedule(te.create_prim_func([a, b]))
    (i,) = sch.get_loops(sch.get_sblock("B"))
    outer, inner = sch.split(i, [threads, None])
    inner, vec = sch.split(inner, [None, lanes])
    if threads > 1:
        sch.parallel(outer)
    sch.vectorize(vec)
    return sch.mod["main"]


def use_threads(threads: int) -> None:
    """Size TVM's runtime thread pool for `threads` in this process and in the worker processes it starts.
    TVM sizes the pool once, at its first parallel call, from $TVM_NUM_THREADS or else from half the logical CPUs
    on x86 (it assumes hyper-threading: 1 thread on a 2-vCPU VM), so this must run before then. One thread sets
    nothing: 1-thread kernels have no parallel loop, and a process that times both must keep the larger pool."""
    if threads > 1:
        os.environ["TVM_NUM_THREADS"] = str(threads)


def check_runs_here(cpu: CPUModel) -> None:
    if not _runs_here(cpu.isa.name):
        raise UnsupportedISAError(
            f"{cpu.isa.name} code cannot run on this host ({platform.machine()}); it can be compiled, not measured here"
        )


def measure_peak(cpu: CPUModel, repeat: int = 9, threads: int = 1, bursts: int = 1, precision: str = "fp32") -> dict:
    """fp32 FMA throughput of `threads` threads, built and timed through TVM (best and median of `repeat`; with
    several `bursts` of `repeat`, limits.BURST_GAP_SECONDS apart, the best burst's), and the memory bandwidth
    they get together. Another `precision`: the throughput of its dot-product instruction (precision.py), in
    giga-operations per second under the same keys (a multiply and an add each count one, as for FLOPs)."""
    from . import precision as precisions
    import numpy as np
    import tvm

    check_runs_here(cpu)
    if threads > 1 and os.environ.get(_MEASURING_CHILD) != str(threads):
        return _measure_in_child(cpu, repeat, threads, bursts, precision)
    use_threads(threads)
    dot, kind = precisions.require(precision, cpu), precisions.get(precision)
    reduced = dot.reduced
    n_acc = cpu.vector_registers * 3 // 4  # 2 FMA units x 4-5 cycles latency needs ~10 chains
    iters = 20000
    func = _peak_primfunc(cpu.lanes, n_acc, iters, threads, dot if reduced else None, kind)
    lib = tvm.compile(tvm.IRModule({"fma_peak": func}), target=cpu.target(threads, dot.mattr))
    dev = tvm.cpu()
    dtype = kind.accumulator
    x = tvm.runtime.tensor(np.concatenate([np.full(cpu.lanes, 0.5), np.full(cpu.lanes, 1e-3)]).astype(dtype), dev)
    o = tvm.runtime.tensor(np.zeros(threads * n_acc * cpu.lanes, dtype), dev)
    timer = evaluator(lib.mod, "fma_peak", number=20, repeat=repeat, min_repeat_ms=30)
    flops = kind.ops_per_lane * cpu.lanes * n_acc * iters * threads
    found = []
    for i in range(bursts):
        time.sleep(limits.BURST_GAP_SECONDS if i else 0)
        secs = sorted(timer(x, o).results)
        # The peak is a capacity: the fastest repeat; the median is kept beside it to show the noise.
        found.append({
            "peak_gflops": flops / secs[0] / 1e9,
            "median_gflops": flops / secs[len(secs) // 2] / 1e9,
            "gflops_per_repeat": [flops / s / 1e9 for s in secs],
            "accumulators": n_acc,
            "threads": threads,
            "precision": precision,
            "instruction": dot.name,
            "target": cpu.target_dict(threads, dot.mattr),
            "runtime_threads": int(tvm.runtime.num_threads()),
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        })
    out = found[0] if bursts == 1 else limits.best_of(found)
    out.update(measure_bandwidth(cpu, threads))
    return out


_MEASURING_CHILD = "TVM_TTILE_PEAK_CHILD"


def _measure_in_child(cpu: CPUModel, repeat: int, threads: int, bursts: int, precision: str = "fp32") -> dict:
    """measure_peak in a fresh process whose thread pool is sized for `threads` (this process's pool may have
    been sized already, and TVM cannot grow it)."""
    import json
    import pickle
    import subprocess
    import sys

    code = ("import pickle, sys, json; from tvm_ttile.cpu import measure_peak; "
            f"print(json.dumps(measure_peak(pickle.loads(sys.stdin.buffer.read()), {repeat}, {threads}, {bursts}, "
            f"{precision!r})))")
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), **{_MEASURING_CHILD: str(threads)})
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(cpu), capture_output=True, env=env)
    if out.returncode:
        from .errors import TTileError

        raise TTileError(f"measuring the {threads}-thread peak failed: {out.stderr.decode().strip().splitlines()[-1:]}")
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


def measure_bandwidth(cpu: CPUModel, threads: int = 1, mib: int = 256, repeat: int = 5) -> dict:
    """Memory bandwidth of `threads` threads streaming `mib` MiB in and out (best of `repeat`)."""
    import numpy as np
    import tvm

    use_threads(threads)
    elements = mib * 1024 * 1024 // 4
    elements -= elements % (threads * cpu.lanes)
    lib = tvm.compile(tvm.IRModule({"main": stream_primfunc(cpu.lanes, elements, threads)}),
                      target=cpu.target(threads))
    dev = tvm.cpu()
    a = tvm.runtime.tensor(np.ones(elements, "float32"), dev)
    b = tvm.runtime.tensor(np.zeros(elements, "float32"), dev)
    secs = sorted(evaluator(lib.mod, repeat=repeat, min_repeat_ms=0)(a, b).results)
    return {"bandwidth_gbs": 2 * 4 * elements / secs[0] / 1e9, "bandwidth_bytes_streamed": 2 * 4 * elements}


def peak_path(cpu: CPUModel, threads: int = 1, precision: str = "fp32"):
    kind = "" if precision == "fp32" else f"_{precision}"  # (fp32's files keep their names)
    return cpu.cache_dir / (f"peak{kind}.json" if threads == 1 else f"peak{kind}_{threads}threads.json")


def host_nominal(cpu: CPUModel, threads: int = 1) -> dict:
    """The nominal fp32 rate of `threads` cores of this host (limits.nominal), from the family and model in the
    CPU's name and the clock /proc/cpuinfo reports."""
    ident = re.search(r"family (\d+) model (\d+)", cpu.name)
    vendor = "AMD" if "AMD" in cpu.name else "Intel" if "Intel" in cpu.name else "unknown"
    mhz = None
    try:
        with open("/proc/cpuinfo") as f:
            mhz = max((float(ln.split(":")[1]) for ln in f if ln.startswith("cpu MHz")), default=None)
    except (OSError, ValueError):
        pass
    return limits.nominal(vendor, int(ident[1]) if ident else None, int(ident[2]) if ident else None,
                          cpu.isa.name, mhz, threads)


_RUN_PEAKS: dict = {}


def run_peak(cpu: CPUModel, threads: int = 1, precision: str = "fp32") -> dict:
    """The peak (and memory bandwidth) measured in this process, once per CPU and thread count: what a run's
    "% of peak" divides by, so that it reflects the machine's moment. A measurement above the cached best revises
    the cache (limits.merge). A CPU that cannot run here (a cross-compiled ISA) gets the cached peak."""
    if not _runs_here(cpu.isa.name):
        return peak(cpu, threads=threads, precision=precision)
    key = (str(cpu.cache_dir), threads, precision)
    if key not in _RUN_PEAKS:
        peak(cpu, threads=threads, remeasure=True, precision=precision)
    return _RUN_PEAKS[key]


def peak(cpu: CPUModel, rebuild: bool = False, threads: int = 1, remeasure: bool = False,
         precision: str = "fp32") -> dict:
    """The best peak of `cpu` at `threads` threads ever measured (a capacity: a busy moment only lowers it), per
    CPU/ISA/TVM/tvm_ttile version and thread count. A first measurement is the best of limits.FIRST_BURSTS
    spaced bursts; `remeasure` measures once more now (kept for this process's run_peak) and revises the cache
    if it finds more; `rebuild` forgets the cache and measures afresh."""
    path = peak_path(cpu, threads, precision)
    cached = None if rebuild else _cached_peak(path)
    if cached and not remeasure:
        return cached
    with measuring(path, f"the {threads}-thread {precision} peak"), phase("peaks"):
        cached = None if rebuild else _cached_peak(path)  # measured by another process while this one waited
        if cached and not remeasure:
            return cached
        if cached:
            measured = dict(cpu.describe(), **measure_peak(cpu, threads=threads, precision=precision))
        else:
            measured = dict(cpu.describe(), **measure_peak(cpu, repeat=3, threads=threads,
                                                           bursts=limits.FIRST_BURSTS, precision=precision))
        if _runs_here(cpu.isa.name) and precision == "fp32":  # (limits.nominal knows fp32 rates)
            measured.update(host_nominal(cpu, threads))
        _RUN_PEAKS[(str(cpu.cache_dir), threads, precision)] = measured
        record, revised = limits.merge(cached, measured)
        write_json(path, record)
    log = logging.getLogger(__name__)
    for r in revised:
        log.warning("the cached %d-thread %s was revised from %.1f to %.1f (measured more now)%s", threads,
                    r["limit"], r["from"], r["to"], "; catalogs are re-thresholded from their stored measurements "
                    "on their next use" if r["limit"] == "peak_gflops" and threads == 1 else "")
    for line in limits.problems(record):
        log.warning("%s", line)
    return record


def _cached_peak(path) -> dict | None:
    """The cached record, or None; a damaged one is reported and measured again, never reused."""
    cached = read_json(path)
    if cached is None and path.exists():
        logging.getLogger(__name__).warning("%s is damaged: the peak is measured again", path)
    return cached if cached and "peak_gflops" in cached else None
