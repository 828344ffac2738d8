"""The paper's protocol in chromium: the Experiments page's "Paper protocol" tab runs the
preset and shows its scoring beside ours and the published Table 2 beside our figures."""

from __future__ import annotations

import csv
from urllib.parse import urlencode

import pytest

from slarouter_core.data import write_parquet
from tests.conftest import make_frame

pytestmark = pytest.mark.browser

IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


def test_paper_protocol_tab_runs_the_preset_and_shows_the_published_table_beside_ours(app_url, browser, tmp_path):
    from playwright.sync_api import expect

    frame = make_frame(n=200, seed=3)
    frame["benchmark"] = frame["benchmark"].map({"alpha_bench": "boolq", "beta_bench": "winogrande"})
    path = write_parquet(frame, tmp_path / "paper_named.parquet")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    page.goto(f"{app_url}/experiments_page?" + urlencode({"enc": "hashing", "src": "path", "path": str(path)}))
    page.wait_for_selector(IDLE)
    page.get_by_role("tab", name="Paper protocol").click()
    panel = page.get_by_role("tabpanel", name="Paper protocol")
    expect(panel).to_contain_text("user thumbs at rate 0.2")
    panel.get_by_role("button", name="Run the paper's protocol").click()
    expect(panel.get_by_text("Beside the published Table 2")).to_be_visible()
    page.wait_for_selector(IDLE)
    expect(panel).to_contain_text("Scored the paper's way beside ours")
    expect(panel).to_contain_text("Qwen3.5")
    assert panel.locator("[data-testid='stDataFrame']").count() == 2
    with page.expect_download() as download:
        panel.get_by_role("button", name="Published beside ours (CSV)").click()
    rows = list(csv.DictReader(open(download.value.path(), encoding="utf-8")))
    by_method = {(r["benchmark"], r["method"]): r for r in rows}
    assert {b for b, _ in by_method} == {"boolq", "winogrande"}
    boolq = by_method[("boolq", "SLARouter (fixed V)")]
    assert boolq["alpha published (%)"] == "85.0" and boolq["satisfaction published (%)"] == "85.6"
    assert boolq["verdict"].split(":")[0] in ("reproduced", "partly", "not reproduced")
    with page.expect_download() as download:
        panel.get_by_role("button", name="Scores (CSV)").click()
    scores = list(csv.DictReader(open(download.value.path(), encoding="utf-8")))
    slr = [r for r in scores if r["method"] == "SLARouter (fixed V)"]
    assert len(slr) == 2 and all(float(r["judge calls"]) > 0 for r in slr)
    page.close()
