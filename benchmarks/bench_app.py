"""Dashboard figures, measured in a real browser (issue #3).

1. Time to first chart: from `page.goto(.../live_run)` until the first Vega-Lite chart of Live
   run is drawn, on the demo data, in a new browser session against a warm server
   (another session has opened the app once). Measured with the `hashing` encoder, with
   MiniLM whose embeddings are already in the disk cache, and with MiniLM on an empty
   cache (the very first open). Also: from pressing Start until the first data point.
   Target: <= 5 s. Every figure runs three routers side by side (paper, guarded,
   contextual) on the same stream, with the static mixture and oracle references.
2. Chart updates per second with a 10,000-request history and 200 requests per tick:
   synthetic data with 30,000 requests (same generator as the demo), one Step of 10,000,
   then Start with 200 requests per tick and 0.1 s between ticks; for 10 s the page polls
   the Live run headline and the queue chart's canvas and counts distinct states.
   Target: >= 2 updates/s.
3. Memory per additional browser session: resident memory (VmRSS) of the Streamlit
   server with one session on Live run after serving the whole demo stream, then after
   N more sessions doing the same (each its own router, queue and trace); reported as
   the increase divided by N. Target: <= 300 MB.

Needs Debian chromium at /usr/bin/chromium and the `playwright` package (never
`playwright install`). The server gets an empty temporary embedding cache. Browser and
server share this machine's CPUs, so the 1-minute load average is printed with each
figure. Run: .venv/bin/python benchmarks/bench_app.py [--sessions 4] [--period 0.1]
[--only first|updates|memory]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, free_port, start_app, stop_app  # noqa: E402

CHART = "[data-testid='stVegaLiteChart']"
#: Live run streams three routers side by side in every figure (issue 13)
ROUTERS = "routers=paper,guarded,contextual"
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
DRAWN = """() => { const el = document.querySelector("[data-testid='stVegaLiteChart']");
                   return !!(el && (el.querySelector('canvas') || el.querySelector('svg'))); }"""
SERVED = """() => { const m = [...document.querySelectorAll("[data-testid='stMetric']")]
                      .find(e => e.innerText.includes('Served'));
                    return m ? m.querySelector("[data-testid='stMetricValue']").innerText : ''; }"""


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def close_dialog(page) -> None:
    dialog = page.get_by_role("dialog", name="Page not found")
    if dialog.count():
        dialog.get_by_role("button", name="Close").click()


def first_chart(browser, url: str) -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_function(DRAWN, timeout=120_000)
    took = time.perf_counter() - start
    page.close()
    return took


def start_to_data(browser, url: str) -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    page.wait_for_function(DRAWN, timeout=120_000)
    page.wait_for_selector(IDLE)
    close_dialog(page)
    start = time.perf_counter()
    page.get_by_role("button", name="Start").click()
    page.wait_for_function(f"() => ({SERVED})() !== '' && ({SERVED})() !== '0'", timeout=60_000)
    took = time.perf_counter() - start
    page.close()
    return took


def updates_per_second(browser, base: str, data_path: Path, seconds: float = 10.0,
                       period: float = 0.1) -> tuple[float, float, int]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(120_000)
    page.goto(f"{base}/live_run?enc=hashing&{ROUTERS}&src=path&path={data_path}&tick=10000")
    page.wait_for_function(DRAWN)
    page.wait_for_selector(IDLE)
    close_dialog(page)
    page.get_by_role("button", name="Step").click()
    page.wait_for_function(f"() => ({SERVED})() === '10,000'")
    tick = page.get_by_label("requests per tick")
    tick.fill("200")
    tick.press("Enter")
    page.wait_for_selector(IDLE)
    box = page.get_by_label("seconds between ticks")
    box.fill(f"{period:.2f}")
    box.press("Enter")
    page.wait_for_selector(IDLE)
    assert page.evaluate(SERVED) == "10,000", "changing the tick size must not reset the run"
    page.get_by_role("button", name="Start").click()
    page.wait_for_function(f"() => ({SERVED})() !== '10,000'")
    counts = page.evaluate(
        """async ([secs, servedFn]) => {
            const served = eval(servedFn);
            const chart = () => { const c = document.querySelector("[data-testid='stVegaLiteChart'] canvas");
                                  return c ? c.toDataURL() : ''; };
            const seenServed = new Set(), seenChart = new Set();
            let lastS = served(), lastC = chart();
            const t0 = performance.now();
            while (performance.now() - t0 < secs * 1000) {
                await new Promise(r => setTimeout(r, 25));
                const s = served(), c = chart();
                if (s !== lastS) { seenServed.add(s); lastS = s; }
                if (c !== lastC) { seenChart.add(c.length + ':' + c.slice(-64)); lastC = c; }
            }
            return [seenServed.size, seenChart.size, lastS];
        }""", [seconds, SERVED])
    page.close()
    n_served, n_chart, last = counts
    return n_served / seconds, n_chart / seconds, int(str(last).replace(",", ""))


def run_session(context_page, base: str) -> None:
    page = context_page
    page.goto(f"{base}/live_run?enc=hashing&{ROUTERS}&tick=3000")
    page.wait_for_function(DRAWN, timeout=120_000)
    page.wait_for_selector(IDLE)
    close_dialog(page)
    page.get_by_role("button", name="Step").click()
    page.wait_for_function(f"() => ({SERVED})() === '3,000'", timeout=120_000)
    page.wait_for_selector(IDLE)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=4, help="additional browser sessions for the memory figure")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long to count chart updates")
    ap.add_argument("--period", type=float, default=0.1, help="seconds between ticks for the update figure")
    ap.add_argument("--only", choices=["first", "updates", "memory"], help="measure one figure only")
    args = ap.parse_args()
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: apt-get install chromium", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    from slarouter_core.synthetic import generate_demo

    tmp = Path(tempfile.mkdtemp(prefix="bench_app-"))
    big = generate_demo(tmp / "synthetic_30k.parquet", n=30_000, seed=1)
    env = {"SLAROUTER_CACHE_DIR": str(tmp / "cache")}  # starts empty: MiniLM's first embed is measured
    port = free_port()
    proc = start_app(port, env=env)
    base = f"http://127.0.0.1:{port}"
    print(f"server pid {proc.pid}, {os.cpu_count()} CPUs, chromium {CHROMIUM}, load average {load()}")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            first_chart(browser, f"{base}/live_run?enc=hashing&{ROUTERS}")  # warm the server (imports, numba cache)
            if args.only in (None, "first"):
                measure_first(browser, base, port, env, proc_box := [proc])
                proc = proc_box[0]
            if args.only in (None, "updates"):
                measure_updates(browser, base, big, args.seconds, args.period)
            if args.only in (None, "memory"):
                measure_memory(browser, base, proc, args.sessions)
            browser.close()
    finally:
        stop_app(proc)
    return 0


def measure_first(browser, base, port, env, proc_box) -> None:
    hashing = [first_chart(browser, f"{base}/live_run?enc=hashing&{ROUTERS}") for _ in range(3)]
    cold = first_chart(browser, f"{base}/live_run?{ROUTERS}")  # MiniLM, empty embedding cache
    warm = [first_chart(browser, f"{base}/live_run?{ROUTERS}") for _ in range(2)]
    # a new server process keeps the disk cache but not the in-memory one
    stop_app(proc_box[0])
    proc_box[0] = start_app(port, env=env)
    first_chart(browser, f"{base}/live_run?enc=hashing&{ROUTERS}")
    disk = first_chart(browser, f"{base}/live_run?{ROUTERS}")
    go = [start_to_data(browser, f"{base}/live_run?enc=hashing&{ROUTERS}") for _ in range(2)]
    print(f"1. time to first chart on Live run (demo data, 3,000 requests, 3 routers); target <= 5 s "
          f"[load {load()}]")
    print(f"   hashing encoder:                       {min(hashing):.2f} s (best of 3; all: "
          + ", ".join(f"{x:.2f}" for x in hashing) + ")")
    print(f"   MiniLM, embeddings in memory:          {min(warm):.2f} s")
    print(f"   MiniLM, embeddings from the disk cache (new server): {disk:.2f} s")
    print(f"   MiniLM, empty cache (first ever open): {cold:.2f} s")
    print(f"   Start pressed -> first data point:     {min(go):.2f} s")


def measure_updates(browser, base, big, seconds, period) -> None:
    ups, charts, last = updates_per_second(browser, base, big, seconds, period)
    print(f"2. chart updates per second, 10,000-request history per router (3 routers), 200 requests/tick, "
          f"{period:g} s period; "
          f"target >= 2/s [load {load()}]")
    print(f"   headline updates: {ups:.1f}/s; queue-chart redraws: {charts:.1f}/s "
          f"(served {last:,} of 30,000 at the end)")


def measure_memory(browser, base, proc, sessions) -> None:
    ctx0 = browser.new_context()
    run_session(ctx0.new_page(), base)
    time.sleep(1.0)
    before = rss_mb(proc.pid)
    contexts = []
    for _ in range(sessions):
        ctx = browser.new_context()
        run_session(ctx.new_page(), base)
        contexts.append(ctx)
    time.sleep(1.0)
    after = rss_mb(proc.pid)
    per = (after - before) / sessions
    print("3. memory per additional browser session (server RSS, each session ran the whole "
          f"demo stream on Live run); target <= 300 MB [load {load()}]")
    print(f"   RSS with 1 session: {before:.0f} MB; with {1 + sessions}: {after:.0f} MB; "
          f"per additional session: {per:.1f} MB")
    for ctx in contexts + [ctx0]:
        ctx.close()


if __name__ == "__main__":
    sys.exit(main())
