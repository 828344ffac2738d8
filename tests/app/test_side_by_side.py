"""Live run with routers side by side (issue 13): same requests and feedback plan, the
references, a headline per router, and one colour per router on every chart."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from slarouter_core.baselines import clairvoyant_oracle, static_mixture_lp
from slarouter_core.live import ROUTER_COLORS, color_encoding, human_cost, model_colors, series_color
from slarouter_core.live.charts import HALF_WIDTH, legend_columns

from .conftest import open_app
from slarouter_core.live.charts import title_text

PAGE = "pages/live_run.py"


def rows(chart) -> list[dict]:
    return pa.ipc.open_stream(chart.proto.data.data).read_all().to_pylist()


def specs(at) -> dict[str, tuple[dict, object]]:
    out = {}
    for c in at.main.get("vega_lite_chart"):
        spec = json.loads(c.proto.spec)
        out[title_text(spec).split(" (")[0]] = (spec, c)
    return out


def color_ranges(spec: dict) -> list[dict]:
    """Every colour scale with a domain in a (layered) spec."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "color" in node and isinstance(node["color"], dict) and "scale" in node["color"]:
                sc = node["color"]["scale"]
                if "domain" in sc and "range" in sc:
                    found.append(dict(zip(sc["domain"], sc["range"])))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return found


@pytest.fixture(scope="module")
def three():
    """Three routers after two ticks of 400 requests."""
    at = open_app(PAGE, tick="400", routers="paper,guarded,contextual")
    at.button(key="w_step").click().run()
    at.button(key="w_step").click().run()
    return at


def test_every_router_gets_the_same_requests_and_feedback_plan(three):
    live = three.session_state.live
    assert live.routers == ("paper", "guarded", "contextual") and live.t == 800
    sims = list(live.sims.values())
    for sim in sims[1:]:
        np.testing.assert_array_equal(sim.order, sims[0].order)
        np.testing.assert_array_equal(sim.feedback_plan, sims[0].feedback_plan)
        assert sim.config.seed == sims[0].config.seed and sim.config.feedback_rate == sims[0].config.feedback_rate
        assert sim.t == 800
    assert {s.config.router.mode for s in sims} == {"paper", "guarded", "contextual"}
    # the routers really differ on those requests
    assert not np.array_equal(live.sims["paper"].arrays()["model"], live.sims["contextual"].arrays()["model"])


def test_a_headline_per_router_with_satisfaction_and_cost_multiples_of_both_references(three):
    live = three.session_state.live
    data = live.data
    metrics = {m.label: m.value for m in three.metric}
    acc, mean_cost = data.solved.mean(axis=0), data.costs.mean(axis=0)
    f, _, _ = static_mixture_lp(acc, mean_cost, live.alpha)
    best = int(np.argmax(acc))
    for mode, sim in live.sims.items():
        a = sim.arrays()
        assert metrics[f"Satisfaction ({mode})"] == f"{100 * a['satisfied'].mean():.1f}%"
        mixture = float((data.costs[a["row"]] @ f).sum())
        assert metrics[f"Cost ÷ static mixture ({mode})"] == f"{a['cost'].sum() / mixture:.2f}x"
        dearest = data.costs[a["row"], best].sum()
        assert metrics[f"Cost ÷ {data.models[best]} ({mode})"] == f"{a['cost'].sum() / dearest:.2f}x"


def test_cost_chart_has_the_static_mixture_and_oracle_lines(three):
    live = three.session_state.live
    data = live.data
    spec, chart = specs(three)["Cumulative operating cost"]
    last = {r["series"]: r["value"] for r in rows(chart) if r["t"] == 800}
    order = live.sim.order[:800]
    f, _, _ = static_mixture_lp(data.solved.mean(axis=0), data.costs.mean(axis=0), live.alpha)
    assert last["static mixture"] == pytest.approx((data.costs[order] @ f).sum() / 1e6, rel=1e-5)
    cfg = live.sim.config
    oracle = clairvoyant_oracle(data, live.sim.embeddings, live.alpha, cfg.seed, cfg.feedback_rate)
    route = dict(zip(oracle.order.tolist(), oracle.model.tolist()))
    want = sum(data.costs[r, route[r]] for r in order.tolist())
    assert last["oracle"] == pytest.approx(want / 1e6, rel=1e-5)
    for mode in live.routers:
        assert last[mode] == pytest.approx(live.sims[mode].arrays()["cost"].sum() / 1e6, rel=1e-5)


