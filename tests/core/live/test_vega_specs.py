"""Every chart the dashboard draws is valid Vega-Lite (checked against the schema Altair
ships), carries no data of its own beyond one-row rule labels (the page passes the frame),
and the streaming specs cost a tick no Altair work (built once per distinct call)."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest
from altair.utils.schemapi import validate_jsonschema
from altair.vegalite.schema import core as vl_schema

from slarouter_core.data import from_frame
from slarouter_core.embedding_cache import embed_texts
from slarouter_core.live import LiveRun, RunSettings
from slarouter_core.live import charts as C
from slarouter_core.live.experiment_charts import comparison_chart, sweep_charts
from slarouter_core.live.tables import zoo_chart
from slarouter_core.service.monitor import ServiceView
from tests.conftest import make_frame
from tests.core.live.zoo_frames import dollar_zoo

SCHEMA = vl_schema.load_schema()  # the Vega-Lite version this Altair writes


def valid(spec: dict) -> None:
    """Raises if ``spec`` with its frame (a named dataset here) is not valid Vega-Lite."""
    validate_jsonschema({"data": {"name": "frame"}, **spec} if "data" not in spec else spec, SCHEMA)
    text = json.dumps(spec)
    assert '"$schema"' not in text and '{"name": "empty"}' not in text and '{"name": "frame"}' not in text


def state_document(n: int = 80, models: int = 3) -> dict:
    """A service state document as ``GET /v1/state`` answers it (the fields the view reads)."""
    rng = random.Random(0)
    rows = [{"t": t, "q": rng.random(), "cost": rng.random() * 1e-3, "est_costs": [1e-4 * 10 ** j for j in range(models)],
             "shat": rng.random(), "feedback": rng.choice([None, 0, 1]), "served": rng.choice([None, *range(models)]),
             "explored": rng.random() < 0.1, "failed": rng.random() < 0.05, "retried": False} for t in range(1, n + 1)]
    return {"models": [{"name": f"m{j}"} for j in range(models)], "alpha": 0.8, "t": n, "history": rows}


def test_the_live_run_and_service_charts_are_valid_vega_lite():
    data = from_frame(make_frame(n=300, seed=3))
    live = LiveRun(data, embed_texts(data.texts, "hashing:64"), RunSettings(per_tick=150),
                   routers=("paper", "guarded", "contextual"))
    live.step()
    charts = live.charts() + [live.tradeoff_chart()] + ServiceView(state_document()).charts()
    assert len(charts) >= 10
    for chart in charts:
        valid(chart.spec)
    with pytest.raises(Exception):  # the check can fail
        valid({"mark": "line", "encoding": {"x": {"field": "t", "type": "bogus"}}})


def aggregate_rows(feedback_models=("iid",)) -> pd.DataFrame:
    """Rows as ``experiments.aggregate`` gives them: two benchmarks, three methods."""
    return pd.DataFrame([{"benchmark": b, "method": m, "seeds": 3, "cost_mean": 1.0 + j, "cost_std": 0.1,
                          "satisfaction_mean": 0.5 + 0.1 * j, "satisfaction_std": 0.01, "alpha": 0.8,
                          "sla_met": j > 0, "cost_unit": "USD", "feedback_model": fb, "feedback_rate": 0.1 * (j + 1)}
                         for fb in feedback_models for b in ("b0", "b1")
                         for j, m in enumerate(["x only", "static_mixture", "SLARouter"])])


def test_the_service_monitor_names_every_model_below_its_charts_in_their_own_colours():
    state = {**state_document(models=11), "mode": "contextual"}
    charts = {c.key: c for c in ServiceView(state).charts()}
    names = [m["name"] for m in state["models"]]
    cost = charts["cost"].spec["layer"][0]["encoding"]
    assert cost["color"]["scale"]["domain"] == ["SLARouter (reported usage)"] + [f"only {n}" for n in names]
    assert cost["color"]["scale"]["range"] == [C.ROUTER_COLORS["contextual"]] + C.model_colors(names)
    assert cost["color"]["legend"]["orient"] == "bottom" and cost["color"]["legend"]["labelLimit"] == 0
    assert cost["strokeDash"]["scale"]["range"] == [[1, 0]] + [[2, 2]] * 11  # the router solid, models dotted
    ratio = charts["ratio"].spec["layer"][0]["encoding"]["color"]
    assert ratio["scale"]["range"] == C.model_colors(names) and ratio["legend"]["orient"] == "bottom"
    assert len(set(ratio["scale"]["range"])) == 11


def test_the_service_cost_chart_never_draws_two_names_in_one_colour():
    """The router's colour goes through ``color_encoding``'s rule: a service whose mode the
    dashboard does not know gets a spare hue, which a model past the palette's end (its hue
    taken) would otherwise get too."""
    models = len(C.MODEL_PALETTE) + 1
    for mode in (None, "paper", "contextual", "someone_elses_policy"):
        state = state_document(models=models) | ({"mode": mode} if mode else {})
        cost = {c.key: c for c in ServiceView(state).charts()}["cost"].spec["layer"][0]["encoding"]
        scale = cost["color"]["scale"]
        assert len(scale["domain"]) == models + 1 == len(set(scale["range"])), mode
        assert scale["domain"] == cost["strokeDash"]["scale"]["domain"]
        if mode in C.ROUTER_COLORS:
            assert scale["range"][0] == C.ROUTER_COLORS[mode]


def test_the_experiment_and_zoo_charts_are_valid_vega_lite():
    agg, several = aggregate_rows(), aggregate_rows(("iid", "negative"))
    specs = [comparison_chart(agg)[1], *[s for _, s in sweep_charts(agg, "feedback_rate", "rate")],
             *[s for _, s in sweep_charts(agg, "feedback_rate", "rate", log=True, series="S")],
             comparison_chart(several)[1], *[s for _, s in sweep_charts(several, "feedback_rate", "rate")]]
    zoo = from_frame(dollar_zoo(11, n=220, benchmarks=2), cost="cost_usd")
    specs += [zoo_chart(zoo)[1], zoo_chart(zoo, per_benchmark=False, legend=False, labels=False)[1]]
    for spec in specs:
        valid(spec)
    assert "facet" in specs[0] and specs[0]["columns"] == 2 and "facet" in specs[-2]


def test_a_streaming_spec_is_built_once_and_every_call_gets_its_own_copy():
    color = C.color_encoding("series", ["a", "b"], ["a", "b"], "router")
    C._streaming_chart.cache_clear()
    first = C._chart_spec("Q", "Q", color, 100, rule=0.8, rule_label="alpha")
    first["layer"][0]["transform"] = [{"filter": "true"}]  # a caller may change its copy (run.py does)
    again = C._chart_spec("Q", "Q", color, 100, rule=0.8, rule_label="alpha")
    assert "transform" not in again["layer"][0]
    assert C._streaming_chart.cache_info().hits == 1 and C._streaming_chart.cache_info().misses == 1
    longer = C._chart_spec("Q", "Q", color, 200, rule=0.8, rule_label="alpha")  # another stream: another spec
    assert longer["layer"][0]["encoding"]["x"]["scale"]["domain"] == [0, 200]
    assert [la["mark"]["type"] for la in again["layer"]] == ["line", "rule", "text"]


def _linear(hex_colour: str):
    import numpy as np

    c = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(hex_colour: str):
    import numpy as np

    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ \
        _linear(hex_colour) / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_every_model_hue_is_visible_on_white_and_apart_from_the_others():
    """Issue 23, defects 3 and 12: up to 20 models stay distinguishable (CIELAB distance)
    and none is a near-invisible light tint (WCAG contrast against the white page)."""
    import numpy as np

    def contrast(h: str) -> float:
        lum = float(np.dot([0.2126, 0.7152, 0.0722], _linear(h)))
        return 1.05 / (lum + 0.05)

    palette = C.MODEL_PALETTE
    assert len(set(palette)) == len(palette) == 20
    assert min(map(contrast, palette)) >= 3.0, {h: round(contrast(h), 2) for h in palette}

    def closest(colours):
        return min(float(np.linalg.norm(_lab(a) - _lab(b))) for i, a in enumerate(colours) for b in colours[i + 1:])

    assert closest(palette) >= 16 and closest(palette[:11]) >= 20
    assert C.model_colors([f"m{j}" for j in range(11)]) == list(palette[:11])
