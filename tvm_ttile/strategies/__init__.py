"""Search strategies over the structured space (one small module each, interface in base.py): which drawn
schemes get measured, and in which order."""
from ..errors import TTileError
from .base import Strategy  # noqa: F401
from .model import ModelStrategy
from .drawn_order import RandomStrategy

STRATEGIES = {s.NAME: s for s in (RandomStrategy, ModelStrategy)}


def make_strategy(name: str, **options) -> Strategy:
    if name not in STRATEGIES:
        raise TTileError(f"unknown search strategy {name!r}; choose from {', '.join(STRATEGIES)}")
    return STRATEGIES[name](**options)
