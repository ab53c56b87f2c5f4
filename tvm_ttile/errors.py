"""Errors raised for bad input: each message names what is wrong."""


class TTileError(ValueError):
    """Base class for tvm_ttile input errors."""


class UnsupportedISAError(TTileError):
    pass


class UnsupportedDtypeError(TTileError):
    pass


class RegisterPressureError(TTileError):
    """A microkernel does not fit the vector register file."""


class ShapeError(TTileError):
    """A size is not positive, or does not divide what it must divide."""


def check_positive(**sizes):
    """Raise ShapeError naming every size that is not a positive integer."""
    bad = [f"{k}={v!r}" for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool) or v <= 0]
    if bad:
        raise ShapeError("sizes must be positive integers, got " + ", ".join(bad))


def check_dtype(dtype):
    if dtype != "float32":
        raise UnsupportedDtypeError(f"dtype {dtype!r} is not supported: tvm_ttile microkernels are float32 only")
