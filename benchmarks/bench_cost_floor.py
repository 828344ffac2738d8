"""Where the honest-SLA cost goals sit against what any certified router could pay
(issue 19; docs/RESULTS.md, "What the cost goals would need").

    python benchmarks/bench_cost_floor.py              # demo and Llama-3, thumbs and judge fill-in
    python benchmarks/bench_cost_floor.py --seeds 20   # the margin from more runs
    python benchmarks/bench_cost_floor.py --c-shared 1 # the offline text model regularised more
    python benchmarks/bench_cost_floor.py --c-model 1  # its per-model offsets held as loosely as before c_model=0.1
    python benchmarks/bench_cost_floor.py --curve      # also the floor by labels seen, and as a router learns
    python benchmarks/bench_cost_floor.py --encoder minilm+layers=2,4,6   # another text encoder

A router that certifies its SLA window at 95% must end the window with its estimate at
alpha plus the bound's width (its margin), so on average it delivers about alpha + margin
(when its estimate is low it pays for more, when high for less, and the two cancel).
This script measures that margin on the contextual router's own runs (the width of its
end-of-window bound, with the thumbs alone and with an ACPBench-grade judge on every
answer) and prices the satisfaction alpha + margin four ways, each a multiple of the
static mixture at alpha:

* text-blind: the cheapest mix of models, the stream's accuracies known in hindsight
  (``static_mixture_lp`` at alpha + margin): what a router that learns nothing from the
  text pays at best;
* learned text, oracle price: the contextual router's text model (MiniLM, the same
  multi-task logistic regression) fitted offline on as many labels as a stream gives its
  router (one in five requests; with the judge, every request: the judge's verdicts on
  the answers without thumbs, each at its calibrated value, as the router learns from
  them), drawn uniformly over requests and models, and routed at
  the price whose *true* satisfaction is alpha + margin (or the cheapest time-share of two
  prices, or of a price and one model for every request): the text's worth with perfect
  control and free, unbiased labels;
* known context: each request's accuracy per model known for its context (the demo's
  lead phrase and topic, Llama-3's benchmark), the per-request LP at alpha + margin;
* the router: the contextual router's own mean cost over the same runs.

``--curve`` prices the learned-text floor on fewer labels too, and over the stream as a
live router learns: request ``t`` routed on the labels a router has by then (all of them
with a judge, a fifth on thumbs), each count at its own oracle price; and on every label
placed on the models as the router's runs served them instead of uniformly.

With judge fill-in each row adds one judge call per request at the zoo's cheapest
model's mean cost (as ``bench_honest_sla.py`` charges it). The goals are issue 19's.

A second table splits the router's own cost, run by run, at the satisfaction that run
delivered (so every column buys the same satisfaction on the same stream):

* its own predictions, one price: the predictions the router made at each step (its text
  model as it stood then), served at the one price (or time-share of two prices, or of a
  price and one model) that delivers the run's satisfaction in hindsight: what the
  router's control (its moving price, its fallback) costs is the gap to the router;
* its last fit: its text model refitted on every label it kept by the window's end, for
  every request: what learning during the stream costs is the gap to the column before;
* uniform labels: as many labels (as many thumbs, the rest calibrated verdicts), drawn
  uniformly over requests and models: what the labels falling on the models it served
  cost is the gap to the column before.

A third table reads the router's text model where its predictions did not choose the step
(exploration, and the fallback's one model for every request): the served model's
prediction as the model stood then against the outcome, by fifths of the prediction, and
the slope of a logistic regression of the outcome on the prediction's logit (1 for
calibrated predictions, under 1 for predictions spread wider than the outcomes). The plan
reads these predictions as satisfaction rates when it sets its price.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_honest_sla import COST_GOALS  # noqa: E402

from slarouter_core.baselines import oracle_lp, static_mixture_lp  # noqa: E402
from slarouter_core.data import midpoint_alpha  # noqa: E402
from slarouter_core.embedding_cache import embed_texts  # noqa: E402
from slarouter_core.encoders import DEFAULT_ENCODER, EncoderUnavailableError, LazyEncoder  # noqa: E402
from slarouter_core.experiments import PAPER_EXCLUDE, load_any  # noqa: E402
from slarouter_core.feedback import FeedbackConfig  # noqa: E402
from slarouter_core.judge import JUDGE_PRESETS  # noqa: E402
from slarouter_core.policies.contextual import ContextualConfig  # noqa: E402
from slarouter_core.policies.text_model import PRICE_CAP, fit_multitask_logistic, multitask_predictions  # noqa: E402
from slarouter_core.preflight import routed_cost  # noqa: E402
from slarouter_core.router import RouterConfig  # noqa: E402
from slarouter_core.simulator import Simulation, SimulationConfig, single_threaded_blas  # noqa: E402
from slarouter_core.synthetic import demo_difficulty  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "messplus_llama3"
#: issue 19's goals (cost / static mixture): thumbs only, with judge fill-in (bench_honest_sla's)
GOALS = {name: (COST_GOALS[name], COST_GOALS[name + " + judge"]) for name in ("demo (mixed)", "llama-3, 8 mixed")}


def context_accuracy(solved: np.ndarray, context: np.ndarray) -> np.ndarray:
    """(N, M): each request's per-model accuracy over the requests of its context."""
    P = np.zeros(solved.shape)
    for c in np.unique(context):
        rows = context == c
        P[rows] = solved[rows].mean(0)
    return P


