"""An 11-model dollar zoo in chromium: the sidebar's zoo table shows every column (no
horizontal overflow: a long model name wraps, a number is never cut), and the zoo's picture
fits the page."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from slarouter_core.data import write_parquet
from tests.core.live.zoo_frames import dollar_zoo

pytestmark = pytest.mark.browser

IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


def test_an_11_model_zoo_fits_the_sidebar_and_the_page(app_url, browser, tmp_path):
    from playwright.sync_api import expect

    path = write_parquet(dollar_zoo(11), tmp_path / "zoo11.parquet")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(30_000)
    page.goto(f"{app_url}/?" + urlencode({"enc": "hashing", "src": "path", "path": str(path), "cost": "cost_usd"}))
    sidebar = page.locator("[data-testid='stSidebar']")
    expect(sidebar).to_contain_text("Model zoo (11 models, cheapest first)")
    page.wait_for_selector(IDLE)
    table = sidebar.locator("[data-testid='stTable']").first  # static: drawn with the page, never a grey box
    expect(table).to_be_visible()
    width, visible = table.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert width <= visible, (width, visible)  # nothing to scroll to: every column is in view
    assert sidebar.locator("[data-testid='stVegaLiteChart']").count() == 1
    main = page.locator("[data-testid='stMainBlockContainer']")
    right = main.evaluate("e => e.getBoundingClientRect().right")
    charts = main.locator("[data-testid='stVegaLiteChart']")
    expect(charts.first).to_be_visible()
    assert charts.first.evaluate("e => e.getBoundingClientRect().right") <= right
    page.wait_for_timeout(1000)  # the canvases finish drawing
    page.screenshot(path=str(tmp_path / "data_page.png"), full_page=True)
    page.close()
