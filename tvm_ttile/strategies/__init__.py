"""Search strategies over the structured space (one small module each, interface in base.py): which drawn
schemes get measured, and in which order. gbfs and na2c walk the space from measured schemes (neighbours.py)."""
from ..errors import TTileError
from .base import Strategy  # noqa: F401
from .drawn_order import RandomStrategy
from .gbfs import GBFS, GBFSStrategy
from .model import ModelStrategy
from .na2c import NA2C, NA2CStrategy

STRATEGIES = {s.NAME: s for s in (RandomStrategy, ModelStrategy, GBFSStrategy, NA2CStrategy)}
SEARCHES = {s.NAME: s for s in (GBFS, NA2C)}  # neighbourhood searches over any neighbours.Landscape


def make_strategy(name: str, **options) -> Strategy:
    if name not in STRATEGIES:
        raise TTileError(f"unknown search strategy {name!r}; choose from {', '.join(STRATEGIES)}")
    return STRATEGIES[name](**options)
