"""What the scripts that study one tune-model work dir's tasks share: their command line and the network as tuned."""
import argparse
import dataclasses


def arguments(doc: str, threads_required: bool = False, flags: dict | None = None, numbers: dict | None = None,
              more=None):
    """MODEL WORK_DIR [--input-shape] [--threads] [--rounds] --out, the script's own on/off `flags`
    ({"--name": help}) and numbers ({"--name": (default, help)}), and whatever `more(parser)` adds, parsed."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    if more is not None:
        more(ap)
    for flag, text in (flags or {}).items():
        ap.add_argument(flag, action="store_true", help=text)
    for name, (default, text) in (numbers or {}).items():
        ap.add_argument(name, type=type(default), default=default, help=text)
    ap.add_argument("model")
    ap.add_argument("work_dir")
    ap.add_argument("--input-shape", help="NCHW, e.g. 1,3,224,224 (default: the model's)")
    ap.add_argument("--threads", type=int, required=threads_required, default=None if threads_required else 1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", required=True)
    return ap.parse_args()


@dataclasses.dataclass
class TunedNetwork:
    cpu: object
    target: object
    tasks: list  # network.Task, at the work dir's thread count
    database: object


def open_tuned(args) -> TunedNetwork:
    """The host (its thread pool sized for args.threads), the model prepared as tune-model prepares it (seed 0's
    weights), its tasks, and the work dir's database."""
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.metaschedule import open_database
    from tvm_ttile.models.importers import load_model

    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(args.threads)
    shape = tuple(int(x) for x in args.input_shape.split(",")) if args.input_shape else None
    mod = nw.prepare(load_model(args.model, shape, seed=0).mod, cpu)
    return TunedNetwork(cpu, cpu.target(args.threads), nw.extract_tasks(mod, cpu=cpu, threads=args.threads),
                        open_database(args.work_dir))
