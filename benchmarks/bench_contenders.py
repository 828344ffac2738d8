"""How often the contextual router's contenders test writes a model off on its first
labels (issue 19; docs/STUDIES.md, "Written off on its first thumbs").

    python benchmarks/bench_contenders.py                          # demo, Llama-3, unseen and fresh zoos
    python benchmarks/bench_contenders.py --scenarios fresh --labels 1 2 4 8 16 32
    python benchmarks/bench_contenders.py --floor 3     # no write-off before a model's third thumbs
    python benchmarks/bench_contenders.py --q 0.99      # the test at its 99% quantile (ContextualConfig.contender_q)

While no price reaches the target, exploration labels only the models that may be the
best (``ContextualPolicy.may_be_best``: the exact 95% quantile of a model's Beta posterior
over its request-blind thumbs, under the uniform prior, reaches the leader's posterior
mean), and a committed fallback serves the leader alone, so a model that fails the test
gets no more labels while the price stays capped: a write-off on a few unlucky thumbs can
last the stream. The test is checked at every step, on one label as on a hundred.

For each model of each stream this prints, exactly (a sum over every sequence of thumbs,
no simulation), the probability that a model of its true accuracy fails the test at some
point within its first K request-blind thumbs, against the best of the other models read
at its true accuracy (a leader with many labels; an early leader reads its own noise too,
which only adds write-offs). A model as good as its leader fails it on its first thumbs
down whenever the leader reads above 1 - sqrt(0.05) = 77.6% (one thumbs down leaves
Beta(1, 2), whose 95% quantile is that). The same figure for a model far below its leader
is the test doing its job: the labels it saves are what Llama-3's headroom needs. The
last column is that side: the mean number of a model's first 64 thumbs it gets while still
a contender, what the test lets exploration spend on it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_honest_sla import SCENARIOS, build_streams  # noqa: E402

from slarouter_core.policies.contextual import beta_contenders  # noqa: E402

#: the leader's posterior size: a leader whose level is known (its mean is what the test reads)
LEADER_SIZE = 1e9


def write_off_curve(level: float, leader: float, horizon: int, floor: int = 0, q: float = 0.95) -> np.ndarray:
    """``curve[n - 1]``: P(a model of true ``level`` has failed the contenders test at some
    point within its first n thumbs), n = 1 to ``horizon``, against a leader read at
    ``leader``: the thumbs counted exactly (a model still in the running after n thumbs
    with s up carries on). ``floor``: the test does not act before a model has that many
    thumbs (a variant, not the policy's); ``q``: the test's quantile (``contender_q``)."""
    alive = np.array([1.0])  # alive[s]: still a contender after n thumbs, s of them up
    gone, curve = 0.0, []
    for n in range(1, horizon + 1):
        nxt = np.zeros(n + 1)
        nxt[1:] += alive * level
        nxt[:-1] += alive * (1.0 - level)
        s = np.arange(n + 1)
        # one two-model zoo per count of thumbs up: the model's posterior beside the leader's
        mean = np.stack([(s + 1.0) / (n + 2.0), np.full(n + 1, leader)], axis=1)
        size = np.stack([np.full(n + 1, n + 2.0), np.full(n + 1, LEADER_SIZE)], axis=1)
        keep = beta_contenders(mean, size, q)[:, 0] | (n < floor)
        gone += float(nxt[~keep].sum())
        alive = np.where(keep, nxt, 0.0)
        curve.append(gone)
    return np.array(curve)


def write_off_chance(level: float, leader: float, labels: list[int], floor: int = 0,
                     q: float = 0.95) -> list[float]:
    """The chance of :func:`write_off_curve` within each K of ``labels`` thumbs."""
    curve = write_off_curve(level, leader, max(labels), floor, q)
    return [float(curve[k - 1]) for k in labels]


#: the thumbs over which ``thumbs_while_in`` counts
SPENT_HORIZON = 64


def thumbs_while_in(level: float, leader: float, floor: int = 0, horizon: int = SPENT_HORIZON,
                    q: float = 0.95) -> float:
    """The mean number of a model's first ``horizon`` thumbs that it gets while still a
    contender (its first always): what the test lets exploration spend on it, each thumb
    five served requests at feedback rate 0.2."""
    curve = write_off_curve(level, leader, horizon, floor, q)
    return 1.0 + float(np.sum(1.0 - curve[:-1]))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=["demo", "llama", "unseen", "fresh"])
    ap.add_argument("--labels", nargs="+", type=int, default=[1, 2, 5, 10, 16],
                    help="thumbs within which a write-off is counted (each a column)")
    ap.add_argument("--floor", type=int, default=0,
                    help="no write-off before a model has this many thumbs (a variant; the policy has none)")
    ap.add_argument("--q", type=float, default=0.95,
                    help="the test's quantile (ContextualConfig.contender_q; default 0.95, the policy's default)")
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if min(args.labels) < 1 or args.floor < 0 or not 0.5 <= args.q < 1.0:
        ap.error("--labels must be positive, --floor not negative and --q in [0.5, 1)")
    labels = sorted(set(args.labels))
    t0 = time.perf_counter()
    print("Each model against the best of the others at their true accuracies (the uniform prior, "
          f"the exact {100 * args.q:g}% quantile" + (f"; no write-off before {args.floor} thumbs" if args.floor else "")
          + "); the chance it fails the contenders test within its first K request-blind thumbs:\n")
    print("| stream | model | accuracy | cost / cheapest | against | " + " | ".join(f"K = {k}" for k in labels)
          + f" | thumbs while in (of {SPENT_HORIZON}) |")
    print("|---|---|---|---|---|" + "---|" * len(labels) + "---|")
    seen = set()
    for name, data, _alpha, *_ in build_streams(args.scenarios):
        if name in seen:  # a stream listed twice (with and without a judge) once
            continue
        seen.add(name)
        acc, cost = data.solved.mean(0), data.costs.mean(0)
        for m in np.argsort(cost):
            other = np.delete(acc, m).max()
            chance = write_off_chance(float(acc[m]), float(other), labels, args.floor, args.q)
            spent = thumbs_while_in(float(acc[m]), float(other), args.floor, q=args.q)
            print(f"| {name} | {data.models[m]} | {100 * acc[m]:.1f}% | {cost[m] / cost.min():.1f}x | "
                  f"{100 * other:.1f}% | " + " | ".join(f"{100 * c:.1f}%" for c in chance) + f" | {spent:.1f} |",
                  flush=True)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
