"""(Relax) From an imported module to tuning tasks: the rewrites that `prepare` applies (rewrites.py, transposed.py),
what they share (bindings.py) and the fused tasks that tuning searches (tasks.py)."""
from .bindings import binding_of, replace_calls, static_shape
from .rewrites import MAX_OUTPUT_GROWTH, prepare
from .tasks import Task, extract_tasks, fuse, fuse_passes

__all__ = ["MAX_OUTPUT_GROWTH", "Task", "binding_of", "extract_tasks", "fuse", "fuse_passes", "prepare",
           "replace_calls", "static_shape"]
