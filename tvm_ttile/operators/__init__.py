"""Operators (TE definitions + numpy references) and the benchmark layer/matrix sizes shipped as data.

Layouts follow the paper: conv2d input NHWC, weights RSCK (= TVM's HWIO), output NHWK; the vectorized
dimension is the innermost one of the output (k for conv2d, j for matmul).
"""
from .base import (conv1d_nwc_reference, conv2d_nhwc_reference, normalize_pad, run_against_reference,
                   weights_for)
from .conv1d import Conv1d, Depthwise1d
from .conv2d import Conv2d, Depthwise
from .matmul import BatchMatmul, Matmul
from .qconv2d import QConv2d
from .qdepthwise import QDepthwise
from .qmatmul import QMatmul
from .shapes import (OPERATORS, QUANTIZED, SHAPE_FIELDS, at_precision, conv2d_layers, get_layer, kind_of, load_shapes,
                     matmul_shapes)

__all__ = ["OPERATORS", "QUANTIZED", "SHAPE_FIELDS", "BatchMatmul", "Conv1d", "Conv2d", "Depthwise", "Depthwise1d",
           "Matmul", "QConv2d", "QDepthwise", "QMatmul", "at_precision",
           "conv1d_nwc_reference", "conv2d_layers", "conv2d_nhwc_reference", "get_layer", "kind_of", "load_shapes",
           "matmul_shapes", "normalize_pad", "run_against_reference", "weights_for"]
