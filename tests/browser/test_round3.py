"""Issue 23 in chromium at 1400 x 1000, on one server: an 11-model dollar zoo's Live run
charts draw nothing past their right edge (legends below, in columns that fit) and no
metric value is cut; the sidebar's zoo table wraps long names; garbage links and the
README's ``/data_page`` open their pages without an exception or a "Page not found"
dialog."""

from __future__ import annotations

import io
from urllib.parse import urlencode

import pytest

from slarouter_core.data import write_parquet
from tests.core.live.zoo_frames import dollar_zoo

pytestmark = pytest.mark.browser

IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
#: elements whose text must never be cut with an ellipsis (scrollWidth > clientWidth)
CUT = """els => els.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""


def blank_right_edge(png: bytes, columns: int = 3) -> bool:
    """Whether the last ``columns`` pixel columns of a chart's screenshot are background:
    a legend or label cut at the chart's right edge would draw there."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("L")
    w, h = img.size
    strip = img.crop((w - columns, 0, w, h))
    return strip.getextrema()[0] >= 235  # the darkest pixel there


def assert_charts_whole(charts, tmp_path, name: str) -> None:
    """Screenshot every chart (``name{i}.png``): none draws up to its right edge (a cut
    legend or label)."""
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        png = chart.screenshot(path=str(tmp_path / f"{name}{i}.png"))
        assert blank_right_edge(png), f"{name} {i} draws up to its right edge (a cut legend or label)"


#: a data grid (drawn on a canvas) scrolls sideways when its columns are wider than the page
GRID_SCROLLS = """els => els.filter(e => e.scrollWidth > e.clientWidth + 1).length"""
#: metric values, labels and deltas, with whatever element inside them cuts the text
METRICS = ("[data-testid='stMetricValue'], [data-testid='stMetricValue'] *, [data-testid='stMetricLabel'], "
           "[data-testid='stMetricLabel'] *, [data-testid='stMetricDelta']")


def settled_shot(page, locator, path) -> None:
    """A screenshot of ``locator`` once the page has finished its rerun (a grid drawn
    again meanwhile is a new element: try again)."""
    from playwright.sync_api import Error

    for attempt in range(3):
        page.wait_for_selector(IDLE)
        page.wait_for_timeout(700)
        try:
            locator.scroll_into_view_if_needed()
            locator.screenshot(path=path)
            return
        except Error:
            if attempt == 2:
                raise


@pytest.fixture(scope="module")
def zoo11(tmp_path_factory):
    return write_parquet(dollar_zoo(11), tmp_path_factory.mktemp("zoo") / "zoo11.parquet")


@pytest.fixture(scope="module")
def page(browser):
    p = browser.new_page(viewport={"width": 1400, "height": 1000})
    p.set_default_timeout(60_000)
    yield p
    p.close()


def test_an_11_model_zoo_names_every_model_on_every_chart_with_nothing_cut(app_url, page, tmp_path, zoo11):
    from playwright.sync_api import expect

    path = zoo11
    page.goto(f"{app_url}/live_run?" + urlencode({"enc": "hashing", "src": "path", "path": str(path),
                                                   "cost": "cost_usd", "tick": "200"}))
    page.wait_for_selector(IDLE)
    for _ in range(2):
        page.get_by_role("button", name="Step").click()
        page.wait_for_timeout(500)
        page.wait_for_selector(IDLE)
    expect(page.locator("[data-testid='stMain']")).to_contain_text("Served (of 880)")
    expect(page.locator("[data-testid='stMetricValue']").first).to_have_text("400")
    charts = page.locator("[data-testid='stMain'] [data-testid='stVegaLiteChart']")
    expect(charts).to_have_count(8)
    page.wait_for_timeout(1500)  # the canvases finish drawing
    page.screenshot(path=str(tmp_path / "live_run_page.png"))
    assert_charts_whole(charts, tmp_path, "chart")
    # metric values and deltas whole, and the sidebar's zoo table wraps instead of cutting
    assert page.locator(METRICS).evaluate_all(CUT) == []
    cells = page.locator("[data-testid='stSidebar'] [data-testid='stTable'] td, "
                         "[data-testid='stSidebar'] [data-testid='stTable'] th")
    assert cells.count() >= 11 * 3
    assert cells.evaluate_all(CUT) == []
    # ... and the table itself is not wider than the sidebar (its last column was cut)
    assert page.locator("[data-testid='stSidebar'] [data-testid='stTable'], "
                        "[data-testid='stSidebar'] [data-testid='stTable'] > div").evaluate_all(CUT) == []
    expect(page.locator("[data-testid='stSidebar']")).to_contain_text("mistralai/Mistral-Large-2411")
    # the story says who holds the SLA against both references
    story = page.locator(".st-key-live_story")
    expect(story).to_contain_text("the static mixture's cost")
    expect(story).to_contain_text("the most accurate model")


