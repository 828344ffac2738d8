"""Live run: stream the seeded simulation, a batch of requests per tick, and watch it."""

from __future__ import annotations

import math
from dataclasses import replace

import streamlit as st

from pages import _shared as sh
from slarouter_core.live import (LIMITS, ROUTER_MODES, LiveRun, RunSettings, clamp_setting, feedback_model_choices,
                                 human_cost, settings_json)

FEEDBACK_HELP = ("iid: each request independently. bursty: feedback comes in bursts (same mean rate). "
                 "negative: thumbs-down given more often than thumbs-up. delayed: verdicts arrive 50 requests "
                 "late. drift: the workload shifts from one half of the benchmarks to the other.")
st.title("Live run")
ss = st.session_state
data = sh.current_data()
spec = sh.data_spec()
run = sh.run_settings()
mid = run.resolved_alpha(data)


def lim(name: str, value: float | None = None) -> dict:
    """min/max of a widget from the shared limits, and the current value clamped into them
    (so a value from a shared link can never break the page)."""
    lo, hi = LIMITS[name]
    cast = int if name in ("seed", "per_tick") else float
    value = getattr(run, name) if value is None else value
    return {"min_value": cast(lo), "max_value": cast(hi), "value": cast(clamp_setting(name, cast(value)))}


with st.container(border=True):
    routers = st.multiselect(
        "routers, side by side on the same requests and feedback", ROUTER_MODES, default=list(run.routers),
        key="w_routers",
        help="paper: Algorithm 1 as published. guarded: text-blind, holds the SLA by escalating to the priciest "
             "model (its V is v_scale = 10 times the V below). contextual: learns from the request text which "
             "model solves it and certifies the SLA with its own confidence bound (c, V, Q_max and epsilon do not "
             "apply; docs/IMPROVED.md). Each router gets the same request order and feedback plan. The first "
             "one is also the router of Feedback by hand and Experiments.")
    c1, c2, c3, c4 = st.columns(4)
    alpha_lim = lim("alpha", run.resolved_alpha(data))
    alpha = c1.number_input("alpha: target satisfaction", step=0.005, format="%.3f", key="w_alpha",
                            help="Share of requests that must satisfy the user. Default: halfway between the "
                                 "accuracies of the two most expensive models.", **alpha_lim)
    c = c1.number_input("c: exploration scale", step=0.05, key="w_c",
                        help="Explore with probability min(1, c / t^(1/4)).", **lim("c"))
    v_mode = c2.radio("V (cost weight)", ["data-driven", "fixed"], index=int(run.fixed_v), horizontal=True,
                      key="w_vmode")
    V, q_max, eps = run.V, run.q_max, run.eps
    if v_mode == "fixed":
        V = c2.number_input(f"V (per {data.cost_unit})", format="%.3e", key="w_V", **lim("V"))
    else:
        q_max = c2.number_input("Q_max", key="w_qmax", **lim("q_max"))
        eps = c2.number_input("epsilon", format="%.4f", key="w_eps",
                              help="V = Q_max * epsilon / (mean cost gap, cheapest to dearest).", **lim("eps"))
    rate = c3.slider("feedback rate", 0.0, 1.0, float(clamp_setting("feedback_rate", run.feedback_rate)), 0.01,
                     key="w_rate", help="Probability that a user gives feedback on a request.")
    seed = c3.number_input("seed", step=1, key="w_seed", help="Changing the seed starts a new run.", **lim("seed"))
    tick = c4.number_input("requests per tick", step=50, key="w_tick", **lim("per_tick"))
    period = c4.number_input("seconds between ticks", min_value=0.1, max_value=10.0,
                             value=float(ss.get("live_period", 0.3)), step=0.1, key="w_period")
    ss.live_period = float(period)
    choices = feedback_model_choices()
    fb_model = run.feedback_model
    if len(choices) > 1:
        fb_model = c3.selectbox("feedback model", choices, help=FEEDBACK_HELP,
                                index=choices.index(run.feedback_model) if run.feedback_model in choices else 0,
                                key="w_fbmodel")
    else:
        c3.caption("Feedback model: IID (each request gives feedback with the rate above).")

if not routers:
    st.warning("Pick at least one router: keeping " + ", ".join(run.routers) + ".")
    routers = list(run.routers)

