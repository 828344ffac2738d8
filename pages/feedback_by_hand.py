"""Feedback by hand: the router decides one request at a time, you give the verdict."""

from __future__ import annotations

import streamlit as st

from pages import _frame
from pages import _shared as sh
from slarouter_core.live import (ROUTER_COLORS, HandRouters, feedback_model_choices, router_modes, router_modes_help,
                                 settings_change)
from slarouter_core.live.tables import short_names

#: the history's columns shown at first, and short headers for the history's columns
HISTORY_SHOWN = ["id", "router", "model", "explored", "logged_outcome", "shat_served", "your_feedback",
                 "q_before", "q_after"]
HISTORY_SHORT = {"explored": "expl.", "logged_outcome": "logged", "shat_served": "shat", "your_feedback": "you",
                 "q_before": "Q before", "q_after": "Q after", "predictor_trained": "trained"}
FEEDBACK_HELP = ("iid: each request independently. bursty: feedback comes in bursts (same mean rate). "
                 "negative: thumbs-down given more often than thumbs-up. delayed: verdicts arrive 50 requests "
                 "late. drift: the workload shifts from one half of the benchmarks to the other.")

_frame.open_page("pages/feedback_by_hand.py")
st.title("Feedback by hand")
st.caption("Each router you pick decides the same request and shows why: per model, the predicted satisfaction "
           "`shat`, the cost term `V*C` and the queue term `Q*(alpha - shat)` (a policy that prices satisfaction shows its price for Q); it serves the lowest score (their "
           "sum) unless it explores. Your thumbs are the user's feedback on one answer; it goes to the router(s) "
           "that served it. Other settings: the sidebar (change them on Live run).")
ss = st.session_state
data = sh.current_data()
spec = sh.data_spec()
run = sh.run_settings()


def on_feedback_model() -> None:
    """The feedback model is a shared setting: apply it, or say why not and put the box back."""
    new, problems = settings_change(sh.run_settings(), {"feedback_model": ss.w_hand_fbmodel}, data)
    if problems:
        ss.hand_error = "Not applied: " + problems["feedback_model"]
        ss.w_hand_fbmodel = sh.run_settings().feedback_model
    else:
        sh.set_run_settings(new)


def on_routers() -> None:
    if not ss.w_hand_routers:
        ss.hand_error = "Pick at least one router: keeping " + ", ".join(ss.hand.routers) + "."
        ss.w_hand_routers = list(ss.hand.routers)


