"""Live run page: widgets reach the simulation, charts redraw thinned, runs reproduce."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from slarouter_core.data import load_parquet

from .conftest import APP, open_app

PAGE = "pages/live_run.py"


def chart_rows(chart) -> list[dict]:
    """Rows of a chart's data (the Arrow IPC stream Streamlit sends to the browser)."""
    return pa.ipc.open_stream(chart.proto.data.data).read_all().to_pylist()


def test_widgets_change_what_the_simulation_receives():
    at = open_app(PAGE)
    at.number_input(key="w_alpha").set_value(0.7)
    at.number_input(key="w_c").set_value(0.3)
    at.radio(key="w_vmode").set_value("fixed").run()
    at.number_input(key="w_V").set_value(2e-5)
    at.slider(key="w_rate").set_value(0.5)
    at.number_input(key="w_seed").set_value(3)
    at.number_input(key="w_tick").set_value(150).run()
    at.button(key="w_step").click().run()
    live = at.session_state.live
    cfg = live.sim.config
    assert (cfg.router.alpha, cfg.router.c, cfg.router.V, cfg.feedback_rate, cfg.seed) == (0.7, 0.3, 2e-5, 0.5, 3)
    assert live.t == 150
    assert (at.metric[0].label, at.metric[0].value) == ("Served (of 3,000)", "150")
    at.radio(key="w_vmode").set_value("data-driven").run()
    assert at.session_state.live.sim.config.router.V is None
    assert at.session_state.live.t == 0  # new settings: a new run


def charts_by_key(at) -> dict:
    """Charts by a short key (the first word of their title; call ratios by router)."""
    out = {}
    for c in at.get("vega_lite_chart"):
        title = json.loads(c.proto.spec)["title"]
        key = title.split(" (")[0]
        out[key] = c
    return out


def test_step_draws_every_chart_from_the_run():
    at = open_app(PAGE, tick="300")
    # queue, cost, satisfaction, a call ratio per router, cost against satisfaction, events
    assert len(at.get("vega_lite_chart")) == 7
    at.button(key="w_step").click().run()
    at.button(key="w_step").click().run()
    charts = charts_by_key(at)
    live = at.session_state.live
    assert live.routers == ("paper", "contextual")
    q_rows = chart_rows(charts["Virtual queue Q_t"])
    for mode in live.routers:
        rows = [r for r in q_rows if r["series"] == mode]
        a = live.sims[mode].arrays()
        assert len(rows) == 600 and rows[-1]["t"] == 600
        assert np.isclose(rows[-1]["value"], a["q"][-1], rtol=1e-6)
    cost = [r for r in chart_rows(charts["Cumulative operating cost"]) if r["t"] == 600]
    names = {r["series"] for r in cost}
    demo = load_parquet(APP.replace("app.py", "data/demo.parquet"))
    assert names == {"paper", "contextual", "static mixture", "oracle"} | {f"only {m}" for m in demo.models}
    assert {"Model call ratio, paper", "Model call ratio, contextual"} <= set(charts)


def test_long_histories_are_thinned_to_about_2000_points():
    at = open_app(PAGE, tick="2500")
    at.button(key="w_step").click().run()
    streaming = [c for c in at.get("vega_lite_chart")
                 if json.loads(c.proto.spec)["title"].split(" (")[0] not in ("Cost against satisfaction",
                                                                           "Where exploration and feedback happened")]
    assert len(streaming) == 5
    for chart in streaming:
        rows = chart_rows(chart)
        per_series = {}
        for r in rows:
            per_series[r["series"]] = per_series.get(r["series"], 0) + 1
        assert max(per_series.values()) <= 2000
        assert max(r["t"] for r in rows) == 2500


def test_start_pause_and_reset():
    at = open_app(PAGE)
    at.button(key="w_start").click().run()
    assert at.session_state.live_running
    served = at.session_state.live.t
    assert served == 200  # the fragment ticked once in this rerun (run_every never fires here)
    at.button(key="w_pause").click().run()
    assert not at.session_state.live_running
    at.button(key="w_reset").click().run()
    assert at.session_state.live.t == 0


def test_a_run_is_reproducible_for_a_seed():
    def trace(seed: int):
        at = open_app(PAGE, seed=str(seed), tick="400")
        for _ in range(3):
            at.button(key="w_step").click().run()
        return at.session_state.live.sim.trace(), [m.value for m in at.metric]

    (t1, m1), (t2, m2), (t3, _) = trace(5), trace(5), trace(6)
    assert t1.equals(t2) and m1 == m2
    assert not t1["model"].equals(t3["model"])


def test_downloads_offer_trace_and_settings():
    at = open_app(PAGE, seed="4")
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Trace (CSV)" in labels and "Settings (JSON)" in labels


def test_feedback_models_of_the_core_are_offered():
    at = open_app(PAGE, rate="0.5")
    box = at.selectbox(key="w_fbmodel")
    assert set(box.options) >= {"iid", "bursty", "negative", "delayed", "drift"}
    box.set_value("negative").run()
    at.button(key="w_step").click().run()
    assert at.session_state.live.sim.config.feedback.kind == "negative"
    assert at.query_params["fbmodel"] == "negative"
    # a bursty model cannot give feedback on half the requests with its default bursts
    at.selectbox(key="w_fbmodel").set_value("bursty").run()
    assert "Settings not applied" in at.error[0].value
    assert at.session_state.run_settings.feedback_model == "negative"


def test_changing_the_tick_size_keeps_the_run():
    at = open_app(PAGE, tick="100")
    at.button(key="w_step").click().run()
    at.number_input(key="w_tick").set_value(250).run()
    at.button(key="w_step").click().run()
    assert at.session_state.live.t == 350


def test_the_first_router_is_the_mode_of_the_other_pages():
    at = open_app(PAGE)
    at.multiselect(key="w_routers").set_value(["guarded", "paper"]).run()
    at.button(key="w_step").click().run()
    live = at.session_state.live
    assert live.routers == ("guarded", "paper")
    assert live.sims["guarded"].config.router.mode == "guarded" and live.t == 200
    assert at.session_state.run_settings.mode == "guarded"
    assert "router mode: **guarded**" in " ".join(m.value for m in at.sidebar.markdown)
    assert at.query_params["mode"] == "guarded" and at.query_params["routers"] == "guarded,paper"


def test_changing_the_seed_mid_run_says_that_the_run_started_again():
    at = open_app(PAGE)
    at.button(key="w_step").click().run()
    assert at.session_state.live.t == 200
    at.number_input(key="w_seed").set_value(8).run()
    assert at.session_state.live.t == 0
    assert any("started again" in i.value for i in at.info)


def test_a_mode_from_the_link_survives_a_visit_to_live_run():
    at = open_app(PAGE, mode="guarded")
    at.number_input(key="w_c").set_value(0.2).run()
    assert at.session_state.run_settings.mode == "guarded"  # Feedback by hand keeps its router
    assert at.session_state.live.routers == ("paper", "contextual")
