"""The first visit after a server start: a shared deep link, an old short one (``/live``)
included, opens its page with no "Page not found" dialog and no list of Streamlit's own in
the sidebar.

Needs a fresh *server*, not just a fresh browser session: with a ``pages/`` folder beside
``app.py`` Streamlit stays in its classic multipage mode, process-wide, until the first run
of ``app.py``'s ``st.navigation``; so each test here starts its own server (about a second)."""

from __future__ import annotations

import contextlib

import pytest

from pages._frame import OLD_URLS

from .conftest import CHROMIUM, free_port, start_app, stop_app

pytestmark = pytest.mark.browser

IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"

#: records, from the first byte of the page on, every sidebar list Streamlit draws itself
#: and any "Page not found" text: a dialog that flashes and is replaced still counts
WATCH = """
window.__seen = [];
new MutationObserver(() => {
  const nav = document.querySelector("[data-testid='stSidebarNav']");
  if (nav) window.__seen.push('nav: ' + nav.innerText.replace(/\\s+/g, ' '));
  if (document.body && document.body.innerText.includes('Page not found')) window.__seen.push('Page not found');
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


#: every URL a link may hold (the old short ones included), the page it opens, and the
#: path the browser ends on (the old short URLs forward to their page's own URL)
EVERY_LINK = [("", "Data", ""), ("data_page", "Data", "data_page"), ("live_run", "Live run", "live_run"),
              ("feedback_by_hand", "Feedback by hand", "feedback_by_hand"),
              ("experiments_page", "Experiments", "experiments_page"), ("service_page", "Service", "service_page"),
              ("data", "Data", ""), ("live", "Live run", "live_run"), ("feedback", "Feedback by hand", "feedback_by_hand"),
              ("experiments", "Experiments", "experiments_page"), ("service", "Service", "service_page")]
#: first requests: every page's own URL and two old short ones; ``/data`` ends on Data's
#: file's name, not ``/``: Streamlit's classic mode (see below) has no page at ``/`` but
#: ``app.py`` itself, so its file ``pages/data.py`` forwards to ``pages/data_page.py``'s URL
FIRST = [x for x in EVERY_LINK if x[0] not in OLD_URLS] + [("live", "Live run", "live_run"),
                                                           ("data", "Data", "data_page")]


def open_link(browser, port: int, link: str, heading: str, path: str) -> None:
    """Open ``/link?enc=hashing&seed=7``: its page, the app's five links and no list of
    Streamlit's own in the sidebar, the link's settings read and kept in the URL, and no
    "Page not found", not even for a moment."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(30_000)
    page.add_init_script(WATCH)
    page.goto(f"http://127.0.0.1:{port}/{link}?enc=hashing&seed=7")
    # an old short URL forwards (a second script run on the page's own URL): the first
    # run's end is not yet the page's, so wait for the URL the page lives on
    page.wait_for_url(f"http://127.0.0.1:{port}/{path}?*", timeout=60_000)
    expect(page.locator("h1", has_text=heading)).to_be_visible(timeout=60_000)
    page.wait_for_selector(IDLE)
    sidebar = page.locator("[data-testid='stSidebar']")
    expect(sidebar.locator("a")).to_have_count(5)
    links = [a.inner_text().strip().split("\n")[-1] for a in sidebar.locator("a").all()]
    assert [x for x in links if x] == ["Data", "Live run", "Feedback by hand", "Experiments", "Service"]
    # Service shows the service's own settings, the others the link's
    expect(sidebar).to_contain_text("the service's own" if heading == "Service" else "seed = 7")
    assert page.evaluate("window.__seen") == []
    assert page.get_by_role("dialog").count() == 0
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.url.split("?")[0] == f"http://127.0.0.1:{port}/{path}", page.url
    assert "seed=7" in page.url, page.url
    page.close()


@contextlib.contextmanager
def fresh_server():
    """A server of its own (its first session is the test's), stopped afterwards; the
    port it listens on."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed")
    port = free_port()
    proc = start_app(port)
    try:
        yield port
    finally:
        stop_app(proc)


@pytest.mark.parametrize("link, heading, path", FIRST, ids=[x[0] or "root" for x in FIRST])
def test_a_link_as_a_fresh_servers_first_request_opens_its_page(browser, link, heading, path):
    """An old short URL too: it used to open its page under Streamlit's "Page not found"
    (the classic ``pages/`` mode of a fresh server knew only the files' names)."""
    with fresh_server() as port:  # this is its very first session
        open_link(browser, port, link, heading, path)


def test_an_old_link_after_a_fresh_servers_first_request_for_a_page(browser):
    """A first request for a page's own URL never ran ``app.py`` in the classic mode, so
    the next session's old short URL got "Page not found" as well."""
    with fresh_server() as port:
        open_link(browser, port, "live_run", "Live run", "live_run")
        open_link(browser, port, "feedback", "Feedback by hand", "feedback_by_hand")


def test_every_link_opens_its_page_once_the_navigation_has_run(browser):
    """Every URL, old short ones included, through ``app.py``'s ``st.navigation``."""
    with fresh_server() as port:
        open_link(browser, port, "", "Data", "")
        for link, heading, path in EVERY_LINK:
            open_link(browser, port, link, heading, path)
