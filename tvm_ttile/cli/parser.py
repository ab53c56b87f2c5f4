"""The `tvm-ttile` argument parser: one function per subcommand."""
from __future__ import annotations

import argparse

from ..baselines.engines import ENGINES
from ..network.budget import BUDGETS
from ..network.search import LIBRARIES
from ..winograd import DEFAULT as WINOGRAD_DEFAULT
from .arguments import (PREPACK_HELP, add_cpu_args, add_precision_arg, add_strategy_option, dir_arg, host_port,
                        non_negative, pad_arg, parents, threads_arg, trials_or_same)
from .commands import cmd_compare, cmd_microkernels, cmd_peak, cmd_tune, cmd_tune_model


def make_parser():
    parser = argparse.ArgumentParser(prog="tvm-ttile", description="TTile's structured autotuning space for TVM")
    sub = parser.add_subparsers(dest="command", required=True)
    output, tuning = parents()
    for add in (_add_peak, _add_microkernels, _add_tune, _add_tune_model, _add_compare):
        add(sub, output, tuning)
    return parser


def _add_peak(sub, output, tuning) -> None:
    p = sub.add_parser("peak", help="measure (once, then cached) the peak and memory bandwidth", parents=[output])
    p.add_argument("--rebuild", action="store_true", help="measure again instead of reading the cache")
    p.add_argument("--threads", type=threads_arg, default=1, help="the peak and memory bandwidth of this many threads")
    add_precision_arg(p, "the peak of the dot-product instruction")
    add_cpu_args(p)
    p.set_defaults(func=cmd_peak)


def _add_microkernels(sub, output, tuning) -> None:
    from ..microkernels.spec import FAMILIES

    p = sub.add_parser("microkernels", help="build (once, then cached) and show the microkernel catalog",
                       parents=[output])
    p.add_argument("--op", choices=[*FAMILIES, "all"], default="all")
    p.add_argument("--rebuild", action="store_true", help="measure every candidate again")
    p.add_argument("--threshold", type=float, default=0.80, help="keep kernels at >= this fraction of peak")
    p.add_argument("--top", type=int, default=15, help="rows of the kept list to print")
    add_precision_arg(p, "microkernels")
    add_cpu_args(p)
    p.set_defaults(func=cmd_microkernels)


def _add_tune(sub, output, tuning) -> None:
    p = sub.add_parser("tune", help="tune one conv2d or conv1d (grouped too), depthwise conv2d or conv1d, matmul or "
                       "batch matmul in the structured space", parents=[output, tuning])
    p.add_argument("op", choices=["conv2d", "depthwise", "conv1d", "depthwise1d", "matmul", "batch_matmul"])
    p.add_argument("--layer", help="a named layer, e.g. ResNet18-2, Yolo9000-12, bert-qkv")
    for name, helptext in (("K", "output channels (conv2d) / reduction size (matmul)"), ("C", "input channels"),
                           ("H", "input height"), ("W", "input width (conv1d, depthwise1d: length)"), ("hw", "input height = width (shorthand)"),
                           ("M", "rows"), ("N", "columns")):
        p.add_argument(f"--{name}", type=int, help=helptext)
    p.add_argument("--R", type=int, default=3, help="kernel height (default 3)")
    p.add_argument("--S", type=int, help="kernel width (default: --R)")
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--pad", type=pad_arg, default=(0,), help="1 (all sides), 0,3 (height, width) or 0,3,0,3 (top, "
                   "left, bottom, right)")
    p.add_argument("--dilation", type=int, default=1)
    p.add_argument("--batch", type=int, default=1, help="conv2d / conv1d batch (the parallel level may split it), "
                   "batch_matmul's number of matrices")
    p.add_argument("--groups", type=int, default=1, help="conv2d / conv1d groups: C/groups input channels per group "
                   "of K/groups outputs (ResNeXt); groups = C = K is `tune depthwise` / `tune depthwise1d`")
    p.add_argument("--layout", choices=["nn", "nt", "tn"], help="batch_matmul operands: nn A[B,M,K] x B[B,K,N]; nt "
                   "the second stored [B,N,K] (Q x K^T); tn the first stored [B,K,M]")
    p.add_argument("--dense", action="store_true", help="matmul with weights stored W[N,K]")
    p.add_argument("--prepack", action="store_true", help=PREPACK_HELP)
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--seed", type=non_negative, default=0)
    p.add_argument("--sampler", default="ttile", help="ttile (paper 6.1), single, combined, levels")
    p.add_argument("--strategy", choices=["ttile", "model", "gbfs", "na2c", "automcl"], default="ttile",
                   help="ttile: the structured space, schemes measured as drawn; model: the structured space, a "
                        "pool of drawn schemes ranked before measuring (with --trials 0: build the top-ranked "
                        "one, no candidate timed); gbfs, na2c: the structured space walked from measured schemes "
                        "to their neighbours (G-BFS, N-A2C); automcl: AutoMCL's computes and analytic space (dense)")
    p.add_argument("--work-dir", type=dir_arg, help="MetaSchedule database directory (resumes if it exists)")
    p.add_argument("--rpc-tracker", type=host_port, help="host:port of a TVM RPC tracker to measure on")
    p.add_argument("--rpc-key", default="local", help="device key at the RPC tracker")
    p.add_argument("--history", action="store_true", help="with --json: every trial's scheme and GFLOPS")
    add_precision_arg(p, "the operator")
    add_cpu_args(p)
    add_strategy_option(p)
    p.set_defaults(func=cmd_tune)


