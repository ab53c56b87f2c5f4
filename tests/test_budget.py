"""Every budget (network/budget.py) keeps the same contract, checked on simulated networks: the first budget and
every later one stay within trials_per_task, budgets only grow, and the rounds end. The share budget gives the
extra rounds to the tasks that hold the network's time, and stops a task whose last round stopped paying. The
phase clock (phases.py) charges each second to one phase."""
import pytest

from tvm_ttile.errors import TTileError
from tvm_ttile.network.budget import BUDGETS, ShareBudget, Standing, create
from tvm_ttile.phases import phase, recording


def _simulate(budget, seconds: dict, trials_per_task: int, gain_of) -> tuple:
    """Run the rounds as tune_network does: {task: final budget}, rounds."""
    budgets = {k: budget.first(trials_per_task) for k in seconds}
    gains, rounds = {}, 0
    while True:
        more = budget.more([Standing(k, budgets[k], seconds[k], gains.get(k)) for k in seconds], trials_per_task)
        if not more:
            return budgets, rounds
        rounds += 1
        assert rounds < 1000, "the rounds never end"
        for k, b in more.items():
            assert budgets[k] < b <= trials_per_task  # budgets grow, within the most asked
            gains[k] = gain_of(k, b)
            budgets[k] = b


@pytest.mark.parametrize("kind", list(BUDGETS))
@pytest.mark.parametrize("trials_per_task", [1, 2, 8, 9, 50])
def test_every_budget_stays_within_trials_per_task_and_ends(kind, trials_per_task):
    budget = create(kind)
    assert budget.kind == kind and budget.doc
    seconds = {f"t{i}": s for i, s in enumerate([5.0, 3.0, 1.0, 0.5, 0.01, None])}
    for gain in (lambda k, b: 0.5, lambda k, b: 0.0, lambda k, b: 1.0 / b):
        budgets, _ = _simulate(budget, seconds, trials_per_task, gain)
        assert all(1 <= b <= trials_per_task for b in budgets.values())


def test_an_unknown_budget_is_refused_in_one_line():
    with pytest.raises(TTileError, match="unknown budget 'most'; choose from share, fixed"):
        create("most")


def test_the_share_budget_measures_more_where_the_time_is_while_it_pays():
    budget = ShareBudget()
    seconds = {"big": 10.0, "mid": 5.0, "small": 0.2, "tiny": 0.1, "failed": None}
    budgets, rounds = _simulate(budget, seconds, 50, lambda k, b: 0.1)  # every round pays
    assert budgets["big"] == budgets["mid"] == 50 and rounds == (50 - 8 + 7) // 8
    assert budgets["small"] == budgets["tiny"] == budgets["failed"] == 8  # 1.3% of the time: the first round only
    budgets, rounds = _simulate(budget, seconds, 50, lambda k, b: 0.1 if k == "big" else 0.0)
    assert budgets["big"] == 50 and budgets["mid"] == 16  # its first extra round took nothing off: it stops
    assert _simulate(create("fixed"), seconds, 50, lambda k, b: 0.1) == ({k: 50 for k in seconds}, 0)


def test_phases_are_exclusive_and_add_up_to_the_wall_time(monkeypatch):
    from tvm_ttile import phases

    now = [100.0]  # a clock the test moves: each second is charged to the innermost phase open
    monkeypatch.setattr(phases.time, "perf_counter", lambda: now[0])

    def wait(seconds):
        now[0] += seconds

    with recording() as clock:
        wait(1)  # before any phase: untracked
        with phase("import"):
            wait(2)
            with phase("peaks"):  # the outer phase pauses
                wait(3)
            wait(4)
        with recording() as inner:  # a recording inside one keeps its clock
            assert inner is clock
            with phase("catalogs"):
                wait(5)
            with phase("import"):  # a phase entered again adds up
                wait(6)
    out = clock.to_json()
    assert out == {"phases": {"import": 12.0, "peaks": 3.0, "catalogs": 5.0}, "wall_seconds": 21.0,
                   "untracked_seconds": 1.0, "build_seconds": 21.0}
    assert phases.build_seconds({"phases": {"import": 2.0, "library timings": 5.0}, "wall_seconds": 10.0}) == 5.0
    with pytest.raises(KeyError, match="unknown phase 'imports'"):
        with phase("imports"):
            pass
