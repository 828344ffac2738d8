"""The registry: every method on the same stream and feedback plan, seeded, with its params checked."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slarouter_core import baselines as B
from slarouter_core.feedback import FeedbackConfig
from slarouter_core.simulator import stream_plan, stream_plan_full

from .toy import ALPHA, RATE


def test_all_methods_share_the_stream(split, results):
    stream, _, _ = split
    order0, _, _ = stream_plan(stream.n_requests, stream.solved, RATE, 42)
    for name, r in results.items():
        np.testing.assert_array_equal(r.order, order0, err_msg=name)
        assert r.model.shape == (stream.n_requests,)
        assert r.summary.requests == stream.n_requests
        np.testing.assert_array_equal(r.satisfied, stream.solved[r.order, r.model])


def test_same_seed_same_result_different_seed_different_stream(split):
    stream, semb, hist = split
    for name in ("random", "static_mixture", "messplus", "carrot", "causal"):
        f = B.METHODS[name]
        a = f(stream, semb, ALPHA, 3, RATE, history=hist)
        b = f(stream, semb, ALPHA, 3, RATE, history=hist)
        c = f(stream, semb, ALPHA, 4, RATE, history=hist)
        np.testing.assert_array_equal(a.model, b.model, err_msg=name)
        np.testing.assert_array_equal(a.cost, b.cost, err_msg=name)
        np.testing.assert_equal(dataclasses.asdict(a.summary), dataclasses.asdict(b.summary))
        assert a.extra_cost == b.extra_cost
        assert not np.array_equal(a.order, c.order)


def _all_methods(stream, semb, hist, seed, feedback):
    out = {}
    for name, f in B.METHODS.items():
        kw = {"model": "medium"} if name == "single" else ({"V": 1e-3} if name == "slarouter" else {})
        out[name] = f(stream, semb, ALPHA, seed, RATE, history=hist, feedback=feedback, **kw)
    return out


@pytest.mark.parametrize("fcfg", [FeedbackConfig(kind="negative", negative_ratio=1.8),
                                  FeedbackConfig(kind="bursty", burst_length=10, on_fraction=0.6),
                                  FeedbackConfig(kind="drift", drift_mix=0.0)])
def test_every_method_gets_the_same_non_iid_plan(split, fcfg):
    stream, semb, hist = split
    order, fplan, _ = stream_plan_full(stream.n_requests, stream.solved, RATE, 5, True, fcfg, stream.benchmarks)
    iid_order, iid_plan, _ = stream_plan(stream.n_requests, stream.solved, RATE, 5)
    plan = fplan.feedback
    if fcfg.kind == "drift":  # the benchmark mix changes: first all of "a", then all of "b"
        assert not np.array_equal(order, iid_order)
        assert set(stream.benchmarks[order[: int((stream.benchmarks == "a").sum())]]) == {"a"}
    else:
        assert not np.array_equal(plan, iid_plan)
    res = _all_methods(stream, semb, hist, 5, fcfg)
    for name, r in res.items():
        np.testing.assert_array_equal(r.order, order, err_msg=name)
    for name in ("messplus", "slarouter"):  # online: the verdicts they saw are the plan's, for their models
        r = res[name]
        seen = plan[np.arange(stream.n_requests), r.model]
        assert r.summary.feedback == int((seen != -1).sum()), name
        if fcfg.kind == "negative":  # presence depends on the served model's label
            assert r.summary.feedback != int((iid_plan[np.arange(stream.n_requests), r.model] != -1).sum())


def test_iid_feedback_config_is_the_default_exactly(split):
    stream, semb, hist = split
    default = _all_methods(stream, semb, hist, 9, None)
    explicit = _all_methods(stream, semb, hist, 9, FeedbackConfig())
    for name in B.METHODS:
        a, b = default[name], explicit[name]
        np.testing.assert_array_equal(a.model, b.model, err_msg=name)
        np.testing.assert_array_equal(a.cost, b.cost, err_msg=name)
        np.testing.assert_equal(dataclasses.asdict(a.summary), dataclasses.asdict(b.summary))
    order, _, _ = stream_plan(stream.n_requests, stream.solved, RATE, 9)  # the old API's stream
    np.testing.assert_array_equal(default["messplus"].order, order)


def test_feedback_is_not_a_method_param(split):
    stream, semb, hist = split
    with pytest.raises(ValueError, match="not as a method param"):
        B.check_params("slarouter", {"feedback": {"kind": "bursty"}})
    with pytest.raises(ValueError, match="not as a method param"):
        B.check_params("messplus", {"feedback": {"kind": "bursty"}})
    with pytest.raises(TypeError, match="FeedbackConfig"):
        B.random_router(stream, semb, ALPHA, 0, RATE, feedback="bursty")
    with pytest.raises(ValueError, match="on_fraction"):
        B.messplus(stream, semb, ALPHA, 0, 0.5, feedback=FeedbackConfig(kind="bursty", on_fraction=0.25))
