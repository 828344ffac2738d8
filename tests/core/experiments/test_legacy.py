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
