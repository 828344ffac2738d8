"""What the router's text encoder sees of a stream's contexts (issue 19; docs/RESULTS.md,
"What the encoder sees").

    python benchmarks/bench_encoder_sees.py                     # Llama-3 (8 mixed) and the demo, packaged MiniLM
    python benchmarks/bench_encoder_sees.py --encoder hf:PATH   # your encoder (e.g. the paper's ModernBERT)
    python benchmarks/bench_encoder_sees.py --data my.parquet   # your own log (its benchmark column as the context)

The contextual router learns each model's satisfaction from the request's embedding. How
much of a stream's structure it can ever learn is fixed by the encoder, not by the router:
where two contexts (benchmarks a live router never reads) look alike to the encoder and
differ in how often each model solves them, every prediction in them is off, whatever the
feedback. This script measures that ceiling on half of the stream's requests (seeded
split), with the other half's labels:

* a linear probe: how often a logistic regression on the embedding names the request's
  context, and which contexts it takes for which;
* the most the router's text model (the same multi-task logistic regression, same
  settings) learns: fitted on every model's label of every request of the first half
  (full information, more than any stream gives), its mean prediction per context on the
  second half against each model's accuracy there. The share-weighted mean of the
  absolute errors is what no amount of feedback removes with this encoder.

The contexts: a benchmark log's ``benchmark`` column; the built-in demo's lead phrase and
topic (what sets its requests' difficulty). The router itself never reads either.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slarouter_core.embedding_cache import embed_texts  # noqa: E402
from slarouter_core.encoders import DEFAULT_ENCODER, EncoderUnavailableError, LazyEncoder  # noqa: E402
from slarouter_core.experiments import PAPER_EXCLUDE, load_any  # noqa: E402
from slarouter_core.policies.contextual import ContextualConfig  # noqa: E402
from slarouter_core.policies.text_model import fit_multitask_logistic, multitask_predictions  # noqa: E402
from slarouter_core.synthetic import demo_difficulty  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "messplus_llama3"


def context_report(X: np.ndarray, solved: np.ndarray, context: np.ndarray, seed: int = 0,
                   c_shared: float | None = None, c_model: float | None = None) -> dict:
    """The probe and the full-information text model on a seeded half split (see the
    module docstring). ``context``: each request's context label (any hashable values).

    Returns ``names`` (the contexts, sorted), ``share`` (each one's share of the held-out
    half), ``recall`` (the probe's share of each context named right), ``probe`` (its
    accuracy overall), ``confused`` (``(true, taken for, share of true)`` for the three
    largest mistakes), ``accuracy`` and ``predicted`` ((K, M): each model's accuracy and the
    text model's mean prediction per context, held-out half), ``error`` (their
    share-weighted mean absolute difference)."""
    from sklearn.linear_model import LogisticRegression

    cfg = ContextualConfig()  # the router's own settings unless given
    c_shared = cfg.c_shared if c_shared is None else c_shared
    c_model = cfg.c_model if c_model is None else c_model
    X = np.asarray(X, np.float64)
    solved = np.asarray(solved, np.float64)
    names, k = np.unique(np.asarray(context), return_inverse=True)
    n, M = solved.shape
    fit = np.random.default_rng(seed).random(n) < 0.5
    held = ~fit
    if len(names) < 2 or fit.sum() < 2 or held.sum() < 1:
        raise ValueError("the probe needs at least two contexts and requests in both halves")
    probe = LogisticRegression(C=10.0, max_iter=2000).fit(X[fit], k[fit])
    named = probe.predict(X[held])
    truth = k[held]
    K = len(names)
    confusion = np.zeros((K, K))
    np.add.at(confusion, (truth, named), 1.0)
    rows = confusion.sum(1)
    recall = np.divide(np.diag(confusion), rows, out=np.full(K, np.nan), where=rows > 0)
    off = np.where(np.eye(K, dtype=bool), 0.0, confusion / np.maximum(rows, 1.0)[:, None])
    top = np.argsort(off, axis=None)[::-1][:3]
    confused = [(str(names[i]), str(names[j]), float(off[i, j])) for i, j in zip(*np.unravel_index(top, off.shape))
                if off[i, j] > 0]
    # every model's label of every request of the first half: the most any feedback could give
    rows_fit = np.flatnonzero(fit)
    theta = fit_multitask_logistic(np.repeat(X[rows_fit], M, axis=0), np.tile(np.arange(M), len(rows_fit)),
                                   solved[rows_fit].ravel(), M, c_shared, c_model)
    P = multitask_predictions(theta, X[held], M)

    def per_context(values: np.ndarray) -> np.ndarray:
        """(K, M) mean of ``values`` (held-out rows) over each context's rows (nan: none)."""
        sums = np.zeros((K, M))
        np.add.at(sums, truth, values)
        return np.divide(sums, rows[:, None], out=np.full((K, M), np.nan), where=rows[:, None] > 0)

    share = rows / len(truth)
    accuracy, predicted = per_context(solved[held]), per_context(P)
    present = share > 0
    error = float(share[present] @ np.abs(predicted - accuracy)[present].mean(1))
    return {"names": [str(v) for v in names], "share": share, "recall": recall, "probe": float(np.mean(named == truth)),
            "confused": confused, "accuracy": accuracy, "predicted": predicted, "error": error}


