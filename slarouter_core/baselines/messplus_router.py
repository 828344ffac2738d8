"""MESS+ as published, on the common stream.

Its exploration schedule and data-driven V come from :mod:`slarouter_core.policies.schedule`,
the module SLARouter's policies use, so the comparison cannot drift apart on them.
"""

from __future__ import annotations

import numpy as np

from ..data import RoutingData
from ..feedback import NO_FEEDBACK, FeedbackConfig, thumbs_of
from ..policies.schedule import data_driven_v, exploration_probability
from ..predictor import PredictorConfig, SatisfactionPredictor
from ..validation import Range
from .common import History, MethodResult, check_alpha, check_embeddings, common_stream, method_result

#: paper's fixed V for SLARouter and MESS+ (costs in joules)
PAPER_V = 1e-5


def messplus(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
             feedback_rate: float, *, history: History | None = None, c: float = 0.1,
             V: float | None = PAPER_V, q_max: float = 30.0, eps: float = 0.001,
             predictor: PredictorConfig | dict | None = None,
             feedback: FeedbackConfig | None = None) -> MethodResult:
    """MESS+ on the common stream (the paper uses SLARouter's V and c for it).

    * Explore with probability ``min(1, c / t^(1/4))`` (step 1 always explores, so every
      running cost estimate starts from a real observation). Exploration queries every
      model, serves the last (most capable) one and is charged the SUM of all models'
      costs. When the user gives feedback (plan of ``stream_plan``, rate phi) the
      predictor gets the full label vector (one observation per model) and one step.
    * Exploitation: argmin_m V * Cbar_m + Q * (alpha - shat_m(x)); Cbar_m is the running
      mean of model m's observed cost (all models on exploration, the served one otherwise).
    * Queue: Q <- max(0, Q + alpha - s) only when feedback exists (s the served model's
      label); without feedback Q is left unchanged (no imputation).
    * V: fixed (default 1e-5, as SLARouter in the paper) or, with ``V=None``, data-driven
      as SLARouter's: q_max * eps / DeltaC with DeltaC the running mean cost gap.

    Feedback models (``feedback``, the same plan every method of a run gets): a verdict on
    the served model moves the queue; on an exploration step the predictor learns every
    model's verdict the plan gives (all of them under IID-like presence; under
    negativity bias each answer's verdict is present or not by its own label, as a
    user rating all M answers would give it; a judge's labels are the judge's). Judge
    fill-in (``judge_fill``) is SLARouter's protocol, not MESS+'s: it sees the thumbs only. Delayed
    feedback is honoured: a verdict on request i (queue step and, for exploration, the
    predictor update) takes effect after request ``i + delay - 1`` was served (delay 0
    or 1: at once), exactly when the simulator hands SLARouter the same verdict.

    The policy draws come from the router seed of ``stream_plan`` (as SLARouter's).
    Predictions are batched over each stretch between two predictor updates.
    """
    alpha = check_alpha(alpha)
    X = check_embeddings(data, embeddings)
    pcfg = PredictorConfig(**predictor) if isinstance(predictor, dict) else (predictor or PredictorConfig())
    Range(low=0.0, low_open=True, optional=True)("V", V)  # None: data-driven V
    N, M = data.n_requests, data.n_models
    order, plan, mseed = common_stream(data, seed, feedback_rate, feedback)
    fb = thumbs_of(plan.feedback)  # MESS+ learns from user feedback only: judge fill-in is not its protocol
    policy_ss, buffer_ss, pred_ss = np.random.SeedSequence(int(mseed)).spawn(3)
    policy_rng = np.random.Generator(np.random.PCG64(policy_ss))
    buffer_rng = np.random.Generator(np.random.PCG64(buffer_ss))
    pred = SatisfactionPredictor(X.shape[1], M, pcfg, seed=int(pred_ss.generate_state(1, np.uint64)[0]))
    Xs = X[order]
    Cs = np.asarray(data.costs, np.float64)[order]
    ts = np.arange(1, N + 1)
    explore = policy_rng.random(N) < exploration_probability(ts, c)
    explore[0] = True
    has = fb != NO_FEEDBACK  # (N, M): which verdicts the plan gives
    learn = explore & has.any(axis=1)  # exploration steps whose labels reach the predictor
    steps = np.arange(N)
    # end of which step each request's verdict arrives (the simulator's delayed semantics)
    due = steps if plan.delay is None else steps + np.maximum(np.asarray(plan.delay, np.int64) - 1, 0)
    spreads = np.cumsum(Cs[:, -1] - Cs[:, 0])
    v_trace = np.full(N, float(V)) if V is not None else data_driven_v(q_max, eps, spreads, ts)
    charged = np.where(explore, Cs.sum(axis=1), 0.0)

    model = np.full(N, M - 1, np.int64)
    q_trace = np.zeros(N)
    fb_served = np.full(N, NO_FEEDBACK, np.int8)
    cost_sum = np.zeros(M)
    cost_cnt = np.zeros(M)
    q = 0.0
    arrivals: dict[int, list[int]] = {}
    # the predictor changes only at the end of steps where exploration labels arrive
    train_at = np.unique(due[learn & (due < N)])
    start = 0
    for stop in list(train_at + 1) + [N]:
        if stop <= start:
            continue
        seg = np.arange(start, stop)
        exploit = seg[~explore[seg]]
        shat = pred.predict(Xs[exploit]) if len(exploit) else None
        k = 0
        for i in seg:
            if explore[i]:
                m = M - 1
                cost_sum += Cs[i]
                cost_cnt += 1
            else:
                cbar = cost_sum / np.maximum(cost_cnt, 1)
                m = int(np.argmin(v_trace[i] * cbar + q * (alpha - shat[k])))
                k += 1
                charged[i] = Cs[i, m]
                cost_sum[m] += Cs[i, m]
                cost_cnt[m] += 1
            model[i] = m
            fb_served[i] = fb[i, m]
            if has[i, m] or learn[i]:
                arrivals.setdefault(int(due[i]), []).append(int(i))
            for j in arrivals.pop(int(i), ()):
                mj = model[j]
                if has[j, mj]:
                    q = max(0.0, q + alpha - float(fb[j, mj]))
                if learn[j]:
                    for jm in np.flatnonzero(has[j]):
                        pred.add(Xs[j], int(jm), float(fb[j, jm]))
                    pred.train_step(buffer_rng)
            q_trace[i] = q
        start = stop
    return method_result("messplus", data, alpha, order, model, charged=charged, explored=explore,
                         q=q_trace, feedback=fb_served, v=v_trace,
                         info={"c": c, "V": V, "explore_cost": float(charged[explore].sum())})