def _add_tune_model(sub, output, tuning) -> None:
    from ..models.zoo import MODELS

    p = sub.add_parser("tune-model", help="tune and compile a whole network (Relax) and compare it",
                       parents=[output, tuning])
    p.add_argument("model", help=", ".join(MODELS) + ", or a path to an .onnx file")
    p.add_argument("--input-shape", help="NCHW input shape when the model's is dynamic, e.g. 1,3,224,224")
    p.add_argument("--trials-per-task", type=non_negative, default=50,
                   help="the most tvm_ttile trials a conv2d/matmul task measures (0: a zero-trial network, each "
                        "task's top-ranked scheme verified and built, nothing timed)")
    p.add_argument("--budget", choices=list(BUDGETS), default="share",
                   help="; ".join(f"{b.kind}: {b.doc}" for b in BUDGETS.values()))
    p.add_argument("--other-trials", type=non_negative, default=0,
                   help="MetaSchedule's evolutionary search per other task (pooling, layout, ...), beside "
                        "tvm_ttile's memory-bound schedules (default 0: those schedules alone)")
    p.add_argument("--memory-bound", choices=["on", "off"], default="on",
                   help="measure tvm_ttile's memory-bound schedules of the other tasks (off: the default build)")
    p.add_argument("--fresh", action="store_true",
                   help="ignore the record library (records of tasks tuned in earlier runs on this CPU) and add "
                        "nothing to it")
    p.add_argument("--seed", type=non_negative, default=0)
    p.add_argument("--work-dir", type=dir_arg, help="database and report directory (default tune_<model>; resumes)")
    p.add_argument("--metaschedule-trials", type=trials_or_same, default=0,
                   help="also tune the network with MetaSchedule's tune_relax for this many trials in all "
                        "('same': as many as tvm_ttile measured)")
    p.add_argument("--libraries", default=",".join(LIBRARIES),
                   help=f"library references to time (optional extras): any of {', '.join(ENGINES)}")
    p.add_argument("--fp32-model", metavar="MODEL",
                   help="for a quantized model: the fp32 model it was quantized from (built-in name or .onnx); "
                        "the report gives top-1 agreement and error against it over 100 random inputs")
    p.add_argument("--strategy", choices=["ttile", "model", "gbfs", "na2c"], default=None,
                   help="how conv2d/matmul tasks pick what to measure: model (the default: a pool of drawn schemes "
                        "ranked by the cost model first, measured from the top; see --strategy-option), ttile "
                        "(schemes measured as drawn), gbfs or na2c (walks from measured schemes to their "
                        "neighbours)")
    p.add_argument("--dense", choices=["tvm_ttile", "automcl"], default="tvm_ttile",
                   help="who tunes dense layers (matmul by constant weights): tvm_ttile's space, or AutoMCL's "
                        "computes with the classifier's pick (--trials-per-task trials per shape)")
    p.add_argument("--cache-flush", nargs="?", choices=["on", "weights", "off"], const="on", default="on",
                   help="time tvm_ttile's candidates with the CPU caches flushed, as a layer meets its weights in the "
                        "network (default on: builds tuned so ran level with or faster than builds tuned hot, "
                        "tuned in 0.6x the time); weights: only the weights and the output flushed, the input and "
                        "residuals kept in cache")
    p.add_argument("--no-prepack", action="store_true",
                   help="keep the model's weight layout (default: pack conv2d/matmul weights once at build time)")
    p.add_argument("--in-network-top", type=non_negative, metavar="N", default=0,
                   help="after tuning, time each conv2d/matmul task's N fastest candidates inside the running "
                        "network and build with the fastest there (default 0: tuning's pick; the report then also "
                        "says how well each way of timing candidates alone ranks them as the network does)")
    p.add_argument("--winograd", choices=["on", "off"], default=WINOGRAD_DEFAULT,
                   help="also compute each 3x3 stride-1 conv2d with Winograd F(2,3) and F(4,3) and build, layer by "
                        "layer, whichever form measured faster (default on); off: direct convolutions only")
    add_precision_arg(p, "the network's conv2d and matmul layers (a QDQ model is int8 without it)")
    add_strategy_option(p)
    p.set_defaults(func=cmd_tune_model)


