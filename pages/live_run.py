"""Live run: stream the seeded simulation, a batch of requests per tick, and watch it."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import streamlit as st

from pages import _frame
from pages import _shared as sh
from slarouter_core.live import (LiveRun, RunSettings, describe_reset, feedback_model_choices, human_cost,
                                 router_modes, router_modes_help, settings_change, settings_json, stated_text,
                                 stated_weight, takes_setting, takes_stated_levels,
                                 takes_warning_settings)
from slarouter_core.experiments.runs import judge_call_cost
from slarouter_core.live.story import headline_story, same_satisfaction_note
from slarouter_core.live.settings import JUDGE_CHOICES
from slarouter_core.live.watchdog import WATCH_EVERY_S, Progress
from slarouter_core.live.watchdog import check as check_stall

FEEDBACK_HELP = ("iid: each request independently. bursty: feedback comes in bursts (same mean rate). "
                 "negative: thumbs-down given more often than thumbs-up. delayed: verdicts arrive 50 requests "
                 "late. drift: the workload shifts from one half of the benchmarks to the other.")
_frame.open_page("pages/live_run.py")
st.title("Live run")
ss = st.session_state
data = sh.current_data()
spec = sh.data_spec()
run = sh.run_settings()

# widget key -> setting; every widget goes through one check (settings_change): a value
# that cannot be used is named in plain text above the buttons and the widget goes back
# to the value the run uses (no silent red box with the reason on hover only)
KEYS = {"w_routers": "routers", "w_alpha": "alpha", "w_c": "c", "w_vmode": "fixed_v", "w_V": "V", "w_qmax": "q_max",
        "w_eps": "eps", "w_rate": "feedback_rate", "w_seed": "seed", "w_tick": "per_tick", "w_fbmodel": "feedback_model",
        "w_judge": "judge", "w_jbudget": "judge_budget", "w_jcost": "judge_cost",
        "w_stated": "stated_levels", "w_warnz": "warn_z", "w_warnafter": "warn_after"}


def shown(field: str, settings: RunSettings):
    """What the widget of ``field`` shows for ``settings``."""
    if field == "alpha":
        return float(settings.resolved_alpha(data))
    if field == "fixed_v":
        return "fixed" if settings.fixed_v else "data-driven"
    if field == "routers":
        return list(settings.routers)
    if field == "judge_cost":
        return settings.resolved_judge_cost(data)
    if field == "stated_levels":
        return stated_text(settings.stated_levels)
    value = getattr(settings, field)
    return int(value) if field in ("seed", "per_tick", "warn_after") else value


def on_setting(key: str) -> None:
    """A widget changed: apply its value, or say why not and put the widget back."""
    field, raw = KEYS[key], ss[key]
    value = {"fixed_v": lambda v: v == "fixed", "routers": tuple, "seed": int, "per_tick": int,
             "warn_after": int, "judge": str}.get(
        field, lambda v: v if isinstance(v, str) else float(v))(raw)
    if field == "routers" and not value:
        problems = {field: "pick at least one router; keeping " + ", ".join(sh.run_settings().routers) + "."}
    else:
        new, problems = settings_change(sh.run_settings(), {field: value}, data)
    if problems:
        ss.live_rejected = ss.get("live_rejected", []) + list(problems.values())
        ss[key] = shown(field, sh.run_settings())
    else:
        sh.set_run_settings(new)


def widget(key: str) -> dict:
    """key, change callback and (first time only) the value in use of a settings widget."""
    out = {"key": key, "on_change": on_setting, "args": (key,)}
    if key not in ss:
        out["value"] = shown(KEYS[key], run)
    return out


def select_widget(key: str, choices) -> dict:
    """:func:`widget` for a selectbox, which takes an index, never a value (one not among
    ``choices`` shows the first)."""
    out = widget(key)
    if "value" in out:
        value = out.pop("value")
        out["index"] = list(choices).index(value) if value in choices else 0
    return out


# settings live in the sidebar: Start, Pause, the headline and the charts stay on one screen
with st.sidebar:
    st.markdown("### Live run settings")
    st.multiselect(
        "routers, side by side on the same requests and feedback", router_modes(),
        default=None if "w_routers" in ss else list(run.routers), key="w_routers", on_change=on_setting,
        args=("w_routers",),
        help=router_modes_help() + " (docs/IMPROVED.md). Each router gets the same request order and feedback "
             "plan. The first one is also the router of Feedback by hand and Experiments.")
    st.number_input("alpha: target satisfaction", step=0.005, format="%.3f",
                    help="Share of requests that must satisfy the user. Default: halfway between the "
                         "accuracies of the two most expensive models.", **widget("w_alpha"))
    st.number_input("c: exploration scale", step=0.05, help="Explore with probability min(1, c / t^(1/4)).",
                    **widget("w_c"))
    vm = widget("w_vmode")
    vm["index"] = ["data-driven", "fixed"].index(vm.pop("value", shown("fixed_v", run)))
    st.radio("V (cost weight)", ["data-driven", "fixed"], horizontal=True, **vm)
    if run.fixed_v:
        st.number_input(f"V (per {data.cost_unit})", format="%.3e", **widget("w_V"))
    else:
        st.number_input("Q_max", **widget("w_qmax"))
        st.number_input("epsilon", format="%.4f",
                        help="V = Q_max * epsilon / (mean cost gap, cheapest to dearest).", **widget("w_eps"))
    st.slider("feedback rate", 0.0, 1.0, step=0.01, help="Probability that a user gives feedback on a request.",
              **widget("w_rate"))
    choices = feedback_model_choices()
    st.selectbox("feedback model", choices, help=FEEDBACK_HELP, **select_widget("w_fbmodel", choices))
    st.selectbox("LLM judge where users give no thumbs", JUDGE_CHOICES, format_func=lambda j: j or "none",
                 **select_widget("w_judge", JUDGE_CHOICES),
                 help="The judge reads the answer and gives a verdict (with its measured error rates) on a share of "
                      "the requests, drawn whatever thumbs they get: where there are none its verdict stands in, "
                      "where there are the pair calibrates it. Below a full budget a router that calibrates the "
                      "judge (contextual) also has it read the rated answers outside its share, to calibrate it "
                      "only. Its calls are counted apart from thumbs and their cost is added to each router's "
                      "operating cost.")
    if run.judge:
        st.slider("judge budget (share of requests it reads)", 0.0, 1.0, step=0.05, **widget("w_jbudget"))
        st.number_input(f"judge cost per call ({data.cost_unit})", format="%.4g", **widget("w_jcost"),
                        help="Default: the mean cost per request of the zoo's cheapest model, "
                             f"{human_cost(judge_call_cost(data, None), data.cost_unit)} "
                             f"({data.models[int(data.costs.mean(axis=0).argmin())]}).")
    stated_by = [m for m in run.routers if takes_stated_levels(m)]
    if stated_by:
        weight = stated_weight(stated_by[0])
        st.text_input(
            "stated accuracies, one per model (contextual router's prior)", **widget("w_stated"),
            placeholder="one per model: " + ", ".join(data.models),
            help=f"Each model's accuracy as its provider or a leaderboard states it: a number in (0, 1) per "
                 f"model, in this order: {', '.join(data.models)} (empty: none). They are the prior of each "
                 f"model's level for {', '.join(stated_by)}"
                 + (f", worth {weight:g} labels" if math.isfinite(weight) else "")
                 + ": the router starts from them instead of from nothing, the thumbs overrule them as they "
                 "come, and the estimate and its bound never use them. Changing them starts the run again.")
    warned_by = [m for m in run.routers if takes_warning_settings(m)]
    if warned_by:
        default = RunSettings()
        with st.expander("when to say \"SLA at risk\" (warn_z, warn after)", expanded=False):
            z_by = [m for m in warned_by if takes_setting(m, "warn_z")]
            if z_by:
                st.number_input(
                    "warn_z: how optimistic the at-risk test is", step=0.1, format="%.4f", **widget("w_warnz"),
                    help=f"For {', '.join(z_by)}: the test reads each model's level at its posterior mean plus "
                         "warn_z standard deviations as the best it can deliver, and says \"SLA at risk\" when "
                         f"even that cannot bring the window to alpha. Default {default.warn_z:g} (the one-sided "
                         "95% bound); 0 or more. Lower warns a likely miss sooner but warns more runs that go on "
                         "to meet alpha: over seeds 0-99 at warn_z 0.5, the hard 11-model zoo 0 warns 89 of its "
                         "91 misses before half (73 at the default), while the demo's false alarms go from 20 to "
                         "55 of 97 met runs (docs/RESULTS.md, \"How early it warns\"). While at risk, exploration "
                         "may label every model, so it moves routing a little. Changing it starts the run again.")
            after_by = [m for m in warned_by if takes_setting(m, "warn_after")]
            if after_by:
                st.number_input(
                    "warn after: thumbs before the first test", step=16, **widget("w_warnafter"),
                    help=f"For {', '.join(after_by)}: no at-risk test before the run holds this many thumbs "
                         f"(default {default.warn_after}: test from the start). On a few dozen thumbs the test is "
                         "noisy and warns runs that go on to meet alpha; waiting cuts those early false alarms "
                         "but can warn a miss later: over seeds 0-99 with warn_after=128, the demo's false alarms "
                         "fall from 20 to 12 of 97 met runs while the hard zoo 0 warns 72 of its 91 misses "
                         "before half instead of 73 (docs/RESULTS.md, \"How early it warns\"). Changing it "
                         "starts the run again.")
    st.number_input("seed", step=1, help="Changing the seed starts a new run (you are told when it does).",
                    **widget("w_seed"))
    st.number_input("requests per tick", step=50, **widget("w_tick"))
    period = st.number_input("seconds between ticks", min_value=0.1, max_value=10.0,
                             value=float(ss.get("live_period", 0.3)), step=0.1, key="w_period")
    ss.live_period = float(period)
    st.divider()

st.caption("Settings are in the sidebar (each one is also in the page URL). Requests per tick and seconds between "
           "ticks change the pace only, and a router setting that none of the routers here reads (c or V beside "
           "contextual alone) changes nothing; any other change starts the run again from the first request (a "
           "running run keeps running), and the page says which setting did it.")
for problem in ss.pop("live_rejected", []):
    st.error(f"Settings not applied: {problem}")

emb = sh.embeddings(data)
if emb is not None:
    # the tick size changes the pace, not the run; a setting none of its routers reads changes neither
    key = (spec, replace(run, per_tick=1).reaching(run.routers))
    if ss.get("live_key") != key:
        if ss.get("live") is not None and ss.live.t > 0:
            ss.live_note = describe_reset(ss.live_key[1], key[1]) if ss.live_key[0] == spec else \
                "New data: the run was reset and starts again from the first request."
        ss.live = LiveRun(data, emb, run, routers=run.routers)
        ss.live_key = key
        # a Start pressed just after a change (its rerun may have cut the change's rerun
        # short) starts the new run: never a Start that silently does nothing
        ss.live_running = bool(ss.get("live_running", False)) and not ss.live.done
    live: LiveRun = ss.live
    live.settings = run

    def start() -> None:
        ss.live_running = not ss.live.done
        ss.live_progress = Progress(time.monotonic(), ss.live.t)  # the watchdog's clock starts

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
        st.warning(note)
    # defect 9: a run believed running that serves nothing is said, never silent
    progress, note = check_stall(ss.get("live_progress"), live.t, time.monotonic(), ss.live_period,
                                 bool(ss.get("live_running")), live.done)
    if note:
        ss.live_stall_note, ss.live_progress = note, progress
    stall = ss.pop("live_stall_note", None)
    if stall:
        st.warning(stall)
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

    check = live.preflight_check
    if check is not None:
        with st.expander("Pre-flight: can this SLA be certified with this feedback?", expanded=False):
            for line in check.report():
                st.markdown(line)
            st.caption("Text-blind, before any request (slarouter preflight; README, \"Before the first request\").")

    @st.fragment(run_every=ss.live_period if ss.live_running else None)
    def panel() -> None:
        live: LiveRun = ss.live
        # A click (Pause) reruns the page in a new script thread while this one may still be
        # inside live.step() (Streamlit's fast reruns stop it only at its next st. call), and
        # a step that landed after the paused page was drawn left the counter a tick behind
        # the trace. So: step only if still running when the run's lock is held (a Pause
        # before it stops the tick), and read what is drawn under that lock (live.view: the
        # paused page waits for a tick under way and draws it).
        if live.step_if(lambda: bool(ss.live_running)):
            ss.live_progress = Progress(time.monotonic(), live.t)
            if live.done:
                ss.live_running = False
                st.rerun()  # a full rerun turns the timer off
        view = live.view()
        h = view.headline
        unit = live.data.cost_unit
        top = st.columns([1, 3])
        top[0].metric(f"Served (of {h['total']:,})", f"{h['served']:,}")
        best = h["routers"][0]["best_model"]
        top[1].caption(f"alpha = {100 * h['alpha']:.1f}%. References: the **static mixture** (the cheapest "
                       "text-blind call mix whose mean accuracy reaches alpha) and the **most accurate model** "
                       f"({best}) called every time; the oracle knows every label. A multiple is green only where "
                       "the router holds the SLA and costs less than the reference.")
        with st.container(border=True, key="live_story"):
            for line in headline_story(h, run.c, run.feedback_rate):
                st.markdown(line)
        widths = [1.3, 1, 0.8, 1, 1, 0.8]
        labels = st.columns(widths)
        for col, text in zip(labels[1:], ("Satisfaction vs alpha", "SLA", "Cost ÷ static mixture",
                                          "Cost ÷ most accurate", "Q")):
            col.caption(text)
        for r in h["routers"]:
            row = st.columns(widths)
            if not r["v_applies"]:
                v_text = "V does not apply (its own rule)"
            elif r["v_note"]:
                v_text = f"V = {r['v']:.3g}: {r['v_note']}"
            else:
                v_text = f"V = {r['v']:.3g}" + (" (from the data's mean cost gap)" if h["served"] == 0
                                                 and not run.fixed_v else "")
            row[0].markdown(f"<span style='color:{r['color']};font-size:1.4em'>&#9632;</span> "
                            f"**{r['mode']}**", unsafe_allow_html=True)
            row[0].caption(v_text)
            sat = r["satisfaction"]
            row[1].metric(f"Satisfaction ({r['mode']})", "-" if math.isnan(sat) else f"{100 * sat:.1f}%",
                          delta=None if math.isnan(sat) else f"{100 * (sat - h['alpha']):+.1f} pts vs alpha",
                          label_visibility="collapsed",
                          help=f"SLA {r['sla']}: met when the satisfaction so far is at least alpha = "
                               f"{100 * h['alpha']:.1f}%." + (f" Its own {100 * r['bound_scope'][0]:.0f}% lower bound"
                                                              f" ({r['bound_scope'][1]}): {100 * r['lcb']:.1f}%."
                                                              if math.isfinite(r["lcb"]) and r["bound_scope"] else ""))
            status = r["status"]
            sla = "-" if r["sla"] == "not started" else r["sla"]
            row[2].metric(f"SLA ({r['mode']})", sla, label_visibility="collapsed",
                          delta="at risk" if status.get("at_risk") else None, delta_color="inverse",
                          delta_arrow="off",
                          help=(status.get("guarantee") or "This router claims no guarantee of its own.")
                          + (f" At risk since request {status['at_risk_since']:,}." if status.get("at_risk_since")
                             else ""))
            met = r["sla"] == "met"
            for col, key, ref in ((row[3], "vs_mixture", "static mixture"), (row[4], "vs_best", best)):
                x = r[key]
                col.metric(f"Cost ÷ {ref} ({r['mode']})", "-" if math.isnan(x) else f"{x:.2f}x",
                           delta=None if math.isnan(x) else f"{100 * (x - 1):+.0f}% cost",
                           delta_color="inverse" if met else "off", label_visibility="collapsed",
                           help=f"Operating cost so far: {human_cost(r['cost_raw'], unit)}"
                                + (f", of which judge calls {human_cost(r['judge_spend'], unit)}"
                                   if r["judge_calls"] else "") + f", against the {ref}'s on the same requests."
                                + (same_satisfaction_note(r) if key == "vs_mixture" else ""))
            row[5].metric(f"Q ({r['mode']})", f"{r['q']:.3g}", label_visibility="collapsed",
                          help=f"The router's {r['q_label']}.")
        if h["served"] == 0:
            st.info("Nothing served yet: press Start (or Step) and every router serves the same requests; the "
                    "charts below fill in, with the stream's length on the x axis.")
        learned = []
        for r in h["routers"]:
            text = (f"{r['mode']}: explored {r['explored']:,}, thumbs on {r['thumbs']:,}, "
                    f"predictor labels {r['labels']:,}")
            if run.judge:
                text += (f", judge calls {r['judge_calls']:,} costing {human_cost(r['judge_spend'], unit)} "
                         "(in its cost above)")
            learned.append(text)
        st.caption(" · ".join(learned) + ". Charts show at most 2,000 points per series; the CSV has every request.")
        charts = view.charts
        left, right = st.columns(2)
        # Q beside what the queue believed: a missed SLA with Q near 0 explains itself
        for col, name in ((left, "queue"), (right, "belief"), (left, "satisfaction"), (right, "cost")):
            cf = charts[name]
            col.vega_lite_chart(cf.frame, cf.spec, width="stretch")
        ratios = [cf for key, cf in charts.items() if key.startswith("ratio")]
        with right:
            for cf in ratios:
                st.vega_lite_chart(cf.frame, cf.spec, width="stretch")
        trade = view.tradeoff
        left.vega_lite_chart(trade.frame, trade.spec, width="stretch")
        st.vega_lite_chart(charts["events"].frame, charts["events"].spec, width="stretch")

    panel()

    @st.fragment(run_every=WATCH_EVERY_S if ss.live_running else None)
    def watchdog() -> None:
        """Its own timer: if the run's timer stops while the run counts as running, a full
        rerun restarts it and the page says so (above the buttons)."""
        progress, note = check_stall(ss.get("live_progress"), ss.live.t, time.monotonic(), ss.live_period,
                                     bool(ss.get("live_running")), ss.live.done)
        if note:
            ss.live_stall_note, ss.live_progress = note, progress
            st.rerun()

    watchdog()

_frame.close_page("pages/live_run.py")
