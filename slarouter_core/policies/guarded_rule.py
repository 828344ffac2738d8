"""The guarded rule, compiled: named records for its parameters and state (numpy
structured types, so no field is read by position) and the step functions that both the
per-request path and the batched kernel call (:func:`guarded_choose`,
:func:`guarded_update`, :func:`guarded_absorb`, :func:`guarded_late`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .paper import argmin_score
from .schedule import label_share, p_explore_at, v_at

#: Thompson policy: Marsaglia-Tsang proposals per gamma variate (pre-drawn per step)
TS_TRIES = 4

#: the rule's parameters, by name, as the compiled functions read them
PARAMS = np.dtype([(k, np.float64) for k in (
    "alpha", "c", "V", "q_max", "eps", "v_scale", "text_weight", "optimism", "margin_z", "guard_q",
    "prior_strength", "horizon", "pessimism", "label_fpr", "label_fnr", "train_every")]
    + [(k, np.bool_) for k in ("levels", "bank_surplus", "dr", "learn_from_all", "mixture", "thompson")])
#: the rule's scalar state, by name (per-model arrays travel beside it)
STATE = np.dtype([(k, np.float64) for k in (
    "spread_sum", "deficit", "var_sum", "r2sum", "r2n", "q", "n_feedback", "pending", "delay_sum")])
#: per-model state arrays
ARRAYS = ("lpos", "lcnt", "psum", "last_dev", "last_shat", "csum")


def params_record(alpha: float, g: Any) -> np.ndarray:
    """One-element PARAMS array from the SLA level and a GuardedConfig (V and guard_q:
    -1 means none)."""
    cfg = g
    out = np.zeros(1, PARAMS)
    r = out[0]
    r["alpha"], r["c"], r["q_max"], r["eps"] = alpha, cfg.c, cfg.q_max, cfg.eps
    r["V"] = -1.0 if cfg.V is None else cfg.V
    r["guard_q"] = -1.0 if g.guard_q is None else g.guard_q
    for k in ("v_scale", "text_weight", "optimism", "margin_z", "prior_strength", "horizon", "pessimism",
              "label_fpr", "label_fnr", "train_every", "levels", "bank_surplus", "learn_from_all"):
        r[k] = getattr(g, k)
    r["dr"] = g.queue_update == "dr"
    r["mixture"] = g.policy == "mixture"
    r["thompson"] = g.policy == "thompson"
    return out


# -- the rule, compiled ---------------------------------------------------------------------
_jit = njit(cache=True, nogil=True)


@_jit
def decision_queue_of(s, par):
    """max(0, base + z * sqrt(var)), base the banked deficit (or the truncated queue)."""
    base = s.deficit if par.bank_surplus else s.q
    return max(0.0, base + par.margin_z * np.sqrt(s.var_sum))


@_jit
def beta_level(a0, pos, cnt):
    """Posterior mean and pseudo-count of a Beta(a0 + pos, a0 + cnt - pos) level."""
    A = a0 + pos
    B = a0 + cnt - pos
    return A / (A + B), A + B


@_jit
def mixture_pick(cost, level, target, u):
    """Cheapest randomised mix of at most two models whose levels reach ``target``; the
    uniform ``u`` picks the model. Returns (model, escalated): escalated when no mix
    reaches the target and the priciest model is served (the guard's assumption)."""
    M = cost.shape[0]
    best = np.inf
    pick = -1
    for i in range(M):
        if level[i] >= target and cost[i] < best:
            best = cost[i]
            pick = i
    lo = -1
    hi = -1
    wbest = 0.0
    for i in range(M):
        for j in range(M):
            if level[i] < target <= level[j] and cost[i] < cost[j]:
                wv = (target - level[i]) / (level[j] - level[i])
                mix = cost[i] + wv * (cost[j] - cost[i])
                if mix < best:
                    best = mix
                    lo = i
                    hi = j
                    wbest = wv
    if lo >= 0:
        return (hi if u < wbest else lo), False
    if pick >= 0:
        return pick, False
    top = 0
    for i in range(1, M):
        if cost[i] > cost[top]:
            top = i
    return top, True


@_jit
def gamma_variate(a, D, row):
    """Gamma(a, 1) by Marsaglia-Tsang from pre-drawn numbers ``D[row]`` (TS_TRIES
    normals, then TS_TRIES + 1 uniforms; the last boosts a < 1). If every proposal is
    rejected (probability < 1e-5 per variate for a >= 1) the last proposal is kept."""
    K = (D.shape[1] - 1) // 2
    boost = 1.0
    if a < 1.0:
        boost = D[row, 2 * K] ** (1.0 / a)
        a = a + 1.0
    d = a - 1.0 / 3.0
    cc = 1.0 / np.sqrt(9.0 * d)
    g = d
    for k in range(K):
        z = D[row, k]
        v = 1.0 + cc * z
        if v <= 0.0:
            continue
        v = v * v * v
        g = d * v
        u = D[row, K + k]
        z2 = z * z
        if u < 1.0 - 0.0331 * z2 * z2:
            break
        if u > 0.0 and np.log(u) < 0.5 * z2 + d * (1.0 - v + np.log(v)):
            break
    return g * boost


@_jit
def thompson_levels(lpos, lcnt, P, dev, a0, w, levels, D, out):
    """One posterior sample per model: Beta(a0 + positives, a0 + negatives) (shifted by
    the predictor's centred deviation ``w * dev`` when ``levels``); without ``levels``
    the Beta has the predictor's mean and ``lcnt + 2 a0`` pseudo-counts."""
    M = lpos.shape[0]
    for j in range(M):
        if levels:
            A = a0 + lpos[j]
            B = a0 + lcnt[j] - lpos[j]
        else:
            pj = min(max(P[j], 1e-3), 1.0 - 1e-3)
            n = lcnt[j] + 2.0 * a0
            A = pj * n
            B = (1.0 - pj) * n
        ga = gamma_variate(A, D, 2 * j)
        gb = gamma_variate(B, D, 2 * j + 1)
        th = ga / (ga + gb) if ga + gb > 0.0 else A / (A + B)
        if levels:
            th = th + w * dev[j]
        out[j] = min(max(th, 1e-3), 1.0 - 1e-3)


@_jit
def guarded_choose(t, u_explore, u_choice, P, costs, s, par, lpos, lcnt, psum, csum, dev, shat, est, lv, cm, D):
    """Step ``t``'s choice with predictions ``P`` (one row): updates the running sums in
    ``s``/``psum``/``csum`` and writes ``dev``, ``shat`` (the levels) and ``est`` (the
    estimate the choice used). Returns (model, explored, p_explore, V, decision queue,
    escalated)."""
    M = P.shape[0]
    a0 = par.prior_strength
    p = p_explore_at(par.c, t)
    explore = t == 1 or u_explore < p
    s.spread_sum += costs[M - 1] - costs[0]
    v = v_at(par.V, par.q_max, par.eps, s.spread_sum, t) * par.v_scale
    for j in range(M):
        pj = P[j]
        psum[j] += pj
        csum[j] += costs[j]
        if par.levels:
            th, n = beta_level(a0, lpos[j], lcnt[j])
            dev[j] = pj - psum[j] / t
            sh = min(max(th + par.text_weight * dev[j], 1e-3), 1 - 1e-3)
            sd = np.sqrt(th * (1 - th) / (n + 1))
        else:
            dev[j] = 0.0
            sh = pj
            sd = np.sqrt(pj * (1 - pj) / (lcnt[j] + 2 * a0 + 1))
        shat[j] = sh
        est[j] = min(1.0, sh + par.optimism * sd)
    qd = decision_queue_of(s, par)
    escalated = False
    if explore:
        m = min(int(u_choice * M), M - 1)
    elif par.mixture:
        for j in range(M):
            th, n = beta_level(a0, lpos[j], lcnt[j])
            lv[j] = th - par.pessimism * np.sqrt(th * (1 - th) / (n + 1))
            cm[j] = csum[j] / t
        base = s.deficit if par.bank_surplus else s.q
        m, escalated = mixture_pick(cm, lv, par.alpha + (base + par.margin_z * np.sqrt(s.var_sum)) / par.horizon,
                                    u_choice)
        for j in range(M):
            est[j] = lv[j]
    else:
        if par.thompson:  # posterior samples replace the optimistic levels
            thompson_levels(lpos, lcnt, P, dev, a0, par.text_weight, par.levels, D, lv)
            for j in range(M):
                est[j] = lv[j]
        m = argmin_score(v, costs, qd, par.alpha, est)
        if par.guard_q >= 0 and qd > par.guard_q and m != M - 1:
            m = M - 1
            escalated = True
    return m, explore, p, v, qd, escalated


@_jit
def debias(f, par):
    if par.label_fpr != 0.0 or par.label_fnr != 0.0:
        return (f - par.label_fpr) / (1.0 - par.label_fpr - par.label_fnr)
    return f


@_jit
def guarded_absorb(m, f, shat_m, dev_m, explored, s, par, lpos, lcnt):
    """Learn from a label (now or late): residuals, model ``m``'s level and, when the
    predictor should learn it, the count towards its next training step. Returns
    (predictor learns it, a training step is due)."""
    fd = debias(f, par)
    s.n_feedback += 1.0
    s.r2sum += (fd - shat_m) ** 2
    s.r2n += 1.0
    lcnt[m] += 1.0
    lpos[m] += min(1.0, max(0.0, fd - par.text_weight * dev_m))
    learn = par.learn_from_all or explored
    due = False
    if learn:
        s.pending += 1.0
        if s.pending >= par.train_every:
            s.pending = 0.0
            due = True
    return learn, due


@_jit
def feedback_share(t, lag, s):
    """The running share of steps with a label among those due (:func:`.schedule.label_share`)."""
    return label_share(t, s.n_feedback, lag)


@_jit
def guarded_update(t, m, explored, f, shat_m, dev_m, s, par, lpos, lcnt):
    """Step ``t``'s queue step with label ``f`` (< 0: none yet). Returns (the s the queue
    used, predictor learns it, a training step is due)."""
    phi = feedback_share(t, s.delay_sum / s.n_feedback if s.n_feedback > 0 else 0.0, s)
    if f >= 0:
        fd = debias(float(f), par)
        s_used = shat_m + (fd - shat_m) / phi if par.dr else fd
    else:
        s_used = shat_m
    s.deficit += par.alpha - s_used
    s.q = max(0.0, s.q + par.alpha - s_used)
    r2 = (s.r2sum + 0.25) / (s.r2n + 1.0)
    s.var_sum += r2 * (1.0 - phi) / (phi if par.dr else 1.0)
    learn, due = False, False
    if f >= 0:
        learn, due = guarded_absorb(m, float(f), shat_m, dev_m, explored, s, par, lpos, lcnt)
    return s_used, learn, due


@_jit
def guarded_late(t_now, age, f, shat_m, dev_m, m, explored, s, par, lpos, lcnt):
    """A label for the step ``age`` steps before ``t_now``: the queue's doubly-robust
    correction now (the share of labels with this one's delay in the lag), then learn."""
    if par.dr:
        phi = feedback_share(t_now, (s.delay_sum + age) / (s.n_feedback + 1.0), s)
        s.deficit -= (debias(f, par) - shat_m) / phi
    s.delay_sum += age
    return guarded_absorb(m, f, shat_m, dev_m, explored, s, par, lpos, lcnt)


@_jit
def _guarded_kernel(i0, i1, t0, P, p0, costs, fb, U, st, par, lpos, lcnt, psum, csum, last_dev, last_shat,
                    out_m, out_f, out_dev, learn, TS):
    """The rule over block rows [i0, i1) with fixed predictions (row i is ``P[i - p0]``).
    Stops after a step whose label makes a training step due; returns (next row, due)."""
    M = P.shape[1]
    s = st[0]
    pr = par[0]
    shat = np.empty(M)
    est = np.empty(M)
    dev = np.empty(M)
    cm = np.empty(M)
    lv = np.empty(M)
    for i in range(i0, i1):
        t = t0 + i + 1
        m, explore, p, v, qd, esc = guarded_choose(t, U[i, 0], U[i, 1], P[i - p0], costs[i], s, pr, lpos, lcnt,
                                                   psum, csum, dev, shat, est, lv, cm, TS[i if pr.thompson else 0])
        for j in range(M):
            last_dev[j] = dev[j]
            last_shat[j] = shat[j]
        s_used, lrn, due = guarded_update(t, m, explore, fb[i, m], shat[m], dev[m], s, pr, lpos, lcnt)
        out_m[i] = m
        out_f[i, 0] = 1.0 if explore else 0.0
        out_f[i, 1] = shat[m]
        out_f[i, 2] = s_used
        out_f[i, 3] = decision_queue_of(s, pr)
        out_f[i, 4] = v
        out_dev[i] = dev[m]
        learn[i] = lrn
        if due:
            return i + 1, True
    return i1, False
