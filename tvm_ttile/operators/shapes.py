"""The benchmark layer and matrix sizes shipped as data, by name, and shapes files of your own."""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ..errors import ShapeError, TTileError
from .conv1d import Conv1d, Depthwise1d
from .conv2d import Conv2d, Depthwise
from .matmul import BatchMatmul, Matmul
from .qconv2d import QConv2d
from .qdepthwise import QDepthwise
from .qmatmul import QMatmul


@lru_cache(maxsize=None)
def _data(fname):
    return json.loads(resources.files("tvm_ttile.data").joinpath(fname).read_text())


def conv2d_layers() -> dict:
    """The paper's conv2d layers by name (batch 1, fp32), from the package data."""
    out = {}
    for d in _data("conv2d_layers.json")["layers"]:
        out[d["name"]] = Conv2d(K=d["K"], C=d["C"], H=d["in_hw"], W=d["in_hw"], R=d["R"], S=d["R"],
                                stride=d["stride"], pad=d["pad"], name=d["name"])
    return out


def matmul_shapes() -> dict:
    return {d["name"]: Matmul(M=d["M"], N=d["N"], K=d["K"], name=d["name"])
            for d in _data("matmul_shapes.json")["shapes"]}


def get_layer(name: str):
    """A conv2d layer or matmul shape by name, e.g. 'ResNet18-2' or 'bert-qkv'."""
    table = {**conv2d_layers(), **matmul_shapes()}
    if name not in table:
        raise ShapeError(f"unknown layer {name!r}; known: {', '.join(table)}")
    return table[name]


SHAPE_FIELDS = {"conv2d": {"required": ("K", "C", "H", "W", "R", "S"),
                           "optional": ("stride", "pad", "dilation", "N", "groups")},
                "depthwise": {"required": ("C", "H", "W", "R", "S"), "optional": ("stride", "pad", "dilation", "N")},
                "conv1d": {"required": ("K", "C", "W", "S"), "optional": ("stride", "pad", "dilation", "N", "groups")},
                "depthwise1d": {"required": ("C", "W", "S"), "optional": ("stride", "pad", "dilation", "N")},
                "matmul": {"required": ("M", "N", "K"), "optional": ("dense",)},
                "batch_matmul": {"required": ("B", "M", "N", "K"), "optional": ("layout",)}}


OPERATORS = {"conv2d": Conv2d, "depthwise": Depthwise, "conv1d": Conv1d, "depthwise1d": Depthwise1d,
             "matmul": Matmul, "batch_matmul": BatchMatmul}
# (fp32 operator class, precision) -> its quantized form made from an instance (at_precision)
QUANTIZED = {(Matmul, p): (lambda op, p=p: QMatmul(M=op.M, N=op.N, K=op.K, name=op.name, precision=p))
             for p in ("int8", "bf16")}
QUANTIZED.update({(Conv2d, p): (lambda op, p=p: QConv2d.of(op, precision=p)) for p in ("int8", "bf16")})
# int8 depthwise: exact in fp32 lanes (qdepthwise.py); there is no bf16 depthwise
QUANTIZED[(Depthwise, "int8")] = QDepthwise.of
# the shapes-file "op" of each quantized operator
QUANTIZED_KINDS = {QMatmul: "matmul", QConv2d: "conv2d", QDepthwise: "depthwise"}


def at_precision(operator, precision: str):
    """`operator` computing `precision`: itself for fp32, else its quantized counterpart (QUANTIZED), refused in
    one line for an operator that has none yet."""
    from ..precision import get as get_precision

    get_precision(precision)  # an unknown name: one line
    if precision == operator.data_precision:
        return operator
    counterpart = QUANTIZED.get((type(operator), precision))
    if counterpart is None:
        have = ", ".join(f"{kind_of_class(c)} {p}" for c, p in QUANTIZED)
        raise TTileError(f"{kind_of(operator)} has no {precision} form yet; tvm_ttile computes {have}")
    return counterpart(operator)


def kind_of_class(cls) -> str:
    return next(kind for kind, c in OPERATORS.items() if c is cls)


def kind_of(operator) -> str:
    """The shapes-file "op" of an operator (a key of OPERATORS), a quantized one's too."""
    if type(operator) in QUANTIZED_KINDS:
        return QUANTIZED_KINDS[type(operator)]
    return next(kind for kind, cls in OPERATORS.items() if isinstance(operator, cls))


def load_shapes(path) -> list:
    """Operators from a JSON shapes file: {"layers": [{"name": ..., "op": "conv2d" | "depthwise" | "conv1d" |
    "depthwise1d" | "matmul" | "batch_matmul", <fields>}, ...]} with the fields of SHAPE_FIELDS (conv2d: K, C, H,
    W, R, S, stride, pad, dilation, N = batch, groups; depthwise: the same without K and groups; conv1d: K, C, W,
    S, stride, pad, dilation, N, groups; depthwise1d: the same without K and groups; matmul: M, N, K, dense;
    batch_matmul: B, M, N, K, layout nn / nt / tn), and optionally "precision" (precision.PRECISIONS; int8: matmul,
    conv2d, depthwise; bf16: matmul, conv2d; operators.at_precision). pad is one int, [h, w] or
    [top, left, bottom, right] ([left, right] for conv1d). Every problem is a ShapeError naming the file, the entry
    and the field."""
    import os
    import re

    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ShapeError(f"shapes file {path} does not exist") from None
    except IsADirectoryError:
        raise ShapeError(f"shapes file {path} is a directory, not a JSON file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ShapeError(f"shapes file {path} is not valid JSON: {e}") from None
    entries = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ShapeError(f'shapes file {path} needs a non-empty list under "layers", e.g. {{"layers": [{{"name": '
                         f'"my-conv", "op": "conv2d", "K": 64, "C": 64, "H": 56, "W": 56, "R": 3, "S": 3, "pad": 1}}]}}')
    ops, seen = [], set()
    for i, entry in enumerate(entries):
        where = f"shapes file {os.fspath(path)}, layer {i + 1}"
        if not isinstance(entry, dict):
            raise ShapeError(f"{where}: expected an object, got {entry!r}")
        name, kind = entry.get("name"), entry.get("op")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            raise ShapeError(f'{where}: "name" must be letters, digits, ".", "_" or "-" (it names a work dir), '
                             f"got {name!r}")
        if name in seen:
            raise ShapeError(f"{where}: the name {name!r} is used twice")
        seen.add(name)
        if kind not in SHAPE_FIELDS:
            raise ShapeError(f'{where} ({name}): "op" must be one of {", ".join(SHAPE_FIELDS)}, got {kind!r}')
        precision = entry.get("precision", "fp32")
        fields = {k: v for k, v in entry.items() if k not in ("name", "op", "precision")}
        allowed = SHAPE_FIELDS[kind]["required"] + SHAPE_FIELDS[kind]["optional"]
        unknown = sorted(set(fields) - set(allowed))
        missing = [k for k in SHAPE_FIELDS[kind]["required"] if k not in fields]
        if unknown or missing:
            raise ShapeError(f"{where} ({name}): " + "; ".join(
                ([f"unknown field(s) {', '.join(unknown)}"] if unknown else []) +
                ([f"missing field(s) {', '.join(missing)}"] if missing else [])) + f" (a {kind} takes {', '.join(allowed)})")
        try:
            ops.append(at_precision(OPERATORS[kind](name=name, **fields), precision))
        except TTileError as e:  # (a ShapeError, an unknown precision, one an operator lacks)
            raise ShapeError(f"{where} ({name}): {e}") from None
    return ops
