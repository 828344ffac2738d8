"""Does the contextual router turn the request text into savings, with confidence?

Prints every figure of the contextual-mode issue in one run, with the paper and guarded
modes side by side (docs/RESULTS.md shows its output next to this command):

    python benchmarks/bench_contextual.py                 # 20 seeds, every scenario
    python benchmarks/bench_contextual.py --seeds 5 --scenarios demo llama-mixed
    python benchmarks/bench_contextual.py --ablate text   # one part of the contextual mode off

"Met" = whole-stream satisfaction >= alpha in at least 18 of 20 seeds (90% of the seeds).
Cost is the mean over seeds of the stream's mean cost per request, divided by the static
mixture's expected cost on the same stream (the cheapest text-blind mix of models that
reaches alpha with the stream's own accuracies, known in hindsight) or by the most
accurate single model's. "own LCB" is the router's end-of-stream 90% lower confidence
bound on its satisfaction (paper mode claims none). Defaults only, no per-dataset tuning.

Scenarios (all at feedback rate 0.2 unless named otherwise):
1. demo: the built-in synthetic demo, one mixed stream, midpoint alpha.
2. llama-mixed: the shared Llama-3 data, 8 benchmarks interleaved, pooled midpoint alpha.
3. per-benchmark: each Llama-3 benchmark on its own, midpoint alpha; cost / most accurate
   model. A benchmark is held to the goal only where that model itself clears alpha by at
   least a point (SciQ and SocialIQa sit within noise of it and are reported only).
4. llama-mixed at rate 0.05, and under bursty and negativity-biased feedback.
5. swapped-zoo: llama-mixed with the medium and large models' costs swapped, so the
   priciest model is not the most accurate (a zoo the defaults were not tuned on).
   specialist-zoo: a synthetic zoo of topic specialists (``synthetic.SPECIALIST_MODELS``)
   whose priciest model, a generalist, is not the best on any topic: only a router that
   learns from the text which model is good saves here.
``--scenarios random-zoos`` (not in the default run): three seeded synthetic zoos of 11
models with random per-topic skills and log-uniform costs unrelated to skill (dollars per
request from 0.1 to 20), each at its midpoint alpha.
``--scenarios phases`` (not in the default run) shows where the contextual mode's cost goes,
on seed 0 of the demo and of llama-mixed: per stretch of the stream, the share of requests
on which no price reached the plan's target (the policy then serves its fallback, one
model for every request), their cost and satisfaction, and at the end the headroom
(the most accurate model's accuracy minus alpha) against the certificate's margin.
A final table, "ceilings", bounds what the text can buy on each mixed dataset, as cost /
static mixture at alpha and above it (a router that must certify 90% of its seeds from
1 label in 5 needs a margin of 1 to 3 points):
* linear text: the cheapest plan on a multi-task logistic regression of the MiniLM
  embedding fitted on every label of every model (in sample, so optimistic);
* known context: the cheapest per-request plan for a router that knows each request's
  hidden context exactly (the demo's difficulty, which its lead phrase reveals; the
  Llama-3 benchmark; the specialist zoo's topic and difficulty) and each model's exact
  accuracy in every context. No router that reads only the text can do better, so a goal
  below this figure cannot be met.
The per-benchmark scenario adds a table of the labels needed to tell the two most
accurate models apart (one-sided 90% confidence, 90% power) against the labels the whole
stream gives at rate 0.2: a router that assumes nothing from cost order cannot find the
best model sooner.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slarouter_core.baselines import static_mixture_lp  # noqa: E402
from slarouter_core.baselines.oracle import oracle_lp  # noqa: E402
from slarouter_core.data import RoutingData, from_frame, midpoint_alpha  # noqa: E402
from slarouter_core.embedding_cache import embed_texts  # noqa: E402
from slarouter_core.experiments import PAPER_EXCLUDE, load_any, parse_method, seeds_needed  # noqa: E402
from slarouter_core.feedback import FeedbackConfig  # noqa: E402
from slarouter_core.policies.contextual import CONTEXTUAL_SWITCHES, ContextualConfig  # noqa: E402
from slarouter_core.policies.text_model import PRICE_CAP as _PRICE_CAP  # noqa: E402
from slarouter_core.policies.text_model import fit_multitask_logistic, price_for_target  # noqa: E402
from slarouter_core.preflight import labels_to_separate  # noqa: E402
from slarouter_core.router import NO_FEEDBACK, RouterConfig, SLARouter  # noqa: E402
from slarouter_core.simulator import SimulationConfig, simulate, stream_plan_full  # noqa: E402
from slarouter_core.synthetic import (SPECIALIST_MODELS, demo_difficulty, generate_demo_frame,  # noqa: E402
                                     random_zoo_models)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "messplus_llama3"
DEMO = ROOT / "data" / "demo.parquet"
SCENARIOS = ("demo", "llama-mixed", "per-benchmark", "llama-rate-0.05", "llama-bursty", "llama-negative",
             "swapped-zoo", "specialist-zoo", "text-ceiling")
#: above alpha, in points, for the ceilings table
CEILING_MARGINS = (0.0, 1.0, 2.0)
MODES = ("paper", "guarded", "contextual")
#: a benchmark is held to the per-benchmark goal when its best model clears alpha by this
HOLD_MARGIN = 0.01


def one_run(data: RoutingData, X: np.ndarray, cfg: RouterConfig, rate: float, seed: int,
            fb: FeedbackConfig) -> tuple[float, float, float, float]:
    sim = simulate(data, X, SimulationConfig(cfg, feedback_rate=rate, seed=seed, feedback=fb))
    a = sim.arrays()
    best = int(np.argmax(data.solved.mean(0)))
    return (float(a["satisfied"].mean()), float(a["cost"].mean()), sim.router.certified_lower_bound(),
            float((a["model"] == best).mean()))


def with_costs_swapped(data: RoutingData, i: int, j: int) -> RoutingData:
    frame = data.frame.copy()
    a, b = (f"{data.models[k]}_{data.cost_metric}" for k in (i, j))
    frame[a], frame[b] = data.frame[b].to_numpy(), data.frame[a].to_numpy()
    return from_frame(frame, cost=data.cost_metric)


def run_scenario(name: str, data: RoutingData, X: np.ndarray, alpha: float, seeds, modes, ctx: ContextualConfig,
                 rate: float = 0.2, fb: FeedbackConfig = FeedbackConfig(), jobs: int = 1,
                 reference: str = "static") -> list[dict]:
    from joblib import Parallel, delayed

    mix = static_mixture_lp(data.solved.mean(0), data.costs.mean(0), alpha)[1]
    best = float(data.costs.mean(0)[int(np.argmax(data.solved.mean(0)))])
    cfgs = {m: RouterConfig(alpha=alpha, mode=m, **({"settings": ctx} if m == "contextual" else {}))
            for m in modes}
    tasks = [(m, s) for m in modes for s in seeds]
    out = Parallel(n_jobs=jobs)(delayed(one_run)(data, X, cfgs[m], rate, s, fb) for m, s in tasks)
    rows = []
    for m in modes:
        res = np.array([r for (mm, _), r in zip(tasks, out) if mm == m])
        sats, costs, lcbs, best_share = res[:, 0], res[:, 1], res[:, 2], res[:, 3]
        met = int((sats >= alpha).sum())
        rows.append(dict(scenario=name, mode=m, alpha=alpha, met=met, n=len(seeds),
                         held=met >= seeds_needed(len(seeds)), sat=float(sats.mean()), sat_min=float(sats.min()),
                         lcb=float(np.nanmean(lcbs)) if np.isfinite(lcbs).any() else math.nan,
                         vs_static=float(costs.mean() / mix), vs_best=float(costs.mean() / best),
                         best_share=float(best_share.mean())))
    return rows


def print_rows(rows: list[dict], goal: str) -> None:
    print(f"\n{goal}\n")
    print("| scenario | mode | alpha | seeds >= alpha | met (18/20) | satisfaction mean (min) | own LCB "
          "| cost / static mixture | cost / most accurate model | most accurate model's share |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lcb = "–" if math.isnan(r["lcb"]) else f"{100 * r['lcb']:.1f}%"
        print(f"| {r['scenario']} | {r['mode']} | {100 * r['alpha']:.1f}% | {r['met']}/{r['n']} | "
              f"{'yes' if r['held'] else 'no'} | {100 * r['sat']:.1f}% ({100 * r['sat_min']:.1f}%) | {lcb} | "
              f"{r['vs_static']:.2f}x | {r['vs_best']:.2f}x | {100 * r['best_share']:.0f}% |", flush=True)


def phases(name: str, data: RoutingData, X: np.ndarray, alpha: float, ctx: ContextualConfig, seed: int = 0) -> None:
    """Seed ``seed`` served request by request, reading each decision's price: where the
    cost goes (see the module docstring)."""
    cfg = RouterConfig(alpha=alpha, mode="contextual", settings=ctx)
    sc = SimulationConfig(cfg, feedback_rate=0.2, seed=seed)
    order, plan, router_seed = stream_plan_full(data.n_requests, data.solved, 0.2, seed, True, sc.feedback, None)
    r = SLARouter(cfg, data.n_models, X.shape[1], seed=router_seed)
    N = data.n_requests
    capped, model = np.zeros(N, bool), np.zeros(N, np.int64)
    for i in range(N):
        d = r.decide(X[order[i]], data.costs[order[i]])
        f = int(plan.feedback[i, d.model])
        r.observe(d, None if f == NO_FEEDBACK else f)
        capped[i], model[i] = d.q >= _PRICE_CAP, d.model
    cost, sat = data.costs[order, model], data.solved[order, model]
    mix = static_mixture_lp(data.solved.mean(0), data.costs.mean(0), alpha)[1]
    print(f"\n{name}, seed {seed}: satisfaction {100 * sat.mean():.1f}% (alpha {100 * alpha:.1f}%), "
          f"cost {cost.mean() / mix:.2f}x the static mixture\n")
    print("| requests | no price reaches the target | cost / static mixture | satisfaction |")
    print("|---|---|---|---|")
    for a, b in ((0, N // 10), (N // 10, N // 2), (N // 2, N)):
        print(f"| {a + 1}-{b} | {100 * capped[a:b].mean():.0f}% | {cost[a:b].mean() / mix:.2f}x | "
              f"{100 * sat[a:b].mean():.1f}% |")
    pol = r.policy
    print(f"\nheadroom: most accurate model {100 * data.solved.mean(0).max():.1f}% - alpha = "
          f"{100 * (data.solved.mean(0).max() - alpha):.1f} points; the certificate's margin at the end "
          f"(its bound's width / t) = {100 * pol.cert.width(pol.cert.var) / N:.1f} points", flush=True)


def linear_text_plans(data: RoutingData, X: np.ndarray, targets) -> list[float]:
    """Mean cost of the cheapest plan on an in-sample multi-task logistic fit to every label
    (fitted once) whose *real* satisfaction reaches each of ``targets``."""
    N, M = data.solved.shape
    Y, C = data.solved, data.costs
    theta = fit_multitask_logistic(np.repeat(X, M, 0), np.tile(np.arange(M), N), Y.reshape(-1), M, 10.0, 1.0)
    D = X.shape[1]
    W = (theta[:D][None, :] + theta[D:D + D * M].reshape(M, D)).T
    P = 1.0 / (1.0 + np.exp(-(X.astype(np.float64) @ W + theta[-M:])))
    rows = np.arange(N)
    out = []
    for target in targets:
        lo, hi = 0.0, 1.0
        for _ in range(30):  # the plan target whose real satisfaction reaches the target
            mid = (lo + hi) / 2
            m = np.argmin(C - price_for_target(P, C, mid) * P, axis=1)
            lo, hi = (mid, hi) if Y[rows, m].mean() < target else (lo, mid)
        m = np.argmin(C - price_for_target(P, C, hi) * P, axis=1)
        out.append(float(C[rows, m].mean()))
    return out


def known_context_plans(data: RoutingData, context: np.ndarray, targets) -> list[float]:
    """Mean cost of the cheapest per-request plan that knows each request's context and each
    model's exact accuracy in it (the per-request LP on per-context accuracies), per target."""
    S = np.zeros(data.solved.shape)
    for c in np.unique(context):
        S[context == c] = data.solved[context == c].mean(0)
    return [oracle_lp(S, data.costs, target)[1] / data.n_requests for target in targets]


