"""MESS+: exploration charged at every model's cost, the queue moved only by feedback,
delayed verdicts, and the exploration and V schedule it shares with SLARouter."""

from __future__ import annotations

import numpy as np
import pytest

import slarouter_core.baselines.messplus_router as messplus_router
from slarouter_core import baselines as B
from slarouter_core.feedback import FeedbackConfig
from slarouter_core.policies.schedule import data_driven_v, exploration_probability
from slarouter_core.simulator import stream_plan, stream_plan_full

from .toy import ALPHA, RATE


def test_messplus_exploration_charges_sum_of_all_costs(split):
    stream, semb, _ = split
    r = B.messplus(stream, semb, ALPHA, 42, 0.3, c=1e6)  # p_t = 1: every step explores
    assert r.explored.all()
    assert np.all(r.model == stream.n_models - 1)
    np.testing.assert_allclose(r.cost, stream.costs[r.order].sum(axis=1))
    assert r.summary.operating_cost == pytest.approx(stream.costs.sum())
    assert r.summary.satisfaction == pytest.approx(stream.solved[:, -1].mean())
    # mixed run: explored steps charged the sum, exploited steps the served model only
    r = B.messplus(stream, semb, ALPHA, 42, 0.3)
    C = stream.costs[r.order]
    np.testing.assert_allclose(r.cost[r.explored], C[r.explored].sum(axis=1))
    np.testing.assert_allclose(r.cost[~r.explored], C[~r.explored, r.model[~r.explored]])
    assert 0 < r.explored.sum() < len(r.explored)


def test_messplus_queue_frozen_without_feedback(split):
    stream, semb, _ = split
    r = B.messplus(stream, semb, ALPHA, 7, 0.3)
    _, plan, _ = stream_plan(stream.n_requests, stream.solved, 0.3, 7)
    gives = plan[:, 0] >= 0
    prev = np.concatenate([[0.0], r.q[:-1]])
    assert np.all(r.q[~gives] == prev[~gives])
    expected = np.maximum(0.0, prev[gives] + ALPHA - plan[gives, r.model[gives]])
    np.testing.assert_allclose(r.q[gives], expected)
    r0 = B.messplus(stream, semb, ALPHA, 7, 0.0)
    assert np.all(r0.q == 0.0) and r0.summary.feedback == 0


def test_messplus_delayed_feedback(split):
    stream, semb, _ = split
    iid = B.messplus(stream, semb, ALPHA, 7, 0.3, V=1e-3)
    zero = B.messplus(stream, semb, ALPHA, 7, 0.3, V=1e-3, feedback=FeedbackConfig(kind="delayed", delay=0))
    np.testing.assert_array_equal(zero.model, iid.model)  # delay 0: the immediate path exactly
    np.testing.assert_array_equal(zero.q, iid.q)
    d = 40
    late = B.messplus(stream, semb, ALPHA, 7, 0.3, V=1e-3, feedback=FeedbackConfig(kind="delayed", delay=d))
    _, plan, _ = stream_plan(stream.n_requests, stream.solved, 0.3, 7)
    gives = np.flatnonzero(plan[np.arange(stream.n_requests), late.model] != -1)
    first_move = int(np.flatnonzero(late.q != 0)[0]) if (late.q != 0).any() else stream.n_requests
    # the queue cannot move before the first verdict arrives, d - 1 steps after it was given
    assert first_move >= gives[0] + d - 1
    # the queue replays the same verdicts, each d - 1 steps late
    q = 0.0
    expect = np.zeros(stream.n_requests)
    arrive = {int(i) + d - 1: int(i) for i in gives}
    for t in range(stream.n_requests):
        if t in arrive:
            j = arrive[t]
            q = max(0.0, q + ALPHA - plan[j, late.model[j]])
        expect[t] = q
    np.testing.assert_allclose(late.q, expect)
    assert not np.array_equal(late.model, iid.model)


def test_messplus_follows_the_shared_schedule(split, monkeypatch):
    """Exploration is ``exploration_probability(t, c)`` on the policy draws (step 1 always
    explores) and data-driven V is ``data_driven_v`` on the running cost spreads in
    serving order: the schedule SLARouter's policies use, not a copy of it."""
    stream, semb, _ = split
    c, q_max, eps, seed = 0.6, 12.0, 0.02, 11
    calls = []

    def recording_v(*args):
        calls.append(args)
        return data_driven_v(*args)

    monkeypatch.setattr(messplus_router, "data_driven_v", recording_v)
    r = B.messplus(stream, semb, ALPHA, seed, RATE, c=c, V=None, q_max=q_max, eps=eps)
    N = stream.n_requests
    ts = np.arange(1, N + 1)
    order, _, mseed = stream_plan_full(N, stream.solved, RATE, seed, True, FeedbackConfig())
    np.testing.assert_array_equal(r.order, order)
    policy_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(mseed)).spawn(3)[0]))
    expected_explore = policy_rng.random(N) < exploration_probability(ts, c)
    expected_explore[0] = True
    np.testing.assert_array_equal(r.explored, expected_explore)
    assert 0 < expected_explore.sum() < N  # the schedule, not a degenerate all-or-nothing
    costs = stream.costs[order]
    spread_sum = np.cumsum(costs[:, -1] - costs[:, 0])
    assert len(calls) == 1
    got_q_max, got_eps, got_spread, got_t = calls[0]
    assert (got_q_max, got_eps) == (q_max, eps)
    np.testing.assert_array_equal(got_spread, spread_sum)
    np.testing.assert_array_equal(got_t, ts)
    # the V that MESS+ decided with (its last value reaches the summary) is the schedule's
    assert r.summary.final_v == data_driven_v(q_max, eps, spread_sum[-1], N)
