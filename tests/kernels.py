"""Small hand-made 'kept' microkernel sets, so space and lowering tests need no measured catalog. Kernels the
ISA's register file cannot hold (e.g. 5 x 2 x 2 accumulators with AVX2's 16 registers) are left out."""
from tvm_ttile.microkernels.spec import Microkernel


def _fitting(kernels):
    return [mk for mk in kernels if mk.min_registers <= mk._regs]


def conv_kept(isa, lanes, red=16):
    out = [Microkernel.make("conv2d", isa, lanes, red, h=h, w=w, k=k) for h in (1, 2, 3, 4, 5) for w in (1, 2) for k in (1, 2)]
    out += [Microkernel.make("conv2d", isa, lanes, red, h=h, k=1, r=3, s=3) for h in (2, 3)]
    return _fitting(out)


def matmul_kept(isa, lanes, red=16):
    return _fitting([Microkernel.make("matmul", isa, lanes, red, i=i, j=j) for i in (1, 2, 3, 4, 5) for j in (1, 2)])


def depthwise_kept(isa, lanes, red=3):
    out = [Microkernel.make("depthwise", isa, lanes, red, s=s, h=h, w=w, k=k)
           for s in (1, 3) for h in (1, 2) for w in (1, 2, 4, 7) for k in (1, 2)]
    return _fitting(out)


def in_another_process(module: str, call: str):
    """The value of `call` (a JSON-able expression over test module `module`'s names) computed by a fresh Python
    with another string-hash seed: what a seeded search gives must not depend on the process."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    code = f"import json, sys; sys.path.insert(0, 'tests'); from {module} import *; print(json.dumps({call}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "7", "PATH": ""}, cwd=str(Path(__file__).resolve().parents[1]))
    return json.loads(out.stdout.strip().splitlines()[-1])


def blocked_weights(lowered) -> bool:
    """Whether a lowered kernel (lowering.Lowered) reads its constant weights in the blocked layout
    (packing.pack_weights): its region's intrinsic is a packed variant, and the packing is a copy marked as
    build-time preprocessing."""
    from tvm_ttile.microkernels.intrin import parse_suffix
    from tvm_ttile.packing import LAYOUT_REWRITE

    return parse_suffix(lowered.intrinsics[0])[1] > 0 and LAYOUT_REWRITE in str(lowered.sch.mod)
