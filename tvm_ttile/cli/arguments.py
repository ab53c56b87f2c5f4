"""The command line's argument types, shared options and their help (generated from the declared options)."""
from __future__ import annotations

import argparse
import sys

from ..errors import TTileError


def number(value: str):
    try:
        return float(value)
    except ValueError:
        return value


def parse_options(items, flag: str = "--sampler-option") -> dict:
    """NAME=VALUE strings -> options; numbers and true/false are converted (the sampler checks names and
    types)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise TTileError(f"{flag} takes NAME=VALUE, got {item!r}")
        low = value.lower()
        out[name] = int(value) if value.lstrip("-").isdigit() else (low == "true") if low in ("true", "false") \
            else number(value)
    return out


MAX_THREADS = 1024
THREADS_HELP = ("threads to tune and run with: a number, or 'all' (the physical cores, as MetaSchedule counts "
                "them); schemes get a parallel level for it, and timings are kept per thread count")


def physical_cores() -> int:
    import os

    import psutil

    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def threads_arg(value):
    """--threads: a whole number in [1, MAX_THREADS] or 'all'; a warning above the cores this host has."""
    if value == "all":
        return physical_cores()
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"expected a number of threads from 1 to {MAX_THREADS} or 'all', got {value!r}")
    if n > physical_cores():
        print(f"tvm-ttile: warning: {n} threads on a host with {physical_cores()} physical cores: threads will share "
              "cores, and timings will say little", file=sys.stderr)
    return n


def host_port(value):
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected host:port (e.g. 127.0.0.1:9190), got {value!r}")
    return host, int(port)


def trials_or_same(value):
    if value == "same":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of trials or 'same', got {value!r}") from None


def pad_arg(value):
    try:
        pads = tuple(int(v) for v in value.split(","))
    except ValueError:
        pads = ()
    if len(pads) not in (1, 2, 4) or any(v < 0 for v in pads):
        raise argparse.ArgumentTypeError(f"expected 1, 0,3 (height, width) or 0,3,0,3 (top, left, bottom, right) "
                                         f"with whole numbers >= 0, got {value!r}")
    return pads


def dir_arg(value):
    from ..workdir import check_dir

    try:
        return check_dir(value)
    except TTileError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def non_negative(value):
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value!r}")
    return n


CONFIRM_HELP = ("after tuning, time the N fastest candidates of each task again together (3 round-robin rounds) and "
                "keep the fastest then: one slow repeat can bury a good candidate on a shared machine (default 3, or "
                "$TVM_TTILE_CONFIRM_TOP; 0: off; the TVM baselines get the same)")
PREPACK_HELP = ("weights are constants, as in a network: the tuned kernel may read them packed once at build "
                "time, and timing leaves that packing out (tvm_ttile, MetaSchedule and the templates); int8 and "
                "bf16 weights always are")


def add_precision_arg(p, what: str) -> None:
    """--precision, its choices from precision.PRECISIONS: one declaration for every command that takes it."""
    from ..precision import PRECISIONS

    p.add_argument("--precision", choices=list(PRECISIONS), default="fp32",
                   help=f"{what} at this precision (int8: u8 x s8 -> s32 on VNNI; bf16: bf16 x bf16 -> fp32 on "
                        "AVX512_BF16; matmul and conv2d for now; refused on a CPU without the instruction)")


def add_cpu_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--isa", choices=["avx2", "avx512", "neon"], help="force a narrower ISA of the host")
    g.add_argument("--target", help='a TVM llvm target as JSON, e.g. \'{"kind":"llvm","mcpu":"x86-64-v3"}\'')


def parents():
    """The options several commands share, declared once: (output, tuning)."""
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print the result as JSON")
    output.add_argument("--verbose", action="store_true",
                        help="MetaSchedule's log while tuning, and the traceback of an unexpected error")
    tuning = argparse.ArgumentParser(add_help=False)
    tuning.add_argument("--threads", type=threads_arg, default=1, help=THREADS_HELP)
    tuning.add_argument("--confirm-top", type=non_negative, metavar="N", help=CONFIRM_HELP)
    tuning.add_argument("--sampler-option", action="append", default=[], metavar="NAME=VALUE",
                        help=sampler_option_help())
    return output, tuning


def sampler_option_help() -> str:
    """--sampler-option's help, from the ttile sampler's declared options (options.summary)."""
    from ..network.defaults import NETWORK_SAMPLER_OPTIONS
    from ..options import summary
    from ..samplers import SAMPLERS, options_text

    return (f"an option of tvm_ttile's sampler, NAME=VALUE; its options and defaults: "
            f"{summary(SAMPLERS['ttile'].all_options())} (tune-model's: {options_text(NETWORK_SAMPLER_OPTIONS)})")


def strategy_option_help() -> str:
    """--strategy-option's help, from each strategy's declared options."""
    from ..options import summary
    from ..strategies import STRATEGIES

    return "an option of the search strategy, NAME=VALUE; " + "; ".join(
        f"{name}: {summary(cls.all_options())}" for name, cls in STRATEGIES.items())


def add_strategy_option(p) -> None:
    """tune's and tune-model's --strategy-option (compare has its own, per system: one Action object shared
    through a parent parser cannot be redefined in one subcommand without changing it in the others)."""
    p.add_argument("--strategy-option", action="append", default=[], metavar="NAME=VALUE",
                   help=strategy_option_help())


def strategy_name(name: str | None) -> str | None:
    """The strategies module's name of a --strategy choice (ttile: the paper's draws, measured as drawn; None: the
    command's default)."""
    return {"ttile": "random"}.get(name, name)
