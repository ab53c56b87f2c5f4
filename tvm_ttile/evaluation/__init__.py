"""What results files share: the provenance header (command, machine, date), markdown tables, plots
(report.py), and the statistics comparisons use (stats.py)."""
from .report import command_line, md_table, provenance, publish
from .stats import geomean, spearman

__all__ = ["command_line", "geomean", "md_table", "provenance", "publish", "spearman"]
