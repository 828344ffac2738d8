"""SLARouter dashboard: `make app` (or `streamlit run app.py`).

Frame only: page setup, the shared sidebar (dataset, model zoo in cost order, current
settings) and navigation. Each page is a thin script in `pages/`; everything algorithmic
comes from `slarouter_core`.
"""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st
from PIL import Image

from pages import _shared as sh
from slarouter_core.live import DEFAULT_POLICY, RunSettings, human_cost, settings_to_query, zoo_table


def page_icon() -> Image.Image:
    """The tab icon, drawn here (a fork of two routes on a blue disc): served by this
    server, so it works offline (a `:material/...` icon is fetched from a font CDN)."""
    n = 32
    y, x = np.mgrid[0:n, 0:n] + 0.5
    img = np.zeros((n, n, 4), np.uint8)
    disc = (x - 16) ** 2 + (y - 16) ** 2 <= 15.5 ** 2
    img[disc] = (31, 111, 235, 255)
    stem = (abs(x - 16) <= 1.6) & (y >= 17) & (y <= 26)
    left = (abs((x - 16) + (y - 17)) <= 2.0) & (y >= 8) & (y <= 17)
    right = (abs((x - 16) - (y - 17)) <= 2.0) & (y >= 8) & (y <= 17)
    img[disc & (stem | left | right)] = (255, 255, 255, 255)
    return Image.fromarray(img, "RGBA")


st.set_page_config(page_title="SLARouter", page_icon=page_icon(), layout="wide")
sh.init_session()

#: script, title, icon, and the URL used where a page's URL must not be its file's name
#: (see ``sh.url_path``)
PAGES = [("pages/data_page.py", "Data", ":material/table:", "data"),
         ("pages/live_run.py", "Live run", ":material/monitoring:", "live"),
         ("pages/feedback_by_hand.py", "Feedback by hand", ":material/thumbs_up_down:", "feedback"),
         ("pages/experiments_page.py", "Experiments", ":material/science:", "experiments"),
         ("pages/service_page.py", "Service", ":material/dns:", "service")]
# the first page is the default, served at "/" while it still reserves its url_path: it
# keeps its short name, and its file's name (``/data_page``, the name a first visit after
# a server start finds, and the README's) forwards to it below instead of opening a
# "Page not found" dialog on any later visit
urls = [PAGES[0][3]] + [sh.url_path(path, other) for path, _, _, other in PAGES[1:]]
pages = [st.Page(path, title=title, icon=icon, url_path=url, default=i == 0)
         for i, ((path, title, icon, _), url) in enumerate(zip(PAGES, urls))]


def _forward(target: st.Page):
    """A link made before the pages got their files' names (``/live?...``) opens the page
    it meant, with its settings."""
    def forward() -> None:
        st.switch_page(target, query_params=st.query_params.to_dict())
    return forward


aliases = [st.Page(_forward(p), title=p.title, url_path=other)
           for p, url, (_, _, _, other) in zip(pages, urls, PAGES) if other != url]
if sh.url_path(PAGES[0][0], PAGES[0][3]) != urls[0]:
    aliases.append(st.Page(_forward(pages[0]), title=pages[0].title, url_path=sh.url_path(PAGES[0][0], "")))
# Streamlit's own sidebar list is off (``client.showSidebarNavigation = false`` in
# .streamlit/config.toml): on the first run after a start it would list the files of
# ``pages/`` ("app, data page, ..., shared") for a moment; the links are drawn here instead
page = st.navigation(pages + aliases, position="hidden")
with st.sidebar:
    for p in pages:
        st.page_link(p)

sh.current_data()  # validates the session's data (falls back to the demo with a note)
if st.session_state.get("url_problems"):
    reset = urlencode(settings_to_query(sh.data_spec(), RunSettings()))
    with st.container(border=True):
        st.warning("Some settings in the link could not be used as they are:\n\n"
                   + "\n".join(f"- {p}" for p in st.session_state.url_problems)
                   + f"\n\n[Open this page with every setting at its default](./{page.url_path}"
                   + (f"?{reset}" if reset else "") + ")")

        def dismiss() -> None:
            st.session_state.url_problems = []

        st.button("Dismiss", key="w_dismiss_url_problems", on_click=dismiss)
page.run()

# the sidebar is drawn after the page so that it shows the settings the page just set
data = sh.current_data()
spec = sh.data_spec()
run = sh.run_settings()
if page.title == "Service":  # it watches a running service: its zoo and settings are the service's own
    with st.sidebar:
        st.markdown("### Service")
        st.caption("This page watches a running `slarouter serve`: the zoo, alpha and router mode shown here are "
                   "the service's own (from its zoo file and command line), not the dataset and settings of the "
                   "other pages.")
    sh.sync_url()
    st.stop()
with st.sidebar:
    st.markdown("### Dataset")
    name = sh.display_name(spec).rstrip("/").split("/")[-1]  # a path's last part: the sidebar is narrow
    st.markdown(f"**{name}**" + (" · :orange-badge[SYNTHETIC]" if data.synthetic else ""))
    bench = ", ".join(spec.benchmarks) if spec.benchmarks else f"all {len(data.benchmark_names)}"
    st.caption(f"{data.n_requests:,} requests · benchmarks: {bench} · cost: {data.cost_metric} "
               f"({data.cost_unit}) · encoder: {spec.encoder}")
    for w in data.warnings:  # e.g. a model left out for want of its outcomes: said on every page
        st.caption(f":orange[{w}]")
    st.markdown(f"### Model zoo ({data.n_models} models, cheapest first)")
    frame, chart = sh.zoo_picture(spec, per_benchmark=False, legend=False, labels=False, height=180)
    st.vega_lite_chart(frame, chart, width="stretch")
    st.caption("Accuracy against cost (log scale); the green line is the cheapest static mix of models.")
    zoo = zoo_table(data)
    # a static table, drawn with the page (a data grid is an empty grey box until its
    # script loads) and wrapping a long model name instead of cutting it
    st.table(pd.DataFrame({"model": zoo["model"],
                           "cost/request": [human_cost(v, data.cost_unit) for v in zoo[f"mean cost ({data.cost_unit})"]],
                           "acc.": [f"{a:.0%}" for a in zoo["accuracy"]]}), hide_index=True)  # 3 characters: fits
    st.markdown("### Settings")
    alpha = run.resolved_alpha(data)
    v_text = f"V = {run.V:g} (fixed)" if run.fixed_v else f"V data-driven (Q_max = {run.q_max:g}, eps = {run.eps:g})"
    st.markdown(
        f"alpha = **{alpha:.3f}**{' (midpoint)' if run.alpha is None else ''} · c = {run.c:g}  \n"
        f"{v_text}  \n"
        f"feedback rate = {run.feedback_rate:g} · seed = {run.seed} · {run.per_tick} requests/tick"
        + (f"  \nfeedback model: {run.feedback_model}" if run.feedback_model != "iid" else "")
        + (f"  \nrouter mode: **{run.mode}**" if run.mode != DEFAULT_POLICY else "")
        + f"  \nLive run routers: {', '.join(run.routers)}")
    st.caption("These settings are in the page URL: copy it to share them.")

sh.sync_url()