def ceilings(name: str, data: RoutingData, X: np.ndarray, context: np.ndarray, alpha: float) -> str:
    mix = static_mixture_lp(data.solved.mean(0), data.costs.mean(0), alpha)[1]
    targets = [alpha + mg / 100 for mg in CEILING_MARGINS]
    costs = linear_text_plans(data, X, targets) + known_context_plans(data, context, targets)
    return f"| {name} | {100 * alpha:.1f}% | " + " | ".join(f"{v / mix:.2f}x" for v in costs) + " |"


def labels_needed(sub: RoutingData) -> tuple[float, float]:
    """``(gap, labels per model)``: the two most accurate models' accuracy gap and the labels
    each needs so that a one-sided 90% test tells them apart with 90% power."""
    acc = np.sort(sub.solved.mean(0))[::-1]
    return float(acc[0] - acc[1]), labels_to_separate(acc[0], acc[1])


def specialist_zoo() -> RoutingData:
    """The synthetic specialist zoo (3,000 requests, seed 0; the demo's texts)."""
    return from_frame(generate_demo_frame(3000, 0, SPECIALIST_MODELS), cost="energy_joules")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20, help="seeds per scenario and mode (default 20)")
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS + ("phases", "random-zoos"))
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--ablate", default=None, choices=sorted(CONTEXTUAL_SWITCHES),
                    help="switch one part of the contextual mode off (docs/IMPROVED.md)")
    ap.add_argument("--contextual", nargs="+", default=[], metavar="KEY=VALUE",
                    help="contextual settings other than the defaults, e.g. clusters=16")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--encoder", default="minilm")
    args = ap.parse_args(argv)
    ctx = ContextualConfig(**(CONTEXTUAL_SWITCHES[args.ablate] if args.ablate else {}))
    if args.contextual:
        settings = parse_method("slarouter:" + ",".join(args.contextual)).params  # as compare reads them
        ctx = RouterConfig(alpha=0.5, mode="contextual", settings=ctx).with_settings(**settings).settings
    seeds = list(range(args.seeds))
    t0 = time.perf_counter()
    print(f"seeds={args.seeds} (met = {seeds_needed(args.seeds)}/{args.seeds}) modes={args.modes} "
          f"contextual={ctx} ablate={args.ablate}")

    if "demo" in args.scenarios or "phases" in args.scenarios:
        demo = load_any(DEMO)
        Xd = embed_texts(demo.texts, args.encoder)
    if "phases" in args.scenarios:
        phases("demo (mixed)", demo, Xd, midpoint_alpha(demo), ctx)
    if "demo" in args.scenarios:
        print_rows(run_scenario("demo (mixed)", demo, Xd, midpoint_alpha(demo), seeds, args.modes, ctx,
                                jobs=args.jobs), "Goal 1: built-in demo, mixed stream, midpoint alpha "
                   "(target: met at <= 0.6x the static mixture)")
    if "random-zoos" in args.scenarios:
        rows = []
        for z in range(3):
            zoo = from_frame(generate_demo_frame(3000, z, random_zoo_models(11, 100 + z)), cost="energy_joules")
            acc, cost = zoo.solved.mean(0), zoo.costs.mean(0)
            best = int(np.argmax(acc))
            print(f"\nrandom zoo {z}: most accurate model {100 * acc[best]:.1f}% ({int((cost > cost[best]).sum())} of "
                  f"{zoo.n_models - 1} others dearer), priciest model {100 * acc[int(np.argmax(cost))]:.1f}%")
            rows += run_scenario(f"random zoo {z} (11 models)", zoo, embed_texts(zoo.texts, args.encoder),
                                 midpoint_alpha(zoo), seeds, args.modes, ctx, jobs=args.jobs)
        print_rows(rows, "Zoos no default was tuned on: 11 models, random skills, costs unrelated to skill")
    llama_needed = [s for s in args.scenarios if s not in ("demo", "random-zoos")]
    if llama_needed and not SHARED.exists():
        print(f"\nshared data not found at {SHARED}: Llama-3 scenarios skipped")
        return 0
    if llama_needed:
        full = load_any(SHARED)
        data = full.without(PAPER_EXCLUDE)
        X = embed_texts(data.texts, args.encoder)
        a = midpoint_alpha(data)
    if "phases" in args.scenarios:
        phases("llama-3, 8 mixed", data, X, a, ctx)
    if "llama-mixed" in args.scenarios:
        print_rows(run_scenario("llama-3, 8 mixed", data, X, a, seeds, args.modes, ctx, jobs=args.jobs),
                   "Goal 2: Llama-3, 8 benchmarks mixed, pooled midpoint alpha "
                   "(target: met at <= 1.2x the pooled static mixture)")
    if "per-benchmark" in args.scenarios:
        rows = []
        for b in data.benchmark_names:
            sub = data.select([b])
            ab = midpoint_alpha(sub)
            held = sub.solved.mean(0).max() - ab >= HOLD_MARGIN
            rows += run_scenario(b + ("" if held else " (reported, not held)"), sub, X[data.benchmarks == b], ab,
                                 seeds, args.modes, ctx, jobs=args.jobs)
        print_rows(rows, "Goal 3: each Llama-3 benchmark alone, midpoint alpha "
                   "(target: met at <= 1.02x the most accurate model where it clears alpha)")
        print("\nLabels needed to find the most accurate model without assuming it from cost order\n")
        print("| benchmark | requests | labels the stream gives (rate 0.2) | gap between the two best models "
              "| labels needed per model (90% confidence, 90% power) |")
        print("|---|---|---|---|---|")
        for b in data.benchmark_names:
            sub = data.select([b])
            gap, need = labels_needed(sub)
            print(f"| {b} | {sub.n_requests} | {0.2 * sub.n_requests:.0f} | {100 * gap:.1f} points | {need:.0f} |")
    goal4 = []
    if "llama-rate-0.05" in args.scenarios:
        goal4 += run_scenario("llama-3 mixed, rate 0.05", data, X, a, seeds, args.modes, ctx, rate=0.05, jobs=args.jobs)
    if "llama-bursty" in args.scenarios:
        goal4 += run_scenario("llama-3 mixed, bursty", data, X, a, seeds, args.modes, ctx,
                              fb=FeedbackConfig(kind="bursty"), jobs=args.jobs)
    if "llama-negative" in args.scenarios:
        goal4 += run_scenario("llama-3 mixed, negativity-biased", data, X, a, seeds, args.modes, ctx,
                              fb=FeedbackConfig(kind="negative"), jobs=args.jobs)
    if goal4:
        print_rows(goal4, "Goal 4: sparser and non-IID feedback (reported: how far it holds)")
    if "swapped-zoo" in args.scenarios:
        swapped = with_costs_swapped(data, data.n_models - 2, data.n_models - 1)
        print_rows(run_scenario("llama-3 mixed, medium/large costs swapped", swapped, X, midpoint_alpha(data),
                                seeds, args.modes, ctx, jobs=args.jobs),
                   "Goal 5: a zoo whose priciest model is not its most accurate (same alpha as goal 2)")
    if "specialist-zoo" in args.scenarios:
        spec = specialist_zoo()
        Xs = embed_texts(spec.texts, args.encoder)
        print_rows(run_scenario("specialist zoo (synthetic)", spec, Xs, midpoint_alpha(spec), seeds, args.modes,
                                ctx, jobs=args.jobs),
                   "Goal 5: a zoo of topic specialists whose priciest model is the best on no topic")
    if "text-ceiling" in args.scenarios:
        heads = [f"at alpha + {mg:g}" if mg else "at alpha" for mg in CEILING_MARGINS]
        print("\nCeilings: cost / static mixture of the cheapest plan that reaches alpha (+ points), on a "
              "linear model of the text fitted to every label (in sample), and knowing each request's "
              "hidden context and every model's accuracy in it\n")
        print("| dataset | alpha | " + " | ".join(f"linear text, {h}" for h in heads) + " | "
              + " | ".join(f"known context, {h}" for h in heads) + " |")
        print("|---" * (2 + 2 * len(heads)) + "|")
        if "demo" in args.scenarios:
            print(ceilings("demo (mixed); context: difficulty", demo, Xd, demo_difficulty(demo.texts),
                           midpoint_alpha(demo)), flush=True)
        print(ceilings("llama-3, 8 mixed; context: benchmark", data, X, data.benchmarks, a), flush=True)
        if "specialist-zoo" in args.scenarios:
            context = np.char.add(spec.benchmarks.astype(str), demo_difficulty(spec.texts).astype(str))
            print(ceilings("specialist zoo; context: topic and difficulty", spec, Xs, context,
                           midpoint_alpha(spec)), flush=True)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
