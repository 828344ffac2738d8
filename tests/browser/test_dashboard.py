"""End to end in chromium: Live run streams and redraws; a thumbs-down on Feedback by hand moves Q."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.browser

IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


def metric_value(page, label: str) -> str:
    box = page.locator("[data-testid='stMetric']", has_text=label).first
    return box.locator("[data-testid='stMetricValue']").inner_text().strip()


def chart_pixels(page) -> str:
    """A fingerprint of what the first chart shows right now (its canvas or SVG)."""
    return page.evaluate("""() => {
        const el = document.querySelector("[data-testid='stVegaLiteChart']");
        if (!el) return "";
        const c = el.querySelector("canvas");
        return c ? c.toDataURL() : (el.querySelector("svg") || el).outerHTML;
    }""")


def test_live_run_then_thumbs_down(app_url, browser):
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(30_000)
    page.goto(f"{app_url}/live_run?enc=hashing&tick=100")
    expect(page.locator("[data-testid='stVegaLiteChart']").first).to_be_visible()
    page.wait_for_selector(IDLE)
    assert page.get_by_role("dialog").count() == 0  # the first visit after a start: no "Page not found"
    expect(page.locator("[data-testid='stMetric']", has_text="Served").first).to_contain_text("0")
    before = chart_pixels(page)

    page.get_by_role("button", name="Start").click()
    # the fragment timer serves 100 requests per tick: the counter and the chart move on their own
    expect(page.locator("[data-testid='stMetric']", has_text="Served").first.locator(
        "[data-testid='stMetricValue']")).to_have_text(re.compile(r"^[1-9][\d,]*00$"))
    first = int(metric_value(page, "Served").replace(",", ""))
    page.wait_for_function(
        """n => { const m = [...document.querySelectorAll("[data-testid='stMetric']")]
                  .find(e => e.innerText.includes('Served'));
                  if (!m) return false;
                  const v = m.querySelector("[data-testid='stMetricValue']").innerText;
                  return parseInt(v.replace(/,/g, '')) > n; }""",
        arg=first)
    page.wait_for_function("""prev => { const el = document.querySelector("[data-testid='stVegaLiteChart']");
        const c = el && el.querySelector("canvas"); const now = c ? c.toDataURL() : (el ? el.innerHTML : "");
        return now !== "" && now !== prev; }""", arg=before)
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("button", name="Pause")).to_be_disabled()  # the paused rerun has been drawn
    page.wait_for_selector(IDLE)
    # the paused page draws every tick served, one under way at the click included (the page
    # steps and reads the run under its lock: LiveRun.step_if, LiveRun.view), and it holds
    served = int(metric_value(page, "Served").replace(",", ""))
    page.wait_for_timeout(1000)
    page.wait_for_selector(IDLE)
    assert int(metric_value(page, "Served").replace(",", "")) == served
    with page.expect_download() as download:  # built lazily on click, from this session's run
        page.get_by_role("button", name="Trace (CSV)").click()
    lines = open(download.value.path()).read().splitlines()
    # the demo's two routers side by side (paper, contextual): one block of rows each, exactly
    # what the paused page shows
    assert lines[0].startswith("router,t,row,doc_id")
    assert len(lines) == 2 * served + 1, (len(lines), served)

    page.get_by_role("link", name="Feedback by hand").click()
    page.get_by_role("button", name="Next request from the stream").click()
    expect(page.get_by_text("Request #1")).to_be_visible()
    page.wait_for_selector(IDLE)
    q_before = float(metric_value(page, "Queue Q"))
    page.locator("[data-testid='stFeedback'] button").nth(1).click()  # thumbs down
    expect(page.get_by_text("Recorded thumbs down")).to_be_visible()
    q_after = float(metric_value(page, "Queue Q"))
    assert q_after > q_before
    page.close()
