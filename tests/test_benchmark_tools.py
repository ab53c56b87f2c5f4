"""Every reusable benchmark tool answers --help (benchmarks/tools/: each takes a work dir, a model or a run)."""
import pathlib
import subprocess
import sys

import pytest

TOOLS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "tools"
HELPERS = {"compare_run.py", "tuned_network.py"}  # imported by the tools, not run


@pytest.mark.parametrize("tool", sorted(p.name for p in TOOLS.glob("*.py") if p.name not in HELPERS))
def test_tool_answers_help(tool):
    proc = subprocess.run([sys.executable, str(TOOLS / tool), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout


def test_every_tool_is_indexed():
    index = (TOOLS.parent / "README.md").read_text()
    missing = [p.name for p in TOOLS.glob("*.*") if p.name not in HELPERS and f"tools/{p.name}" not in index]
    assert not missing, f"benchmarks/README.md does not list {missing}"
