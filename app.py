"""SLARouter dashboard: `make app` (or `streamlit run app.py`).

Navigation only: the pages' titles, URLs and order. Each page is a script in `pages/` that
draws the shared frame around itself (`pages/_frame.py`, which says why); everything
algorithmic comes from `slarouter_core`.

An old short URL (`/live`) is a hidden page on a file of its own (`pages/live.py`), which
forwards to the page: a fresh server runs in Streamlit's classic `pages/` mode until this
file's `st.navigation` first runs, and that mode knows only the folder's files.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pages._frame import OLD_URLS, PAGES


# The default page is served at "/"; its url_path only names it (Streamlit keys pages by
# it), so it takes one no link uses and leaves its file's name to a hidden page on the
# same script: ``/data_page`` (the README's link) opens Data as it is. Every other page's
# URL is its file's name (st.Page's default).
pages = [st.Page(script, title=title, icon=icon, url_path="home" if i == 0 else None, default=i == 0)
         for i, (script, title, icon) in enumerate(PAGES)]
hidden = [st.Page(PAGES[0][0], title=PAGES[0][1], url_path=Path(PAGES[0][0]).stem, visibility="hidden")]
# a link from before the pages got their files' names (``/live?...``): its file forwards
hidden += [st.Page(stub, title=url, url_path=url, visibility="hidden") for url, stub in OLD_URLS.items()]
st.navigation(pages + hidden, position="hidden").run()
