"""Does SLARouter hold the SLA on real data? (issue 5; figures in docs/RESULTS.md)

Per benchmark (each its own stream, alpha = midpoint of the two most expensive models'
accuracy), 3 seeds: whole-stream satisfaction (mean over seeds), operating cost, and the
static mixture's and the clairvoyant oracle's cost on the same stream.

    python benchmarks/bench_sla.py --mode paper
    python benchmarks/bench_sla.py --mode guarded
    python benchmarks/bench_sla.py --mode guarded --ablate levels
    python benchmarks/bench_sla.py --mode guarded --rate 0.05
    python benchmarks/bench_sla.py --mode guarded --feedback bursty
    python benchmarks/bench_sla.py --mode guarded --feedback drift --mixed

``--set key=value`` overrides any RouterConfig field (e.g. ``--set margin_z=0.5``,
``--set policy=thompson``). The last lines summarise the table: benchmarks meeting alpha,
and (with baselines) the geometric-mean cost / static mixture and the worst shortfall.
Timings printed are wall-clock seconds on this machine (not a test).
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slarouter_core.baselines import clairvoyant_oracle, static_mixture  # noqa: E402
from slarouter_core.data import midpoint_alpha  # noqa: E402
from slarouter_core.embedding_cache import embed_texts  # noqa: E402
from slarouter_core.experiments import load_any  # noqa: E402
from slarouter_core.feedback import KINDS, FeedbackConfig  # noqa: E402
from slarouter_core.judge import JUDGE_PRESETS  # noqa: E402
from slarouter_core.router import GUARDED_SWITCHES, RouterConfig  # noqa: E402
from slarouter_core.simulator import PAPER_SEEDS, SimulationConfig, simulate  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "messplus_llama3"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--mode", default="guarded", choices=["paper", "guarded"])
    ap.add_argument("--rate", type=float, default=0.2)
    ap.add_argument("--feedback", default="iid", choices=KINDS)
    ap.add_argument("--judge", default=None, choices=sorted(JUDGE_PRESETS))
    ap.add_argument("--ablate", default=None, choices=sorted(GUARDED_SWITCHES))
    ap.add_argument("--set", action="append", default=[], help="RouterConfig field=value")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(PAPER_SEEDS))
    ap.add_argument("--benchmarks", nargs="+", default=None)
    ap.add_argument("--exclude", nargs="+", default=["mmlu_abstract_algebra"])
    ap.add_argument("--mixed", action="store_true", help="one stream of all the benchmarks")
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--shat-bias", action="store_true",
                    help="instead: the served model's mean shat vs its true satisfaction on steps "
                         "without feedback (what the paper's queue substitutes)")
    ap.add_argument("--text-signal", action="store_true",
                    help="instead: how well the embeddings predict each model's success (ROC AUC)")
    args = ap.parse_args(argv)

    data = load_any(args.data)
    emb = embed_texts(data.texts, args.encoder)
    names = args.benchmarks or [b for b in data.benchmark_names if b not in args.exclude]
    if args.text_signal:
        return text_signal(data, emb, names, args.seeds)
    if args.shat_bias:
        print("| benchmark | mean shat (served, no feedback) | true satisfaction there | large-model calls |")
        print("|---|---|---|---|")
        for b in names:
            sub = data.select([b])
            X = emb[data.benchmarks == b]
            cfg = RouterConfig(alpha=midpoint_alpha(sub), mode=args.mode)
            r = []
            for seed in args.seeds:
                a = simulate(sub, X, SimulationConfig(cfg, feedback_rate=args.rate, seed=seed)).arrays()
                nf = a["feedback"] < 0
                r.append((a["shat_served"][nf].mean(), a["satisfied"][nf].mean(), (a["model"] == sub.n_models - 1).mean()))
            m = np.mean(r, axis=0)
            print(f"| {b} | {m[0]:.3f} | {m[1]:.3f} | {100 * m[2]:.0f}% |")
        return 0
    overrides = {}
    for kv in args.set:
        k, v = kv.split("=", 1)
        try:
            overrides[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            overrides[k] = v
    if args.ablate:
        overrides.update(GUARDED_SWITCHES[args.ablate])
    fcfg = FeedbackConfig(kind=args.feedback, judge=JUDGE_PRESETS[args.judge] if args.judge else None)
    groups = [names] if args.mixed else [[b] for b in names]
    print(f"mode={args.mode} rate={args.rate} feedback={fcfg.kind} judge={args.judge} "
          f"ablate={args.ablate} set={overrides} seeds={args.seeds}")
    print("| benchmark | alpha | satisfaction (mean ± sd) | SLA | cost MJ | static mixture MJ (its satisfaction) "
          "| oracle MJ | cost / static | calls " + "/".join(data.models) + " |")
    print("|---|---|---|---|---|---|---|---|---|")
    bench = data.benchmarks
    met = cheap = 0
    ratios, shortfalls = [], []
    t_all = time.perf_counter()
    t_sim = 0.0
    for group in groups:
        sub = data.select(group)
        X = emb[np.isin(bench, group)]
        a = midpoint_alpha(sub)
        cfg = RouterConfig(alpha=a, mode=args.mode).with_settings(**overrides)
        sats, costs, calls = [], [], []
        for seed in args.seeds:
            t0 = time.perf_counter()
            s = simulate(sub, X, SimulationConfig(cfg, feedback_rate=args.rate, seed=seed, feedback=fcfg)).summary()
            t_sim += time.perf_counter() - t0
            sats.append(s.satisfaction)
            costs.append(s.operating_cost / 1e6)
            calls.append(s.call_ratio)
        sat, cost = float(np.mean(sats)), float(np.mean(costs))
        if args.no_baselines:
            sm = orc = sm_sat = float("nan")
        else:
            sms = [static_mixture(sub, X, a, sd, args.rate).summary for sd in args.seeds]
            sm = float(np.mean([x.operating_cost / 1e6 for x in sms]))
            sm_sat = float(np.mean([x.satisfaction for x in sms]))
            orc = clairvoyant_oracle(sub, X, a, args.seeds[0], args.rate).summary.operating_cost / 1e6
        ok = sat >= a
        met += ok
        ratios.append(cost / sm)
        shortfalls.append(a - sat)
        cheap += cost <= sm
        name = "+".join(group) if len(group) < 3 else f"mixed ({len(group)} benchmarks)"
        print(f"| {name} | {a:.3f} | {sat:.3f} ± {np.std(sats, ddof=1) if len(sats) > 1 else 0:.3f} | "
              f"{'met' if ok else f'missed by {a - sat:.3f}'} | {cost:.3f} | {sm:.3f} ({sm_sat:.3f}) | {orc:.3f} | "
              f"{cost / sm:.2f} | {'/'.join(f'{100 * x:.0f}%' for x in np.mean(calls, axis=0))} |",
              flush=True)
    print(f"\nSLA met on {met}/{len(groups)}; cost <= static mixture on {cheap}/{len(groups)}; "
          f"simulation time {t_sim:.1f} s ({len(groups) * len(args.seeds)} runs), total {time.perf_counter() - t_all:.1f} s")
    if not args.no_baselines:
        print(f"geometric-mean cost / static mixture {float(np.exp(np.mean(np.log(ratios)))):.2f}; "
              f"worst shortfall {max(0.0, max(shortfalls)):.3f} (alpha - satisfaction, 0 = met everywhere)")
    return 0


def text_signal(data, emb, names, seeds) -> int:
    """Upper bound on the text signal a router can use: a logistic regression on the
    embeddings, trained on a random 20% of the requests with EVERY model's label (more than
    any router sees), ROC AUC on the other 80%, mean over seeds. 0.5 = no signal."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    print("| benchmark | " + " | ".join(f"AUC {m}" for m in data.models) + " |")
    print("|---|" + "---|" * data.n_models)
    for b in names:
        mask = data.benchmarks == b
        X, Y = emb[mask], data.solved[mask]
        aucs = np.zeros(data.n_models)
        for seed in seeds:
            idx = np.random.default_rng(seed).permutation(len(X))
            tr, te = idx[: len(X) // 5], idx[len(X) // 5:]
            for j in range(data.n_models):
                clf = LogisticRegression(C=1.0, max_iter=1000).fit(X[tr], Y[tr, j])
                aucs[j] += roc_auc_score(Y[te, j], clf.predict_proba(X[te])[:, 1]) / len(seeds)
        print(f"| {b} | " + " | ".join(f"{a:.3f}" for a in aucs) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
