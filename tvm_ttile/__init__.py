"""tvm_ttile: TTile's structured autotuning space for Apache TVM."""
__version__ = "0.1.0"
