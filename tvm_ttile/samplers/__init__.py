"""Samplers of the structured space (one small module each, shared draws in base.py)."""
from .ablations import SAMPLERS, make_sampler  # noqa: F401
from .base import Sampler, options_text  # noqa: F401
