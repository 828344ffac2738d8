"""SLARouter dashboard: `make app` (or `streamlit run app.py`).

Frame only: page setup, the shared sidebar (dataset, model zoo in cost order, current
settings) and navigation. Each page is a thin script in `pages/`; everything algorithmic
comes from `slarouter_core`.
"""

from __future__ import annotations

import streamlit as st

from pages import _shared as sh
from slarouter_core.live import zoo_table

st.set_page_config(page_title="SLARouter", page_icon=":material/alt_route:", layout="wide")
sh.init_session()

pages = [
    st.Page("pages/data_page.py", title="Data", icon=":material/table:", url_path="data", default=True),
    st.Page("pages/live_run.py", title="Live run", icon=":material/monitoring:", url_path="live"),
    st.Page("pages/feedback_by_hand.py", title="Feedback by hand", icon=":material/thumbs_up_down:",
            url_path="feedback"),
    st.Page("pages/experiments_page.py", title="Experiments", icon=":material/science:", url_path="experiments"),
]
page = st.navigation(pages)

sh.current_data()  # validates the session's data (falls back to the demo with a note)
page.run()

# the sidebar is drawn after the page so that it shows the settings the page just set
data = sh.current_data()
spec = sh.data_spec()
run = sh.run_settings()
with st.sidebar:
    st.markdown("### Dataset")
    name = "built-in demo" if spec.source == "demo" else spec.path.split("/")[-1]
    st.markdown(f"**{name}**" + (" · :orange-badge[SYNTHETIC]" if data.synthetic else ""))
    bench = ", ".join(spec.benchmarks) if spec.benchmarks else f"all {len(data.benchmark_names)}"
    st.caption(f"{data.n_requests:,} requests · benchmarks: {bench} · cost: {data.cost_metric} "
               f"({data.cost_unit}) · encoder: {spec.encoder}")
    st.markdown("### Model zoo (cheapest first)")
    st.dataframe(zoo_table(data), hide_index=True, width="stretch",
                 column_config={"accuracy": st.column_config.NumberColumn("acc.", format="%.3f"),
                                f"mean cost ({data.cost_unit})": st.column_config.NumberColumn(
                                    f"{data.cost_unit}/request", format="%.4g")})
    st.markdown("### Settings")
    alpha = run.resolved_alpha(data)
    v_text = f"V = {run.V:g} (fixed)" if run.fixed_v else f"V data-driven (Q_max = {run.q_max:g}, eps = {run.eps:g})"
    st.markdown(
        f"alpha = **{alpha:.3f}**{' (midpoint)' if run.alpha is None else ''} · c = {run.c:g}  \n"
        f"{v_text}  \n"
        f"feedback rate = {run.feedback_rate:g} · seed = {run.seed} · {run.per_tick} requests/tick"
        + (f"  \nfeedback model: {run.feedback_model}" if run.feedback_model != "iid" else "")
        + (f"  \nrouter mode: **{run.mode}**" if run.mode != "paper" else ""))
    st.caption("These settings are in the page URL: copy it to share them.")
    for problem in st.session_state.get("url_problems", []):
        st.warning(problem)

sh.sync_url()
