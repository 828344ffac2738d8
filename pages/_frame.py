"""The frame every page draws around itself: page setup, the links to the five pages, a
note on settings a link could not use, and the shared sidebar (dataset, model zoo in cost
order, current settings).

Why each page draws it (``open_page`` first, ``close_page`` last) instead of ``app.py``
around ``page.run()``: Streamlit runs a page script in two ways. ``app.py`` calls
``st.navigation`` (the pages' titles, URLs, order), but until the first ``st.navigation``
call after a server start, Streamlit is in its classic multipage mode because a ``pages/``
folder sits beside ``app.py``, and runs the file a URL names (``/live_run``) on its own;
``AppTest`` is in that mode on every run. A page that draws its own frame looks the same
either way, with no private flag to flip and no test-only branch.

That mode knows only the files of ``pages/``, so each old short URL (``/live``) is a file
too: ``pages/live.py`` only calls :func:`forward_old_url`, and ``app.py`` serves the same
file as a hidden page, so the old URL forwards in either mode with no "Page not found".
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st
from PIL import Image

from pages import _shared as sh
from slarouter_core.live import DEFAULT_POLICY, RunSettings, human_cost, settings_to_query, stated_text, zoo_table

#: script, title, icon and the URL links had before the pages got their files' names, in
#: menu order; the first is the default page, served at ``/``. Each page's URL is its
#: file's name (``/live_run``): the name Streamlit's classic mode gives it too, so a link
#: works in either mode.
_PAGE_TABLE = [("pages/data_page.py", "Data", ":material/table:", "data"),
               ("pages/live_run.py", "Live run", ":material/monitoring:", "live"),
               ("pages/feedback_by_hand.py", "Feedback by hand", ":material/thumbs_up_down:", "feedback"),
               ("pages/experiments_page.py", "Experiments", ":material/science:", "experiments"),
               ("pages/service_page.py", "Service", ":material/dns:", "service")]
#: script, title, icon, in menu order
PAGES = [(script, title, icon) for script, title, icon, _ in _PAGE_TABLE]
#: URLs of links made before the pages got their files' names, and the file each runs:
#: ``pages/<old>.py``, which forwards to its page (:func:`forward_old_url`)
OLD_URLS = {old: f"pages/{old}.py" for *_, old in _PAGE_TABLE}


def forward_old_url(stub: str) -> None:
    """Open the page an old short URL meant, with the link's settings (its query
    parameters). ``stub``: the calling file (``pages/live.py``: its ``__file__``)."""
    script = next(s for s, *_, old in _PAGE_TABLE if old == Path(stub).stem)
    st.switch_page(script, query_params=st.query_params.to_dict())


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


def open_page(script: str) -> None:
    """Everything a page shows before its own content. ``script``: the page's file
    (``pages/live_run.py``), which names it in the links and in the reset link."""
    title = next(t for s, t, _ in PAGES if s == script)
    st.set_page_config(page_title=f"{title} · SLARouter", page_icon=page_icon(), layout="wide")
    sh.init_session()
    # Streamlit's own list is off (``client.showSidebarNavigation = false`` in
    # .streamlit/config.toml): in its classic mode it would list every file of ``pages/``
    with st.sidebar:
        for s, t, icon in PAGES:
            st.page_link(s, label=t, icon=icon)
    if script.endswith("service_page.py"):  # it watches a running service, not the session's data
        with st.sidebar:
            st.markdown("### Service")
            st.caption("This page watches a running `slarouter serve`: the zoo, alpha and router mode shown here "
                       "are the service's own (from its zoo file and command line), not the dataset and settings "
                       "of the other pages.")
    sh.current_data()  # validates the session's data (falls back to the demo with a note)
    if st.session_state.get("url_problems"):
        reset = urlencode(settings_to_query(sh.data_spec(), RunSettings()))
        with st.container(border=True):
            st.warning("Some settings in the link could not be used as they are:\n\n"
                       + "\n".join(f"- {p}" for p in st.session_state.url_problems)
                       + f"\n\n[Open this page with every setting at its default](./{Path(script).stem}"
                       + (f"?{reset}" if reset else "") + ")")

            def dismiss() -> None:
                st.session_state.url_problems = []

            st.button("Dismiss", key="w_dismiss_url_problems", on_click=dismiss)


def close_page(script: str) -> None:
    """Everything a page shows after its own content: the sidebar is drawn last so that it
    shows the settings the page just set; then the settings go into the URL."""
    if not script.endswith("service_page.py"):
        _sidebar()
    sh.sync_url()


def _sidebar() -> None:
    data = sh.current_data()
    spec = sh.data_spec()
    run = sh.run_settings()
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
                               "cost/request": [human_cost(v, data.cost_unit)
                                                for v in zoo[f"mean cost ({data.cost_unit})"]],
                               "acc.": [f"{a:.0%}" for a in zoo["accuracy"]]}), hide_index=True)  # 3 chars: fits
        st.markdown("### Settings")
        alpha = run.resolved_alpha(data)
        v_text = (f"V = {run.V:g} (fixed)" if run.fixed_v
                  else f"V data-driven (Q_max = {run.q_max:g}, eps = {run.eps:g})")
        st.markdown(
            f"alpha = **{alpha:.3f}**{' (midpoint)' if run.alpha is None else ''} · c = {run.c:g}  \n"
            f"{v_text}  \n"
            f"feedback rate = {run.feedback_rate:g} · seed = {run.seed} · {run.per_tick} requests/tick"
            + (f"  \nfeedback model: {run.feedback_model}" if run.feedback_model != "iid" else "")
            + (f"  \nLLM judge: {run.judge} on {run.judge_budget:.0%} of requests"
               + (" (contextual: and the other rated ones, to calibrate it)" if run.judge_budget < 1 else "")
               if run.judge else "")
            + (f"  \nstated accuracies: {stated_text(run.stated_levels)}" if run.stated_levels else "")
            + (f"  \nat-risk test: warn_z = {run.warn_z:g}"
               + (f", after {run.warn_after} thumbs" if run.warn_after else "")
               if run.warn_z != RunSettings().warn_z or run.warn_after else "")
            + (f"  \nrouter mode: **{run.mode}**" if run.mode != DEFAULT_POLICY else "")
            + f"  \nLive run routers: {', '.join(run.routers)}")
        st.caption("These settings are in the page URL: copy it to share them.")