def _add_compare(sub, output, tuning) -> None:
    from ..baselines import SYSTEMS
    from ..compare import DEFAULT_SYSTEMS

    p = sub.add_parser("compare", help="tune layers with tvm_ttile and the baselines side by side",
                       parents=[output, tuning])
    p.add_argument("--strategy-option", action="append", default=[], metavar="[SYSTEM:]NAME=VALUE",
                   help="an option of a system's search: gbfs:starts=8 (that system's), or rho=8 (every chosen "
                        "system whose search has it: " + "; ".join(
                            f"{n}: {', '.join(s.strategy_options())}" for n, s in SYSTEMS.items()
                            if s.strategy_options()) + ")")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--layers", default="ResNet18-2,Yolo9000-12", help="named layers, comma separated")
    g.add_argument("--shapes", metavar="FILE", help='a JSON file of your own shapes: {"layers": [{"name": "my-conv", '
                   '"op": "conv2d", "K": 64, "C": 64, "H": 56, "W": 56, "R": 3, "S": 3, "stride": 1, "pad": [1, 1]}, '
                   '{"name": "my-mm", "op": "matmul", "M": 128, "N": 768, "K": 768}]}')
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                   help=", ".join(name + (f" ({system.operators[0]} only)" if len(system.operators) == 1 else "")
                                  for name, system in SYSTEMS.items()))
    p.add_argument("--budget", type=int, default=200, help="trials per tuner, layer and seed")
    p.add_argument("--ttile-budget", type=int, help="trials for tvm_ttile (default: --budget)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per tuner (tvm_ttile; baselines too by default)")
    p.add_argument("--baseline-seeds", type=int, help="seeds for the TVM baselines (default: --seeds)")
    p.add_argument("--retime-rounds", type=int, default=3,
                   help="round-robin rounds timing every best side by side after tuning (0: no re-timing)")
    p.add_argument("--out", type=dir_arg, default="compare", help="results directory (resumes from its work/ databases)")
    p.add_argument("--prepack", action="store_true", help=PREPACK_HELP + "; AutoMCL's computes still pack in the "
                   "timed function, as in its paper, and libraries pack on every call")
    p.set_defaults(func=cmd_compare)
