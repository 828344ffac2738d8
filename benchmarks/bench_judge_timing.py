"""What the timing of the judge and the thumbs does to the contextual router's estimate
(issue 19; docs/RESULTS.md, "A judge on a share of the requests").

    python benchmarks/bench_judge_timing.py                  # 200 runs per row
    python benchmarks/bench_judge_timing.py --runs 50 --budget 0.5

The certificate's estimate rectifies each step's prediction with the user's thumbs
(``slarouter_core/policies/certificate.py``). That is unbiased only if (1) whether a step
goes to the judge does not depend on its thumbs and (2) late thumbs are divided by the
share of steps whose thumbs were due. The judge may also read the rated answers outside
its draw once their thumbs come, if those verdicts only calibrate it
(``judge_calibrate``). Each row runs the certificate alone on streams whose
truth is known (``slarouter_core.experiments.certificate_streams.known_truth_run``: 1,500
requests, satisfaction 0.625 on average, thumbs on a fifth, a judge 25 points too harsh
on good answers reading a share ``--budget`` of them) with one condition kept or broken,
under a text model that over-predicts (a constant 0.9) and one that under-predicts (0.35).

Columns: the estimate's mean error against the truth in points (± its standard error over
the runs), and the share of runs whose claimed lower bound (one-sided 95%, window mode) is
above the truth: at most 5% where the bound holds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slarouter_core.experiments.certificate_streams import known_truth_run  # noqa: E402
from slarouter_core.judge import JudgeModel  # noqa: E402
from slarouter_core.policies.certificate import Certificate  # noqa: E402

#: the certificate tests' judge: 25 points too harsh on good answers
HARSH = JudgeModel(fpr=0.05, fnr=0.25, name="harsh")
N, DELAY, ALPHA, DELTA = 1500, 50, 0.7, 0.05

#: (row name, known_truth_run settings): the router's rules first, then each rule broken
ROWS = (
    ("judge drawn whatever the thumbs, thumbs with their request", {}),
    (f"judge drawn whatever the thumbs, thumbs {DELAY} requests late", {"delay": DELAY}),
    ("the same, and the judge reads the other rated answers to calibrate itself, thumbs with their request",
     {"calibrate": True}),
    (f"the same, and the judge reads the other rated answers to calibrate itself, thumbs {DELAY} requests late",
     {"calibrate": True, "delay": DELAY}),
    ("judge reads every rated answer and the budget of the rest, thumbs with their request",
     {"judge_reads_rated": True}),
    (f"judge reads every rated answer and the budget of the rest, thumbs {DELAY} requests late",
     {"judge_reads_rated": True, "delay": DELAY}),
    (f"judge drawn whatever the thumbs, thumbs {DELAY} requests late, taken as given with their request",
     {"delay": DELAY, "ages": False}),
)
TEXT_MODELS = (("over-predicts (0.9)", 0.9), ("under-predicts (0.35)", 0.35))


def measure(settings: dict, predicted: float, budget: float, runs: int) -> tuple[float, float, float]:
    """(mean error in points, its standard error, share of runs with the bound above the truth)."""
    out = np.array([known_truth_run(Certificate(ALPHA, DELTA, "window", N), seed, N, judge=HARSH, budget=budget,
                                    predicted=predicted, **settings) for seed in range(runs)])
    err = 100 * (out[:, 1] - out[:, 0])
    return float(err.mean()), float(err.std(ddof=1) / np.sqrt(runs)), float(np.mean(out[:, 2] > out[:, 0]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="seeded streams per row (default 200)")
    ap.add_argument("--budget", type=float, default=0.25, help="share of answers the judge reads (default 0.25)")
    args = ap.parse_args(argv)
    if args.runs < 2:
        ap.error("--runs must be at least 2")
    if not 0.0 < args.budget <= 1.0:
        ap.error("--budget must be in (0, 1]")
    t0 = time.perf_counter()
    print(f"{args.runs} streams of {N} requests per row, thumbs on 20%, judge on {100 * args.budget:g}% of answers\n")
    head = " | ".join(f"text model {name}: error, bound above truth" for name, _ in TEXT_MODELS)
    print(f"| feedback timing | {head} |")
    print("|---|" + "---|" * len(TEXT_MODELS))
    for name, settings in ROWS:
        cells = []
        for _, predicted in TEXT_MODELS:
            err, se, miss = measure(settings, predicted, args.budget, args.runs)
            cells.append(f"{err:+.2f} ± {se:.2f} pts, {100 * miss:.0f}%")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
