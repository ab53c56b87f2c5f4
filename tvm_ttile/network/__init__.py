"""Whole networks with Relax: extract the tuning tasks, tune them, build with the database.

    net = load_model("resnet18")                       # or an .onnx path, or a torch.nn.Module
    result = tune_network(net.mod, work_dir="rn18")    # tvm_ttile for conv2d/matmul tasks, MetaSchedule for the rest
    vm = build_network(net.mod, "rn18")                # tvm.relax.VirtualMachine

Conv2d runs in NHWC with HWIO (= RSCK) weights, the layout the microkernels are made for: `prepare` converts
the imported (NCHW) module. Tasks are the fused PrimFuncs of Relax's CPU pipeline (conv2d + bias + residual add
+ ReLU is one task); each task's records go to one MetaSchedule JSON database in work_dir, so an interrupted
run resumes and `build_network` (MetaSchedule's compile_relax pipeline) finds every record.

Weights are constants: with `prepack` (the default) each fused function marks them layout-free, its schedule
copies them into the layout its microkernel streams (packing.pack_weights; MetaSchedule's RewriteLayout does
the same for its own tasks), tuning times the kernel on packed weights, and `build_network` splits the copies
out and folds them on the constants: packing costs nothing per inference (TVM's cpu_weight_prepack, without
its change of the module's interface).
"""
from ..relax import Task, extract_tasks, fuse, prepare
from .build import build_executable, build_network, run, verify_against_untuned, vm_of
from .defaults import (CACHE_STATES, COLD_SETTINGS, NETWORK_SAMPLER_OPTIONS, NETWORK_STRATEGY,
                       NETWORK_STRATEGY_OPTIONS, TWIN_SCHEMES, network_sampler_options, network_strategy_options)
from .in_network import task_symbol
from .policy import POLICIES, create as create_policy
from .profile import latency, profile, spread
from .tune import DENSE_POLICIES, NetworkTuneResult, TaskResult, claim_task_dir, tune_network
from .winograd_choice import choose_winograd, winograd_tasks

__all__ = ["CACHE_STATES", "COLD_SETTINGS", "DENSE_POLICIES", "NETWORK_SAMPLER_OPTIONS", "NETWORK_STRATEGY",
           "NETWORK_STRATEGY_OPTIONS", "POLICIES", "TWIN_SCHEMES", "NetworkTuneResult", "Task", "TaskResult",
           "build_executable", "build_network", "choose_winograd", "claim_task_dir", "create_policy", "extract_tasks",
           "fuse", "latency", "network_sampler_options", "network_strategy_options", "prepare", "profile", "run",
           "spread", "task_symbol", "tune_network", "verify_against_untuned", "vm_of", "winograd_tasks"]
