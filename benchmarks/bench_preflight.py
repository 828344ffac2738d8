"""The pre-flight check (``slarouter preflight``) beside the router's own runs.

    python benchmarks/bench_preflight.py                 # 20 seeds, the honest-SLA streams
    python benchmarks/bench_preflight.py --seeds 5 --scenarios demo unseen
    python benchmarks/bench_preflight.py --penalties   # the text floor under other penalties

Before any request, ``slarouter_core.preflight`` says from each model's accuracy and mean
cost, the feedback rate and the window whether the contextual router's bound can end a
window at alpha, with what margin, and the least a text-blind router that certifies it
pays. This runs the contextual router (defaults) on the streams of
``bench_honest_sla.py`` and sets each prediction beside what the runs did: the bound's
width at the window's end (the margin), how many runs ended with their bound clearing
alpha (none, where the check says it cannot be certified), and the cost. The check is
text-blind: where the router's text model predicts the outcome its margin is smaller,
and where it learns while serving it pays more than the floor. The text floor
(``preflight --text``) is what the router's text model, learned from a stream's thumbs
(with the judge, and its calibrated verdicts on the rest) on half of it, pays on the
other half with perfect control, the judge's calls included: no router with this text
model and these labels pays less.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_honest_sla import build_streams, run  # noqa: E402

from slarouter_core.embedding_cache import embed_texts  # noqa: E402
from slarouter_core.judge import JUDGE_PRESETS  # noqa: E402
from slarouter_core.preflight import PreflightConfig, check_text_floor, preflight  # noqa: E402

SCENARIOS = ("demo", "llama", "zoos", "unseen")


def check(data, alpha: float, judge: bool):
    """The pre-flight check of a stream as its router runs it (the window: the stream; the
    judge at the cheapest model's mean cost per call, as the benchmark charges it)."""
    cfg = PreflightConfig(alpha=alpha, feedback_rate=0.2, window=data.n_requests,
                          judge=JUDGE_PRESETS["acpbench"] if judge else None)
    return preflight(data.solved.mean(0), data.costs.mean(0), cfg, data.models)


#: (c_shared, c_model) of the text floor's penalty table: the defaults, the offsets ten
#: times looser (the defaults before c_model=0.1), then the shared direction ever tighter,
#: the offsets ten times tighter than it
PENALTIES = ((10.0, 0.1), (10.0, 1.0), (3.0, 0.3), (1.0, 0.1), (0.3, 0.03))


def penalties(scenarios) -> int:
    """The text floor of each stream (with the judge: its verdicts and calls too) as the
    text model's penalties tighten:
    the defaults suit the demo, a stronger penalty Llama-3 (its outcomes vary within what
    the encoder tells apart, so a loose fit learns noise)."""
    print("text floor (held out, a stream's labels, perfect control) / static mixture, by the text model's "
          "penalties (c_shared, c_model); the first column is the router's default\n")
    print("| stream | " + " | ".join(f"{cs:g}, {cm:g}" for cs, cm in PENALTIES) + " |")
    print("|---|" + "---|" * len(PENALTIES))
    for name, data, alpha, with_judge, *_ in build_streams(scenarios):
        X = embed_texts(data.texts)
        for judge in (False, True) if with_judge else (False,):
            pre = check(data, alpha, judge)
            if pre.certified_cost is None:
                continue
            floors = [check_text_floor(pre, data.solved, data.costs, X, c_shared=cs, c_model=cm)[0]
                      for cs, cm in PENALTIES]
            print(f"| {name}{' + judge' if judge else ''} | " + " | ".join(f"{f:.2f}x" for f in floors) + " |")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--penalties", action="store_true",
                    help="only the text floor of each stream under other penalties of the text model (no runs)")
    args = ap.parse_args(argv)
    if args.penalties:
        return penalties(args.scenarios)
    t0 = time.perf_counter()
    seeds = list(range(args.seeds))
    print(f"contextual router, defaults, feedback rate 0.2, seeds 0-{args.seeds - 1}; pre-flight: text-blind, "
          "the window = the stream\n")
    print("| stream | alpha | pre-flight: certifiable (best model's bound at the end) | margin, points: pre-flight / "
          "router | runs whose bound cleared alpha | runs >= alpha | cost / static mixture: text-blind floor / "
          "text floor (held out) / router |")
    print("|---|---|---|---|---|---|---|")
    notes = []
    for name, data, alpha, with_judge, *_ in build_streams(args.scenarios):
        X = embed_texts(data.texts)
        for judge in (False, True) if with_judge else (False,):
            pre = check(data, alpha, judge)
            (row,) = run(name, data, X, alpha, seeds, ["contextual"], judge, args.jobs)
            verdict = (f"yes ({100 * pre.alpha_max:.1f}%, +{100 * pre.headroom:.2f})" if pre.certifiable else
                       f"**no** ({100 * pre.alpha_max:.1f}%, {100 * pre.headroom:.2f})")
            floor = "–" if pre.certified_cost is None else f"{pre.ratio(pre.certified_cost):.2f}x"
            # with the judge: its calibrated verdicts on the rest too, and its calls' cost
            text = ("–" if pre.certified_cost is None else
                    f"{check_text_floor(pre, data.solved, data.costs, X)[0]:.2f}x")
            print(f"| {row['scenario']} | {100 * alpha:.1f}% | {verdict} | {100 * pre.margin:.2f} / "
                  f"{100 * row['margin']:.2f} | {row['cleared']}/{row['n']} | {row['met']}/{row['n']} | "
                  f"{floor} / {text} / {row['cost']:.2f}x |")
            if not pre.certifiable:
                notes.append((row["scenario"], pre.report()[1:]))
    for scenario, lines in notes:
        print(f"\n{scenario}:")
        for line in lines:
            print(f"  {line}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