try:
    new = RunSettings(alpha=None if run.alpha is None and math.isclose(alpha, mid, abs_tol=5e-4) else float(alpha),
                      c=float(c), fixed_v=v_mode == "fixed", V=float(V), q_max=float(q_max), eps=float(eps),
                      feedback_rate=float(rate), seed=int(seed), per_tick=int(tick), feedback_model=fb_model,
                      mode=routers[0] if tuple(routers) != run.routers else run.mode, routers=tuple(routers))
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
        if ss.get("live") is not None and ss.live.t > 0:
            ss.live_note = "New settings: the run started again from the first request."
        ss.live = LiveRun(data, emb, run, routers=run.routers)
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
        ss.live = LiveRun(data, emb, run, routers=run.routers)

    note = ss.pop("live_note", None)
    if note:
        st.info(note)
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
        unit = live.data.cost_unit
        top = st.columns([1, 3])
        top[0].metric(f"Served (of {h['total']:,})", f"{h['served']:,}")
        top[1].caption(f"alpha = {100 * h['alpha']:.1f}% · the static mixture is the cheapest text-blind call mix "
                       "whose mean accuracy reaches alpha; the oracle knows every label. Savings are against "
                       f"always calling the most accurate model ({h['routers'][0]['best_model']}).")
        labels = st.columns([1.3, 1, 1, 1, 1, 1])
        for col, text in zip(labels[1:], ("Satisfaction vs alpha", "Cost vs static mixture",
                                          f"Saved vs {h['routers'][0]['best_model']}", "SLA", "Q")):
            col.caption(text)
        for r in h["routers"]:
            row = st.columns([1.3, 1, 1, 1, 1, 1])
            if r["mode"] == "contextual":
                v_text = "V does not apply (its own certified rule)"
            elif r["mode"] == "guarded":
                v_text = f"V = {r['v']:.3g}: {r['v_note']}"
            else:
                v_text = f"V = {r['v']:.3g}"
            row[0].markdown(f"<span style='color:{r['color']};font-size:1.4em'>&#9632;</span> "
                            f"**{r['mode']}**", unsafe_allow_html=True)
            row[0].caption(v_text)
            sat = r["satisfaction"]
            row[1].metric(f"Satisfaction ({r['mode']})", "-" if math.isnan(sat) else f"{100 * sat:.1f}%",
                          delta=None if math.isnan(sat) else f"{100 * (sat - h['alpha']):+.1f} pts vs alpha",
                          label_visibility="collapsed",
                          help=f"SLA {r['sla']}: met when the satisfaction so far is at least alpha = "
                               f"{100 * h['alpha']:.1f}%." + (f" Its own 90% lower bound: {100 * r['lcb']:.1f}%."
                                                              if math.isfinite(r["lcb"]) else ""))
            row[2].metric(f"Cost vs static mixture ({r['mode']})",
                          "-" if math.isnan(r["vs_mixture"]) else f"{r['vs_mixture']:.2f}x",
                          label_visibility="collapsed",
                          help=f"Operating cost so far: {human_cost(r['cost_raw'], unit)}.")
            saved = r["saved_share"]
            row[3].metric(f"Saved vs {r['best_model']} ({r['mode']})", human_cost(r["saved"], unit),
                          delta=None if math.isnan(saved) else f"{100 * saved:.0f}% of its cost", delta_color="off",
                          label_visibility="collapsed")
            row[4].metric(f"SLA ({r['mode']})", "-" if r["sla"] == "not started" else r["sla"],
                          label_visibility="collapsed")
            row[5].metric(f"Q ({r['mode']})", f"{r['q']:.3g}", label_visibility="collapsed",
                          help=f"The router's {r['q_label']}.")
        first = h["routers"][0]
        if h["served"] == 0:
            st.info("Nothing served yet: press Start (or Step) and every router serves the same requests; the "
                    "charts below fill in, with the stream's length on the x axis.")
        st.caption(f"{first['mode']}: explored {first['explored']:,} requests; feedback on {first['feedback']:,}. "
                   f"Charts show at most 2,000 points per series; the CSV has every request.")
        charts = {cf.key: cf for cf in live.charts()}
        left, right = st.columns(2)
        for col, name in ((left, "queue"), (right, "cost"), (left, "satisfaction")):
            cf = charts[name]
            col.vega_lite_chart(cf.frame, cf.spec, width="stretch")
        ratios = [cf for key, cf in charts.items() if key.startswith("ratio")]
        with right:
            for cf in ratios:
                st.vega_lite_chart(cf.frame, cf.spec, width="stretch")
        trade = live.tradeoff_chart()
        left.vega_lite_chart(trade.frame, trade.spec, width="stretch")
        st.vega_lite_chart(charts["events"].frame, charts["events"].spec, width="stretch")

    panel()
