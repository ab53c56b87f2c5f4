"""The `tvm-ttile` command line: arguments.py (types and shared options), parser.py (the subcommands),
commands.py (what each does); here, running one with one-line errors and a clean Ctrl-C."""
from __future__ import annotations

import signal
import sys
import threading

from ..errors import TTileError
from .arguments import parse_options, physical_cores, threads_arg  # noqa: F401 (the tests' and benchmarks' names)
from .parser import make_parser


class _Interrupt:
    """Whether Ctrl-C was pressed: TVM turns a KeyboardInterrupt raised inside its callbacks into a RuntimeError."""
    seen = False

    @classmethod
    def handler(cls, signum, frame):
        cls.seen = True
        signal.default_int_handler(signum, frame)


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _Interrupt.handler) if on_main else None
    _Interrupt.seen = False
    try:
        return _run(args)
    finally:
        if on_main:
            signal.signal(signal.SIGINT, previous)


def _run(args) -> int:
    try:
        try:
            return args.func(args)
        except Exception:
            if _Interrupt.seen:
                raise KeyboardInterrupt from None
            raise
    except TTileError as e:
        print(f"tvm-ttile: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        work = getattr(args, "work_dir", None) or getattr(args, "out", None)
        print("tvm-ttile: interrupted; every finished measurement is kept" +
              (f" in {work}: run the same command again to resume" if work else
               " (pass --work-dir to be able to resume)"), file=sys.stderr)
        return 130
    except Exception as e:  # not an input error tvm_ttile knows: one line, the traceback with --verbose
        if getattr(args, "verbose", False):
            raise
        lines = str(e).strip().splitlines()
        print(f"tvm-ttile: error: {type(e).__name__}: {lines[-1] if lines else ''} (unexpected; run again with "
              "--verbose for the traceback and report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
