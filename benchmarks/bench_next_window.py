"""A router in service keeps what it learned: its first SLA window against the next one,
on requests it has not seen (issue 19; docs/STUDIES.md, "The next SLA window").

    python benchmarks/bench_next_window.py                       # 20 seeds, every scenario
    python benchmarks/bench_next_window.py --scenarios demo --seeds 5
    python benchmarks/bench_next_window.py --set h=0.25           # your own contextual settings
    python benchmarks/bench_next_window.py --scenarios demo --misses   # each missed seed of each window

The issue's rows (``bench_honest_sla.py``) start every stream cold: the text model, each
model's level, the judge's calibration and the residuals behind the bound are all learned
while the SLA window is being served. A router in service serves window after window
(``sla_window``); each new window starts its estimate, bound and warnings afresh and keeps
what was learned. Here each seeded run serves two windows of equal length, the second on
requests the first never showed it, with the contextual router's defaults (feedback rate
0.2, alpha and judge as in ``bench_honest_sla.py``):

* demo: the built-in demo, then a fresh sample of the same generator (another seed);
* llama: the shared Llama-3 stream (8 benchmarks mixed) split in two random halves per
  seed (each window is half the issue's stream, so its margin is wider);
* zoos / unseen: each synthetic zoo, then a fresh sample of the same zoo (another
  generator seed, as the stated rows of ``bench_honest_sla.py`` measure a leaderboard).

Per window: seeds at or above alpha ("met" = 18 of 20), satisfaction, the router's own
bound at the window's end, cost over the static mixture of that window's own requests
(judge calls included), the share of requests the fallback served (no price reached the
target), and the missed seeds warned before half of their window. "Next / first" is the
mean over seeds of each seed's second-window cost over its first.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_honest_sla import SHARED, between_best_two, synthetic  # noqa: E402

from slarouter_core.baselines import static_mixture_lp  # noqa: E402
from slarouter_core.cli import policy_settings  # noqa: E402
from slarouter_core.data import RoutingData, from_frame, midpoint_alpha  # noqa: E402
from slarouter_core.embedding_cache import embed_texts  # noqa: E402
from slarouter_core.experiments import PAPER_EXCLUDE, load_any, seeds_needed  # noqa: E402
from slarouter_core.feedback import FeedbackConfig, judge_calls  # noqa: E402
from slarouter_core.judge import JUDGE_PRESETS  # noqa: E402
from slarouter_core.policies.text_model import PRICE_CAP  # noqa: E402
from slarouter_core.router import RouterConfig  # noqa: E402
from slarouter_core.simulator import Simulation, SimulationConfig  # noqa: E402
from slarouter_core.synthetic import generate_demo_frame, random_zoo_models  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("demo", "llama", "zoos", "unseen")
#: the generator seed offset of a zoo's fresh sample (the stated rows' independent sample)
FRESH = 1000


def joined(first: RoutingData, fresh: pd.DataFrame) -> RoutingData:
    """``first``'s requests, then ``fresh``'s (their ids moved past ``first``'s)."""
    fresh = fresh.copy()
    fresh["doc_id"] = fresh["doc_id"].astype(np.int64) + int(first.frame["doc_id"].astype(np.int64).max()) + 1
    return from_frame(pd.concat([first.frame, fresh], ignore_index=True), cost=first.cost_metric)


def build_pairs(scenarios) -> list[tuple]:
    """``(name, data, alpha, with_judge, split)``: ``data`` holds both windows' requests;
    ``split`` is the size of the first window's pool (the rest are the next window's), or
    None to split the requests in two random halves per seed."""
    pairs: list[tuple] = []
    if "demo" in scenarios:
        demo = load_any(ROOT / "data" / "demo.parquet")
        pairs.append(("demo (mixed)", joined(demo, generate_demo_frame(demo.n_requests, 1)), midpoint_alpha(demo),
                      True, demo.n_requests))
    if "llama" in scenarios:
        if SHARED.exists():
            llama = load_any(SHARED).without(PAPER_EXCLUDE)
            pairs.append(("llama-3, 8 mixed (halves)", llama, midpoint_alpha(llama), True, None))
        else:
            print(f"shared data not found at {SHARED}: the Llama-3 rows are skipped")

    def zoo(label: str, n_models: int, base: int, z: int, hard: bool = False) -> tuple:
        data = synthetic(n_models, base + z, z)
        fresh = generate_demo_frame(3000, z + FRESH, random_zoo_models(n_models, base + z))
        alpha = between_best_two(data) if hard else midpoint_alpha(data)
        return (label, joined(data, fresh), alpha, False, data.n_requests)

    if "zoos" in scenarios:
        pairs += [zoo(f"11-model zoo {z}", 11, 100, z) for z in (0, 2)]
    if "unseen" in scenarios:
        pairs += [zoo(f"unseen 4-model zoo {z}", 4, 200, z) for z in (0, 1)]
        pairs += [zoo(f"unseen 11-model zoo {z} (alpha between its best two)", 11, 300, z, hard=True)
                  for z in (0, 1)]
    return pairs


def window_order(n: int, split: int | None, seed: int) -> np.ndarray:
    """Each window's requests, shuffled by the seed: the first pool then the rest, or two
    random halves."""
    rng = np.random.default_rng([seed, 19])
    if split is None:
        return rng.permutation(n)[:2 * (n // 2)]
    if n != 2 * split:
        raise ValueError(f"the two windows must be equally long: {split} and {n - split} requests")
    return np.concatenate([rng.permutation(split), split + rng.permutation(n - split)])


def one_run(data: RoutingData, X: np.ndarray, alpha: float, split: int | None, seed: int,
            fb: FeedbackConfig, call_cost: float, settings: dict) -> list[tuple]:
    """Per window: (satisfaction, cost with the judge's calls / the window's static
    mixture, own bound, first warning within the window or None, fallback share)."""
    order = window_order(data.n_requests, split, seed)
    stream = data.take(order)
    w = len(order) // 2
    router = RouterConfig(alpha=alpha, mode="contextual").with_settings(sla_window=w, **settings)
    sim = Simulation(stream, X[order], SimulationConfig(router, feedback_rate=0.2, seed=seed, shuffle=False,
                                                        feedback=fb))
    policy = sim.router.policy
    capped = np.zeros(len(order), bool)
    out = []
    for start in (0, w):
        for i in range(start, start + w):
            sim.step(1)
            capped[i] = policy.lam >= PRICE_CAP  # the price the step used (the policy's after it)
        status = sim.router.sla_status()  # the window's own, before the next one starts
        a = sim.arrays()
        win = slice(start, start + w)
        mix = static_mixture_lp(stream.solved[win].mean(0), stream.costs[win].mean(0), alpha)[1]
        calls = judge_calls(a["feedback"][win])
        first = status["first_at_risk"]
        out.append((float(a["satisfied"][win].mean()), (float(a["cost"][win].mean()) + calls * call_cost / w) / mix,
                    sim.router.certified_lower_bound(), None if first is None else first - start - 1,
                    float(np.mean(capped[win] & ~a["explored"][win]))))
    return out


def run(name: str, data: RoutingData, X: np.ndarray, alpha: float, split: int | None, seeds, judge: bool,
        jobs: int, settings: dict) -> list[dict]:
    from joblib import Parallel, delayed

    fb = FeedbackConfig(judge_fill=JUDGE_PRESETS["acpbench"]) if judge else FeedbackConfig()
    w = data.n_requests // 2 if split is None else split  # requests per window
    # a judge call at the cheapest model's mean cost per request (bench_honest_sla's price)
    call_cost = float(data.costs[:split].mean(0).min()) if judge else 0.0
    res = Parallel(n_jobs=jobs)(delayed(one_run)(data, X, alpha, split, s, fb, call_cost, settings) for s in seeds)
    rows = []
    for k, label in enumerate(("first", "next")):
        sat = np.array([r[k][0] for r in res])
        first = [r[k][3] for r in res]
        missed = sat < alpha
        rows.append(dict(scenario=name + (" + judge" if judge else ""), window=label, alpha=alpha, n=len(res),
                         met=int((~missed).sum()), sat=float(sat.mean()), sat_min=float(sat.min()),
                         lcb=float(np.mean([r[k][2] for r in res])), cost=float(np.mean([r[k][1] for r in res])),
                         fallback=float(np.mean([r[k][4] for r in res])), missed=int(missed.sum()),
                         warned=sum(1 for m, f in zip(missed, first) if m and f is not None and f < w / 2),
                         false_alarms=sum(1 for m, f in zip(missed, first) if not m and f is not None),
                         ratio=float(np.mean([r[1][1] / r[0][1] for r in res])), requests=w,
                         misses=[(s, r[k][0], r[k][1], r[k][3]) for s, r, m in zip(seeds, res, missed) if m]))
    return rows


def print_rows(rows: list[dict]) -> None:
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["window"] == "next" else "–"
        print(f"| {r['scenario']} | {r['window']} ({r['requests']:,}) | {100 * r['alpha']:.1f}% | {r['met']}/{r['n']} | "
              f"{'yes' if r['met'] >= seeds_needed(r['n']) else 'no'} | {100 * r['sat']:.1f}% ({100 * r['sat_min']:.1f}%) | "
              f"{100 * r['lcb']:.1f}% | {r['cost']:.2f}x | {ratio} | {100 * r['fallback']:.0f}% | "
              f"{r['warned']}/{r['missed']} | {r['false_alarms']} |", flush=True)


def print_misses(rows: list[dict]) -> None:
    """Each missed seed of each window: satisfaction, cost, its first warning in the window."""
    for r in rows:
        for seed, sat, cost, first in r["misses"]:
            warned = "not warned" if first is None else f"first warned at request {first + 1:,} of the window"
            print(f"  {r['scenario']}, {r['window']} window, seed {seed}: {100 * sat:.1f}% at {cost:.2f}x, {warned}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--misses", action="store_true", help="after each stream, list every missed seed of each window")
    ap.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of ContextualConfig (repeatable; values read as JSON where they parse)")
    args = ap.parse_args(argv)
    try:
        settings = policy_settings(args.settings)
        if "sla_window" in settings:
            raise ValueError("sla_window is this benchmark's own (one window per pool of requests)")
        RouterConfig(alpha=0.5, mode="contextual").with_settings(**settings)
    except (ValueError, TypeError) as err:
        ap.error(str(err))
    if args.seeds < 1 or args.first_seed < 0:
        ap.error("--seeds must be >= 1 and --first-seed >= 0")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    t0 = time.perf_counter()
    print(f"contextual router, seeds {seeds[0]}-{seeds[-1]} (met = {seeds_needed(args.seeds)}/{args.seeds}), "
          f"feedback rate 0.2, two SLA windows per run, the next on requests the first did not show"
          + (f"; settings {settings}" if settings else "; defaults"))
    print("\n| stream | window (requests) | alpha | seeds >= alpha | met | satisfaction mean (min) | own LCB "
          "| cost / static mixture | next / first | fallback share | missed seeds warned before half | false alarms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, data, alpha, with_judge, split in build_pairs(args.scenarios):
        X = embed_texts(data.texts)
        for judge in (False, True) if with_judge else (False,):
            rows = run(name, data, X, alpha, split, seeds, judge, args.jobs, settings)
            print_rows(rows)
            if args.misses:
                print_misses(rows)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
