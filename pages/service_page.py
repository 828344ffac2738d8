"""Service: watch a running `slarouter serve` (GET /v1/state), with the Live run charts."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import streamlit as st

from pages import _frame
from pages import _shared as sh
from slarouter_core.service.monitor import ServiceUnreachable, ServiceView, fetch_state, fmt_share, normalise_url

#: the models table's headers, short enough for 1400 px (the full name is each header's help)
SHORT_HEADERS = {"prompt_tokens": "in tok.", "completion_tokens": "out tok.", "cost": "cost",
                 "thumbs_up": "up", "thumbs_down": "down"}

_frame.open_page("pages/service_page.py")
st.title("Service")
ss = st.session_state
c1, c2, c3 = st.columns([3, 1, 1])
url = c1.text_input("Service URL", value=ss.get("service_url", "http://127.0.0.1:8000"), key="w_service_url",
                    help="Where `slarouter serve` listens. The page polls its GET /v1/state.")
period = c2.number_input("seconds between polls", min_value=0.5, max_value=60.0,
                         value=float(ss.get("service_period", 2.0)), step=0.5, key="w_service_period")
watch = c3.toggle("Watch", value=bool(ss.get("service_watch", False)), key="w_service_watch",
                  help="Poll the service and redraw the charts on a timer.")
ss.service_url, ss.service_period, ss.service_watch = url, float(period), bool(watch)

def checked_url(text: str) -> str:
    """The service's base URL, or a ValueError saying in words why the text is not one (a
    host name has no spaces; a port is a number): never a connection error for a typo."""
    base = normalise_url(text)
    parts = urlsplit(base)
    host = parts.hostname or ""
    if not re.fullmatch(r"[A-Za-z0-9._-]+|[0-9a-fA-F:.]+", host) or " " in text.strip():
        raise ValueError(f"{text.strip()[:80]!r} is not a URL: give host:port or http://host:port, "
                         "e.g. http://127.0.0.1:8000")
    try:
        _ = parts.port  # assigned: a bare expression would be shown on the page (Streamlit's magic)
    except ValueError:
        raise ValueError(f"{text.strip()[:80]!r} has a port that is not a number from 0 to 65535") from None
    return base


try:
    base = checked_url(url)
except ValueError as exc:
    st.error(str(exc))
    st.stop()


@st.fragment(run_every=ss.service_period if ss.service_watch else None)
def panel() -> None:
    try:
        view = ServiceView(fetch_state(base))
    except ServiceUnreachable as exc:
        st.warning(str(exc))
        return
    h = view.headline()
    state = view.state
    up, down = h["thumbs_up"], h["thumbs_down"]
    wilson = "Wilson" in str(h["bound"])
    m = st.columns(4)
    m[0].metric("Requests routed", f"{h['served']:,}")
    m[1].metric("Cost so far (zoo prices)", f"{h['cost']:.4g}",
                help="In the currency of the zoo file's price_per_1k_input/output and price_per_request "
                     "(e.g. USD), from the token usage the models reported.")
    m[2].metric("SLA", h["sla"], delta="at risk" if h["at_risk"] else None, delta_color="inverse", delta_arrow="off",
                help=f"alpha = {h['alpha']:.3f}; met when the lower bound is at least alpha."
                + (f" At risk since request {h['at_risk_since']:,}: even at its best the router does not "
                   "expect its bound to reach alpha by the window's end." if h["at_risk"] and h["at_risk_since"]
                   else "") + (f" {h['window']}." if h["window"] else ""))
    m[3].metric("Queue Q", f"{h['q']:.3g}")
    m = st.columns(3)  # longer labels than the first row's: a quarter of the page cut them
    covers, conf = h["covers"], f"{100 * h['confidence']:.0f}%"
    m[0].metric(f"Satisfaction, {covers} (estimate)", fmt_share(h["estimate"]),
                help=("Every request routed" if covers == "all requests" else
                      "Every request of the current SLA window (each window starts afresh)")
                + ": the thumbs where a user gave them, the router's own prediction elsewhere.")
    if wilson:  # the bound is on the thumbs alone: show it beside the share it bounds
        n = up + down
        m[1].metric(f"Thumbs up (of {n:,} thumbs)", fmt_share(up / n) if n else "-",
                    help="Only the requests whose users gave thumbs: another population than the estimate's.")
        m[2].metric(f"Thumbs up: {conf} lower bound", fmt_share(h["lower_bound"]), help=h["bound"])
    else:
        m[1].metric(f"Satisfaction, {covers}: {conf} lower bound", fmt_share(h["lower_bound"]), help=h["bound"])
    st.caption(f"mode {h['mode']} · thumbs up {up:,}, down {down:,} · "
               f"backend failures {h['failures']:,} · requests no backend answered {h['failed']:,}"
               + (f" · {h['refits']}" if h["refits"] else "") + ". "
               + ("The SLA is checked on the thumbs received (the router claims no bound of its own). "
                  if wilson else "") + "Charts show the service's recent history. The service's own zoo: "
               + ", ".join(f"{x['name']} ({x['model']})" for x in state["models"]) + ".")
    if h["judge"]:
        st.caption(h["judge"] + ".")
    pre = state.get("preflight")
    if pre:  # the zoo states accuracies: can its SLA be certified at the thumbs rate it gets?
        with st.expander("Pre-flight: can this SLA be certified? (the zoo's stated accuracies)", expanded=False):
            for line in pre["report"]:
                st.markdown(line)
            st.caption(f"Thumbs rate {pre['feedback_rate_source']}; text-blind, on the thumbs alone (README, "
                       "\"Before the first request\").")
    # the backends' own model names are in the caption above: without them, and with short
    # headers (full names in their help), an 11-model zoo's table fits 1400 px unscrolled
    models = view.models_frame().drop(columns=["model"])
    st.dataframe(models, hide_index=True, column_config=sh.fitted_grid(models, SHORT_HEADERS),
                 height=35 * (len(models) + 1) + 3)  # every model in view, no inner scrolling
    charts = {cf.key: cf for cf in view.charts()}
    left, right = st.columns(2)
    for col, name in ((left, "queue"), (right, "cost"), (left, "satisfaction"), (right, "ratio")):
        cf = charts[name]
        col.vega_lite_chart(cf.frame, cf.spec, width="stretch")
    st.vega_lite_chart(charts["events"].frame, charts["events"].spec, width="stretch")


panel()

_frame.close_page("pages/service_page.py")
