"""The cost-floor benchmark's arithmetic: time-shares, context accuracies, oracle-priced routing."""

import math

import numpy as np
import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def floor():
    return load_script("bench_cost_floor")


def test_cheapest_point_at_a_rate_is_on_the_lower_convex_hull(floor):
    rate = np.array([0.7, 0.8, 0.9])
    cost = np.array([1.0, 2.0, 5.0])
    assert floor.cheapest_at(rate, cost, 0.75) == pytest.approx(1.5)  # half of each of the first two
    assert floor.cheapest_at(rate, cost, 0.85) == pytest.approx(3.5)  # (0.8, 2) and (0.9, 5), not (0.7, 1) and (0.9, 5)
    assert floor.cheapest_at(rate, cost, 0.8) == pytest.approx(2.0)
    assert math.isnan(floor.cheapest_at(rate, cost, 0.95))  # no point reaches it


def test_context_accuracy_is_each_contexts_own_mean(floor):
    solved = np.array([[1, 0], [0, 0], [1, 1], [1, 1]], float)
    P = floor.context_accuracy(solved, np.array([0, 0, 1, 1]))
    assert np.array_equal(P, [[0.5, 0], [0.5, 0], [1, 1], [1, 1]])


def test_routing_on_a_perfect_prediction_beats_every_text_blind_mix(floor):
    """The cheap model solves the easy half only: routed on predictions that know which half
    a request is in, the rate 0.95 costs what the dear model costs on the hard half alone."""
    n = 400
    easy = np.arange(n) % 2 == 0
    solved = np.column_stack([easy, np.ones(n)]).astype(float)
    costs = np.tile([1.0, 10.0], (n, 1))
    cost = floor.routed_cost(solved, solved, costs, 0.95)
    blind = floor.static_mixture_lp(solved.mean(0), costs.mean(0), 0.95)[1]
    assert cost == pytest.approx(0.5 * 1.0 + 0.45 * 10.0 + 0.05 * 1.0, rel=0.02)
    assert cost < 0.6 * blind


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