def test_satisfaction_in_percent_with_a_band_for_the_routers_own_bound(three):
    live = three.session_state.live
    spec, chart = specs(three)["Running request satisfaction"]
    layers = spec["layer"]
    assert any(layer["mark"]["type"] == "area" for layer in layers)
    line = [layer for layer in layers if layer["mark"]["type"] == "line"][0]
    assert line["encoding"]["y"]["axis"]["format"] == "%"
    data = rows(chart)
    for mode in live.routers:
        mine = [r for r in data if r["series"] == mode]
        assert mine[-1]["value"] == pytest.approx(live.sims[mode].arrays()["satisfied"].mean(), rel=1e-6)
        lo = mine[-1]["lo"]
        if mode == "paper":  # the paper's rule claims no bound: no band
            assert lo is None or np.isnan(lo)
        else:
            assert lo == pytest.approx(live.sims[mode].router.certified_lower_bound(), rel=1e-5)


def test_one_colour_per_router_on_every_chart_and_single_models_in_their_own_hues(three):
    live = three.session_state.live
    seen: dict[str, set] = {}
    for title, (spec, _) in specs(three).items():
        for scale in color_ranges(spec):
            for name, colour in scale.items():
                seen.setdefault(name, set()).add(colour)
    for mode in live.routers:
        assert seen[mode] == {ROUTER_COLORS[mode]}, mode
    hues = model_colors(live.data.models)
    assert len(set(hues)) == len(hues)
    for j, m in enumerate(live.data.models):
        assert seen[m] == {hues[j]} and seen[f"only {m}"] == {hues[j]}
        assert hues[j] not in set(ROUTER_COLORS.values())
    # no two series share a colour on the cost chart
    cost = color_ranges(specs(three)["Cumulative operating cost"][0])[0]
    assert len(set(cost.values())) == len(cost)


def test_eleven_or_more_series_keep_distinct_colours_and_a_legend_that_fits():
    models = [f"model-{i:02d}" for i in range(12)]
    names = ["paper", "guarded", "contextual", "static mixture", "oracle"] + [f"only {m}" for m in models]
    enc = color_encoding("series", names, models, title="series")
    colours = enc["scale"]["range"]
    assert len(set(colours)) == len(names) == 17
    assert series_color("oracle", models) != series_color("paper", models)
    assert series_color("only model-11", models) != series_color("only model-00", models)
    legend = enc["legend"]
    assert legend["orient"] == "bottom" and legend["labelLimit"] == 0 and legend["titleLimit"] == 0
    # as many columns as fit half a page at 1400 px with every label whole
    assert legend["columns"] == legend_columns(names) >= 2
    assert legend["columns"] * (max(map(len, names)) * 6.5 + 40) <= HALF_WIDTH
    assert legend["symbolLimit"] == 0  # every entry shown


def test_guarded_mode_says_why_its_v_is_ten_times_the_settings_v(three):
    live = three.session_state.live
    v_paper = live.sims["paper"].router.current_v()
    captions = [c.value for c in three.caption]
    guarded = [c for c in captions if c.startswith("V = ") and "v_scale" in c]
    assert len(guarded) == 1 and "10 times the V of the settings" in guarded[0]
    v_guarded = float(guarded[0].split("V = ")[1].split(":")[0])
    assert v_guarded == pytest.approx(10 * v_paper, rel=1e-2)
    assert f"V = {v_paper:.3g}" in captions  # paper: the settings' V as it is


def test_before_start_charts_have_fixed_axes_not_an_infinite_extent():
    at = open_app(PAGE)
    assert at.session_state.live.t == 0
    for title, (spec, chart) in specs(at).items():
        layers = spec.get("layer", [spec])
        if title == "Cost against satisfaction":  # fixed log axis over the models' costs
            assert all("domain" in layer["encoding"]["x"]["scale"] for layer in layers[:3])
            continue
        main = [layer for layer in layers if "x" in layer.get("encoding", {}) and "field" in layer["encoding"]["x"]
                and "isValid" not in json.dumps(layer.get("transform", []))][0]
        assert main["encoding"]["x"]["scale"]["domain"] == [0, 3000], title
        if not rows(chart) and title != "Where exploration and feedback happened":
            assert "domain" in main["encoding"]["y"].get("scale", {}), title


@pytest.mark.parametrize("value,unit,text", [(6.079e6, "ms", "1.69 h"), (0.0001004, "USD", "$0.0001"), (8.13e-5, "USD", "$0.0000813"),
                                             (0.25, "USD", "$0.25"), (1234.5, "J", "1.23 kJ"),
                                             (3.5e6, "J", "3.5 MJ"), (512.0, "tokens", "512 tokens"),
                                             (float("nan"), "J", "-")])
def test_numbers_in_human_units(value, unit, text):
    assert human_cost(value, unit) == text


