"""Causal LLM routing (Tsiourvas et al. 2025): RM-Softmax policies trained on doubly
robust pseudo-outcomes from a uniform-logging observational log of the history split.

The log has one model's outcome per request and only where the user gave feedback, which
is why the outcomes are estimated doubly robustly rather than read off.
"""

from __future__ import annotations

import numpy as np

from ..data import RoutingData
from ..feedback import NO_FEEDBACK, FeedbackConfig, make_plan, thumbs_of
from .common import (BUDGETS, TAG_CAUSAL, TAG_CAUSAL_LOG, TRADEOFF_GRID, History, MethodResult, check_alpha,
                     check_embeddings, closest_to_alpha, common_stream, feedback_or_default, method_result,
                     require_history, tagged_rng)
from .knn import K_GRID, knn_neighbours, select_k


def _sub_seed(seed: int, tag: int) -> int:
    """An integer seed for (seed, tag), for helpers that take a plain int."""
    return int(np.random.SeedSequence([int(seed), int(tag)]).generate_state(1, np.uint32)[0])


def rm_softmax_fit(X: np.ndarray, Y: np.ndarray, *, tau: float = 1.0, l2: float = 1e-3,
                   steps: int = 300, lr: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """RM-Softmax: linear scores g(x) = x W + b, policy softmax(g / tau), minimising the
    expected regret (1/n) sum_i sum_t pi(t|x_i) (max_s Y_is - Y_it) + l2 |W|^2 with Adam.

    ``Y`` is (L, n, M): L independent problems (e.g. one per lambda) trained at once.
    Starts from W = 0 (the uniform policy); deterministic. Returns W (L, D, M), b (L, M).
    """
    X = np.asarray(X, np.float64)
    Y = np.asarray(Y, np.float64)
    if Y.ndim == 2:
        Y = Y[None]
    L, n, M = Y.shape
    D = X.shape[1]
    R = np.ascontiguousarray((Y.max(axis=2, keepdims=True) - Y).transpose(1, 0, 2))  # (n, L, M)
    W = np.zeros((D, L * M))  # all problems side by side: one BLAS product per step
    b = np.zeros((L, M))
    mW, vW, mb, vb = np.zeros_like(W), np.zeros_like(W), np.zeros_like(b), np.zeros_like(b)
    b1, b2, e = 0.9, 0.999, 1e-8
    XT = np.ascontiguousarray(X.T)
    for s in range(1, steps + 1):
        G = (X @ W).reshape(n, L, M) + b
        G = (G - G.max(axis=2, keepdims=True)) / tau
        P = np.exp(G)
        P /= P.sum(axis=2, keepdims=True)
        dG = P * (R - (P * R).sum(axis=2, keepdims=True)) / (tau * n)
        gW = XT @ dG.reshape(n, L * M) + 2.0 * l2 * W
        gb = dG.sum(axis=0)
        for p, g, m1, m2 in ((W, gW, mW, vW), (b, gb, mb, vb)):
            m1 *= b1
            m1 += (1 - b1) * g
            m2 *= b2
            m2 += (1 - b2) * g * g
            p -= lr * (m1 / (1 - b1 ** s)) / (np.sqrt(m2 / (1 - b2 ** s)) + e)
    W = np.ascontiguousarray(W.reshape(D, L, M).transpose(1, 0, 2))
    return W, b


def _knn_per_model(X: np.ndarray, rows_by_model: list[np.ndarray], target: np.ndarray,
                   query: np.ndarray, k_grid: tuple[int, ...]) -> tuple[np.ndarray, list[int]]:
    """(len(query), M) kNN regression of ``target`` fitted, per model t, on the rows
    logged with t; a query row that is itself one of them is left out (cross-fitting)."""
    M = len(rows_by_model)
    out = np.empty((len(query), M))
    ks = []
    fallback = float(np.mean(target[np.concatenate(rows_by_model)])) if sum(map(len, rows_by_model)) else 0.5
    for t, rows in enumerate(rows_by_model):
        if len(rows) == 0:
            out[:, t] = fallback
            ks.append(0)
            continue
        if len(rows) == 1:
            out[:, t] = target[rows[0]]
            ks.append(1)
            continue
        k, _ = select_k(X[rows], target[rows], k_grid)
        pos = {int(r): j for j, r in enumerate(rows)}
        exclude = np.array([pos.get(int(q), -1) for q in query])
        idx = knn_neighbours(X[query], X[rows], k, exclude)
        out[:, t] = target[rows][idx].mean(axis=1)
        ks.append(int(k))
    return out, ks


def causal(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int, feedback_rate: float,
           *, history: History | None = None, lam: float | None = None,
           lam_grid: tuple[float, ...] = TRADEOFF_GRID, folds: int = 5, k_grid: tuple[int, ...] = K_GRID,
           tau: float = 1.0, l2: float = 1e-3, steps: int = 300, lr: float = 0.05,
           propensity_clip: float = 0.05, feedback: FeedbackConfig | None = None,
           budget: str = "matched") -> MethodResult:
    """Causal LLM routing (Tsiourvas et al. 2025), the per-lambda RM-Softmax variant.

    * ``budget``: ``"matched"`` (default): the log's feedback rate is raised to
      ``min(1, feedback_rate * stream length / history length)``, so that the log holds
      as many feedback events as an online router expects on the stream (the paper's
      "same amount of feedback"; a feedback model that cannot realise that rate keeps the
      run's rate); ``"full"``: the log's rate is the run's rate.

    * Log: every history request is served once by a model drawn uniformly (propensity
      1/M, known); the user gives feedback with ``feedback_rate`` (seeded with
      ``(seed, 4)``). The training cost is the cost of serving the history that way.
      Only the rows with feedback have an outcome; their cost is always observed.
    * Utility y(t) = a(t) - lambda * c(t) / kappa, kappa = the largest per-model mean
      logged cost (costs normalised as CARROT's; lambda on the same [0, 1] grid).
    * Doubly robust pseudo-outcomes on the feedback rows:
      Yhat_i(t) = muhat_t(x_i) + 1{t_i = t} (y_i - muhat_t(x_i)) / max(e, clip),
      muhat_t a per-model cosine kNN regression (k by leave-one-out CV) of the outcome
      (on model t's feedback rows) and of the cost (on all rows logged with t); a row's
      own observation is left out of its muhat (cross-fitting).
    * RM-Softmax (:func:`rm_softmax_fit`) per lambda; routes argmax_t g(x)_t.
    * Feedback models: the log's feedback follows the run's ``feedback`` model
      (:func:`feedback.make_plan` over the log in history order, seeded with
      ``(seed, 32)``): bursty on/off periods, negativity bias (a logged failure is likelier
      to be labelled, which the DR estimate, built for labels missing at random, does
      not correct), a judge's verdicts as outcomes (``judge``; judge fill-in is not its
      protocol: the log keeps the users' thumbs only). Delays do not matter offline (the
      log is complete before training); drift changes only the stream order it serves.
    * lambda, unless given: ``folds``-fold cross-fitting over the feedback rows; each
      held-out fold's satisfaction under the policy is estimated doubly robustly (the
      log has no other labels); the lambda closest to alpha wins (ties: the cheaper by
      the same DR estimate of cost). The final policy is trained on all feedback rows.
    """
    alpha = check_alpha(alpha)
    X = check_embeddings(data, embeddings)
    hist = require_history(history, "Causal routing", X.shape[1])
    order, _, _ = common_stream(data, seed, feedback_rate, feedback)
    Xh = np.asarray(hist.embeddings, np.float32)
    n, M = hist.n, data.n_models
    Sh = hist.data.solved.astype(np.float64)
    Ch = np.asarray(hist.data.costs, np.float64)
    BUDGETS("budget", budget)
    fcfg = feedback_or_default(feedback)
    log_rate = float(feedback_rate)
    if budget == "matched":
        log_rate = min(1.0, float(feedback_rate) * data.n_requests / max(n, 1))
        try:
            fcfg.check_rate(log_rate)
        except ValueError:
            log_rate = float(feedback_rate)
    rng = tagged_rng(seed, TAG_CAUSAL)
    t_log = rng.integers(0, M, n)
    gives = rng.random(n) < log_rate
    c_log = Ch[np.arange(n), t_log]
    a_log = Sh[np.arange(n), t_log]
    if not fcfg.is_default:  # the log's feedback follows the run's feedback model
        log_plan = make_plan(a_log.astype(np.int8)[:, None], gives, log_rate,
                             _sub_seed(seed, TAG_CAUSAL_LOG), fcfg)
        seen = thumbs_of(log_plan.feedback[:, 0])  # outcomes users logged: judge fill-in is not its protocol
        gives = seen != NO_FEEDBACK
        a_log = np.where(gives, seen, a_log).astype(np.float64)
    means = [c_log[t_log == t].mean() for t in range(M) if np.any(t_log == t)]
    kappa = float(max(means)) if means else 1.0
    cn_log = c_log / kappa
    fb_rows = np.flatnonzero(gives)
    if len(fb_rows) < 2:
        raise ValueError(f"Causal routing needs logged feedback: the history of {n} requests at "
                         f"feedback rate {feedback_rate} gave {len(fb_rows)} labelled rows (need >= 2)")
    e = max(1.0 / M, float(propensity_clip))
    # outcome regressions, evaluated on the feedback rows (the DR sample)
    mu_a, k_a = _knn_per_model(Xh, [fb_rows[t_log[fb_rows] == t] for t in range(M)], a_log, fb_rows, k_grid)
    mu_c, k_c = _knn_per_model(Xh, [np.flatnonzero(t_log == t) for t in range(M)], cn_log, fb_rows, k_grid)
    Xf, tf = Xh[fb_rows], t_log[fb_rows]
    hit = np.zeros((len(fb_rows), M))
    hit[np.arange(len(fb_rows)), tf] = 1.0 / e
    A_dr = mu_a + hit * (a_log[fb_rows, None] - mu_a)
    C_dr = mu_c + hit * (cn_log[fb_rows, None] - mu_c)
    fit = dict(tau=tau, l2=l2, steps=steps, lr=lr)

    est_sat: list[float] = []
    if lam is None:
        grid = np.asarray(lam_grid, np.float64)
        Y = A_dr[None] - grid[:, None, None] * C_dr[None]
        nf = len(fb_rows)
        fold_of = np.empty(nf, np.int64)
        fold_of[rng.permutation(nf)] = np.arange(nf) % max(2, min(int(folds), nf))
        sat_sum = np.zeros(len(grid))
        cost_sum = np.zeros(len(grid))
        for f in np.unique(fold_of):
            tr, te = fold_of != f, fold_of == f
            W, b = rm_softmax_fit(Xf[tr], Y[:, tr], **fit)
            route = np.argmax(np.einsum("nd,ldm->lnm", Xf[te], W) + b[:, None, :], axis=2)  # (L, n_te)
            rows = np.arange(int(te.sum()))
            for j in range(len(grid)):
                sat_sum[j] += A_dr[te][rows, route[j]].sum()
                cost_sum[j] += C_dr[te][rows, route[j]].sum()
        est_sat = list(sat_sum / nf)
        lam = float(grid[closest_to_alpha(sat_sum / nf, alpha, cost_sum)])
    lam = float(lam)
    W, b = rm_softmax_fit(Xf, (A_dr - lam * C_dr)[None], **fit)
    model = np.argmax(X[order] @ W[0] + b[0], axis=1)
    return method_result("causal", data, alpha, order, model, extra_cost=float(c_log.sum()),
                         info={"lambda": lam, "kappa": kappa, "n_history": n, "n_feedback": int(len(fb_rows)),
                               "k_outcome": k_a, "k_cost": k_c, "dr_satisfaction": est_sat,
                               "variant": "rm-softmax, one router per lambda on a grid"})
