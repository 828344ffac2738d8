"""The SLARouter-only grid of `slarouter simulate`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slarouter_core import experiments as E


def test_slarouter_grid_with_feedback_models(toy):
    base = E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback_rate=0.3)
    again = E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback_rate=0.3, feedback="iid")
    pd.testing.assert_frame_equal(base, again)
    names = {"bursty:on_fraction=0.5": "bursty(on_fraction=0.5)", "negative": "negative", "delayed": "delayed",
             "judge-acpbench": "iid+judge(acpbench-gpt5.4-reasoning)"}
    for kind, name in names.items():
        out = E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback_rate=0.3, feedback=kind)
        assert out["feedback_model"].tolist() == [name, name]
        if kind in ("bursty:on_fraction=0.5", "negative"):  # other feedback steps, so other counts
            assert not np.array_equal(out["feedback"].to_numpy(), base["feedback"].to_numpy())
    assert "acpbench" in out["feedback_params"].iloc[0]
    with pytest.raises(ValueError, match="mixed"):
        E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback="drift")
    mixed = E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback="drift", per_benchmark=False)
    assert mixed["benchmark"].tolist() == ["alpha_bench+beta_bench"] and mixed["feedback_kind"].tolist() == ["drift"]


def test_slarouter_grid_rows_carry_the_compare_rows_judge_and_at_risk_columns(toy):
    """`simulate` rows say what `compare` rows say about the judge and the at-risk warning
    (one place computes them): a contextual router that cannot reach alpha warns."""
    from slarouter_core.router import RouterConfig

    rows = E.run_slarouter_grid(toy.data, toy.embeddings, RouterConfig(alpha=0.99, mode="contextual"), alpha=0.99,
                                seeds=(1,), feedback_rate=0.5, feedback="fill-acpbench", judge_cost=2.0)
    assert rows["first_at_risk"].notna().all() and (rows["first_at_risk"] < rows["requests"]).all()
    assert rows["judge_call_cost"].tolist() == pytest.approx([2.0 * 1e-6 if u == "MJ" else 2.0 for u in rows["cost_unit"]])
    assert rows["judge_cost"].tolist() == pytest.approx((rows["judge_calls"] * rows["judge_call_cost"]).tolist())
    assert (rows["judge_calls"] > 0).all()
    paper = E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback_rate=0.5)
    assert paper["first_at_risk"].isna().all()  # the paper's router claims no bound to warn about