def print_report(title: str, models: list[str], rep: dict) -> None:
    print(f"\n{title}: linear probe names the context of {100 * rep['probe']:.1f}% of held-out requests; "
          f"the full-information text model's mean absolute error per context {100 * rep['error']:.1f} points")
    if rep["confused"]:
        print("most confused: " + "; ".join(f"{t} taken for {f} {100 * s:.0f}%" for t, f, s in rep["confused"]))
    head = " | ".join(f"{m}: accuracy / predicted" for m in models)
    print(f"\n| context | share | probe names it | {head} |")
    print("|---|---|---|" + "---|" * len(models))
    for i, name in enumerate(rep["names"]):
        cells = " | ".join(f"{100 * a:.1f}% / {100 * p:.1f}%" for a, p in zip(rep["accuracy"][i], rep["predicted"][i]))
        print(f"| {name} | {100 * rep['share'][i]:.1f}% | {100 * rep['recall'][i]:.0f}% | {cells} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoder", default=DEFAULT_ENCODER,
                    help="the text encoder ('minilm', the packaged default; 'hf:<id or path>' for weights you have)")
    ap.add_argument("--data", type=Path, default=None,
                    help="a routing log (parquet or CSV, the project's format) instead of the built-in streams; "
                         "its benchmark column is the context")
    ap.add_argument("--seed", type=int, default=0, help="the half split's (and any sample's) seed")
    ap.add_argument("--max-requests", type=int, default=20_000,
                    help="a larger log is read on a seeded sample of this many requests (the full-information "
                         "fit holds every model's label of half of them in memory)")
    args = ap.parse_args(argv)
    if args.max_requests < 4:
        ap.error("--max-requests must be at least 4")
    try:  # a missing encoder is refused before any stream is read
        LazyEncoder(args.encoder)  # the spec checked, the weights loaded only if a text is not cached
    except EncoderUnavailableError as err:
        ap.error(str(err))
    t0 = time.perf_counter()
    streams = []
    if args.data is not None:
        try:
            data = load_any(args.data)
        except (OSError, ValueError) as err:
            ap.error(f"cannot read {args.data}: {err}")
        streams.append((str(args.data), data, np.asarray(data.benchmarks)))
    else:
        if SHARED.exists():
            llama = load_any(SHARED).without(PAPER_EXCLUDE)
            streams.append(("llama-3, 8 mixed (context: benchmark)", llama, np.asarray(llama.benchmarks)))
        else:
            print(f"shared data not found at {SHARED}: the Llama-3 stream is skipped")
        demo = load_any(ROOT / "data" / "demo.parquet")
        streams.append(("demo (mixed; context: topic and the lead phrase's difficulty, 0-4)", demo,
                        np.array([f"{t} {d}" for t, d in zip(demo.benchmarks, demo_difficulty(demo.texts))])))
    cfg = ContextualConfig()
    print(f"encoder {args.encoder}; half split seed {args.seed}; text model as the contextual router's "
          f"(c_shared={cfg.c_shared:g}, c_model={cfg.c_model:g})")
    for title, data, context in streams:
        rows = np.arange(data.n_requests)
        if len(rows) > args.max_requests:
            rows = np.sort(np.random.default_rng(args.seed).choice(len(rows), args.max_requests, replace=False))
            title += f", a sample of {args.max_requests} of its {data.n_requests} requests"
        texts = data.texts
        X = embed_texts([texts[i] for i in rows], args.encoder)  # only the rows read
        try:
            rep = context_report(X, data.solved[rows], context[rows], args.seed)
        except ValueError as err:
            ap.error(f"{title}: {err}")
        print_report(title, list(data.models), rep)
    print(f"\n[{time.perf_counter() - t0:.0f} s]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
