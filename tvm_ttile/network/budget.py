"""How many candidates each conv2d / matmul task of a network measures. `create(kind)` is the one place a budget's
name becomes the object that plans it; tune_network asks it for each task's first budget, then, after every round,
which tasks measure more.

    fixed  every task measures trials_per_task candidates (the paper's protocol)
    share  every task first measures its FIRST best-ranked candidates; then the tasks that hold most of the
           network's measured time measure ROUND more, round after round, until a round gains less than
           STOP_GAIN on a task's best or the task reaches trials_per_task
"""
from __future__ import annotations

import dataclasses

from ..errors import TTileError


@dataclasses.dataclass(frozen=True)
class Standing:
    """Where one task stands after a round: `budget` candidates asked, `seconds` its network time (best record x
    calls; None: nothing measured), `gain` what its last extra round took off its best (None: none yet)."""
    key: str
    budget: int
    seconds: float | None
    gain: float | None = None


class FixedBudget:
    kind = "fixed"
    doc = "every conv2d / matmul task measures trials_per_task candidates"

    def first(self, trials_per_task: int) -> int:
        return trials_per_task

    def more(self, standings: list, trials_per_task: int) -> dict:
        return {}


@dataclasses.dataclass(frozen=True)
class ShareBudget:
    kind = "share"
    doc = ("each task measures its best-ranked candidates first; the tasks holding most of the network's time "
           "measure more while it pays")
    first_trials: int = 8  # the committee ranker's first 8 held 0.969x the best of 200 (ranking_xeon/NOTES.md)
    round_trials: int = 8
    stop_gain: float = 0.03  # a round that took less than 3% off the best (about a timing's spread): it stops paying
    share: float = 0.8  # the largest tasks that hold this share of the measured time get the extra rounds

    def first(self, trials_per_task: int) -> int:
        return min(self.first_trials, trials_per_task)

    def more(self, standings: list, trials_per_task: int) -> dict:
        """{task key: its new budget} for the next round (empty: the search is over)."""
        timed = sorted((s for s in standings if s.seconds), key=lambda s: -s.seconds)
        total = sum(s.seconds for s in timed)
        out, held = {}, 0.0
        for s in timed:
            if held >= self.share * total:
                break
            held += s.seconds
            if s.budget < trials_per_task and (s.gain is None or s.gain >= self.stop_gain):
                out[s.key] = min(s.budget + self.round_trials, trials_per_task)
        return out


BUDGETS = {b.kind: b for b in (ShareBudget(), FixedBudget())}


def create(kind: str):
    """The budget of name `kind`."""
    try:
        return BUDGETS[kind]
    except KeyError:
        raise TTileError(f"unknown budget {kind!r}; choose from {', '.join(BUDGETS)}") from None
