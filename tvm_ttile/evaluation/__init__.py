"""What results files share: the provenance header (command, machine, date), markdown tables, plots
(report.py), and the statistics comparisons use (stats.py)."""
from .report import md_table, provenance
from .stats import geomean, spearman

__all__ = ["geomean", "md_table", "provenance", "spearman"]
