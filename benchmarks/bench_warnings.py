"""How early the contextual router says "SLA at risk", and how often it says so where
alpha is met after all: the at-risk test's ``warn_z`` against its two errors (issue 19;
docs/RESULTS.md, "How early it warns").

    python benchmarks/bench_warnings.py                            # 20 seeds, demo, Llama-3, unseen zoos
    python benchmarks/bench_warnings.py --warn-z 1.6449 0.5 --seeds 40 --scenarios unseen
    python benchmarks/bench_warnings.py --warn-z 1.6449 1.0 --set warn_after=128   # the test waits for 128 thumbs

The issue asks that every missed seed be warned before half of its stream. The at-risk
test (``ContextualPolicy.risk_rate``) warns when even each model at an upper bound on its
level, ``warn_z`` posterior standard deviations above its mean (1.6449 by default: the
one-sided 95% bound), leaves the window's estimate likely below alpha. A lower ``warn_z``
reads the levels less generously: it warns misses sooner, and warns more runs that go on
to meet alpha. Per stream and ``warn_z``, on the same seeded streams (contextual mode,
defaults otherwise, feedback rate 0.2, alpha as in ``bench_honest_sla.py``, thumbs only):
runs that met alpha, the missed runs warned before half of the stream (request index below
n / 2, as ``bench_honest_sla.py`` counts them), the median request of a miss's first
warning, the met runs warned at some point ("false alarms"; on Llama-3 most met runs end
with a bound below alpha, so a warning there is no error of the bound's), and the median
request of their first warning. While at risk, exploration may label every model, so
routing moves a little with ``warn_z`` too (the "met" and cost columns).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_honest_sla import build_streams, run  # noqa: E402

from slarouter_core.cli import policy_settings  # noqa: E402
from slarouter_core.embedding_cache import embed_texts  # noqa: E402
from slarouter_core.experiments import seeds_needed  # noqa: E402
from slarouter_core.policies.contextual import ContextualConfig  # noqa: E402

SCENARIOS = ("demo", "llama", "unseen")
#: the default (one-sided 95%), 90%, 84% and 69% upper bounds on each model's level
WARN_Z = (ContextualConfig().warn_z, 1.2816, 1.0, 0.5)


def median_request(firsts: list) -> str:
    return f"{int(np.median(firsts)):,}" if firsts else "–"


def warning_row(name: str, warn_z: float, row: dict) -> str:
    """One table row from ``bench_honest_sla.run``'s row: its counts as that benchmark makes
    them (``warned``, ``missed``, ``false_alarms``), the medians from its ``firsts`` (per run,
    whether it missed and its first warning)."""
    missed = [f for ms, f in row["firsts"] if ms and f is not None]
    alarms = [f for ms, f in row["firsts"] if not ms and f is not None]
    return (f"| {name} | {warn_z:g} | {row['met']}/{row['n']} | {row['cost']:.2f}x | {row['warned']}/{row['missed']} | "
            f"{median_request(missed)} | {row['false_alarms']}/{row['met']} | {median_request(alarms)} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    ap.add_argument("--warn-z", nargs="+", type=float, default=list(WARN_Z),
                    help="the at-risk test's warn_z values to compare (standard deviations above each level)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                    help="another contextual setting for every row (repeatable; e.g. --set warn_after=128)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error("--seeds must be >= 1")
    try:
        extra_settings = policy_settings(args.settings)
    except ValueError as err:
        ap.error(str(err))
    if "warn_z" in extra_settings:
        ap.error("warn_z is this benchmark's own axis: give it with --warn-z")
    for z in args.warn_z:
        try:  # a value the policy refuses is refused before any stream runs
            ContextualConfig(**extra_settings, warn_z=z)
        except (ValueError, TypeError) as err:
            ap.error(f"--warn-z {z}: {err}")
    t0 = time.perf_counter()
    print(f"seeds={args.seeds} (met = {seeds_needed(args.seeds)}/{args.seeds}), feedback rate 0.2, thumbs only, "
          f"contextual defaults but warn_z{''.join(f', {k}={v}' for k, v in extra_settings.items())}\n")
    print("| stream | warn_z | met | cost / static mixture | misses warned before half | a miss's first warning "
          "(median request) | false alarms (met runs warned) | a false alarm's first warning (median request) |")
    print("|---|---|---|---|---|---|---|---|")
    seeds = range(args.seeds)
    for name, data, alpha, _judge, *extra in build_streams(args.scenarios):
        X = embed_texts(data.texts)
        for z in args.warn_z:
            row = run(name, data, X, alpha, seeds, ["contextual"], False, args.jobs,
                      {**(extra[0] if extra else {}), **extra_settings, "warn_z": z})[0]
            print(warning_row(name, z, row), flush=True)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
