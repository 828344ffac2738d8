"""Feedback models as a grid axis."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slarouter_core import experiments as E
from slarouter_core.feedback import FeedbackConfig

from .conftest import FAST

ALL_PRESETS = tuple(E.PRESETS[k] for k in ("single", "random", "static_mixture", "oracle", "carrot", "causal",
                                            "messplus", "slarouter", "slarouter_guarded"))


def test_iid_default_reproduces_rows_and_axis_is_tidy(toy, rows):
    cfg = E.GridConfig(methods=FAST, seeds=(42, 1), feedback=(FeedbackConfig(), "bursty:on_fraction=0.5,burst_length=5"))
    both = E.run_grid(toy, cfg)
    assert len(both) == 2 * len(rows)
    iid = both[both["feedback_model"] == "iid"].reset_index(drop=True)
    # the IID half is the default grid, row for row (the axis adds a loop, not a change)
    pd.testing.assert_frame_equal(iid, rows)
    assert (rows["feedback_kind"] == "iid").all() and (rows["feedback_params"] == "{}").all()
    burst = both[both["feedback_kind"] == "bursty"]
    assert set(burst["feedback_model"]) == {"bursty(burst_length=5,on_fraction=0.5)"}
    assert burst["feedback_params"].iloc[0] == '{"burst_length": 5.0, "on_fraction": 0.5}'
    # feedback-blind references are unchanged; online methods see another plan
    key = ["benchmark", "seed", "method"]
    a, b = iid.set_index(key), burst.set_index(key)
    for m in ("oracle", "static mixture", "large only"):
        assert (a.xs(m, level="method")["satisfaction"] == b.xs(m, level="method")["satisfaction"]).all()
    assert (a.xs("MESS+", level="method")["feedback"] != b.xs("MESS+", level="method")["feedback"]).any()
    # aggregation keeps the feedback models apart and the report names them
    agg = E.aggregate(both)
    assert len(agg) == 2 * len(E.aggregate(rows))
    text = E.format_table(agg)
    assert "feedback bursty(burst_length=5,on_fraction=0.5)" in text
    ov = E.overview(agg)
    assert "MESS+ [feedback iid]" in set(ov["method"]) and "MESS+ [feedback bursty(burst_length=5,on_fraction=0.5)]" in set(ov["method"])


def test_every_method_in_a_cell_runs_on_the_cells_plan(toy, monkeypatch):
    from slarouter_core import baselines as B

    seen = []
    real = B.stream_plan_full

    def spy(n, labels, rate, seed, shuffle=True, feedback=None, groups=None):
        out = real(n, labels, rate, seed, shuffle, feedback, groups)
        seen.append((seed, feedback, out[0].tobytes(), out[1].feedback.tobytes()))
        return out

    monkeypatch.setattr(B, "stream_plan_full", spy)
    import slarouter_core.simulator as S
    monkeypatch.setattr(S, "stream_plan_full", spy)
    fcfg = FeedbackConfig(kind="negative", negative_ratio=2.0)
    E.run_grid(toy, E.GridConfig(methods=ALL_PRESETS, seeds=(3,), feedback=(fcfg,), benchmarks=("alpha_bench",)))
    assert len(seen) >= len(ALL_PRESETS) + 2  # single expands per model; SLARouter plans in both layers
    assert all(s == 3 and f == fcfg for s, f, _, _ in seen)
    assert len({(o, p) for _, _, o, p in seen}) == 1  # one order, one feedback plan for everyone


def test_drift_needs_a_mixed_stream(toy):
    with pytest.raises(ValueError, match="mixed"):
        E.GridConfig(methods=(E.PRESETS["oracle"],), feedback=("drift",))
    with pytest.raises(ValueError, match="at least two benchmarks"):
        E.run_grid(toy, E.GridConfig(methods=(E.PRESETS["oracle"],), seeds=(1,), feedback=("drift",), mixed=True,
                                     benchmarks=("alpha_bench",)))
    cfg = E.GridConfig(methods=(E.PRESETS["static_mixture"], E.PRESETS["messplus"]), seeds=(1,),
                       feedback=("iid", "drift:drift_mix=0"), mixed=True)
    out = E.run_grid(toy, cfg)
    assert set(out["benchmark"]) == {"alpha_bench+beta_bench"} and (out["n_stream"] + out["n_history"] == 240).all()
    assert out["feedback_model"].tolist() == ["iid", "iid", "drift(drift_mix=0)", "drift(drift_mix=0)"]
    # MESS+ routes a reordered stream differently (its call ratio changes)
    calls = [f"calls_{m}" for m in toy.data.models]
    assert not np.allclose(out.loc[1, calls].to_numpy(float), out.loc[3, calls].to_numpy(float))


def test_bad_feedback_axis_inputs(toy):
    with pytest.raises(ValueError, match="unknown feedback model"):
        E.GridConfig(feedback=("sometimes",))
    with pytest.raises(ValueError, match="burst_length must be a finite number >= 1"):
        E.parse_feedback("bursty:burst_length=0")
    with pytest.raises(ValueError, match="must be a number"):
        E.parse_feedback("bursty:burst_length=long")
    with pytest.raises(ValueError, match="bad feedback parameter"):
        E.parse_feedback("delayed:lag=3")
    with pytest.raises(ValueError, match="unknown judge"):
        E.parse_feedback("iid:judge=me")
    with pytest.raises(ValueError, match="judge_calibrate must be true or false"):
        E.parse_feedback("iid:judge_fill=acpbench,judge_budget=0.5,judge_calibrate=maybe")
    off = E.parse_feedback("iid:judge_fill=acpbench,judge_budget=0.5,judge_calibrate=false")
    assert off.judge_calibrate is False and E.feedback_name(off).endswith(",budget=0.5,no-calibration)")
    assert E.parse_feedback("iid:judge_fill=acpbench,judge_budget=0.5").judge_calibrate is True
    with pytest.raises(ValueError, match="exceeds 1"):
        E.GridConfig(feedback=("bursty",), feedback_rates=(0.2, 0.5))
    with pytest.raises(ValueError, match="must differ"):
        E.GridConfig(feedback=("iid", FeedbackConfig()))
    with pytest.raises(ValueError, match="not as a method param"):
        E.run_grid(toy, E.GridConfig(methods=(E.MethodSpec("slarouter", {"feedback": {"kind": "bursty"}}),)))
    assert E.parse_feedback("judge-gpqa").judge is not None
    assert E.parse_feedback({"kind": "delayed", "delay": 3}) == FeedbackConfig(kind="delayed", delay=3)
    assert E.parse_feedback("delayed:delay=200,delay_dist=geometric") == \
        FeedbackConfig(kind="delayed", delay=200.0, delay_dist="geometric")


def test_the_pickers_choices_run_on_one_benchmark():
    assert "drift" not in E.FEEDBACK_CHOICES and {"iid", "bursty", "negative", "delayed"} <= set(E.FEEDBACK_CHOICES)
    assert all(name in E.FEEDBACK_PRESETS for name in E.FEEDBACK_CHOICES)
    E.GridConfig(feedback=tuple(E.FEEDBACK_CHOICES))  # every choice is valid on per-benchmark streams


def test_judge_fill_in_as_a_feedback_spec_and_preset():
    from slarouter_core.judge import JUDGE_PRESETS

    f = E.parse_feedback("iid:judge_fill=acpbench,judge_budget=0.25")
    assert f.judge_fill == JUDGE_PRESETS["acpbench"] and f.judge_budget == 0.25 and f.judge is None
    assert E.feedback_name(f) == "iid+fill(acpbench-gpt5.4-reasoning,budget=0.25)"
    assert E.feedback_params(f)["judge_budget"] == 0.25 and "judge_fill" in E.feedback_params(f)
    assert E.parse_feedback("fill-gpqa") == FeedbackConfig(judge_fill=JUDGE_PRESETS["gpqa"])
    assert E.feedback_name(E.parse_feedback("fill-gpqa")) == "iid+fill(gpqa-gpt5.4-reasoning)"
    assert "fill-acpbench" in E.FEEDBACK_CHOICES and "paper's protocol" in E.FEEDBACK_CHOICES["fill-acpbench"]
    with pytest.raises(ValueError, match="judge_budget"):
        E.parse_feedback("iid:judge_fill=gpqa,judge_budget=2")
    with pytest.raises(ValueError, match="cannot both be set"):
        E.parse_feedback("iid:judge=gpqa,judge_fill=gpqa")
    with pytest.raises(ValueError, match="unknown judge"):
        E.parse_feedback("iid:judge_fill=gpt")
