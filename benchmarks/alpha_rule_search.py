"""Search for the paper's alpha rule: how many of Table 2's 11 published alphas each family
of candidate rules recomputes within 1 point from the published single-model accuracies
and costs (issue 21). Prints, per family, the best rule, its hit count, the benchmarks it
misses and by how much, and how many free choices were fitted to get there.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/alpha_rule_search.py

Families (models in order of cost; "anchor" = one model picked by a criterion):
  anchor criteria  cheapest model within a share of the accuracy range / a share of the
                   best accuracy / some points of the best / at or above the zoo mean or
                   median; on all models or on the cost-Pareto models only; the knee of the
                   cost-accuracy curve (largest drop in marginal accuracy per cost);
                   the best accuracy per cost
  anchor values    its accuracy, the lowest from it up, the mean from it up, a point between
                   it and the next cheaper model (share t)
  zoo values       mean, median, mean of the k best, midpoint of worst and best, a share of
                   the range, cost-weighted means (weights cost^p), the cost-accuracy
                   frontier (mixtures) at a share of the cost range or a multiple of the
                   cheapest cost
  roundings        none, floor / round / ceil to a whole point, the whole point strictly
                   below, round / floor to 5 points; then an offset of -3..+1 points
  linear rules     any weights on the models (by cost, or by accuracy rank) plus a constant:
                   a linear program asks whether any fits all 11 (5 free numbers)
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from slarouter_core.published import paper_table2  # noqa: E402

TOL = 0.01 + 1e-9


def published():
    t = paper_table2()
    rows = []
    for key in t.benchmark_keys:
        s = t.single(key)
        acc = np.array([s[m]["satisfaction"] for m in t.models])
        cost = np.array([s[m]["cost"] for m in t.models])
        order = np.argsort(cost, kind="stable")
        rows.append((key, t.alpha(key), acc[order], cost[order]))
    return rows


ROUNDINGS = {
    "none": lambda x: x,
    "floor": lambda x: math.floor(x * 100 + 1e-9) / 100,
    "round": lambda x: round(x, 2),
    "ceil": lambda x: math.ceil(x * 100 - 1e-9) / 100,
    "below": lambda x: math.ceil(x * 100 - 1e-9) / 100 - 0.01,  # the whole point strictly below
    "round5": lambda x: round(x * 20) / 20,
    "floor5": lambda x: math.floor(x * 20 + 1e-9) / 20,
}
OFFSETS = (-0.03, -0.02, -0.01, 0.0, 0.01)


# -- anchors: (a, c) sorted by cost -> index, given one parameter ----------------------------

def _first(mask):
    idx = np.flatnonzero(mask)
    return int(idx[0]) if len(idx) else len(mask) - 1


def _pareto(a, c):
    """Indices of the models no cheaper-or-equal model beats (cost-sorted input)."""
    keep = []
    for i in range(len(a)):
        if not any((c[j] <= c[i] and a[j] > a[i]) or (c[j] < c[i] and a[j] >= a[i]) for j in range(len(a)) if j != i):
            keep.append(i)
    return keep


ANCHORS = {
    "range share": (np.round(np.arange(0.0, 1.001, 0.01), 3),
                    lambda a, c, s: _first(a >= a.max() - s * (a.max() - a.min()) - 1e-12)),
    "best share": (np.round(np.arange(0.80, 1.0001, 0.0025), 4),
                   lambda a, c, r: _first(a >= r * a.max() - 1e-12)),
    "points below best": (np.round(np.arange(0.0, 0.2001, 0.0025), 4),
                          lambda a, c, d: _first(a >= a.max() - d - 1e-12)),
    "mean + z sd": (np.round(np.arange(-2.0, 2.001, 0.05), 3),
                    lambda a, c, z: _first(a >= a.mean() + z * a.std() - 1e-12)),
    "median + d": (np.round(np.arange(-0.1, 0.1001, 0.0025), 4),
                   lambda a, c, d: _first(a >= np.median(a) + d - 1e-12)),
    "range share, Pareto models": (np.round(np.arange(0.0, 1.001, 0.01), 3),
                                   lambda a, c, s: (lambda p: p[_first(a[p] >= a.max() - s * (a.max() - a.min()) - 1e-12)])(_pareto(a, c))),
    "knee (largest fall in accuracy per cost)": ((0.0,), lambda a, c, _: _knee(a, c)),
    "best accuracy per cost above the cheapest": ((0.0,), lambda a, c, _: 1 + int(np.argmax((a[1:] - a[0]) / np.maximum(c[1:] - c[0], 1e-9)))),
    "gain to the best dearer model below g": (np.round(np.arange(0.0, 0.2001, 0.0025), 4),
                                              lambda a, c, g: _first(np.array([a[i:].max() - a[i] <= g + 1e-12 for i in range(len(a))]))),
}


def _knee(a, c):
    p = _pareto(a, c)
    if len(p) < 3:
        return p[-1]
    slopes = [(a[p[i + 1]] - a[p[i]]) / max(c[p[i + 1]] - c[p[i]], 1e-9) for i in range(len(p) - 1)]
    drops = [slopes[i] - slopes[i + 1] for i in range(len(slopes) - 1)]
    return p[1 + int(np.argmax(drops))]


VALUES = {
    "its accuracy": ((0.0,), lambda a, k, t: a[k]),
    "lowest from it up": ((0.0,), lambda a, k, t: a[k:].min()),
    "mean from it up": ((0.0,), lambda a, k, t: a[k:].mean()),
    "share t from the next cheaper": (np.round(np.arange(0.0, 1.001, 0.05), 2),
                                      lambda a, k, t: a[max(k - 1, 0)] + t * (a[k] - a[max(k - 1, 0)])),
}


def _frontier(a, c, cost):
    """Best accuracy a mixture of models reaches at this mean cost (upper concave hull)."""
    pts = sorted(zip(c, a))
    hull = []
    for p in pts:
        while hull and hull[-1][0] == p[0] and hull[-1][1] <= p[1]:
            hull.pop()
        if hull and hull[-1][0] == p[0]:
            continue
        while len(hull) >= 2 and ((hull[-1][0] - hull[-2][0]) * (p[1] - hull[-2][1])
                                  - (hull[-1][1] - hull[-2][1]) * (p[0] - hull[-2][0])) >= 0:
            hull.pop()
        hull.append(p)
    xs, ys = zip(*hull)
    return float(np.interp(cost, xs, ys)) if len(xs) > 1 else ys[0]


ZOO = {
    "mean": ((0.0,), lambda a, c, p: a.mean()),
    "median": ((0.0,), lambda a, c, p: float(np.median(a))),
    "mean of the k best": ((1, 2, 3), lambda a, c, k: np.sort(a)[-int(k):].mean()),
    "share of the range": (np.round(np.arange(0.0, 1.001, 0.01), 2), lambda a, c, s: a.min() + s * (a.max() - a.min())),
    "cost^p weighted mean": (np.round(np.arange(-2.0, 2.001, 0.1), 2), lambda a, c, p: float((a * c ** p).sum() / (c ** p).sum())),
    "frontier at a share of the cost range": (np.round(np.arange(0.0, 1.001, 0.01), 2),
                                              lambda a, c, s: _frontier(a, c, c.min() + s * (c.max() - c.min()))),
    "frontier at a multiple of the cheapest cost": (np.round(np.arange(1.0, 4.001, 0.02), 2),
                                                    lambda a, c, m: _frontier(a, c, min(m * c.min(), c.max()))),
}


def score(fn, rows):
    errs = {}
    for key, alpha, a, c in rows:
        errs[key] = fn(a, c) - alpha
    hits = sum(abs(e) <= TOL for e in errs.values())
    return hits, errs


def best_of(candidates, rows):
    """candidates: iterable of (description, n_fitted, fn) -> the best few by hits, fewest fits."""
    out = []
    for desc, nfit, fn in candidates:
        hits, errs = score(fn, rows)
        out.append((hits, -nfit, desc, errs))
    out.sort(key=lambda r: (r[0], r[1]), reverse=True)
    return out


def anchored(rows):
    for (aname, (agrid, afn)), (vname, (vgrid, vfn)), (rname, rfn), off in itertools.product(
            ANCHORS.items(), VALUES.items(), ROUNDINGS.items(), OFFSETS):
        for ap, vp in itertools.product(agrid, vgrid):
            nfit = (len(agrid) > 1) + (len(vgrid) > 1) + (rname != "none") + (off != 0)
            desc = f"anchor: {aname} ({ap:g}); value: {vname} ({vp:g}); {rname}; offset {off:+.2f}"
            yield desc, nfit, (lambda a, c, afn=afn, vfn=vfn, ap=ap, vp=vp, rfn=rfn, off=off:
                               round(rfn(vfn(a, afn(a, c, ap), vp)) + off, 4))


def zoo_rules(rows):
    for (zname, (grid, zfn)), (rname, rfn), off in itertools.product(ZOO.items(), ROUNDINGS.items(), OFFSETS):
        for p in grid:
            nfit = (len(grid) > 1) + (rname != "none") + (off != 0)
            desc = f"zoo: {zname} ({p:g}); {rname}; offset {off:+.2f}"
            yield desc, nfit, (lambda a, c, zfn=zfn, p=p, rfn=rfn, off=off: round(rfn(zfn(a, c, p)) + off, 4))


def linear_feasible(rows, by_rank: bool, nonneg: bool):
    """Is there w (one weight per model) and b with |w . a + b - alpha| <= 1 point on all 11?
    Solved as an LP minimising the largest error; returns that error (<= 0.01: feasible)."""
    from scipy.optimize import linprog

    n = len(rows[0][2])
    A, rhs = [], []
    for _, alpha, a, _c in rows:
        x = np.sort(a) if by_rank else a
        # w.x + b - alpha <= e  and  alpha - w.x - b <= e ; variables [w (n), b, e]
        A.append(np.r_[x, 1.0, -1.0]); rhs.append(alpha)
        A.append(np.r_[-x, -1.0, -1.0]); rhs.append(-alpha)
    bounds = [(0, None) if nonneg else (None, None)] * n + [(None, None), (0, None)]
    res = linprog(np.r_[np.zeros(n + 1), 1.0], A_ub=np.array(A), b_ub=np.array(rhs), bounds=bounds)
    return float(res.x[-1]), res.x[:n], float(res.x[n])


def report(title, ranked, show=3):
    top = ranked[0][0]
    n_rules = len(ranked)
    print(f"\n## {title}: {n_rules} rules tried; best {top}/11")
    seen = 0
    for hits, negfit, desc, errs in ranked:
        if hits < top or seen >= show:
            break
        miss = ", ".join(f"{k} {100 * e:+.1f}" for k, e in errs.items() if abs(e) > TOL)
        print(f"  {hits}/11 ({-negfit} fitted choices)  {desc}\n      misses (points): {miss or 'none'}")
        seen += 1
    tens = [r for r in ranked if r[0] >= 10]
    print(f"  rules with >= 10/11: {len(tens)}")
    for hits, negfit, desc, errs in tens[:5]:
        miss = ", ".join(f"{k} {100 * e:+.1f}" for k, e in errs.items() if abs(e) > TOL)
        print(f"    {hits}/11 ({-negfit} fitted)  {desc}  misses: {miss or 'none'}")


def shipped_rule_sweep(rows):
    """The shipped rule (experiments.paper_rule_alpha) as its one fitted number moves."""
    from slarouter_core.experiments.alpha import PAPER_RULE_SPREAD, paper_rule_alpha

    print(f"\n## the shipped rule (spread {PAPER_RULE_SPREAD}) as the spread moves: hits out of 11")
    line = []
    for s in np.round(np.arange(0.0, 1.001, 0.05), 2):
        hits, _ = score(lambda a, c, s=s: paper_rule_alpha(a, c, spread=float(s)), rows)
        line.append(f"{s:.2f}:{hits}")
    print("  " + "  ".join(line))
    hits, errs = score(lambda a, c: paper_rule_alpha(a, c), rows)
    print(f"  shipped: {hits}/11; error per benchmark (points): "
          + ", ".join(f"{k} {100 * e:+.1f}" for k, e in errs.items()))


def main():
    rows = published()
    print("benchmark: published alpha | accuracies in order of cost (costs, MJ)")
    for key, alpha, a, c in rows:
        print(f"  {key:12s} {alpha:.2f} | " + " ".join(f"{x:.3f}" for x in a) + "  (" + " ".join(f"{x:.2f}" for x in c) + ")")
    report("anchor rules", best_of(anchored(rows), rows))
    report("zoo-statistic rules", best_of(zoo_rules(rows), rows))
    shipped_rule_sweep(rows)
    print("\n## linear rules alpha = w . accuracies + b (5 free numbers), the largest error of the best fit")
    for by_rank, nonneg in ((False, True), (False, False), (True, True), (True, False)):
        err, w, b = linear_feasible(rows, by_rank, nonneg)
        print(f"  models {'by accuracy rank' if by_rank else 'by cost'}, weights {'>= 0 (monotone)' if nonneg else 'any sign'}:"
              f" largest error {100 * err:.2f} points (w = {np.round(w, 3).tolist()}, b = {b:+.3f})")


if __name__ == "__main__":
    main()
