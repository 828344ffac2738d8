"""Causal routing: RM-Softmax on doubly robust outcomes of a uniform log, lambda by cross-fitting."""

from __future__ import annotations

import numpy as np
import pytest

from slarouter_core import baselines as B
from slarouter_core.feedback import FeedbackConfig

from .toy import ALPHA, RATE


def test_rm_softmax_learns_the_best_action_per_context():
    rng = np.random.default_rng(0)
    n, M = 300, 3
    best = rng.integers(0, M, n)
    X = np.eye(M)[best] + rng.normal(scale=0.1, size=(n, M))
    Y = np.where(np.arange(M)[None] == best[:, None], 1.0, 0.0) + rng.normal(scale=0.1, size=(n, M))
    W, b = B.rm_softmax_fit(X, Y, steps=200)
    assert W.shape == (1, M, M) and b.shape == (1, M)
    route = np.argmax(X @ W[0] + b[0], axis=1)
    assert (route == best).mean() > 0.95
    # batched problems are independent: the same problem twice gives the same weights
    W2, _ = B.rm_softmax_fit(X, np.stack([Y, Y]), steps=200)
    np.testing.assert_allclose(W2[0], W2[1])
    np.testing.assert_allclose(W2[0], W[0], atol=1e-9)


def test_causal_log_cost_and_lambda(split, results):
    stream, semb, hist = split
    r = results["causal"]
    assert r.info["lambda"] in B.TRADEOFF_GRID
    # the log served every history request once (uniform logging): cost between the
    # cheapest and the dearest model's total, and about the mean of the model columns
    C = hist.data.costs
    assert C[:, 0].sum() < r.extra_cost < C[:, -1].sum()
    assert r.extra_cost == pytest.approx(C.mean(axis=1).sum(), rel=0.3)
    # matched budget: as many logged labels as an online router expects on the stream
    assert 0 < r.info["n_feedback"] <= hist.n
    # cost sensitivity: lambda = 1 is cheaper than lambda = 0
    lo = B.causal(stream, semb, ALPHA, 42, RATE, history=hist, lam=0.0)
    hi = B.causal(stream, semb, ALPHA, 42, RATE, history=hist, lam=1.0)
    assert hi.summary.operating_cost < lo.summary.operating_cost
    assert lo.summary.satisfaction >= hi.summary.satisfaction
    with pytest.raises(ValueError, match="feedback"):
        B.causal(stream, semb, ALPHA, 42, 0.0, history=hist)


def test_causal_and_feedback_models(split):
    stream, semb, hist = split
    iid = B.causal(stream, semb, ALPHA, 3, RATE, history=hist, lam=0.3, budget="full")
    neg = B.causal(stream, semb, ALPHA, 3, RATE, history=hist, lam=0.3, budget="full",
                   feedback=FeedbackConfig(kind="negative", negative_ratio=1.9))
    assert neg.info["n_feedback"] > iid.info["n_feedback"]  # logged failures are labelled more often
    late = B.causal(stream, semb, ALPHA, 3, RATE, history=hist, lam=0.3, budget="full",
                    feedback=FeedbackConfig(kind="delayed"))
    np.testing.assert_array_equal(late.model, iid.model)  # offline: the log is complete before training


def test_causal_gets_the_online_feedback_budget(split):
    """Causal routing's log holds as many label events as an online router expects on the
    stream (rate * stream length), not the run's rate on the history."""
    stream, semb, hist = split
    c_full = B.causal(stream, semb, ALPHA, 5, RATE, history=hist, lam=0.5, budget="full")
    c_matched = B.causal(stream, semb, ALPHA, 5, RATE, history=hist, lam=0.5)
    assert c_matched.info["n_feedback"] > c_full.info["n_feedback"]
    assert abs(c_matched.info["n_feedback"] - RATE * stream.n_requests) < 4 * np.sqrt(RATE * stream.n_requests)