def test_experiments_chart_keeps_router_reference_and_model_colours():
    import pandas as pd

    from slarouter_core.live import comparison_chart

    models = [f"m{i:02d}" for i in range(11)]
    methods = [f"{m} only" for m in models] + ["static mixture", "oracle", "MESS+", "SLARouter (fixed V)",
                                               "SLARouter (data-driven V)", "SLARouter (contextual)",
                                               "SLARouter (sidebar settings)"]
    agg = pd.DataFrame({"benchmark": "b", "method": methods, "cost_mean": 1.0, "cost_std": 0.0,
                        "satisfaction_mean": 0.5, "satisfaction_std": 0.0, "alpha": 0.6, "sla_met": False,
                        "cost_unit": "J"})
    _, spec = comparison_chart(agg, models)
    scale = color_ranges(spec)[0]
    assert len(set(scale.values())) == len(methods)  # 18 series, no colour twice
    assert [scale[f"{m} only"] for m in models] == model_colors(models)
    assert scale["SLARouter (contextual)"] == ROUTER_COLORS["contextual"]
    assert scale["SLARouter (fixed V)"] == ROUTER_COLORS["paper"]
    assert scale["oracle"] == series_color("oracle") and scale["oracle"] != scale["SLARouter (fixed V)"]


def test_cost_against_satisfaction_moves_each_router_and_keeps_the_references(three):
    live = three.session_state.live
    data = live.data
    spec, chart = specs(three)["Cost against satisfaction"]
    got = {(r["series"], r["kind"]): r for r in rows(chart)}
    for mode, sim in live.sims.items():
        a = sim.arrays()
        point = got[(mode, "point")]
        assert point["cost"] == pytest.approx(a["cost"].mean()) and point["satisfaction"] == pytest.approx(
            a["satisfied"].mean())
    for j, m in enumerate(data.models):  # fixed: whole-data accuracy and mean cost
        assert got[(m, "point")]["satisfaction"] == pytest.approx(data.solved[:, j].mean())
    frontier = [r for r in rows(chart) if r["kind"] == "frontier"]
    assert len(frontier) == 21 and all(r["series"] == "static mixture" for r in frontier)
    assert ("oracle", "point") in got
    # one more tick: the routers' points move, the models' do not
    three.button(key="w_step").click().run()
    moved = {(r["series"], r["kind"]): r for r in rows(specs(three)["Cost against satisfaction"][1])}
    assert moved[("contextual", "point")]["cost"] != got[("contextual", "point")]["cost"]
    assert moved[(data.models[0], "point")] == got[(data.models[0], "point")]


def test_experiment_charts_label_the_alpha_line():
    import pandas as pd

    from slarouter_core.live import comparison_chart, sweep_charts

    agg = pd.DataFrame({"benchmark": "b", "method": ["oracle", "MESS+"], "cost_mean": 1.0, "cost_std": 0.0,
                        "satisfaction_mean": 0.5, "satisfaction_std": 0.0, "alpha": 0.6, "sla_met": False,
                        "cost_unit": "J", "feedback_rate": [0.1, 0.1]})
    _, spec = comparison_chart(agg)
    _, sat = sweep_charts(agg, "feedback_rate", "feedback rate")[1]
    for layers in (spec["spec"]["layer"], sat["layer"]):
        text = [layer for layer in layers if layer["mark"]["type"] == "text"]
        assert text and text[0]["encoding"]["text"]["field"] == "label"
        assert "'alpha = '" in text[0]["transform"][1]["calculate"]


def test_the_paper_q_and_a_certified_shortfall_get_an_axis_each(three):
    """Issue 23, defect 12: the paper's Q (hundreds) and contextual's certified shortfall
    (near 0) on one axis squashed one of them flat; a policy whose queue is another quantity
    gets its own axis on the right, and each layer draws only its own routers."""
    from slarouter_core.policies.registry import info as policy_info

    spec, chart = next((s, c) for t, (s, c) in specs(three).items() if t.startswith("Virtual queue"))
    own = [m for m in three.session_state.live.routers if policy_info(m).own_queue_axis]
    assert own, "the default routers include one with a queue of its own kind"
    assert spec["resolve"] == {"scale": {"y": "independent"}}
    left, right = spec["layer"]
    assert right["encoding"]["y"]["axis"]["orient"] == "right"
    assert set(right["transform"][0]["filter"]["oneOf"]) == set(own)
    assert not set(left["transform"][0]["filter"]["oneOf"]) & set(own)
    series = {r["series"] for r in rows(chart)}
    assert set(own) <= series and series - set(own)  # both axes have data