emb = sh.embeddings(data)
if emb is not None:
    o = st.columns([2, 1])
    routers = o[0].multiselect("Routers (each decides the same request)", router_modes(), key="w_hand_routers",
                               on_change=on_routers,
                               **({} if "w_hand_routers" in ss else {"default": ss.get("hand_routers", [run.mode])}),
                               help=router_modes_help() + " One thumbs press judges one answer; where the "
                                    "routers chose different models you pick which one.")
    choices = feedback_model_choices()
    o[1].selectbox("Simulated users' feedback model", choices, key="w_hand_fbmodel", on_change=on_feedback_model,
                   **({} if "w_hand_fbmodel" in ss else {"index": choices.index(run.feedback_model)}),
                   help=FEEDBACK_HELP + " It gives the automatic feedback below (a shared setting: Live run "
                                        "uses it too).")
    ss.hand_routers = list(routers)  # kept when the page (and so its widget) is left
    run = sh.run_settings()
    key = (spec, run.reaching(routers), tuple(routers))  # a setting none of the routers reads restarts nothing
    if ss.get("hand_key") != key:
        ss.hand = HandRouters(data, emb, run, routers=routers, auto_feedback=ss.get("w_auto", True),
                              learn_from_all=ss.get("w_learn_all", True))
        ss.hand_key = key
    hand: HandRouters = ss.hand

    o1, o2 = st.columns(2)
    hand.auto_feedback = o1.toggle(
        "Automatic feedback from simulated users", value=hand.auto_feedback, key="w_auto",
        help=f"On: requests you skip, answers you did not judge and background traffic get the logged outcome as "
             f"feedback with rate {run.feedback_rate:g}, following the feedback model ({run.feedback_model}). "
             "Off: you are the only user giving feedback.")
    hand.learn_from_all = o2.toggle(
        "Learn from every thumbs", value=hand.learn_from_all, key="w_learn_all",
        help="Algorithm 1 trains the predictor only on feedback for explored requests. On: your verdict on "
             "any request also trains it, so you see the estimates move (a demo choice, not the paper's).")

    def next_request() -> None:
        try:
            ss.hand.next_from_stream()
        except ValueError as exc:
            ss.hand_error = str(exc)

    def background() -> None:
        ss.hand.serve_auto(100)

    def reset() -> None:
        ss.hand = HandRouters(data, emb, run, routers=ss.hand.routers, auto_feedback=ss.hand.auto_feedback,
                              learn_from_all=ss.hand.learn_from_all)

    def route_typed() -> None:
        text = ss.get("w_typed", "")
        if not text.strip():
            ss.hand_error = "Type a request first: the text box is empty."
            return
        x = sh.encoder(spec.encoder).encode([text])[0]
        try:
            ss.hand.route_text(text, x)
        except ValueError as exc:
            ss.hand_error = str(exc)

    def on_thumbs(round_id: int) -> None:
        value = ss.get(f"fb_{round_id}")
        cur = ss.hand.current
        if value is None or cur is None or cur.id != round_id or cur.answered:
            return
        ss.hand.answer(int(value), router=ss.get(f"judge_{round_id}"))

    b = st.columns([2, 2, 1])
    b[0].button("Next request from the stream", type="primary", on_click=next_request, key="w_next",
                disabled=hand.stream_left <= 0)
    b[1].button("Serve 100 in the background", on_click=background, key="w_bg",
                help="Route 100 stream requests without showing them (feedback only when automatic feedback is on).")
    b[2].button("Reset", on_click=reset, key="w_hand_reset")
    with st.expander("Type a request instead"):
        st.text_area("Your request", key="w_typed", placeholder="e.g. Prove rigorously that the sum of ...")
        st.button("Route my request", on_click=route_typed, key="w_route_typed")
        st.caption("A typed request is charged each model's mean cost on this data. It has no logged answer; "
                   "for a real one, ask a running service (at the bottom of this page).")
    if ss.get("hand_error"):
        st.error(ss.pop("hand_error"))

    fed = ", ".join(f"{m} {s.n_feedback:,}" for m, s in hand.sessions.items())
    st.caption(f"Stream position {hand.position:,} of {data.n_requests:,} · {hand.auto_served:,} served in the "
               f"background · feedback received so far: {fed}")

    cur = hand.current
    if cur is None:
        st.info("Press **Next request from the stream** (or type one) to see the router decide.")
        st.metric(f"Queue Q ({hand.routers[0]})", f"{hand.primary.q:.4g}")
    else:
        st.markdown(f"**Request #{cur.id}** · {cur.benchmark}")
        st.markdown(f"> {cur.text}")
        for mode, req in cur.requests.items():
            session = hand.sessions[mode]
            d = req.decision
            with st.container(border=True):
                st.markdown(f"<span style='color:{ROUTER_COLORS[mode]};font-size:1.3em'>&#9632;</span> "
                            f"**{mode}** serves **{data.models[d.model]}**", unsafe_allow_html=True)
                # the served model is named in full above: a metric would cut a long name
                m = st.columns([1.3, 1, 1, 0.8])
                m[0].metric(f"Why ({mode})", hand.sessions[mode].why(req),
                            help=f"Exploration probability this step: {d.p_explore:.3f}")
                if req.answered:
                    m[1].metric(f"Queue Q ({mode})", f"{req.q_after:.4g}", delta=f"{req.q_after - req.q_before:+.4g}",
                                delta_color="inverse")
                else:
                    m[1].metric(f"Queue Q ({mode})", f"{req.q_before:.4g}", help="Changes when you answer (or skip).")
                m[2].metric(f"V ({mode})", f"{d.v:.3g}")
                m[3].metric("alpha", f"{d.alpha:.3f}")
                st.caption(session.logged_outcome(req))
                # the table across the page, every column whole; the bars below it
                table = session.explanation(req).assign(model=lambda f: short_names(list(f["model"])))
                st.dataframe(table, hide_index=True, width="stretch",
                             column_config=sh.fitted_grid(table, number_format="%.3g"))
                bars = session.shat_chart(req)
                st.vega_lite_chart(bars.frame, bars.spec, width="stretch")
                if note := session.shat_note(req):
                    st.caption(note)
                if req.answered and req.feedback is not None:
                    verdict = "up" if req.feedback == 1 else "down"
                    learned = "the predictor trained on it" if req.trained else "the predictor did not train on it"
                    st.success(f"Recorded thumbs {verdict} for {mode}: Q went from {req.q_before:.4g} to "
                               f"{req.q_after:.4g}; {learned}.")
                elif req.answered and cur.feedback is not None:
                    st.caption(f"Not judged by you: {mode} served another answer ({req.source}).")

        answers = cur.answers()
        with st.container(border=True):
            if len(answers) > 1:
                options = [routers_[0] for routers_ in answers.values()]
                st.radio("The routers chose different models: which answer do you judge?", options,
                         key=f"judge_{cur.id}", disabled=cur.answered, horizontal=True,
                         format_func=lambda r: f"{data.models[cur.requests[r].decision.model]} "
                                               f"(served by {', '.join(answers[cur.requests[r].decision.model])})")
                judged = ss.get(f"judge_{cur.id}") or options[0]
            else:
                judged = hand.routers[0]
            req = cur.requests[judged]
            if not cur.answered:
                st.markdown(f"**Was this answer good?** The answer of **{data.models[req.decision.model]}** "
                            f"(served by {', '.join(answers[req.decision.model])}). "
                            + hand.sessions[judged].logged_outcome(req))
            st.feedback("thumbs", key=f"fb_{cur.id}", on_change=on_thumbs, args=(cur.id,))

    q = hand.q_chart()
    st.vega_lite_chart(q.frame, q.spec, width="stretch")
    st.subheader("Your feedback history")
    hist = hand.history_frame()
    # the columns that tell what happened, short headers (full names as their help): all 14
    # would scroll sideways at 1400 px; the rest are below and in the CSV
    shown = hist[HISTORY_SHOWN].assign(model=short_names(list(hist["model"])))
    st.dataframe(shown, hide_index=True, width="stretch",
                 column_config=sh.fitted_grid(shown, HISTORY_SHORT, number_format="%.3g"))
    st.download_button("History (CSV, every column)", data=hand.history_csv(),
                       file_name="slarouter_hand_feedback.csv", mime="text/csv", on_click="ignore",
                       key="w_dl_hist", disabled=hist.empty)
    with st.expander("More columns: request text, benchmark, source, V, predictor trained"):
        rest = hist[["id", "router"] + [c for c in hist.columns if c not in HISTORY_SHOWN]]
        st.dataframe(rest, hide_index=True, width="stretch",
                     column_config=sh.fitted_grid(rest, HISTORY_SHORT, number_format="%.3g",
                                                  text={"width": "large"}))