def test_feedback_by_hand_and_experiments_show_every_value_and_column_whole(app_url, page, tmp_path, zoo11):
    """Feedback by hand's metrics, explanation grid and history, and the Experiments page's table,
    on the 11-model zoo at 1400 px: no value cut, no grid scrolling sideways (screenshots
    in tmp_path)."""
    from playwright.sync_api import expect

    query = urlencode({"enc": "hashing", "src": "path", "path": str(zoo11), "cost": "cost_usd"})
    page.goto(f"{app_url}/feedback_by_hand?{query}")
    page.wait_for_selector(IDLE)
    page.get_by_role("button", name="Next request from the stream").click()
    main = page.locator("[data-testid='stMain']")
    expect(main).to_contain_text("serves")
    page.wait_for_selector(IDLE)
    expect(page.locator("[data-testid='stMetricValue']").first).to_be_visible()
    assert page.locator(METRICS).evaluate_all(CUT) == []
    grid = main.locator("[data-testid='stDataFrame']").first
    settled_shot(page, grid, str(tmp_path / "hand_grid.png"))
    assert grid.locator(".dvn-scroller").evaluate_all(GRID_SCROLLS) == 0
    # the explanation and the feedback history (its other columns are in a closed expander)
    grids = main.locator("[data-testid='stDataFrame']:not([data-testid='stExpander'] *)")
    expect(grids).to_have_count(2)
    settled_shot(page, grids.last, str(tmp_path / "hand_history.png"))
    page.screenshot(path=str(tmp_path / "hand_page.png"), full_page=True)
    assert grids.last.locator(".dvn-scroller").evaluate_all(GRID_SCROLLS) == 0
    page.goto(f"{app_url}/experiments_page?{query}&seed=1")
    page.wait_for_selector(IDLE)
    page.get_by_label("Seeds (comma separated)").first.fill("1")
    page.get_by_label("Seeds (comma separated)").first.press("Enter")
    page.wait_for_selector(IDLE)
    page.get_by_role("button", name="Run comparison").click()
    expect(main).to_contain_text("Per method", timeout=240_000)
    page.wait_for_selector(IDLE)
    grids = main.locator("[data-testid='stDataFrame']")
    expect(grids).to_have_count(1)
    settled_shot(page, grids.first, str(tmp_path / "experiments_grid.png"))
    assert grids.first.locator(".dvn-scroller").evaluate_all(GRID_SCROLLS) == 0
    # the comparison's charts: every legend below or beside, none clipped at the right edge
    charts = main.locator("[data-testid='stVegaLiteChart']")
    expect(charts.first).to_be_visible()
    page.wait_for_timeout(1500)  # the canvases finish drawing
    assert charts.count() >= 1
    assert_charts_whole(charts, tmp_path, "experiments_chart")
    assert page.locator(METRICS).evaluate_all(CUT) == []


@pytest.mark.parametrize("link", ["live_run?enc=hashing&fbmodel=zzz&seed=nan&alpha=1e400&routers=",
                                  "feedback_by_hand?enc=hashing&fbmodel=nan&tick=-1",
                                  "experiments_page?enc=hashing&mode=" + "x" * 300,
                                  "data_page?enc=hashing&seed=7"])
