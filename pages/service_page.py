"""Service: watch a running `slarouter serve` (GET /v1/state), with the Live run charts."""

from __future__ import annotations

import streamlit as st

from pages import _shared  # noqa: F401  (first: a first visit after a server start opens this page)
from slarouter_core.service.monitor import ServiceUnreachable, ServiceView, fetch_state, fmt_share, normalise_url

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

try:
    base = normalise_url(url)
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
    m = st.columns(6)
    m[0].metric("Requests routed", f"{h['served']:,}")
    m[1].metric("Cost so far", f"{h['cost']:.4g}", help="From the token usage the models reported.")
    m[2].metric("Satisfaction (estimate)", fmt_share(h["estimate"]))
    m[3].metric("Lower bound", fmt_share(h["lower_bound"]), help=h["bound"])
    m[4].metric("SLA", h["sla"], help=f"alpha = {h['alpha']:.3f}; met when the lower bound is at least alpha.")
    m[5].metric("Queue Q", f"{h['q']:.3g}")
    st.caption(f"mode {h['mode']} · thumbs up {h['thumbs_up']:,}, down {h['thumbs_down']:,} · "
               f"backend failures {h['failures']:,} · requests no backend answered {h['failed']:,}. "
               "Charts show the service's recent history.")
    st.dataframe(view.models_frame(), hide_index=True, width="stretch")
    charts = {cf.key: cf for cf in view.charts()}
    left, right = st.columns(2)
    for col, name in ((left, "queue"), (right, "cost"), (left, "satisfaction"), (right, "ratio")):
        cf = charts[name]
        col.vega_lite_chart(cf.frame, cf.spec, width="stretch")
    st.vega_lite_chart(charts["events"].frame, charts["events"].spec, width="stretch")


panel()
