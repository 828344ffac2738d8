"""Single models and the static mixture: the text-blind reference points."""

from __future__ import annotations

import numpy as np
import pytest

from slarouter_core import baselines as B

from .toy import ALPHA, RATE


def test_single_models_give_column_accuracy_and_cost(split, results):
    stream, _, _ = split
    for j, name in enumerate(stream.models):
        r = results[f"single:{name}"]
        assert r.summary.satisfaction == pytest.approx(stream.solved[:, j].mean(), abs=1e-12)
        assert r.summary.operating_cost == pytest.approx(stream.costs[:, j].sum())
        assert r.summary.call_ratio[j] == 1.0 and r.extra_cost == 0.0
    with pytest.raises(ValueError, match="unknown model"):
        B.single(stream, split[1], ALPHA, 0, RATE, model="huge")


def test_static_mixture_lp_hits_alpha_exactly_when_feasible():
    acc = np.array([0.4, 0.6, 0.9])
    cost = np.array([1.0, 10.0, 100.0])
    for alpha in (0.45, 0.55, 0.7, 0.85, 0.9):
        f, ec, feasible = B.static_mixture_lp(acc, cost, alpha)
        assert feasible
        assert f.sum() == pytest.approx(1.0) and np.all(f >= 0)
        assert abs(f @ acc - alpha) <= 1e-9
        assert np.count_nonzero(f) <= 2
        assert ec == pytest.approx(f @ cost)
    f, ec, _ = B.static_mixture_lp(acc, cost, 0.55)  # hull: the cheap pair (0, 1)
    np.testing.assert_allclose(f, [0.25, 0.75, 0.0], atol=1e-12)
    f, ec, feasible = B.static_mixture_lp(acc, cost, 0.95)  # infeasible
    assert not feasible and f.tolist() == [0.0, 0.0, 1.0] and ec == 100.0


def test_static_mixture_realisation_uses_exact_counts(split, results):
    stream, _, _ = split
    r = results["static_mixture"]
    f = np.array(r.info["fractions"])
    assert r.info["feasible"]
    assert abs(r.info["expected_satisfaction"] - ALPHA) <= 1e-9
    assert abs(f @ stream.solved.mean(axis=0) - ALPHA) <= 1e-9
    counts = np.bincount(r.model, minlength=stream.n_models)
    assert counts.sum() == stream.n_requests
    np.testing.assert_array_less(np.abs(counts - f * stream.n_requests), 1.0 + 1e-9)
    assert B.exact_counts(np.array([1 / 3, 1 / 3, 1 / 3]), 10).sum() == 10
