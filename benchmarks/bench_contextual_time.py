"""What the contextual router's settings cost in time, side by side in one run.

    python benchmarks/bench_contextual_time.py                    # Llama-3, 8 mixed, seeds 0-2
    python benchmarks/bench_contextual_time.py --stream demo --seeds 5

Each variant runs the same seeded streams one after the other in this process (one
thread), contextual mode, feedback rate 0.2, midpoint alpha, and prints seconds per
stream, the ratio to the first variant, how often the text model was refitted and on
how many labels it was fitted last:

* thumbs: no judge;
* judge, no labels: an ACPBench-grade judge reads every answer, its verdicts reach the
  estimate and the levels only (``judge_labels=False``);
* judge: the default, the text model also learns from the judge's calibrated verdicts
  (five times the labels at feedback rate 0.2, so more and larger refits);
* judge, best-model fallback: ``repay_cost=False``, the fallback serving its posterior
  draw's best model, thinned (what the repaying fallback's choice, a few small array
  operations per capped step, costs).

The embeddings come from the cache (embedded once, before the clock starts).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slarouter_core.data import RoutingData, midpoint_alpha  # noqa: E402
from slarouter_core.embedding_cache import embed_texts  # noqa: E402
from slarouter_core.experiments import PAPER_EXCLUDE, load_any  # noqa: E402
from slarouter_core.feedback import FeedbackConfig  # noqa: E402
from slarouter_core.judge import JUDGE_PRESETS  # noqa: E402
from slarouter_core.router import RouterConfig  # noqa: E402
from slarouter_core.simulator import SimulationConfig, simulate, single_threaded_blas  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "messplus_llama3"

#: (label, judge fill-in, contextual settings)
VARIANTS: tuple[tuple[str, bool, dict], ...] = (
    ("thumbs", False, {}),
    ("judge, no labels", True, {"judge_labels": False}),
    ("judge", True, {}),
    ("judge, best-model fallback", True, {"repay_cost": False}),
)


def load_stream(name: str) -> RoutingData:
    if name == "demo":
        return load_any(ROOT / "data" / "demo.parquet")
    if not SHARED.exists():
        raise SystemExit(f"the shared Llama-3 data is not at {SHARED}: use --stream demo")
    full = load_any(SHARED)
    return full.without(PAPER_EXCLUDE)


def time_variant(data: RoutingData, X: np.ndarray, alpha: float, judge: bool, settings: dict,
                 seeds) -> tuple[float, float, float]:
    """(seconds per stream, refits per stream, labels in the last fit) over ``seeds``."""
    feedback = FeedbackConfig(judge_fill=JUDGE_PRESETS["acpbench"]) if judge else FeedbackConfig()
    cfg = RouterConfig(alpha=alpha, mode="contextual").with_settings(**settings)
    secs, refits, labels = [], [], []
    for seed in seeds:
        t0 = time.perf_counter()
        sim = simulate(data, X, SimulationConfig(cfg, feedback_rate=0.2, seed=seed, feedback=feedback))
        secs.append(time.perf_counter() - t0)
        policy = sim.router.policy
        refits.append(policy.version)
        labels.append(min(policy.lab_n, policy.config.max_labels))
    return float(np.mean(secs)), float(np.mean(refits)), float(np.mean(labels))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stream", choices=("llama", "demo"), default="llama")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    data = load_stream(args.stream)
    alpha = midpoint_alpha(data)
    X = embed_texts(data.texts)
    seeds = range(args.seeds)
    print(f"{args.stream}: {data.n_requests} requests, {data.n_models} models, alpha {100 * alpha:.1f}%, "
          f"seeds 0-{args.seeds - 1}, one thread")
    print()
    print("| variant | s per stream | vs thumbs | refits per stream | labels in the last fit |")
    print("|---|---|---|---|---|")
    base = None
    with single_threaded_blas():
        for label, judge, settings in VARIANTS:
            s, refits, labels = time_variant(data, X, alpha, judge, settings, seeds)
            base = s if base is None else base
            print(f"| {label} | {s:.2f} | {s / base:.2f}x | {refits:.1f} | {labels:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
