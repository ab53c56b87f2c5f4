"""Cost models of the structured space: working sets and data movement of a scheme (working_sets), the memory
hierarchy measured once per CPU (hierarchy), PolyDL's cost and a predicted time (analytic), and rankers that
order schemes before any is measured (rankers: analytic ones and a learned pairwise one)."""
from .analytic import CostContext, features, polydl_cost, predicted_seconds  # noqa: F401
from .working_sets import loop_levels, per_cache, traffic, working_sets  # noqa: F401
