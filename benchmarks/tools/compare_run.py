"""Shared by the scripts that take a finished `tvm-ttile compare --out DIR` run further (confirm_top.py,
prefetch.py, fixed_schemes.py): the run, its layers and their operators, and the OUT.md / OUT.json output with a
--render mode that only redraws the table."""
import dataclasses
import json
import os

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def add_output_args(ap, name: str) -> None:
    ap.add_argument("--out", default=os.path.join(HERE, "results", name), help="OUT.md and OUT.json")
    ap.add_argument("--render", action="store_true", help="only rewrite OUT.md from OUT.json")


def render_only(args, render) -> bool:
    """With --render: rewrite OUT.md from OUT.json and say so (the caller then stops)."""
    if args.render:
        with open(args.out + ".json") as f:
            render(json.load(f), args.out + ".md")
    return args.render


def layers_of(compare_out: str, layers: str | None) -> list:
    """`layers` (comma-separated), or every layer of the comparison in compare_out."""
    if layers:
        return layers.split(",")
    with open(os.path.join(compare_out, "compare.json")) as f:
        return list(json.load(f)["results"])


def read_run(compare_out: str) -> dict:
    with open(os.path.join(compare_out, "compare.json")) as f:
        return json.load(f)


def operator_of(run: dict, layer: str, prepack: bool | None = None):
    """The operator the run tuned as `layer` (its shapes file's entry, else the named layer), with its weights as
    the run had them (`prepack`: overrides)."""
    from tvm_ttile.operators import OPERATORS, get_layer

    shape = dict(run.get("shapes", {}).get(layer) or {})
    op = OPERATORS[shape.pop("op")](**shape, name=layer) if shape else get_layer(layer)
    return dataclasses.replace(op, prepack=run.get("prepack", True) if prepack is None else prepack)
