"""What every results file starts with and how its tables are written."""
from __future__ import annotations

import os
import shlex
import sys
import time


def command_line(command: list | None = None) -> str:
    """The command that made a results file, as a user retypes it: `command` (this process's argv by default),
    a script given by its path relative to the working directory after "python"."""
    argv = list(command if command is not None else sys.argv)
    if argv and argv[0].endswith(".py"):
        argv = ["python", os.path.relpath(argv[0])] + argv[1:]
    return shlex.join(argv)


def provenance(cpu=None, *, threads: int | None = None, command: list | None = None, seconds: float | None = None,
               extra: str = "") -> str:
    """One line saying how a results file was made: the command (this process's by default, the script's path
    relative to the working directory), the date, the machine (`cpu`: a cpu.CPUModel) and thread count, and how
    long the run took."""
    parts = [f"Command: `{command_line(command)}`", time.strftime("%Y-%m-%d %H:%M")]
    if cpu is not None:
        parts.append(f"{cpu.describe()['cpu']} ({cpu.isa.name})")
    if threads is not None:
        parts.append(f"{threads} thread{'s' if threads != 1 else ''}")
    if seconds is not None:
        parts.append(f"{seconds:.0f} s")
    return "; ".join(parts) + (f". {extra}" if extra else ".")


def md_table(header, rows, align: str | None = None) -> list:
    """A markdown table's lines: `header` cells, `rows` of cells (converted with str), `align` one character per
    column ("l" left, "r" right; by default the first column left, the rest right)."""
    header = [str(h) for h in header]
    align = align or "l" + "r" * (len(header) - 1)
    if len(align) != len(header):
        raise ValueError(f"align {align!r} has {len(align)} columns, the header {len(header)}")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    for row in rows:
        row = [str(c) for c in row]
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells under a header of {len(header)}: {row}")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def publish(text: str, path: str | None = None) -> None:
    """A results text written to `path` (when given) and printed."""
    if path:
        with open(path, "w") as f:
            f.write(text)
    print(text)
