"""The Experiments page's charts (slarouter_core.live.experiment_charts): error bars,
the labelled alpha line, sweeps, and the PNG/SVG export."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from slarouter_core import experiments as E
from slarouter_core.live import experiment_charts as C


def layers(spec: dict) -> list[dict]:
    return spec["spec"]["layer"] if "spec" in spec else spec["layer"]


def test_comparison_chart_has_error_bars_across_seeds(rows):
    agg = E.aggregate(rows)
    frame, spec = C.comparison_chart(agg)
    assert spec["title"]["subtitle"].startswith("mean over 2 seeds; error bars ± 1 std across seeds")
    pd.testing.assert_series_equal(frame["cost_hi"] - frame["cost_lo"], 2 * agg["cost_std"], check_names=False)
    pd.testing.assert_series_equal(frame["satisfaction_lo"], agg["satisfaction_mean"] - agg["satisfaction_std"],
                                   check_names=False)
    bars = [la for la in layers(spec) if "x2" in la["encoding"] or "y2" in la["encoding"]]
    assert [b["encoding"].get("x2", b["encoding"].get("y2"))["field"] for b in bars] == ["cost_hi", "satisfaction_hi"]
    assert set(frame["panel"]) == {"alpha_bench", "beta_bench"}


def test_every_alpha_line_is_labelled(rows):
    agg = E.aggregate(rows)
    specs = [C.comparison_chart(agg)[1]] + [s for _, s in C.sweep_charts(agg, "feedback_rate", "rate")]
    for spec in specs:
        rules = [la for la in layers(spec) if la["mark"].get("color") == C.ALPHA_COLOR and la["mark"]["type"] == "rule"]
        labels = [la for la in layers(spec) if la["mark"]["type"] == "text"]
        assert len(rules) == len(labels)
    assert len([la for la in layers(specs[-1]) if la["mark"]["type"] == "text"]) == 1
    # over several benchmarks the sweep's line is a mean of their alphas, and says so
    assert "'mean alpha = '" in json.dumps(layers(specs[-1])[-1])
    assert C.ALPHA_LABEL == C.alpha_label()


def test_a_v_sweep_reads_v_from_its_column():
    agg = pd.DataFrame({"method": ["V=a", "V=b"], "V": [1e-6, 1e-4], "benchmark": "x", "cost_mean": [2.0, 1.0],
                        "satisfaction_mean": [0.9, 0.7], "alpha": 0.8, "cost_unit": "MJ"})
    (frame, _), _ = C.sweep_charts(agg, "V", "V", log=True, series="SLARouter (fixed V)")
    assert frame["V"].tolist() == [1e-6, 1e-4] and set(frame["series"]) == {"SLARouter (fixed V)"}
    with pytest.raises(ValueError, match="no column 'feedback_rate'"):
        C.sweep_charts(agg.drop(columns="V"), "feedback_rate", "rate")


def test_feedback_models_get_their_own_panels_and_dashes(rows):
    agg = E.aggregate(pd.concat([rows, rows.assign(feedback_model="negative")]))
    frame, spec = C.comparison_chart(agg)
    assert "alpha_bench · feedback negative" in set(frame["panel"]) and len(set(frame["panel"])) == 4
    (_, cost), _ = C.sweep_charts(agg, "feedback_rate", "rate")
    assert cost["layer"][0]["encoding"]["strokeDash"]["field"] == "feedback_model"


def test_export_renders_png_and_svg_from_the_inlined_data(rows):
    pytest.importorskip("vl_convert")
    frame, spec = C.comparison_chart(E.aggregate(rows))
    full = C.standalone_spec(frame, spec)
    assert len(full["data"]["values"]) == len(frame) and "data" not in spec
    png = C.export_chart(frame, spec, "png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    svg = C.export_chart(frame, spec, "svg").decode()
    assert svg.lstrip().startswith("<svg") and "alpha_bench" in svg and "(target)" in svg
    assert C.standalone_spec(*C.sweep_charts(E.aggregate(rows), "feedback_rate", "rate")[0])["width"] == 420
    with pytest.raises(ValueError, match="format must be one of png, svg"):
        C.render_chart(full, "gif")


def test_export_failures_are_plain_sentences(rows, monkeypatch):
    pytest.importorskip("vl_convert")
    frame, spec = C.comparison_chart(E.aggregate(rows))
    with pytest.raises(C.ChartExportError, match="could not be rendered as PNG: .*Invalid field type"):
        C.render_chart({"mark": "point", "encoding": {"x": {"field": "a", "type": "bogus"}}}, "png")
    monkeypatch.setitem(sys.modules, "vl_convert", None)  # as if not installed
    with pytest.raises(C.ChartExportError, match="pip install vl-convert-python"):
        C.export_chart(frame, spec, "svg")
