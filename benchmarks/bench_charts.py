"""Chart building on the live path: what one Live run tick spends building chart specs
and frames, on an 11-model zoo after 3,000 requests (issue 23: the
charts moved to Altair; this shows a tick does not pay for it).

An 11-model zoo (``random_zoo_models(11, seed=0)``, 3,000 requests of the demo generator,
hashing encoder) is served to the end by three routers side by side (paper, guarded,
contextual). Then, each timed ``--repeat`` times (median and best printed, in ms):

1. ``LiveRun.charts()``: every streaming chart of a tick (frames thinned to 2,000 points
   and specs), as the Live run page calls it on each tick;
2. the specs alone: the ``_chart_spec`` calls of one tick (cost, satisfaction, belief,
   queue, three call-ratio charts), with the same arguments; and the same on an empty spec
   cache (the first tick of a new run builds each spec once);
3. ``LiveRun.tradeoff_chart()`` (drawn on each tick too);
4. the Experiments comparison chart and the Data page's zoo chart (built once per click,
   for scale).

Run: .venv/bin/python benchmarks/bench_charts.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slarouter_core.data import from_frame  # noqa: E402
from slarouter_core.encoders import get_encoder  # noqa: E402
from slarouter_core.live import LiveRun, RunSettings  # noqa: E402
from slarouter_core.live.charts import _chart_spec, color_encoding  # noqa: E402
from slarouter_core.live.tables import zoo_chart  # noqa: E402
from slarouter_core.synthetic import generate_demo_frame, random_zoo_models  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, float]:
    """Median and best wall time of ``fn()`` in ms (one untimed call first)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times), min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    frame = generate_demo_frame(n=3000, seed=0, models=random_zoo_models(11, seed=0))
    data = from_frame(frame)
    emb = get_encoder("hashing").encode(list(data.frame["input_text"]))
    live = LiveRun(data, emb, RunSettings(per_tick=3000), routers=("paper", "guarded", "contextual"))
    while not live.done:
        live.step()
    print(f"{data.n_models} models, {live.t:,} requests served by {', '.join(live.routers)}")
    names = list(live.labels.values())
    models = list(data.models)
    series = names + ["static mixture", "oracle"] + [f"only {m}" for m in models]

    def specs() -> None:  # the arguments of one tick's _chart_spec calls
        n = live.n_requests
        _chart_spec("Cumulative operating cost (USD)", "USD", color_encoding("series", series, models, "router"), n,
                    y_domain=[0.0, 1.0], dash={"field": "series", "type": "nominal", "legend": None})
        _chart_spec("Running request satisfaction", "satisfaction", color_encoding("series", names, models, "router"),
                    n, rule=0.8, rule_label="alpha = 80.0%", percent=True, y_domain=[0.0, 1.0], band=True)
        _chart_spec("What the queue believes", "running satisfaction", color_encoding("series", names, models, "router"),
                    n, rule=0.8, rule_label="alpha = 80.0%", percent=True, y_domain=[0.0, 1.0],
                    dash={"field": "kind", "type": "nominal"})
        for title in ("Virtual queue Q_t", "", ""):
            _chart_spec(title, "Q", color_encoding("series", names, models, "router"), n, y_domain=[0.0, 5.0])
        for _ in live.routers:
            _chart_spec("Model call ratio", "share of calls", color_encoding("series", models, models, "model"), n,
                        area=True, percent=True, y_domain=[0.0, 1.0])

    from slarouter_core.live.experiment_charts import comparison_chart
    import pandas as pd
    agg = pd.DataFrame([{"benchmark": b, "method": m, "seeds": 3, "cost_mean": 1.0 + j, "cost_std": 0.1,
                         "satisfaction_mean": 0.5 + 0.03 * j, "satisfaction_std": 0.01, "alpha": 0.8,
                         "sla_met": j > 8, "cost_unit": "USD", "feedback_model": "iid"}
                        for b in ("b0", "b1", "b2", "b3") for j, m in enumerate(models + ["static_mixture", "oracle"])])
    from slarouter_core.live import charts as C

    def cold_specs() -> None:
        C._streaming_chart.cache_clear()  # each distinct spec is built once, then cached
        specs()

    for label, fn in (("LiveRun.charts() (one tick's streaming charts)", live.charts),
                      ("the specs alone (one tick's _chart_spec calls)", specs),
                      ("the specs alone, first tick of a new run (empty spec cache)", cold_specs),
                      ("LiveRun.tradeoff_chart()", live.tradeoff_chart),
                      ("comparison_chart (4 benchmarks x 13 methods)", lambda: comparison_chart(agg, models)),
                      ("zoo_chart (per benchmark)", lambda: zoo_chart(data))):
        med, best = timed(fn, args.repeat)
        print(f"{label}: median {med:.2f} ms, best {best:.2f} ms ({args.repeat} runs)")


if __name__ == "__main__":
    main()