def router_runs(data, X, alpha: float, seeds,
                judge: bool) -> tuple[float, float, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Mean end-of-window margin (the bound's width over the window), mean stream cost, per
    run the split of its cost (:func:`cost_split`), and the runs' request-blind steps pooled
    (:func:`blind_steps`)."""
    fb = FeedbackConfig(judge_fill=JUDGE_PRESETS["acpbench"]) if judge else FeedbackConfig()
    margins, costs, splits, blind = [], [], [], []
    for seed in seeds:
        sim = Simulation(data, X, SimulationConfig(RouterConfig(alpha=alpha, mode="contextual"), feedback_rate=0.2,
                                                   seed=seed, feedback=fb))
        policy = sim.router.policy
        # the predictions each step's decision saw: the text model as it stands before the
        # step (refits happen on feedback, after the choice; one request at a time gives
        # the same decisions as a whole stream)
        seen = np.empty((sim.n_requests, data.n_models))
        capped = np.zeros(sim.n_requests, bool)  # no price reached the target: the fallback served
        while not sim.done:
            t = sim.t
            seen[t] = policy.predict(X[sim.order[t]])[0]
            sim.step(1)
            capped[t] = policy.lam >= PRICE_CAP  # the price this step's choice used
        cert = policy.cert
        margins.append(cert.width(cert.var) / cert.t)
        a = sim.arrays()
        costs.append(float(a["cost"].mean()))
        splits.append(cost_split(data, X, sim, seen, capped, judge, seed))
        blind.append(blind_steps(a, seen, capped))
    pairs = tuple(np.concatenate(part) for part in zip(*blind))
    return float(np.mean(margins)), float(np.mean(costs)), np.array(splits), pairs


def blind_steps(a: dict, seen: np.ndarray, capped: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(prediction, outcome)`` of one run's request-blind steps (exploration, and the
    fallback's one model for every request; ``a``: the run's ``Simulation.arrays()``): the
    served model's prediction as the text model stood at the step, which did not choose the
    step, so the pairs read the online text model's calibration without the plan's
    selection (:func:`calibration_row`)."""
    blind = a["explored"].astype(bool) | capped
    p = seen[np.arange(len(seen)), a["model"]]
    return p[blind], a["satisfied"][blind].astype(np.float64)


#: the parts of the request-blind steps ``calibration_row`` splits by their prediction
CALIBRATION_PARTS = 5


def calibration_row(p: np.ndarray, y: np.ndarray) -> tuple[list[tuple[float, float]], float]:
    """The request-blind steps by fifths of their prediction, each ``(mean prediction, share
    satisfied)``, and the slope of a logistic regression of the outcome on the prediction's
    logit (scikit-learn, unpenalised): 1 for calibrated predictions, under 1 where they are
    spread wider than the outcomes they predict (over-confident)."""
    from sklearn.linear_model import LogisticRegression

    order = np.argsort(p, kind="stable")
    parts = [(float(p[i].mean()), float(y[i].mean())) for i in np.array_split(order, CALIBRATION_PARTS)]
    q = np.clip(p, 1e-4, 1 - 1e-4)
    z = np.log(q / (1 - q))[:, None]
    if np.ptp(z) == 0 or y.min() == y.max():
        return parts, float("nan")
    return parts, float(LogisticRegression(C=np.inf).fit(z, y).coef_[0, 0])


def cost_split(data, X, sim: Simulation, seen: np.ndarray, capped: np.ndarray, judge: bool,
               seed: int) -> tuple[float, ...]:
    """``(satisfaction, router, own predictions at one price, its last fit, uniform labels,
    share of steps off the plan, plan steps' predicted and delivered satisfaction, then each
    model's share of the steps)`` of one run, the costs a mean per request at the run's
    satisfaction (the module docstring's second table)."""
    a = sim.arrays()
    rows = sim.order
    solved, costs = data.solved[rows], data.costs[rows]
    target = float(a["satisfied"].mean())
    policy = sim.router.policy
    cfg = policy.config
    lx, lm, ly, _ = policy.labels()
    M = data.n_models
    last = fit_multitask_logistic(lx, lm, ly, M, cfg.c_shared, cfg.c_model)
    # as many labels, uniform over requests and models: as many thumbs, the rest (with the
    # judge) the calibrated verdicts, as the router learns them
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(rows), len(ly), replace=len(ly) > len(rows))
    models = rng.integers(0, M, len(ly))
    y = data.solved[rows[pick], models].astype(np.float64)
    if judge:
        y = judged_labels(y, policy.n_feedback, rng)
    uniform = fit_multitask_logistic(X[rows[pick]], models, y, M, cfg.c_shared, cfg.c_model)
    Xs = X[rows]
    # the plan's steps (a price reached the target; not exploring): what it predicted for
    # the models it chose, against what they delivered
    plan = ~a["explored"] & ~capped
    predicted = float(a["shat_served"][plan].mean()) if plan.any() else float("nan")
    delivered = float(a["satisfied"][plan].mean()) if plan.any() else float("nan")
    return (target, float(a["cost"].mean()), routed_cost(seen, solved, costs, target),
            routed_cost(multitask_predictions(last, Xs, M), solved, costs, target),
            routed_cost(multitask_predictions(uniform, Xs, M), solved, costs, target),
            float(1.0 - plan.mean()), predicted, delivered,
            *(np.bincount(a["model"], minlength=M) / len(a["model"])))


def judged_labels(y: np.ndarray, thumbs: int, rng: np.random.Generator) -> np.ndarray:
    """The first ``thumbs`` labels as they are, the rest an ACPBench-grade judge's verdict
    on them at its calibrated value ``P(y = 1 | verdict)`` in hindsight (as the router learns
    the verdicts)."""
    verdict = JUDGE_PRESETS["acpbench"].corrupt(y.astype(np.int8), rng)
    calib = np.array([y[verdict == v].mean() if np.any(verdict == v) else 0.5 for v in (0, 1)])
    return np.where(np.arange(len(y)) < thumbs, y, calib[verdict])


def learned_cost(data, X, target: float, c_shared: float, c_model: float, judge: bool, fits: int = 3,
                 labels: int | None = None, shares: np.ndarray | None = None) -> float:
    """The text model fitted on one label per five requests (with a judge: one per request,
    the rest the judge's verdicts as the router learns them, each its calibrated value
    ``P(y = 1 | verdict)`` in hindsight), uniform over requests and models, routed at the
    oracle price (mean over ``fits`` label draws); ``c_shared`` and ``c_model`` as the
    router's (its defaults unless the command line says otherwise). ``labels``: that many
    instead (a fifth of them thumbs with a judge), as a router has seen part way through;
    ``shares``: each model labelled with that probability instead of uniformly (where a
    router's labels fall: on the models it serves)."""
    n, M = data.n_requests, data.n_models
    full = n if judge else n // 5
    labels = full if labels is None else min(int(labels), full)
    out = []
    for k in range(fits):
        rng = np.random.default_rng(k)
        rows = rng.permutation(n)[:labels] if judge else rng.choice(n, labels, replace=False)
        models = rng.integers(0, M, len(rows)) if shares is None else rng.choice(M, len(rows), p=shares)
        y = data.solved[rows, models].astype(np.float64)
        if judge:  # thumbs on a fifth, the calibrated verdict on the rest
            y = judged_labels(y, labels // 5, rng)
        theta = fit_multitask_logistic(X[rows], models, y, M, c_shared, c_model)
        out.append(routed_cost(multitask_predictions(theta, X, M), data.solved, data.costs, target))
    return float(np.mean(out))


#: label counts at which ``--curve`` prices the text model (and the stream's own count)
CURVE_LABELS = (100, 250, 500, 1000, 2000, 4000, 8000)


def learning_curve(data, X, target: float, c_shared: float, c_model: float,
                   judge: bool) -> tuple[list[tuple[int, float]], float]:
    """The text floor (:func:`learned_cost`) on ``CURVE_LABELS`` labels and on all a stream
    gives, and its mean over the stream's requests when request ``t`` is routed on the
    labels a router has by then (``t`` with a judge, ``t / 5`` on thumbs at rate 0.2;
    linear in the log of the count between points, and the first point's cost before it,
    which flatters the first requests)."""
    n = data.n_requests
    full = n if judge else n // 5
    sizes = [k for k in CURVE_LABELS if k < full] + [full]
    points = [(k, learned_cost(data, X, target, c_shared, c_model, judge, labels=k)) for k in sizes]
    seen = np.maximum(np.arange(1, n + 1) * (full / n), 1.0)
    mean = float(np.interp(np.log(seen), np.log([k for k, _ in points]), [c for _, c in points]).mean())
    return points, mean


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10, help="router runs per stream for its margin and cost")
    ap.add_argument("--c-shared", type=float, default=ContextualConfig().c_shared,
                    help="the offline text model's inverse L2 strength (default: the router's own)")
    ap.add_argument("--c-model", type=float, default=ContextualConfig().c_model,
                    help="its per-model offsets' inverse L2 strength (default: the router's own)")
    ap.add_argument("--encoder", default=DEFAULT_ENCODER,
                    help="the text encoder, of the router's runs and the offline text model alike")
    ap.add_argument("--curve", action="store_true",
                    help="also the text floor by the labels seen, and over the stream as a router learns")
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:  # a missing encoder is refused before any stream runs
        LazyEncoder(args.encoder)  # the spec checked, the weights loaded only if a text is not cached
    except EncoderUnavailableError as exc:
        ap.error(str(exc))
    t0 = time.perf_counter()
    streams = []
    demo = load_any(ROOT / "data" / "demo.parquet")
    topic = np.unique(demo.benchmarks, return_inverse=True)[1]
    streams.append(("demo (mixed)", demo, demo_difficulty(demo.texts) * 100 + topic))
    if SHARED.exists():
        full = load_any(SHARED)
        llama = full.without(PAPER_EXCLUDE)
        streams.append(("llama-3, 8 mixed", llama, np.unique(llama.benchmarks, return_inverse=True)[1]))
    else:
        print(f"shared data not found at {SHARED}: the Llama-3 rows are skipped")
    print(f"router runs per stream: {args.seeds} (seeds 0-{args.seeds - 1}), feedback rate 0.2, contextual defaults; "
          f"offline text model c_shared={args.c_shared:g}, c_model={args.c_model:g}"
          + ("" if args.encoder == DEFAULT_ENCODER else f"; encoder {args.encoder}") + "\n")
    print("| stream | feedback | alpha | margin (points) | text-blind | learned text, oracle price | known context "
          "| router | goal |")
    print("|---|---|---|---|---|---|---|---|---|")
    split_rows, model_lines, curve_rows, calibration_rows = [], [], [], []
    for name, data, context in streams:
        X = embed_texts(data.texts, args.encoder)
        alpha = midpoint_alpha(data)
        mix = static_mixture_lp(data.solved.mean(0), data.costs.mean(0), alpha)[1]
        known = context_accuracy(data.solved.astype(np.float64), context)
        model_lines.append(f"- {name}: " + "; ".join(f"{m} {100 * acc:.1f}% at {c / mix:.2f}x" for m, acc, c in zip(
            data.models, data.solved.mean(0), data.costs.mean(0))))
        for judge, goal in zip((False, True), GOALS[name]):
            with single_threaded_blas():
                margin, router, splits, pairs = router_runs(data, X, alpha, range(args.seeds), judge)
                if args.curve:  # its last point is the floor on every label (the same draws)
                    curve = learning_curve(data, X, alpha + margin, args.c_shared, args.c_model, judge)
                    learned = curve[0][-1][1]
                    shares = splits[:, 8:].mean(axis=0)
                    placed = learned_cost(data, X, alpha + margin, args.c_shared, args.c_model, judge,
                                          shares=shares / shares.sum())
                else:
                    learned = learned_cost(data, X, alpha + margin, args.c_shared, args.c_model, judge)
            target = alpha + margin
            call = float(data.costs.mean(0).min()) if judge else 0.0  # one judge call per request
            blind = static_mixture_lp(data.solved.mean(0), data.costs.mean(0), target)[1]
            context_cost = oracle_lp(known, data.costs, target)[1] / data.n_requests
            cells = [blind, learned, context_cost, router]
            feedback = "thumbs + judge" if judge else "thumbs"
            print(f"| {name} | {feedback} | {100 * alpha:.1f}% | {100 * margin:.2f} | "
                  + " | ".join(f"{(c + call) / mix:.2f}x" for c in cells) + f" | {goal:.2f}x |", flush=True)
            split_rows.append((name, feedback, splits, call, mix))
            calibration_rows.append((name, feedback, len(pairs[0]), *calibration_row(*pairs)))
            if args.curve:
                curve_rows.append((name, feedback, curve, placed, call, mix))
    print("\nThe router's own cost, split (per run at the satisfaction it delivered; mean over runs; a "
          "hindsight price that cannot reach a run's satisfaction leaves that run out of its column, "
          "counted in brackets):\n")
    print("| stream | feedback | satisfaction | router | own predictions, one price | its last fit "
          "| uniform labels | steps off the plan | plan steps: predicted, delivered | steps per model |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, feedback, splits, call, mix in split_rows:
        cells = []
        for k in range(1, 5):
            ok = np.isfinite(splits[:, k])
            missing = f" ({int((~ok).sum())})" if not ok.all() else ""
            cells.append(f"{(splits[ok, k].mean() + call) / mix:.2f}x{missing}" if ok.any() else "-")
        print(f"| {name} | {feedback} | {100 * splits[:, 0].mean():.1f}% | " + " | ".join(cells)
              + f" | {100 * splits[:, 5].mean():.0f}% | {100 * np.nanmean(splits[:, 6]):.1f}%, "
              f"{100 * np.nanmean(splits[:, 7]):.1f}% | "
              + " / ".join(f"{100 * v:.1f}%" for v in splits[:, 8:].mean(axis=0)) + " |")
    print("\nSteps per model are in the zoo's order; each model's accuracy on the stream and its mean cost per "
          "request (a multiple of the static mixture's at alpha):")
    print("\n".join(model_lines))
    print("\nThe router's text model on the steps it did not choose (exploration and the fallback): the served "
          "model's prediction as the model stood at the step against the outcome, pooled over the runs, by fifths "
          "of the prediction; the slope is a logistic regression's on the prediction's logit (1: calibrated; "
          "under 1: predictions spread wider than the outcomes):\n")
    print("| stream | feedback | request-blind steps | by fifth of the prediction: predicted -> delivered | slope |")
    print("|---|---|---|---|---|")
    for name, feedback, n, parts, slope in calibration_rows:
        print(f"| {name} | {feedback} | {n:,} | " + ", ".join(f"{100 * a:.0f}% -> {100 * b:.0f}%" for a, b in parts)
              + f" | {slope:.2f} |")
    if curve_rows:
        print("\nThe text floor by the labels seen (learned text, oracle price, on that many labels drawn as "
              "above), over the stream when each request is routed on the labels a router has by then, and on "
              "every label placed on the models as the router serves them (its steps per model):\n")
        print("| stream | feedback | by labels seen | over the stream | all labels, at the router's model shares |")
        print("|---|---|---|---|---|")
        for name, feedback, (points, mean), placed, call, mix in curve_rows:
            print(f"| {name} | {feedback} | " + ", ".join(f"{k:,}: {(c + call) / mix:.2f}x" for k, c in points)
                  + f" | {(mean + call) / mix:.2f}x | {(placed + call) / mix:.2f}x |")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
