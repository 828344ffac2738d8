"""Live run page: widgets reach the simulation, charts redraw thinned, runs reproduce."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from slarouter_core.data import load_parquet
from slarouter_core.live import BELIEF_KINDS

from .conftest import APP, open_app
from slarouter_core.live.charts import title_text

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
    cfg = live.sims["paper"].config  # c and V are the paper's rule's settings (contextual takes neither)
    assert (cfg.router.alpha, cfg.router.c, cfg.router.V, cfg.feedback_rate, cfg.seed) == (0.7, 0.3, 2e-5, 0.5, 3)
    assert live.sims["contextual"].config.router.alpha == 0.7
    assert live.t == 150
    assert (at.metric[0].label, at.metric[0].value) == ("Served (of 3,000)", "150")
    at.radio(key="w_vmode").set_value("data-driven").run()
    assert at.session_state.live.sims["paper"].config.router.V is None
    assert at.session_state.live.t == 0  # new settings: a new run


def charts_by_key(at) -> dict:
    """Charts by a short key (the first word of their title; call ratios by router)."""
    out = {}
    for c in at.main.get("vega_lite_chart"):
        title = title_text(json.loads(c.proto.spec))
        key = title.split(" (")[0]
        out[key] = c
    return out


def test_step_draws_every_chart_from_the_run():
    at = open_app(PAGE, tick="300")
    # queue, cost, satisfaction, belief, a call ratio per router, cost against satisfaction, events
    assert len(at.main.get("vega_lite_chart")) == 8
    at.button(key="w_step").click().run()
    at.button(key="w_step").click().run()
    charts = charts_by_key(at)
    live = at.session_state.live
    assert live.routers == ("contextual", "paper")
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
    streaming = [c for c in at.main.get("vega_lite_chart")
                 if title_text(json.loads(c.proto.spec)).split(" (")[0] not in ("Cost against satisfaction",
                                                                           "Where exploration and feedback happened")]
    assert len(streaming) == 6
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


def test_changing_the_seed_mid_run_says_that_the_run_was_reset_and_why():
    at = open_app(PAGE)
    at.button(key="w_step").click().run()
    assert at.session_state.live.t == 200
    at.number_input(key="w_seed").set_value(8).run()
    assert at.session_state.live.t == 0
    text = " ".join(w.value for w in at.main.warning)
    assert "The seed changed (seed 42 -> 8): the run was reset" in text
    assert "request order and the feedback plan" in text
    at.button(key="w_step").click().run()  # said once, not on every rerun
    assert not at.main.warning


def test_a_new_seed_before_the_first_request_resets_nothing_and_says_nothing():
    at = open_app(PAGE)
    at.number_input(key="w_seed").set_value(8).run()
    assert not at.main.warning and at.session_state.live.sim.config.seed == 8


def test_settings_sit_in_the_sidebar_and_the_buttons_right_above_headline_and_charts():
    at = open_app(PAGE)
    for kind in ("number_input", "slider", "multiselect", "selectbox", "radio"):
        assert not getattr(at.main, kind), kind  # nothing of the settings pushes the demo down
    for key in ("w_alpha", "w_c", "w_qmax", "w_eps", "w_seed", "w_tick", "w_period"):
        assert at.sidebar.number_input(key=key) is not None
    assert at.sidebar.slider(key="w_rate") and at.sidebar.multiselect(key="w_routers")
    # an emptied placeholder (the embedding progress bar of a process's first page run) is no chart
    order = [node for node in at.main if getattr(node, "type", None) in ("button", "metric", "arrow_vega_lite_chart")
             or (type(node).__name__ in ("Button", "Metric", "UnknownElement")
                 and getattr(node, "type", None) != "empty")]
    kinds = [type(n).__name__ for n in order]
    first_button, first_metric = kinds.index("Button"), kinds.index("Metric")
    charts = [i for i, n in enumerate(order) if type(n).__name__ == "UnknownElement"]
    assert first_button < first_metric < charts[0]  # Start/Pause/Reset, headline, then the charts
    assert [b.key for b in at.main.button][:4] == ["w_start", "w_pause", "w_step", "w_reset"]


def test_a_rejected_value_is_said_in_words_and_the_widget_goes_back():
    at = open_app(PAGE, alpha="0.7")
    at.number_input(key="w_alpha").set_value(1.5).run()
    text = " ".join(e.value for e in at.main.error)
    assert "alpha = 1.5 is above the highest allowed value (0.999); keeping alpha = 0.7" in text
    assert at.number_input(key="w_alpha").value == 0.7  # the widget shows the value in use
    assert at.session_state.run_settings.alpha == 0.7
    at.number_input(key="w_c").set_value(-1.0).run()
    assert "c = -1 is below the lowest allowed value (0)" in at.main.error[0].value
    assert at.number_input(key="w_c").value == 0.1
    at.multiselect(key="w_routers").set_value([]).run()
    assert "pick at least one router" in at.main.error[0].value
    assert at.multiselect(key="w_routers").value == ["contextual", "paper"]
    at.number_input(key="w_c").set_value(0.3).run()  # a good value goes through, no message
    assert not at.main.error and at.session_state.run_settings.c == 0.3


def test_the_belief_chart_shows_what_each_queue_used_against_the_real_satisfaction():
    at = open_app(PAGE, tick="300")
    at.button(key="w_step").click().run()
    chart = charts_by_key(at)["What the queue believes against real satisfaction"]
    spec = json.loads(chart.proto.spec)
    rule = [layer for layer in spec["layer"] if layer["mark"]["type"] == "text"][0]
    assert rule["data"]["values"][0]["label"].startswith("alpha = ")
    rows = chart_rows(chart)
    live = at.session_state.live
    for mode in live.routers:
        a = live.sims[mode].arrays()
        used = np.where(np.isfinite(a["s_used"]), a["s_used"], a["shat_served"])
        last = {r["kind"]: r["value"] for r in rows if r["series"] == mode and r["t"] == 300}
        assert last[BELIEF_KINDS[0]] == pytest.approx(used.mean(), rel=1e-5)
        assert last["real"] == pytest.approx(a["satisfied"].mean(), rel=1e-5)


def test_a_mode_from_the_link_survives_a_visit_to_live_run():
    at = open_app(PAGE, mode="guarded")
    at.number_input(key="w_c").set_value(0.2).run()
    assert at.session_state.run_settings.mode == "guarded"  # Feedback by hand keeps its router
    assert at.session_state.live.routers == ("contextual", "paper")


def test_stated_accuracies_typed_in_the_sidebar_restart_the_run_and_reach_the_contextual_router():
    at = open_app(PAGE)
    models = at.session_state.live.data.models
    box = at.sidebar.text_input(key="w_stated")
    assert box.value == "" and all(m in box.help for m in models)  # the help lists the model order
    assert "worth 20 labels" in box.help and "never use them" in box.help
    at.button(key="w_step").click().run()
    assert at.session_state.live.t == 200
    stated = tuple(round(0.2 + 0.15 * i, 2) for i in range(len(models)))
    at.sidebar.text_input(key="w_stated").input(", ".join(map(str, stated))).run()
    live = at.session_state.live
    assert live.t == 0  # a new prior: a new run, and the page says which setting did it
    text = " ".join(w.value for w in at.main.warning)
    assert f"Settings changed (stated accuracies none -> {', '.join(map(str, stated))}): the run was reset" in text
    assert live.sims["contextual"].router.config.settings.stated_levels == stated
    assert live.sims["paper"].router.config.mode == "paper"
    assert at.query_params["stated"] == ",".join(map(str, stated))
    sidebar = " ".join(m.value for m in at.sidebar.markdown)  # the frame's settings summary says them too
    assert f"stated accuracies: {', '.join(map(str, stated))}" in sidebar
    at.button(key="w_step").click().run()
    assert at.session_state.live.t == 200 and not at.main.error
    # a wrong count, a value outside (0, 1), nan or text: said in words, the run and the box keep the old values
    for bad, said in (("0.5, 0.6", f"2 stated accuracies for a zoo of {len(models)} models"),
                      (", ".join(["1.5"] * len(models)), "got 1.5"), (", ".join(["nan"] * len(models)), "got nan"),
                      ("abc", "'abc' is not a number")):
        at.sidebar.text_input(key="w_stated").input(bad).run()
        error = " ".join(e.value for e in at.main.error)
        assert error.startswith("Settings not applied: ") and said in error, (bad, error)
        assert at.session_state.run_settings.stated_levels == stated
        assert at.sidebar.text_input(key="w_stated").value == ", ".join(map(str, stated))
        assert at.session_state.live.t == 200  # the run goes on
    at.sidebar.text_input(key="w_stated").input("").run()  # empty: none
    assert at.session_state.live.sims["contextual"].router.config.settings.stated_levels == ()
    assert "stated" not in at.query_params


def test_the_stated_accuracies_box_shows_only_for_a_router_that_takes_them():
    at = open_app(PAGE, routers="paper,guarded")
    assert not [t for t in at.sidebar.text_input if t.key == "w_stated"]
    at.multiselect(key="w_routers").set_value(["paper", "contextual"]).run()
    assert at.sidebar.text_input(key="w_stated") is not None


def test_the_at_risk_settings_in_the_sidebar_restart_the_run_and_reach_the_contextual_router():
    at = open_app(PAGE)
    z, after = at.sidebar.number_input(key="w_warnz"), at.sidebar.number_input(key="w_warnafter")
    assert (z.value, after.value) == (1.6449, 0)
    assert "contextual" in z.help and "How early it warns" in z.help
    at.button(key="w_step").click().run()
    at.sidebar.number_input(key="w_warnz").set_value(1.0).run()
    live = at.session_state.live
    assert live.t == 0  # a new test: a new run, and the page says which setting did it
    assert "Settings changed (warn_z 1.6449 -> 1): the run was reset" in " ".join(w.value for w in at.main.warning)
    at.sidebar.number_input(key="w_warnafter").set_value(128).run()
    policy = at.session_state.live.sims["contextual"].router.policy
    assert (policy.config.warn_z, policy.config.warn_after) == (1.0, 128)
    assert at.session_state.live.sims["paper"].router.config.mode == "paper"
    assert (at.query_params["warnz"], at.query_params["warnafter"]) == ("1", "128")
    sidebar = " ".join(m.value for m in at.sidebar.markdown)  # the frame's settings summary says them too
    assert "at-risk test: warn_z = 1, after 128 thumbs" in sidebar
    at.button(key="w_step").click().run()
    assert at.session_state.live.t == 200 and not at.main.error
    # a negative value is said in words; the run and the widget keep what is in use
    at.sidebar.number_input(key="w_warnz").set_value(-1.0).run()
    error = " ".join(e.value for e in at.main.error)
    assert error.startswith("Settings not applied: ") and "warn_z" in error and "keeping warn_z = 1." in error
    assert at.sidebar.number_input(key="w_warnz").value == 1.0 and at.session_state.live.t == 200


def test_a_setting_none_of_the_routers_reads_does_not_restart_the_run():
    """c and V are the paper's rule's: beside the contextual router alone they change
    nothing it does, so the run goes on (and the paper's router beside it restarts)."""
    at = open_app(PAGE, routers="contextual")
    at.button(key="w_step").click().run()
    live = at.session_state.live
    at.number_input(key="w_c").set_value(0.3).run()
    at.radio(key="w_vmode").set_value("fixed").run()
    assert at.session_state.live is live and live.t == 200 and not at.main.warning
    assert at.query_params["c"] == "0.3"  # kept for the routers that read it
    at.multiselect(key="w_routers").set_value(["contextual", "paper"]).run()
    assert at.session_state.live.t == 0 and at.session_state.live.sims["paper"].config.router.c == 0.3
    at.button(key="w_step").click().run()
    at.number_input(key="w_c").set_value(0.2).run()
    assert at.session_state.live.t == 0  # the paper's router reads c: both start again, on the same stream
    assert "Settings changed (c 0.3 -> 0.2): the run was reset" in " ".join(w.value for w in at.main.warning)


def test_the_at_risk_settings_show_only_for_a_router_that_warns():
    at = open_app(PAGE, routers="paper,guarded")
    assert not [n for n in at.sidebar.number_input if n.key in ("w_warnz", "w_warnafter")]
    at.multiselect(key="w_routers").set_value(["paper", "contextual"]).run()
    assert at.sidebar.number_input(key="w_warnz") is not None


def test_a_link_with_at_risk_settings_reaches_the_router():
    at = open_app(PAGE, warnz="0.5", warnafter="64")
    assert not at.warning
    policy = at.session_state.live.sims["contextual"].router.policy
    assert (policy.config.warn_z, policy.config.warn_after) == (0.5, 64)
    assert (at.sidebar.number_input(key="w_warnz").value, at.sidebar.number_input(key="w_warnafter").value) == (0.5, 64)


def test_a_link_with_stated_accuracies_for_another_zoo_keeps_the_page_and_says_why():
    at = open_app(PAGE, stated="0.5,0.6")
    models = at.session_state.live.data.models
    text = " ".join(w.value for w in at.warning)
    assert f"2 stated accuracies for a zoo of {len(models)} models" in text and "using none" in text
    assert at.session_state.run_settings.stated_levels == ()
    at.button(key="w_step").click().run()
    assert not at.exception and at.session_state.live.t == 200
    good = ",".join(["0.6"] * len(models))
    at = open_app(PAGE, stated=good)
    assert not at.warning
    assert at.session_state.live.sims["contextual"].router.config.settings.stated_levels == (0.6,) * len(models)
    assert at.sidebar.text_input(key="w_stated").value == ", ".join(["0.6"] * len(models))


def test_new_data_with_other_models_drops_the_stated_accuracies_with_a_note(tmp_path):
    from slarouter_core.data import write_parquet
    from tests.conftest import make_frame

    at = open_app(PAGE)
    demo = at.session_state.live.data.models
    stated = ", ".join(["0.6"] * len(demo))
    at.sidebar.text_input(key="w_stated").input(stated).run()
    assert at.session_state.run_settings.stated_levels == (0.6,) * len(demo)
    other = tuple(f"other{i}" for i in range(len(demo)))  # as many models, not the same ones
    path = write_parquet(make_frame(n=80, models=other), tmp_path / "other.parquet")
    at.switch_page("pages/data_page.py").run()
    at.radio(key="w_source").set_value("path").run()
    at.text_input(key="w_path").set_value(str(path)).run()
    at.button(key="w_load_path").click().run()
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(w.value for w in at.warning)
    assert f"they were given for {', '.join(demo)}, and the data's models are now {', '.join(other)}" in text
    assert at.session_state.run_settings.stated_levels == ()
    at.switch_page(PAGE).run()
    assert not at.exception and at.sidebar.text_input(key="w_stated").value == ""
    assert at.session_state.live.sims["contextual"].router.config.settings.stated_levels == ()


def test_the_pre_flight_check_follows_alpha_and_the_feedback_rate():
    at = open_app(PAGE)
    exp = next(e for e in at.main.expander if e.label.startswith("Pre-flight"))
    text = " ".join(m.value for m in exp.markdown)
    assert "certifiable: yes" in text and "thumbs on 20% of them" in text
    # alpha above what the best model's bound can end at: the check says so, and what would do
    at.number_input(key="w_alpha").set_value(0.86).run()
    exp = next(e for e in at.main.expander if e.label.startswith("Pre-flight"))
    text = " ".join(m.value for m in exp.markdown)
    assert "certifiable: no" in text and "alpha at most" in text
    assert at.session_state.live.preflight_check.alpha_max < 0.86
    at.slider(key="w_rate").set_value(0.0).run()  # no thumbs: nothing to certify with, no check
    assert not [e for e in at.main.expander if e.label.startswith("Pre-flight")]


def test_the_at_risk_settings_sit_in_an_expander_say_what_they_trade_and_refuse_a_bad_value_in_words():
    at = open_app(PAGE)
    (exp,) = [e for e in at.sidebar.expander if e.label.startswith("when to say")]
    z, after = exp.number_input(key="w_warnz"), exp.number_input(key="w_warnafter")
    # the trade-off, with docs/RESULTS.md's figures as written there
    assert "warns a likely miss sooner" in z.help and "false alarms go from 20 to 55 of 97 met runs" in z.help
    assert "fall from 20 to 12 of 97 met runs" in after.help and "72 of its 91 misses" in after.help
    at.sidebar.number_input(key="w_warnafter").set_value(128).run()
    at.button(key="w_step").click().run()
    assert at.session_state.live.t == 200
    # below 0 or past the limit: said in words, the run and the widget keep the value in use
    for bad, said in ((-16, "warn_after = -16 is below the lowest allowed value (0); keeping warn after = 128"),
                      (2_000_000, "warn_after = 2000000 is above the highest allowed value (1000000)")):
        at.sidebar.number_input(key="w_warnafter").set_value(bad).run()
        error = " ".join(e.value for e in at.main.error)
        assert error.startswith("Settings not applied: ") and said in error, (bad, error)
        assert at.session_state.run_settings.warn_after == 128
        assert at.sidebar.number_input(key="w_warnafter").value == 128 and at.session_state.live.t == 200
    # back to the default: out of the link and of the summary, the policy's own default in the router
    at.sidebar.number_input(key="w_warnafter").set_value(0).run()
    assert "warnafter" not in at.query_params and "at-risk test" not in " ".join(m.value for m in at.sidebar.markdown)
    assert at.session_state.live.sims["contextual"].router.policy.config.warn_after == 0
    assert "Settings changed (warn after 128 -> 0)" in " ".join(w.value for w in at.main.warning)


def test_a_link_s_at_risk_settings_wait_while_no_router_takes_them_and_a_bad_one_is_said():
    at = open_app(PAGE, routers="paper,guarded", warnz="0.8", warnafter="64")
    assert not [e for e in at.sidebar.expander if e.label.startswith("when to say")]
    at.multiselect(key="w_routers").set_value(["paper", "contextual"]).run()
    assert (at.sidebar.number_input(key="w_warnz").value, at.sidebar.number_input(key="w_warnafter").value) == (0.8, 64)
    cfg = at.session_state.live.sims["contextual"].router.policy.config
    assert (cfg.warn_z, cfg.warn_after) == (0.8, 64)
    # a bad value in the link: said, its default used, the link's other settings kept
    at = open_app(PAGE, warnz="abc", warnafter="32", c="0.2")
    text = " ".join(w.value for w in at.warning)
    assert "URL parameter warnz='abc' is not a valid warn_z" in text and "using the default" in text
    run = at.session_state.run_settings
    assert (run.warn_z, run.warn_after, run.c) == (1.6449, 32, 0.2)
    assert at.session_state.live.sims["contextual"].router.policy.config.warn_after == 32
