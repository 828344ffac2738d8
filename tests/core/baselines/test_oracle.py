"""The clairvoyant oracle: a lower bound on every method's cost at its satisfaction."""

from __future__ import annotations

import numpy as np
import pytest

from slarouter_core import baselines as B

from .toy import ALPHA


def test_oracle_is_no_dearer_than_any_method_at_its_satisfaction(split, results):
    stream, _, _ = split
    oracle = results["oracle"]
    assert oracle.summary.satisfaction >= ALPHA
    assert oracle.info["lp_satisfaction"] >= ALPHA - 1e-9
    assert oracle.info["fractional_rows"] <= 1
    # integral rounding is at most one request's cost above the LP bound
    assert oracle.summary.operating_cost <= oracle.info["lp_cost"] + stream.costs.max() + 1e-6
    checked = 0
    for name, r in results.items():
        s = r.summary.satisfaction
        if name != "oracle" and s >= oracle.summary.satisfaction:
            assert oracle.summary.operating_cost <= r.total_cost + 1e-6, name
            checked += 1
        # the oracle LP at the method's own satisfaction is no dearer than the method
        _, cost_at_s, sat_at_s = B.oracle_lp(stream.solved, stream.costs, min(s, 0.999))
        assert sat_at_s >= min(s, 0.999) - 1e-9
        assert cost_at_s <= r.total_cost + 1e-6, name
    assert checked >= 2  # the large model at least reaches the oracle's satisfaction


def test_oracle_lp_matches_brute_force_on_tiny_instance():
    S = np.array([[1, 1], [0, 1], [0, 0], [1, 1]])
    C = np.array([[1.0, 5.0], [1.0, 4.0], [1.0, 9.0], [2.0, 3.0]])
    y, cost, sat = B.oracle_lp(S, C, 0.5)
    assert cost == pytest.approx(5.0) and sat >= 0.5 - 1e-9
    y, cost, sat = B.oracle_lp(S, C, 0.625)  # half of row 1 on the large model
    assert cost == pytest.approx(6.5) and sat == pytest.approx(0.625)
    assert B.round_oracle(y, S).tolist() == [0, 1, 0, 0]
    y, cost, sat = B.oracle_lp(S, C, 0.9)  # infeasible: cheapest routing at the maximum
    assert sat == pytest.approx(0.75) and cost == pytest.approx(1 + 4 + 1 + 2)
