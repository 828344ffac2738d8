"""The first visit after a server start: a shared deep link opens its page, with no "Page
not found" dialog and no list of the ``pages/`` folder's files in the sidebar."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("link, heading, text", [
    ("live_run?enc=hashing&alpha=0.8", "Live run", "Live run settings"),
    ("feedback_by_hand?enc=hashing&seed=7", "Feedback by hand", "seed = 7"),  # the link's settings were read
    ("service_page?enc=hashing", "Service", "the service's own"),
])
def test_a_deep_link_as_the_first_request_opens_its_page(browser, link, heading, text):
    from playwright.sync_api import expect

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed")
    port = free_port()
    proc = start_app(port)  # a fresh server: this is its very first session
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        page.add_init_script(WATCH)
        page.goto(f"http://127.0.0.1:{port}/{link}")
        expect(page.locator("h1", has_text=heading)).to_be_visible(timeout=60_000)
        page.wait_for_selector(IDLE)
        sidebar = page.locator("[data-testid='stSidebar']")
        expect(sidebar).to_contain_text(text)
        assert page.get_by_role("dialog").count() == 0
        assert page.get_by_text("Page not found").count() == 0
        assert page.evaluate("window.__seen") == []  # not even for a moment
        # the app's own links to its five pages, and nothing from the folder listing
        links = [a.inner_text().strip().split("\n")[-1] for a in sidebar.locator("a").all()]
        assert [x for x in links if x] == ["Data", "Live run", "Feedback by hand", "Experiments", "Service"]
        assert page.url.endswith(link)
        page.close()
    finally:
        stop_app(proc)


def test_a_link_from_before_the_page_urls_changed_opens_its_page(browser):
    """``/live?...`` (the Live run URL until the pages got their files' names) forwards to
    ``/live_run`` with the link's settings."""
    from playwright.sync_api import expect

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed")
    port = free_port()
    proc = start_app(port)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        page.goto(f"http://127.0.0.1:{port}/data_page?enc=hashing")  # the server's first session
        expect(page.locator("h1", has_text="Data")).to_be_visible(timeout=60_000)
        page.goto(f"http://127.0.0.1:{port}/live?enc=hashing&seed=7")
        expect(page.locator("h1", has_text="Live run")).to_be_visible(timeout=60_000)
        page.wait_for_selector(IDLE)
        expect(page.locator("[data-testid='stSidebar']")).to_contain_text("seed = 7")
        assert "/live_run?" in page.url and "seed=7" in page.url
        page.close()
    finally:
        stop_app(proc)
