"""AppTest helpers: the dashboard in-process, on the demo data with the instant encoder."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def open_app(page: str | None = None, **query: str) -> AppTest:
    """A fresh browser session (own session state) on ``page``, with URL ``query``."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["enc"] = "hashing"
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at
