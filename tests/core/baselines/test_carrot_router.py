"""CARROT: kNN estimators on the history, mu tuned towards alpha, the matched feedback budget."""

from __future__ import annotations

import numpy as np
import pytest

from slarouter_core import baselines as B
from slarouter_core.feedback import FeedbackConfig
from slarouter_core.judge import GPQA_JUDGE
from slarouter_core.simulator import stream_plan

from .toy import ALPHA, RATE


def test_carrot_extremes_of_mu(split):
    stream, semb, hist = split
    order, _, _ = stream_plan(stream.n_requests, stream.solved, RATE, 42)
    k = 10
    kappa = hist.data.costs.mean(axis=0).max()
    est = B.KNNEstimator(hist.embeddings, {"s": hist.data.solved, "c": hist.data.costs / kappa}, k)
    pred = est.predict(semb[order])
    r0 = B.carrot(stream, semb, ALPHA, 42, RATE, history=hist, mu=0.0, k=k, budget="full")
    r1 = B.carrot(stream, semb, ALPHA, 42, RATE, history=hist, mu=1.0, k=k, budget="full")
    # mu = 0: the highest predicted quality (ties: the cheaper model, i.e. the first)
    np.testing.assert_array_equal(r0.model, np.argmax(pred["s"], axis=1))
    assert np.all(pred["s"][np.arange(len(order)), r0.model] == pred["s"].max(axis=1))
    # mu = 1: the cheapest predicted cost, which here is always the small model
    np.testing.assert_array_equal(r1.model, np.argmin(pred["c"], axis=1))
    assert np.all(r1.model == 0)
    assert r0.summary.satisfaction > r1.summary.satisfaction
    assert r0.summary.operating_cost > r1.summary.operating_cost
    # training data = every model on every history request
    assert r0.extra_cost == pytest.approx(hist.data.costs.sum())
    assert r0.total_cost == pytest.approx(r0.summary.operating_cost + hist.data.costs.sum())


def test_carrot_tunes_mu_towards_alpha(split, results):
    stream, semb, hist = split
    r = results["carrot"]
    assert r.info["mu"] in B.TRADEOFF_GRID
    val = np.array(r.info["val_satisfaction"])
    assert len(val) == len(B.TRADEOFF_GRID)
    assert np.abs(val - ALPHA).min() == pytest.approx(abs(val[B.TRADEOFF_GRID.index(r.info["mu"])] - ALPHA))
    assert abs(r.summary.satisfaction - ALPHA) < 0.1
    h = B.carrot(stream, semb, ALPHA, 42, RATE, history=hist, tuning="holdout", budget="full")
    assert h.info["n_val"] == round(0.25 * hist.n)
    with pytest.raises(ValueError, match="history"):
        B.carrot(stream, semb, ALPHA, 42, RATE)


def test_carrot_and_feedback_models(split):
    stream, semb, hist = split
    c_iid = B.carrot(stream, semb, ALPHA, 3, RATE, history=hist, mu=0.0)
    c_burst = B.carrot(stream, semb, ALPHA, 3, RATE, history=hist, mu=0.0,
                       feedback=FeedbackConfig(kind="bursty", on_fraction=0.6))
    np.testing.assert_array_equal(c_burst.info["quality"], c_iid.info["quality"])  # fully labelled history
    c_judge = B.carrot(stream, semb, ALPHA, 3, RATE, history=hist, mu=0.0, feedback=FeedbackConfig(judge=GPQA_JUDGE))
    assert not np.array_equal(c_judge.info["quality"], c_iid.info["quality"])  # the judge labels its history
    assert c_judge.extra_cost == c_iid.extra_cost


def test_carrot_gets_the_online_feedback_budget(split):
    """CARROT sees as many label events as an online router expects on the stream
    (rate * stream length), not every model's label on the whole history."""
    stream, semb, hist = split
    M = stream.n_models
    want = int(np.ceil(RATE * stream.n_requests / M))
    assert want < hist.n  # the budget binds on this split
    full = B.carrot(stream, semb, ALPHA, 5, RATE, history=hist, mu=0.5, k=5, budget="full")
    matched = B.carrot(stream, semb, ALPHA, 5, RATE, history=hist, mu=0.5, k=5)
    # the training cost is every model serving each history request it learns from
    per_request = hist.data.costs.sum(axis=1)
    assert full.extra_cost == pytest.approx(per_request.sum())
    assert matched.info["n_history"] == want and full.info["n_history"] == hist.n
    assert matched.extra_cost < full.extra_cost
    assert abs(want * M - RATE * stream.n_requests) <= M
    with pytest.raises(ValueError, match="budget"):
        B.carrot(stream, semb, ALPHA, 5, RATE, history=hist, budget="all")
