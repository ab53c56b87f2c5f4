"""Tutorial 1: from your CPU to a tensorized, near-peak microkernel inside a TVM schedule.

    python tutorials/01_microkernels.py

1. detect the CPU and measure its fp32 peak (through TVM, cached);
2. describe a microkernel and register it as a TVM TensorIntrin;
3. tensorize a matmul with it in an ordinary `tvm.s_tir.Schedule`, check it against numpy, time it.
"""
import numpy as np
import tvm

from tvm_ttile import cpu as cpu_mod
from tvm_ttile.microkernels import intrin
from tvm_ttile.microkernels.spec import Microkernel
from tvm_ttile.operators import Matmul

# 1. The CPU model: ISA, lanes, registers, measured peak.
cpu = cpu_mod.detect_host()
peak = cpu_mod.peak(cpu)["peak_gflops"]
print(f"{cpu.name}: {cpu.isa.name}, {cpu.lanes} lanes, {cpu.vector_registers} registers, peak {peak:.0f} GFLOPS")

# 2. A BLIS-like microkernel: 4 rows x 3 vectors of accumulators, over a k loop of 64.
mk = Microkernel.make("matmul", cpu.isa.name, cpu.lanes, red=64, i=4, j=3)
mk.check_registers()
print("microkernel", mk.text, "->", intrin.register(mk))

# 3. A matmul tiled so that its innermost tile is the microkernel, then tensorized.
prob = Matmul(M=96, N=12 * mk.tile["j"], K=512)
sch = tvm.s_tir.Schedule(prob.prim_func())
block = sch.get_sblock("matmul")
i, j, k = sch.get_loops(block)
io, ii = sch.split(i, [None, mk.get("i")])
jo, ji = sch.split(j, [None, mk.tile["j"]])
ko, ki = sch.split(k, [None, mk.red])
sch.reorder(jo, io, ko, ki, ii, ji)
intrin.tensorize_nest(sch, block, mk, {"k": ki, "i": ii, "j": ji}, init_loop=ko)
lib = tvm.compile(sch.mod, target=cpu.target(1))

a, b = prob.random_inputs()
dev = tvm.cpu()
out = tvm.runtime.tensor(np.zeros((prob.M, prob.N), np.float32), dev)
args = (tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), out)
lib(*args)
np.testing.assert_allclose(out.numpy(), prob.reference(a, b), rtol=1e-4, atol=1e-3)
secs = np.median(lib.mod.time_evaluator("main", dev, number=20, repeat=5).__call__(*args).results)
gflops = prob.flops / secs / 1e9
print(f"matmul {prob.M}x{prob.N}x{prob.K}: verified against numpy, {gflops:.1f} GFLOPS = {100 * gflops / peak:.0f}% "
      "of peak, 1 thread (a fixed hand-picked tiling: choosing the tiles is the search space's job)")
