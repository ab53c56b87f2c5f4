"""tvm_ttile: TTile's structured autotuning space for Apache TVM."""
import os as _os

__version__ = "0.1.0"

# The CPUs this process may use (taskset, a cgroup's cpuset), read before TVM's thread pool binds its main thread
# to one of them; processes it starts inherit the variable, and the builder's workers take these CPUs back
# (measure.unpin_build_worker) instead of escaping to every CPU of the machine.
if hasattr(_os, "sched_getaffinity"):
    _os.environ.setdefault("TVM_TTILE_CPUS", ",".join(map(str, sorted(_os.sched_getaffinity(0)))))
