from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from slarouter_core.feedback import FeedbackConfig, bursty_mask, drift_order, make_plan
from slarouter_core.judge import GPQA_JUDGE, JudgeModel
from slarouter_core.router import NO_FEEDBACK
from slarouter_core.simulator import stream_plan, stream_plan_full


def labels(n=20000, m=3, seed=0):
    return (np.random.default_rng(seed).random((n, m)) < np.array([0.4, 0.6, 0.8])).astype(np.int8)


def test_default_config_reproduces_todays_plan_exactly():
    y = labels(3000)
    order, fb, rs = stream_plan(3000, y, 0.2, 42)
    # today's code, written out
    o_ss, f_ss, r_ss = np.random.SeedSequence(42).spawn(3)
    order0 = np.random.Generator(np.random.PCG64(o_ss)).permutation(3000)
    gives = np.random.Generator(np.random.PCG64(f_ss)).random(3000) < 0.2
    fb0 = np.where(gives[:, None], y[order0], NO_FEEDBACK).astype(np.int8)
    assert np.array_equal(order, order0) and np.array_equal(fb, fb0)
    assert rs == int(r_ss.generate_state(1, np.uint32)[0])
    o2, fb2, _ = stream_plan(3000, y, 0.2, 42, feedback=FeedbackConfig())
    assert np.array_equal(fb2, fb0) and np.array_equal(o2, order0)


@settings(max_examples=10, deadline=None)
@given(rate=st.floats(0.02, 0.25), burst=st.floats(5, 80), on=st.floats(0.3, 1.0))
def test_bursty_keeps_the_mean_rate_and_clusters(rate, burst, on):
    n = 60000
    g = bursty_mask(n, rate, burst, on, np.random.default_rng(1))
    assert abs(g.mean() - rate) < 0.25 * rate + 0.004
    if on <= 0.5:  # then P(on | on) >= 0.8 vs 0.5 on average
        # clustering: feedback is more likely right after feedback than on average
        after = g[1:][g[:-1]].mean()
        assert after > g.mean() * 1.2


@settings(max_examples=10, deadline=None)
@given(rate=st.floats(0.02, 0.3), ratio=st.floats(1.0, 4.0))
def test_negativity_bias_rates(rate, ratio):
    y = labels(40000)
    plan = make_plan(y, np.zeros(len(y), bool), rate, 3, FeedbackConfig(kind="negative", negative_ratio=ratio))
    fb = plan.feedback
    neg = fb[y == 0]
    pos = fb[y == 1]
    p_neg = (neg != NO_FEEDBACK).mean()
    p_pos = (pos != NO_FEEDBACK).mean()
    assert p_pos == pytest.approx(rate, abs=0.02)
    assert p_neg == pytest.approx(min(1.0, rate * ratio), abs=0.03)
    assert np.all(fb[fb != NO_FEEDBACK] == y[fb != NO_FEEDBACK])  # verdicts are truthful


@pytest.mark.parametrize("dist", ["fixed", "geometric"])
def test_delayed_feedback_delays(dist):
    y = labels(20000)
    order, plan, _ = stream_plan_full(20000, y, 0.2, 5, feedback=FeedbackConfig(kind="delayed", delay=30, delay_dist=dist))
    assert plan.delay is not None and plan.delay.min() >= 0
    assert plan.delay.mean() == pytest.approx(30, rel=0.05)
    if dist == "fixed":
        assert np.all(plan.delay == 30)
    # presence is the IID plan, unchanged
    _, fb0, _ = stream_plan(20000, y, 0.2, 5)
    assert np.array_equal(plan.feedback, fb0)


def test_drift_changes_the_mix_mid_stream():
    groups = np.array(["a", "b", "c", "d"] * 1000)
    order = np.random.default_rng(0).permutation(4000)
    out = drift_order(order, groups, 0.1, 0)
    assert sorted(out.tolist()) == list(range(4000))
    first = np.isin(groups[out[:2000]], ["a", "b"]).mean()
    last = np.isin(groups[out[2000:]], ["a", "b"]).mean()
    assert first > 0.85 and last < 0.15
    one = np.array(["x"] * 10)
    assert np.array_equal(drift_order(np.arange(10), one, 0.1, 0), np.arange(10))
    with pytest.raises(ValueError, match="benchmark"):
        stream_plan(10, labels(10), 0.2, 0, feedback=FeedbackConfig(kind="drift"))


def test_judge_feedback_has_the_judges_error_rates():
    y = labels(60000)
    gives = np.ones(len(y), bool)
    fb = make_plan(y, gives, 1.0, 0, FeedbackConfig(judge=GPQA_JUDGE)).feedback
    fpr = (fb[y == 0] == 1).mean()
    fnr = (fb[y == 1] == 0).mean()
    assert fpr == pytest.approx(GPQA_JUDGE.fpr, abs=0.01)
    assert fnr == pytest.approx(GPQA_JUDGE.fnr, abs=0.01)


@pytest.mark.parametrize("kw", [dict(kind="sometimes"), dict(burst_length=0.5), dict(on_fraction=0),
                                dict(negative_ratio=0), dict(delay=-1), dict(delay_dist="poisson"),
                                dict(drift_mix=0.9), dict(burst_length=float("nan"))])
def test_config_validation(kw):
    with pytest.raises(ValueError):
        FeedbackConfig(**kw)


def test_bursty_rate_must_be_reachable():
    with pytest.raises(ValueError, match="on_fraction"):
        make_plan(labels(100), np.zeros(100, bool), 0.5, 0, FeedbackConfig(kind="bursty", on_fraction=0.25))


def test_round_trip_dict():
    cfg = FeedbackConfig(kind="negative", negative_ratio=2.0, judge=JudgeModel(0.1, 0.2))
    assert FeedbackConfig.from_dict(cfg.to_dict()) == cfg
    assert FeedbackConfig.from_dict(None) == FeedbackConfig()


def test_verdicts_in_flight_arrive_before_their_position_in_the_order_sent():
    from slarouter_core.feedback import VerdictsInFlight

    v = VerdictsInFlight()
    assert v.send(pos=0, delay=0, t=1, verdict=1)  # no delay: at once, nothing kept
    assert not v.send(pos=1, delay=3, t=2, verdict=0)  # due before position 4
    assert not v.send(pos=2, delay=2, t=3, verdict=1)  # due before position 4 too, sent later
    assert not v.send(pos=3, delay=5, t=4, verdict=1)
    assert len(v) == 3 and v.arriving(3) == []
    assert v.arriving(4) == [(2, 0), (3, 1)]
    assert v.arriving(4) == []  # handed over once
    assert v.arriving(100) == [(4, 1)] and len(v) == 0