# -- the real zoo: a running `slarouter serve` answers, your thumbs go to its router ----------
with st.expander("Ask a running service (real zoo)"):
    from slarouter_core.service.monitor import ServiceUnreachable, ask, send_feedback

    svc_url = st.text_input("Service URL", value=ss.get("service_url", "http://127.0.0.1:8000"), key="w_hand_svc")
    st.text_area("Your request", key="w_svc_typed", placeholder="e.g. Why is the sky blue?")
    if st.button("Ask the service", key="w_svc_ask"):
        try:
            ss.svc_answer = ask(svc_url, ss.get("w_svc_typed", ""))
        except (ValueError, ServiceUnreachable) as exc:
            st.error(str(exc))
    ans = ss.get("svc_answer")
    if ans is not None:
        st.markdown(f"**Answered by {ans.model}**" + (f" (the router chose {ans.chosen}, which failed)"
                                                      if ans.chosen != ans.model else "")
                    + (" · explored" if ans.explored else "") + f" · request `{ans.request_id}`")
        st.markdown(ans.text)
        verdict = st.feedback("thumbs", key=f"svc_fb_{ans.request_id}")
        if verdict is not None and ss.get("svc_sent") != ans.request_id:
            try:
                r = send_feedback(svc_url, ans.request_id, bool(verdict))
                ss.svc_sent = ans.request_id
                st.success(f"Sent to the service's router: its queue is now {r['q']:.4g}.")
            except (ValueError, ServiceUnreachable) as exc:
                st.error(str(exc))

_frame.close_page("pages/feedback_by_hand.py")
