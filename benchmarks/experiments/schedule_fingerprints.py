"""Fingerprints of the scheduled TIR of fixed fp32 schemes (ResNet18-2's conv2d, a 196x512x256 matmul; schemes
drawn with a fixed seed over the first catalog candidates): the same fingerprints at two commits mean their fp32
builds are the same code, which no timing can show as precisely. Nothing is timed.

    PYTHONPATH=<checkout at commit A> python benchmarks/experiments/schedule_fingerprints.py
    PYTHONPATH=<checkout at commit B> python benchmarks/experiments/schedule_fingerprints.py
"""
import hashlib

from tvm_ttile import cpu as cpu_mod
from tvm_ttile.lowering import lower
from tvm_ttile.microkernels import family
from tvm_ttile.operators import Matmul, get_layer
from tvm_ttile.samplers import make_sampler
from tvm_ttile.space import Problem, Space


def main() -> None:
    host = cpu_mod.detect_host()
    for op, kind in ((get_layer("ResNet18-2"), "conv2d"), (Matmul(M=196, N=512, K=256), "matmul")):
        problem = Problem.from_operator(op, host.lanes, host.isa.name)
        space = Space(problem, family.candidates(kind, host.isa, 64)[:12], threads=1)
        for scheme in make_sampler("ttile", seed=3).sample_many(space, 3):
            text = lower(problem, scheme, op.prim_func(host.lanes), threads=1).sch.mod.script()
            print(kind, hashlib.sha1(text.encode()).hexdigest()[:12], scheme.text)


if __name__ == "__main__":
    main()
