from __future__ import annotations

import math

import numpy as np

from slarouter_core.metrics import summarize, thin_indices


def test_summarize_by_hand():
    model = np.array([0, 1, 1, 2])
    sat = np.array([1, 0, 1, 1])
    cost = np.array([1e6, 2e6, 2e6, 5e6])
    q = np.array([0.2, 0.9, 0.5, 0.1])
    s = summarize(model, sat, cost, q, 0.7, ("a", "b", "c"), "J")
    assert s.operating_cost_display == 10.0 and s.display_unit == "MJ"
    assert s.satisfaction == 0.75 and s.sla_met
    assert s.call_ratio == (0.25, 0.5, 0.25)
    assert s.convergence_step == 1 and s.post_convergence_satisfaction == 1.0


def test_post_convergence_is_nan_when_queue_still_rising():
    q = np.arange(100, dtype=float)
    s = summarize(np.zeros(100, int), np.ones(100), np.ones(100), q, 0.5, ("a", "b"), "USD")
    assert math.isnan(s.post_convergence_satisfaction) and s.convergence_step is None
    assert s.display_unit == "USD"


def test_thin_indices():
    idx = thin_indices(10_000, 2000)
    assert len(idx) <= 2000 and idx[0] == 0 and idx[-1] == 9999
    assert np.all(np.diff(idx) > 0)
    assert np.array_equal(thin_indices(50, 2000), np.arange(50))
