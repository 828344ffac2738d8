"""The cost-floor benchmark's arithmetic: context accuracies, the split of a run's cost
(time-shares and oracle-priced routing are tested with the core, tests/core/test_preflight.py)."""

import math

import numpy as np
import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def floor():
    return load_script("bench_cost_floor")


def test_context_accuracy_is_each_contexts_own_mean(floor):
    solved = np.array([[1, 0], [0, 0], [1, 1], [1, 1]], float)
    P = floor.context_accuracy(solved, np.array([0, 0, 1, 1]))
    assert np.array_equal(P, [[0.5, 0], [0.5, 0], [1, 1], [1, 1]])


def test_the_split_records_what_each_decision_saw(floor, monkeypatch):
    """The run's split reads the predictions each choice used (the served model's is the
    step's own ``shat_served``), the fallback's steps as off the plan, and prices every
    column at the satisfaction the run delivered."""
    from slarouter_core.data import from_frame
    from slarouter_core.synthetic import generate_demo_frame

    data = from_frame(generate_demo_frame(600, seed=3))
    X = np.random.default_rng(0).normal(size=(data.n_requests, 8)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    runs = []
    real = floor.cost_split
    monkeypatch.setattr(floor, "cost_split", lambda data, X, sim, seen, capped, judge, seed: runs.append(
        (sim, seen, capped)) or real(data, X, sim, seen, capped, judge, seed))
    margin, cost, splits = floor.router_runs(data, X, 0.6, [0], judge=False)  # below the midpoint: the plan reaches it
    sim, seen, capped = runs[0]
    a = sim.arrays()
    assert np.array_equal(seen[np.arange(len(seen)), a["model"]], a["shat_served"])
    assert 0 < capped.sum() < len(capped)  # the fallback served some steps, the plan others
    sat, router, own, last, uniform, off_plan, predicted, delivered, *shares = splits[0]
    assert np.allclose(shares, np.bincount(a["model"], minlength=data.n_models) / len(a["model"]))
    assert sat == pytest.approx(a["satisfied"].mean()) and router == pytest.approx(cost)
    assert off_plan == pytest.approx(1 - (~a["explored"] & ~capped).mean())
    assert delivered == pytest.approx(a["satisfied"][~a["explored"] & ~capped].mean())
    assert all(np.isfinite([own, last, uniform])) and margin > 0


def test_an_encoder_that_is_not_there_is_refused_before_any_run(floor, capsys):
    with pytest.raises(SystemExit) as stop:
        floor.main(["--encoder", "hf:/nonexistent/model"])
    assert stop.value.code == 2 and "not available" in capsys.readouterr().err
