from __future__ import annotations

import numpy as np
import pytest

from slarouter_core.data import from_frame
from slarouter_core.router import RouterConfig
from slarouter_core.simulator import Simulation, SimulationConfig, simulate
from tests.conftest import make_frame


@pytest.fixture
def data_and_x():
    data = from_frame(make_frame(n=1200))
    X = np.random.default_rng(0).standard_normal((data.n_requests, 16)).astype(np.float32)
    return data, X


def test_same_seed_same_numbers_different_seed_differs(data_and_x):
    data, X = data_and_x
    cfg = SimulationConfig(RouterConfig(alpha=0.6, c=0.3), seed=1)
    a, b = simulate(data, X, cfg).arrays(), simulate(data, X, cfg).arrays()
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    c = simulate(data, X, SimulationConfig(RouterConfig(alpha=0.6, c=0.3), seed=2)).arrays()
    assert not np.array_equal(a["row"], c["row"])


def test_stepper_equals_full_run(data_and_x):
    data, X = data_and_x
    cfg = SimulationConfig(RouterConfig(alpha=0.6, c=0.3), seed=7)
    full = simulate(data, X, cfg).arrays()
    sim = Simulation(data, X, cfg)
    rng = np.random.default_rng(0)
    while not sim.done:
        sim.step(int(rng.integers(1, 300)))
    part = sim.arrays()
    for k in ("model", "q", "s_used", "v", "feedback", "explored"):
        assert np.array_equal(full[k], part[k]), k


def test_feedback_rate_is_respected_and_labels_hidden_without_feedback(data_and_x):
    data, X = data_and_x
    sim = simulate(data, X, SimulationConfig(RouterConfig(alpha=0.6), feedback_rate=0.25, seed=3))
    a = sim.arrays()
    share = (a["feedback"] >= 0).mean()
    assert abs(share - 0.25) < 0.05
    given = a["feedback"] >= 0
    assert np.array_equal(a["feedback"][given], a["satisfied"][given])
    assert np.array_equal(a["s_used"][~given], a["shat_served"][~given])
    assert simulate(data, X, SimulationConfig(RouterConfig(alpha=0.6), feedback_rate=0.0)).summary().feedback == 0


def test_summary_matches_trace(data_and_x):
    data, X = data_and_x
    sim = simulate(data, X, SimulationConfig(RouterConfig(alpha=0.6), seed=4))
    s, tr = sim.summary(), sim.trace()
    assert s.requests == len(tr) == data.n_requests
    assert s.operating_cost == pytest.approx(tr["cost"].sum())
    assert s.satisfaction == pytest.approx(tr["satisfied"].mean())
    assert s.sla_met == (s.satisfaction >= 0.6)
    assert sum(s.call_ratio) == pytest.approx(1.0)
    assert set(tr["model"]) <= set(data.models)
    cum = sim.single_model_cumulative_cost()
    assert cum.shape == (data.n_requests, 3) and np.allclose(cum[-1], data.costs.sum(axis=0))


@pytest.mark.parametrize("kw", [dict(feedback_rate=-0.1), dict(feedback_rate=1.5), dict(seed=-1)])
def test_config_validation(kw):
    with pytest.raises(ValueError):
        SimulationConfig(RouterConfig(alpha=0.5), **kw)
