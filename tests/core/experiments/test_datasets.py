"""Data loading: load_any on the shared MESS+ logs, Dataset's shape check."""

from __future__ import annotations

import numpy as np
import pytest

from slarouter_core import experiments as E


def test_real_data_subset(shared_data):
    from slarouter_core.embedding_cache import embed_texts

    data = E.load_any(shared_data).select(["sciq", "winogrande"])
    ds = E.Dataset("messplus_llama3", data, embed_texts(data.texts, "hashing"))
    rows = E.run_grid(ds, E.GridConfig(methods=(E.PRESETS["single"], E.PRESETS["oracle"], E.PRESETS["carrot"],
                                                E.PRESETS["slarouter"]), seeds=(42,)))
    agg = E.aggregate(rows).set_index(["benchmark", "method"])
    # alpha: midpoint of medium (.736) and large (.791) on winogrande
    assert agg.loc[("winogrande", "oracle"), "alpha"] == pytest.approx(0.764)
    assert agg.loc[("winogrande", "oracle"), "satisfaction_mean"] >= 0.764
    for b in ("sciq", "winogrande"):
        assert agg.loc[(b, "oracle"), "cost_mean"] < agg.loc[(b, "small only"), "cost_mean"] * 2
        assert agg.loc[(b, "CARROT"), "cost_mean"] > 0


def test_a_dataset_needs_one_embedding_row_per_request(toy):
    with pytest.raises(ValueError, match=r"must be \(n_requests=240, D\)"):
        E.Dataset("short", toy.data, np.zeros((239, 6)))
    with pytest.raises(ValueError, match="data not found"):
        E.load_any("/nonexistent/data.parquet")