def test_garbage_links_and_the_readme_data_page_link_open_their_page(app_url, page, link):
    from playwright.sync_api import expect

    page.goto(f"{app_url}/{link}")
    page.wait_for_selector(IDLE)
    expect(page.locator("h1").first).to_be_visible()
    page.wait_for_timeout(500)
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.get_by_text("Page not found").count() == 0 and page.get_by_role("dialog").count() == 0
    if link.startswith("data_page"):
        expect(page.locator("h1", has_text="Data")).to_be_visible()
        expect(page.locator("[data-testid='stSidebar']")).to_contain_text("seed = 7")
    else:
        expect(page.locator("[data-testid='stMain']")).to_contain_text("could not be used")


@pytest.fixture(scope="module")
def service11():
    """A routing service in front of an 11-model zoo with the dollar zoo's long names (one
    fake backend answers for all of them), with 80 requests routed and thumbs on a third."""
    import httpx

    from slarouter_core.encoders import HashingEncoder
    from slarouter_core.service.core import RoutingService, ServiceConfig
    from slarouter_core.service.fake_backend import FakeSpec, create_fake_app
    from slarouter_core.service.server import BackgroundServer, create_app
    from slarouter_core.service.zoo import Zoo, ZooModel
    from tests.core.live.zoo_frames import ZOO_NAMES

    backend = BackgroundServer(create_fake_app(FakeSpec("fake", 0.0, 16))).start()
    prices = [1e-5 * 10 ** (3 * j / 10) for j in range(11)]  # 1e-5 to 1e-2 $ a request
    zoo = Zoo(tuple(ZooModel(name=n, base_url=f"{backend.url}/v1", model=f"fake-{j}", price_per_request=p,
                             timeout_s=5.0) for j, (n, p) in enumerate(zip(ZOO_NAMES, prices))))
    service = RoutingService(zoo, ServiceConfig(alpha=0.8, encoder="hashing"), encoder=HashingEncoder(64))
    server = BackgroundServer(create_app(service, api_keys=None)).start()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for i in range(80):
            r = http.post("/v1/chat/completions", json={"model": "auto", "messages": [
                {"role": "user", "content": f"question {i} on topic {i % 7}"}]})
            r.raise_for_status()
            if i % 3 == 0:
                http.post("/v1/feedback", json={"request_id": r.json()["id"], "satisfied": i % 2 == 0})
    yield server.url
    server.stop()
    backend.stop()


def test_the_service_page_names_all_11_models_on_its_charts_with_nothing_cut(app_url, page, tmp_path, service11):
    """The Service page watching an 11-model service at 1400 px: no chart draws up to its
    right edge (its legend below, in columns that fit), no metric value is cut, and the
    models' table does not scroll sideways (screenshots in tmp_path; that the legends name
    every model in its own colour is tests/core/live/test_vega_specs.py's)."""
    from playwright.sync_api import expect

    from tests.core.live.zoo_frames import ZOO_NAMES

    page.goto(f"{app_url}/service_page?enc=hashing")
    page.wait_for_selector(IDLE)
    box = page.get_by_label("Service URL", exact=True).and_(page.get_by_role("textbox"))
    box.fill(service11)
    box.press("Enter")
    main = page.locator("[data-testid='stMain']")
    expect(main).to_contain_text("Requests routed", timeout=60_000)
    page.wait_for_selector(IDLE)
    expect(page.locator("[data-testid='stMetricValue']").first).to_have_text("80")
    page.screenshot(path=str(tmp_path / "service_page.png"))
    assert page.locator("[data-testid='stException']").count() == 0
    expect(main).to_contain_text("meta-llama/Llama-3.1-405B-Instruct")  # the service's zoo, named
    charts = main.locator("[data-testid='stVegaLiteChart']")
    expect(charts).to_have_count(5)
    page.wait_for_timeout(1500)  # the canvases finish drawing
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        png = chart.screenshot(path=str(tmp_path / f"service_chart{i}.png"))
        assert blank_right_edge(png), f"service chart {i} draws up to its right edge (a cut legend or label)"
    assert page.locator(METRICS).evaluate_all(CUT) == []
    grid = main.locator("[data-testid='stDataFrame']").first
    settled_shot(page, grid, str(tmp_path / "service_models.png"))
    assert grid.locator(".dvn-scroller").evaluate_all(GRID_SCROLLS) == 0
