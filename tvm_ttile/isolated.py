"""End-to-end latency of whole networks, each system timed in a fresh process of its own.

Timed in one process, systems disturb each other at N threads: a library's thread pool outlives its run, and a
TVM build timed right after ONNX Runtime in the same process loses (90th percentile 3x its median:
benchmarks/results/threads_zen4/ort_interference_resnet18.md). So each system is saved to a file (a TVM
executable as a shared library, an ONNX model, an exported torch program) and timed by `python -m tvm_ttile.isolated`
in a process that holds only it, one process per system and round, round-robin over the rounds so that a
disturbed moment of this shared machine hits every system alike.

    timer = IsolatedTimer(x, threads=2, tmp_dir)
    timer.add("tvm_ttile", Saved.tvm(executable, tmp_dir, "tvm_ttile"))
    timer.add("onnxruntime", Saved.onnx(onnx_model, input_name, tmp_dir))
    latencies_ms = timer.run(rounds=3)          # {"tvm_ttile": [...], "onnxruntime": [...]}
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np

from .errors import TTileError
from .timing import evaluator, round_robin

REPEATS = 5  # per process: each repeat at least MIN_REPEAT_MS of back-to-back inferences
MIN_REPEAT_MS = 200


@dataclasses.dataclass(frozen=True)
class Saved:
    """A system saved for timing in another process: its kind ("tvm" or an engine's name), its file, and for
    ONNX the input's name."""
    kind: str
    path: str
    input_name: str = ""

    @classmethod
    def tvm(cls, executable, directory: str, name: str) -> "Saved":
        path = os.path.join(directory, f"{name}.so")
        executable.export_library(path)
        return cls("tvm", path)

    @classmethod
    def onnx(cls, model, input_name: str, directory: str) -> "Saved":
        """ONNX Runtime on an onnx.ModelProto."""
        return cls._engine("onnxruntime", model, None, directory, input_name)

    @classmethod
    def torch(cls, module, x: np.ndarray, directory: str) -> "Saved":
        return cls._engine("torch", module, x, directory)

    @classmethod
    def library(cls, lib: str, net, x: np.ndarray, directory: str) -> "Saved":
        """A library (baselines.engines.ENGINES: "onnxruntime", "openvino", "torch", ...) on a network
        (models.importers.Network)."""
        from .baselines.engines import create

        return cls._engine(lib, create(lib).model_of(net), x, directory, net.input_name)

    @classmethod
    def _engine(cls, lib: str, model, x, directory: str, input_name: str = "") -> "Saved":
        from .baselines.engines import create

        return cls(lib, create(lib).save(model, x, directory), input_name)


class IsolatedTimer:
    def __init__(self, x: np.ndarray, threads: int, directory: str):
        self.threads, self.directory = threads, directory
        self.input_path = os.path.join(directory, "input.npy")
        np.save(self.input_path, np.ascontiguousarray(x))
        self.systems: dict[str, Saved] = {}
        self.envs: dict[str, dict] = {}

    def add(self, name: str, saved: Saved, env: dict | None = None) -> None:
        """`env`: variables set in this system's processes only, e.g. a glibc tunable that only takes effect
        when a process starts."""
        self.systems[name] = saved
        self.envs[name] = dict(env or {})

    def run(self, rounds: int, repeats: int = REPEATS) -> dict:
        """{name: per-repeat latencies in ms}, `repeats` from each of `rounds` processes per system."""
        samples = round_robin({name: (lambda name=name, saved=saved: self._time(name, saved, repeats))
                               for name, saved in self.systems.items()}, rounds)
        return {name: [ms for process in runs for ms in process] for name, runs in samples.items()}

    def _time(self, name: str, saved: Saved, repeats: int) -> list:
        env = {**os.environ, "TVM_NUM_THREADS": str(self.threads), **self.envs.get(name, {})}  # TVM: its pool, once
        args = [sys.executable, "-m", "tvm_ttile.isolated", json.dumps(dataclasses.asdict(saved)), self.input_path,
                str(self.threads), str(repeats)]
        proc = subprocess.run(args, env=env, capture_output=True, text=True)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise TTileError(f"timing {name} in its own process failed (exit code {proc.returncode}): {last}")
        return json.loads(lines[-1])


def _time_saved(saved: Saved, x: np.ndarray, threads: int, repeats: int) -> list:
    if saved.kind == "tvm":
        import tvm

        from .network import vm_of

        vm = vm_of(tvm.runtime.load_module(saved.path))
        xt = tvm.runtime.tensor(x, tvm.cpu())
        vm["main"](xt)  # warm-up
        f = evaluator(vm, "main", repeat=repeats, min_repeat_ms=MIN_REPEAT_MS)
        return [1e3 * s for s in f(xt).results]
    from .baselines.engines import create, latency_ms

    run, _ = create(saved.kind).open(saved.path, saved.input_name, x, threads)
    return latency_ms(run, repeats, MIN_REPEAT_MS / 1e3)


def main(argv=None) -> None:
    saved_json, input_path, threads, repeats = argv or sys.argv[1:]
    from . import cpu as cpu_mod

    cpu_mod.use_threads(int(threads))
    ms = _time_saved(Saved(**json.loads(saved_json)), np.load(input_path), int(threads), int(repeats))
    print(json.dumps(ms))


if __name__ == "__main__":
    main()
