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


def test_step_draws_every_chart_from_the_run():
    at = open_app(PAGE, tick="300")
    assert len(at.get("vega_lite_chart")) == 5
    at.button(key="w_step").click().run()
    at.button(key="w_step").click().run()
    charts = {json.loads(c.proto.spec)["title"]: c for c in at.get("vega_lite_chart")}
    assert "Virtual queue Q_t" in charts and "Cumulative operating cost (MJ)" in charts
    q_rows = chart_rows(charts["Virtual queue Q_t"])
    a = at.session_state.live.sim.arrays()
    assert len(q_rows) == 600 and q_rows[-1]["t"] == 600
    assert np.isclose(q_rows[-1]["value"], a["q"][-1], rtol=1e-6)
    cost = [r for r in chart_rows(charts["Cumulative operating cost (MJ)"]) if r["t"] == 600]
    names = {r["series"] for r in cost}
    demo = load_parquet(APP.replace("app.py", "data/demo.parquet"))
    assert names == {"SLARouter"} | {f"only {m}" for m in demo.models}


def test_long_histories_are_thinned_to_about_2000_points():
    at = open_app(PAGE, tick="2500")
    at.button(key="w_step").click().run()
    for chart in at.get("vega_lite_chart")[:4]:
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


def test_router_mode_reaches_the_simulation_and_the_sidebar():
    at = open_app(PAGE)
    at.selectbox(key="w_mode").set_value("guarded").run()
    at.button(key="w_step").click().run()
    assert at.session_state.live.sim.config.router.mode == "guarded"
    assert at.session_state.live.t == 200
    assert "router mode: **guarded**" in " ".join(m.value for m in at.sidebar.markdown)
    assert at.query_params["mode"] == "guarded"
