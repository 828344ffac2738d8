"""Live run: stream the seeded simulation, a batch of requests per tick, and watch it."""

from __future__ import annotations

import math
from dataclasses import replace

import streamlit as st

from pages import _shared as sh
from slarouter_core.live import ROUTER_MODES, LiveRun, RunSettings, feedback_model_choices, settings_json

FEEDBACK_HELP = ("iid: each request independently. bursty: feedback comes in bursts (same mean rate). "
                 "negative: thumbs-down given more often than thumbs-up. delayed: verdicts arrive 50 requests "
                 "late. drift: the workload shifts from one half of the benchmarks to the other.")
st.title("Live run")
ss = st.session_state
data = sh.current_data()
spec = sh.data_spec()
run = sh.run_settings()
mid = run.resolved_alpha(data)

with st.container(border=True):
    c1, c2, c3, c4 = st.columns(4)
    alpha = c1.number_input("alpha: target satisfaction", min_value=0.001, max_value=0.999, value=float(mid),
                            step=0.005, format="%.3f", key="w_alpha",
                            help="Share of requests that must satisfy the user. Default: halfway between the "
                                 "accuracies of the two most expensive models.")
    c = c1.number_input("c: exploration scale", min_value=0.0, max_value=100.0, value=float(run.c), step=0.05,
                        key="w_c", help="Explore with probability min(1, c / t^(1/4)).")
    v_mode = c2.radio("V (cost weight)", ["data-driven", "fixed"], index=int(run.fixed_v), horizontal=True,
                      key="w_vmode")
    V, q_max, eps = run.V, run.q_max, run.eps
    if v_mode == "fixed":
        V = c2.number_input(f"V (per {data.cost_unit})", min_value=1e-12, max_value=1e6, value=float(run.V),
                            format="%.3e", key="w_V")
    else:
        q_max = c2.number_input("Q_max", min_value=1e-6, max_value=1e6, value=float(run.q_max), key="w_qmax")
        eps = c2.number_input("epsilon", min_value=1e-9, max_value=1.0, value=float(run.eps), format="%.4f",
                              key="w_eps", help="V = Q_max * epsilon / (mean cost gap, cheapest to dearest).")
    rate = c3.slider("feedback rate", 0.0, 1.0, float(run.feedback_rate), 0.01, key="w_rate",
                     help="Probability that a user gives feedback on a request.")
    seed = c3.number_input("seed", min_value=0, max_value=2**31 - 1, value=int(run.seed), step=1, key="w_seed")
    tick = c4.number_input("requests per tick", min_value=1, max_value=20_000, value=int(run.per_tick), step=50,
                           key="w_tick")
    period = c4.number_input("seconds between ticks", min_value=0.1, max_value=10.0,
                             value=float(ss.get("live_period", 0.3)), step=0.1, key="w_period")
    ss.live_period = float(period)
    mode = c4.selectbox("router", ROUTER_MODES, index=ROUTER_MODES.index(run.mode), key="w_mode",
                        help="paper: Algorithm 1 as published. guarded: text-blind, holds the SLA by escalating "
                             "to the priciest model. contextual: learns from the request text which model "
                             "solves it and certifies the SLA with its own confidence bound (c, V, Q_max and "
                             "epsilon do not apply; docs/IMPROVED.md).")
    choices = feedback_model_choices()
    fb_model = run.feedback_model
    if len(choices) > 1:
        fb_model = c3.selectbox("feedback model", choices, help=FEEDBACK_HELP,
                                index=choices.index(run.feedback_model) if run.feedback_model in choices else 0,
                                key="w_fbmodel")
    else:
        c3.caption("Feedback model: IID (each request gives feedback with the rate above).")

try:
    new = RunSettings(alpha=None if run.alpha is None and math.isclose(alpha, mid, abs_tol=5e-4) else float(alpha),
                      c=float(c), fixed_v=v_mode == "fixed", V=float(V), q_max=float(q_max), eps=float(eps),
                      feedback_rate=float(rate), seed=int(seed), per_tick=int(tick), feedback_model=fb_model,
                      mode=mode)
    new.simulation_config(data)  # e.g. a bursty feedback model cannot realise every rate
except ValueError as exc:
    st.error(f"Settings not applied: {exc}")
    new = run
if new != run:
    sh.set_run_settings(new)
    run = new

emb = sh.embeddings(data)
if emb is not None:
    key = (spec, replace(run, per_tick=1))  # the tick size changes the pace, not the run
    if ss.get("live_key") != key:
        ss.live = LiveRun(data, emb, run)
        ss.live_key = key
        ss.live_running = False
    live: LiveRun = ss.live
    live.settings = run

    def start() -> None:
        ss.live_running = not ss.live.done

    def pause() -> None:
        ss.live_running = False

    def step() -> None:
        ss.live_running = False
        ss.live.step()

    def reset() -> None:
        ss.live_running = False
        ss.live = LiveRun(data, emb, run)

    b = st.columns([1, 1, 1, 1, 2, 2])
    b[0].button("Start", type="primary", on_click=start, disabled=bool(ss.live_running) or live.done, key="w_start")
    b[1].button("Pause", on_click=pause, disabled=not ss.live_running, key="w_pause")
    b[2].button("Step", on_click=step, disabled=live.done, key="w_step",
                help="Serve one tick of requests.")
    b[3].button("Reset", on_click=reset, key="w_reset")
    b[4].download_button("Trace (CSV)", data=live.trace_csv, file_name="slarouter_trace.csv",
                         mime="text/csv", on_click="ignore", key="w_dl_trace",
                         help="Every request served so far, unthinned.")
    b[5].download_button("Settings (JSON)", data=settings_json(spec, run, data), file_name="slarouter_settings.json",
                         mime="application/json", on_click="ignore", key="w_dl_settings")

    @st.fragment(run_every=ss.live_period if ss.live_running else None)
    def panel() -> None:
        live: LiveRun = ss.live
        if ss.live_running:
            live.step()
            if live.done:
                ss.live_running = False
                st.rerun()  # a full rerun turns the timer off
        h = live.headline()
        m = st.columns(6)
        m[0].metric(f"Served (of {h['total']:,})", f"{h['served']:,}")
        m[1].metric(f"Operating cost ({h['cost_unit']})", f"{h['cost']:.4g}")
        sat = h["satisfaction"]
        m[2].metric("Satisfaction", "-" if math.isnan(sat) else f"{100 * sat:.1f}%",
                    delta=None if math.isnan(sat) else f"{100 * (sat - h['alpha']):+.1f} pts vs alpha",
                    delta_color="normal")
        m[3].metric("SLA", h["sla"], help=f"Met when the satisfaction so far is at least alpha = {h['alpha']:.3f}.")
        m[4].metric("Current V", f"{h['v']:.3g}")
        m[5].metric("Queue Q", f"{h['q']:.3g}")
        st.caption(f"Explored {h['explored']:,} requests; feedback on {h['feedback']:,}. "
                   f"Charts show at most 2,000 points per series; the CSV has every request.")
        charts = {cf.key: cf for cf in live.charts()}
        left, right = st.columns(2)
        for col, name in ((left, "queue"), (right, "cost"), (left, "satisfaction"), (right, "ratio")):
            cf = charts[name]
            col.vega_lite_chart(cf.frame, cf.spec, width="stretch")
        st.vega_lite_chart(charts["events"].frame, charts["events"].spec, width="stretch")

    panel()
