"""Aggregation over seeds: SLA verdict, cheapest compliant method, overview."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slarouter_core import experiments as E


def test_aggregate_marks_sla_and_cheapest_compliant():
    base = dict(dataset="d", benchmark="b", feedback_rate=0.2, alpha=0.7, cost_unit="MJ",
                post_convergence_satisfaction=np.nan, training_cost=0.0)
    rows = []
    for seed in (1, 2):
        rows += [
            dict(base, method="cheap-miss", method_key="single", seed=seed, operating_cost=1.0, satisfaction=0.6),
            dict(base, method="mid-met", method_key="carrot", seed=seed, operating_cost=2.0 + seed, satisfaction=0.72),
            dict(base, method="dear-met", method_key="single", seed=seed, operating_cost=9.0, satisfaction=0.9),
            dict(base, method="oracle", method_key="oracle", seed=seed, operating_cost=0.5, satisfaction=0.7),
        ]
    agg = E.aggregate(pd.DataFrame(rows)).set_index("method")
    assert agg.loc["mid-met", "cost_mean"] == pytest.approx(3.5)
    assert agg.loc["mid-met", "cost_std"] == pytest.approx(np.std([3.0, 4.0], ddof=1))
    assert agg["sla_met"].to_dict() == {"cheap-miss": False, "mid-met": True, "dear-met": True, "oracle": True}
    # the oracle is a reference bound, never the "cheapest compliant method"
    assert agg["cheapest"].to_dict() == {"cheap-miss": False, "mid-met": True, "dear-met": False, "oracle": False}
    text = E.format_table(agg.reset_index())
    assert "**mid-met**" in text and "met, cheapest" in text and "oracle (ref)" in text
    assert "| cheap-miss | 1.000 ± 0.000 | 60.0 ± 0.0 |" in text
    ov = E.overview(agg.reset_index()).set_index("method")
    assert ov.loc["mid-met", "cost_vs_oracle"] == pytest.approx(3.5 / 0.5)
    assert ov.loc["dear-met", "sla_met"] == 1 and ov.loc["cheap-miss", "sla_met"] == 0


def test_gaps_price_the_routers_own_satisfaction_text_blind():
    """Beside the static mixture at alpha, the mixture that delivers the router's own mean
    satisfaction, from the single models' runs on the same benchmark; a dash in the report
    where the single models did not run."""
    base = dict(dataset="d", benchmark="b", feedback_rate=0.2, alpha=0.7, cost_unit="MJ",
                post_convergence_satisfaction=np.nan, training_cost=0.0, seed=1)
    rows = [dict(base, method="weak only", method_key="single", operating_cost=1.0, satisfaction=0.5),
            dict(base, method="strong only", method_key="single", operating_cost=5.0, satisfaction=0.9),
            dict(base, method="static mixture", method_key="static_mixture", operating_cost=3.0, satisfaction=0.7),
            dict(base, method="oracle", method_key="oracle", operating_cost=0.5, satisfaction=0.7),
            dict(base, method="SLARouter", method_key="slarouter", operating_cost=3.6, satisfaction=0.8)]
    agg = E.aggregate(pd.DataFrame(rows))
    g = E.gaps(agg).iloc[0]
    assert g["cost_vs_static_mixture"] == pytest.approx(3.6 / 3.0)
    # at 80% the mixture serves the strong model 3/4 of the time: 0.25 * 1 + 0.75 * 5 = 4
    assert g["cost_vs_mixture_at_satisfaction"] == pytest.approx(3.6 / 4.0)
    assert "| 1.20× | 0.90× | 7.20× |" in E.format_gaps(agg)
    no_singles = E.aggregate(pd.DataFrame([r for r in rows if r["method_key"] != "single"]))
    assert np.isnan(E.gaps(no_singles).iloc[0]["cost_vs_mixture_at_satisfaction"])
    assert "| 1.20× | – | 7.20× |" in E.format_gaps(no_singles)
