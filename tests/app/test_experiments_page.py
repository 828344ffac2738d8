"""Experiments page: methods, seeds and sweeps reach the runner; table, chart and exports."""

from __future__ import annotations

import json

from .conftest import open_app

PAGE = "pages/experiments_page.py"


def test_comparison_table_chart_and_exports():
    at = open_app(PAGE, c="0.3")
    at.multiselect(key="w_exp_methods").set_value(["single", "static_mixture", "mine"])
    at.text_input(key="w_exp_seeds").set_value("42, 7").run()
    at.button(key="w_exp_run").click().run()
    assert not at.exception and not at.error
    rows = at.session_state.exp_rows
    assert set(rows["seed"]) == {42, 7}
    assert set(rows["benchmark"]) == {"arithmetic", "coding", "history", "science"}
    mine = rows[rows["method"] == "SLARouter (sidebar settings)"]
    assert len(mine) == 8 and {json.loads(p)["c"] for p in mine["params"]} == {0.3}
    assert {m for m in rows["method"] if m.endswith(" only")} == {
        "tiny-1b only", "small-8b only", "medium-32b only", "large-70b only"}
    text = "\n".join(m.value for m in at.markdown)
    assert "request satisfaction (%)" in text and "model call ratio" in text and "±" in text
    assert "met" in text and "missed" in text
    assert len(at.get("vega_lite_chart")) == 1
    labels = [b.proto.label for b in at.get("download_button")]
    assert {"Runs (CSV)", "Table (CSV)", "Report (Markdown)"} <= set(labels)


def test_bad_seeds_are_explained():
    at = open_app(PAGE)
    at.text_input(key="w_exp_seeds").set_value("42, x").run()
    assert "'x' is not a valid seed" in at.error[0].value
    assert at.button(key="w_exp_run").disabled


def test_v_sweep_runs_each_v():
    at = open_app(PAGE)
    at.text_input(key="w_vs_values").set_value("1e-6, 1e-4")
    at.text_input(key="w_vs_seeds").set_value("1").run()
    at.button(key="w_vs_run").click().run()
    assert not at.exception and not at.error
    rows = at.session_state.vs_rows
    assert sorted({json.loads(p)["V"] for p in rows["params"]}) == [1e-6, 1e-4]
    assert len(at.get("vega_lite_chart")) == 2


def test_feedback_rate_sweep_runs_each_rate():
    at = open_app(PAGE)
    at.multiselect(key="w_rs_methods").set_value(["mine"])
    at.text_input(key="w_rs_values").set_value("0.1, 1")
    at.text_input(key="w_rs_seeds").set_value("1").run()
    at.button(key="w_rs_run").click().run()
    assert not at.exception and not at.error
    rows = at.session_state.rs_rows
    assert sorted(set(rows["feedback_rate"])) == [0.1, 1.0]
    full = rows[rows["feedback_rate"] == 1.0]["feedback"].sum()
    sparse = rows[rows["feedback_rate"] == 0.1]["feedback"].sum()
    assert full > 5 * sparse
    at.text_input(key="w_rs_values").set_value("0.1, 2").run()
    assert "out of range" in at.error[0].value
