"""Feedback by hand: the router decides one request at a time, you give the verdict."""

from __future__ import annotations

import streamlit as st

from pages import _shared as sh
from slarouter_core.live import HandSession

st.title("Feedback by hand")
st.caption("The router (settings from the sidebar; change them on Live run) picks a model for each request "
           "and shows why: per model, the predicted satisfaction `shat`, the cost term `V*C` and the queue term "
           "`Q*(alpha - shat)`; it serves the lowest score (their sum) unless it explores. "
           "Your thumbs are the user's feedback.")
ss = st.session_state
data = sh.current_data()
spec = sh.data_spec()
run = sh.run_settings()

emb = sh.embeddings(data)
if emb is not None:
    key = (spec, run)
    if ss.get("hand_key") != key:
        ss.hand = HandSession(data, emb, run, auto_feedback=ss.get("w_auto", True),
                              learn_from_all=ss.get("w_learn_all", True))
        ss.hand_key = key
    hand: HandSession = ss.hand

    o1, o2 = st.columns(2)
    hand.auto_feedback = o1.toggle(
        "Automatic feedback from simulated users", value=hand.auto_feedback, key="w_auto",
        help=f"On: requests you skip and background traffic get the logged outcome as feedback with rate "
             f"{run.feedback_rate:g}. Off: you are the only user giving feedback.")
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
        ss.hand = HandSession(data, emb, run, auto_feedback=ss.hand.auto_feedback,
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

    def on_thumbs(req_id: int) -> None:
        value = ss.get(f"fb_{req_id}")
        cur = ss.hand.current
        if value is None or cur is None or cur.id != req_id or cur.answered:
            return
        ss.hand.answer(int(value))

    b = st.columns([2, 2, 1])
    b[0].button("Next request from the stream", type="primary", on_click=next_request, key="w_next",
                disabled=hand.stream_left <= 0)
    b[1].button("Serve 100 in the background", on_click=background, key="w_bg",
                help="Route 100 stream requests without showing them (feedback only when automatic feedback is on).")
    b[2].button("Reset", on_click=reset, key="w_hand_reset")
    with st.expander("Type a request instead"):
        st.text_area("Your request", key="w_typed", placeholder="e.g. Prove rigorously that the sum of ...")
        st.button("Route my request", on_click=route_typed, key="w_route_typed")
        st.caption("A typed request is charged each model's mean cost on this data.")
    if ss.get("hand_error"):
        st.error(ss.pop("hand_error"))

    st.caption(f"Stream position {hand.position:,} of {data.n_requests:,} · {hand.auto_served:,} served in the "
               f"background · feedback received so far: {hand.router.n_feedback:,}")

    cur = hand.current
    if cur is None:
        st.info("Press **Next request from the stream** (or type one) to see the router decide.")
        st.metric("Queue Q", f"{hand.q:.4g}")
    else:
        d = cur.decision
        with st.container(border=True):
            st.markdown(f"**Request #{cur.id}** · {cur.benchmark}")
            st.markdown(f"> {cur.text}")
            m = st.columns(5)
            m[0].metric("Served by", data.models[d.model])
            m[1].metric("Why", hand.why(cur),
                        help=f"Exploration probability this step: {d.p_explore:.3f}")
            if cur.answered:
                m[2].metric("Queue Q", f"{cur.q_after:.4g}", delta=f"{cur.q_after - cur.q_before:+.4g}",
                            delta_color="inverse")
            else:
                m[2].metric("Queue Q", f"{cur.q_before:.4g}", help="Changes when you answer (or skip).")
            m[3].metric("V", f"{d.v:.3g}")
            m[4].metric("alpha", f"{d.alpha:.3f}")
            table = hand.explanation(cur)
            st.dataframe(table, hide_index=True, width="stretch",
                         column_config={c: st.column_config.NumberColumn(format="%.4g")
                                        for c in table.columns if c not in ("model", "chosen")})
            if not cur.answered:
                st.markdown("**Was this answer good?**")
            st.feedback("thumbs", key=f"fb_{cur.id}", on_change=on_thumbs, args=(cur.id,))
            if cur.answered and cur.feedback is not None:
                verdict = "up" if cur.feedback == 1 else "down"
                learned = "the predictor trained on it" if cur.trained else "the predictor did not train on it"
                st.success(f"Recorded thumbs {verdict}: Q went from {cur.q_before:.4g} to {cur.q_after:.4g}; "
                           f"{learned}.")

    st.subheader("Your feedback history")
    hist = hand.history_frame()
    st.dataframe(hist, hide_index=True, width="stretch")
    st.download_button("History (CSV)", data=hand.history_csv(), file_name="slarouter_hand_feedback.csv",
                       mime="text/csv", on_click="ignore", key="w_dl_hist", disabled=hist.empty)

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
