"""The dashboard's results in plain sentences: which router holds the SLA, at what
multiple of each reference (the static mixture, the most accurate model), and why the
paper's rule misses where it does. Every figure is read from a run or its results; none is
written in here."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from ..policies.registry import DEFAULT_POLICY
from ..policies.registry import info as policy_info


def expected_exploration(c: float, n: int) -> float:
    """The share of ``n`` requests the paper's rule explores on average: the mean of
    min(1, c / t^(1/4)) over t = 1..n (its exploration schedule)."""
    if n <= 0:
        return 0.0
    t = np.arange(1, int(n) + 1, dtype=np.float64)
    return float(np.mean(np.minimum(1.0, float(c) / t ** 0.25)))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def same_satisfaction_note(r: dict[str, Any]) -> str:
    """The static-mixture tile's second yardstick (a sentence, or ""): a router that must
    hold alpha delivers more than alpha, and the mixture that delivers as much costs more
    than the one priced at alpha, so the two multiples together say how much of the cost
    is the satisfaction and how much the routing."""
    same = r.get("vs_mixture_same", float("nan"))
    if not np.isfinite(same):
        return ""
    return (f" Against the static mixture that would deliver this router's own {_pct(r['satisfaction'])} "
            f"(not alpha): {same:.2f}x.")


def headline_story(h: dict[str, Any], c: float, feedback_rate: float) -> list[str]:
    """The run in plain sentences (Markdown), from :meth:`LiveRun.headline`: which router
    holds the SLA and at what multiple of each reference, and why the paper's rule misses
    where it does (how little it explores, hence how few labels its predictor sees). Every
    figure is the run's own; before Start, what the settings lead one to expect."""
    alpha, n = h["alpha"], h["total"]
    routers = h["routers"]
    if h["served"] == 0:
        lines = [f"Press **Start**: {', '.join(r['mode'] for r in routers)} serve the same {n:,} requests with the "
                 f"same feedback, and must keep at least alpha = {_pct(alpha)} of them satisfied."]
        for r in [r for r in routers if policy_info(r["mode"]).explored_labels_only][:1]:
            share = expected_exploration(c, n)
            lines.append(f"`{r['mode']}` explores with probability min(1, c / t^(1/4)), c = {c:g}: about "
                         f"{_pct(share)} of {n:,} requests, so its predictor will learn from about "
                         f"{share * n * feedback_rate:,.0f} labels (explored requests that get feedback, rate "
                         f"{feedback_rate:g}); everywhere else it trusts that predictor.")
        return lines
    best_name = routers[0]["best_model"]
    lines = []
    for r in routers:
        sat = r["satisfaction"]
        cost = (f"at **{r['vs_mixture']:.2f}x** the static mixture's cost and **{r['vs_best']:.2f}x** the cost of "
                f"always calling the most accurate model ({best_name})")
        if np.isfinite(r["vs_mixture_same"]):
            cost += (f" (**{r['vs_mixture_same']:.2f}x** the static mixture that would deliver its "
                     f"{_pct(sat)})")
        if r["sla"] == "met":
            lines.append(f"**{r['mode']}** holds the SLA so far: {_pct(sat)} satisfied, alpha {_pct(alpha)}, {cost}.")
        else:
            lines.append(f"**{r['mode']}** misses the SLA so far: {_pct(sat)} satisfied, "
                         f"{100 * (alpha - sat):.1f} points under alpha {_pct(alpha)}, {cost}.")
        if r["status"].get("at_risk"):
            since = r["status"].get("at_risk_since")
            lines[-1] += " Its own check flags the SLA **at risk**" + (f" since request {since:,}." if since else ".")
        if policy_info(r["mode"]).explored_labels_only and r["sla"] == "missed":
            lines.append(f"Why `{r['mode']}` misses: it explores with probability min(1, c / t^(1/4)) (c = {c:g}), so it "
                         f"explored {_pct(r['explored_share'])} of the requests ({r['explored']:,} of "
                         f"{r['served']:,}) and its predictor learned from only {r['labels']:,} label{'' if r['labels'] == 1 else 's'} (explored "
                         f"requests that got feedback). Its queue Q has grown to {r['q']:.3g}, which pushes it "
                         "towards the models its predictor rates higher, but that predictor rests on those few labels.")
    held = [r for r in routers if r["sla"] == "met"]
    if len(routers) > 1:
        if held:
            top = min(held, key=lambda r: r["cost_raw"])
            lines.insert(0, f"So far **{top['mode']}** is the cheapest router that holds the SLA.")
        else:
            lines.insert(0, "So far no router holds the SLA.")
    return lines


def _explored_labels_only(params: Any) -> bool:
    """Whether an experiment row's SLARouter params select a policy whose model learns from
    explored requests only (the paper's rule: no mode, the default)."""
    try:
        p = json.loads(params) if isinstance(params, str) else dict(params or {})
        return policy_info(p.get("mode", DEFAULT_POLICY)).explored_labels_only
    except (ValueError, TypeError):
        return False


def _multiple(x: float, held: bool) -> str:
    """A cost multiple in bold, coloured as Live run colours it: green only below the
    reference with the SLA held, red above it, grey where the SLA is missed (cheaper then
    is no saving)."""
    colour = ("green" if x < 1 else "red") if held else "gray"
    return f":{colour}[**{x:.2f}x**]"


def experiment_story(agg: pd.DataFrame, rows: pd.DataFrame) -> list[str]:
    """The Experiments comparison in plain sentences (Markdown): per SLARouter method, on
    how many benchmarks it held the SLA and its cost as a geometric-mean multiple of the
    static mixture and of the most accurate single model on each benchmark; for the
    paper's rule, where it misses, the share of requests it explored and about how many
    labels its predictor saw (explored requests times the feedback rate)."""
    if "method_key" not in agg.columns:
        return []
    keys = [k for k in ("dataset", "benchmark", "feedback_rate", "feedback_model") if k in agg.columns]
    refs: dict[str, pd.Series] = {}
    mix = agg[agg["method_key"] == "static_mixture"]
    if len(mix):
        refs["the static mixture"] = mix.set_index(keys)["cost_mean"]
    single = agg[agg["method_key"] == "single"]
    if len(single):
        top = single.sort_values(["satisfaction_mean", "cost_mean"], ascending=[False, True])
        refs["the most accurate single model"] = top.drop_duplicates(keys).set_index(keys)["cost_mean"]
    lines = []
    holders: list[tuple[float, str]] = []  # (mean cost, method) of the routers that hold everywhere
    for method, block in agg[agg["method_key"] == "slarouter"].groupby("method", sort=False):
        b = block.set_index(keys)
        met, n = int(block["sla_met"].sum()), len(block)
        mults = []
        for name, ref in refs.items():
            ratio = (b["cost_mean"] / ref.reindex(b.index)).to_numpy(float)
            ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
            if len(ratio):
                mults.append(f"{_multiple(float(np.exp(np.log(ratio).mean())), met == n)} {name}")
        if met == n:
            holders.append((float(block["cost_mean"].mean()), str(method)))
        verb = "holds" if met == n else ("misses" if met == 0 else "holds on some benchmarks")
        line = f"**{method}** {verb} the SLA: {met} of {n} benchmark(s)"
        line += (", at " + " and ".join(mults) + " (geometric mean over benchmarks)" if mults else "") + "."
        if met < n and mults:
            line += " A cost below a reference is no saving where the SLA is missed."
        lines.append(line)
        mine = rows[(rows["method"] == method)] if "method" in rows.columns else rows.iloc[:0]
        if met < n and len(mine) and _explored_labels_only(mine["params"].iloc[0]):
            share = float((mine["explored"] / mine["n_stream"]).mean())
            labels = float((mine["explored"] * mine["feedback_rate"]).mean())
            lines.append(f"Why **{method}** (the paper's rule) misses: it explores with probability "
                         f"min(1, c / t^(1/4)), which came to {100 * share:.1f}% of each stream "
                         f"({mine['explored'].mean():,.0f} requests on average), so its predictor saw only about "
                         f"{labels:,.0f} label{'' if round(labels) == 1 else 's'} per run (explored requests with feedback). Everywhere else it "
                         "routes on that predictor's estimates.")
    if lines:
        lines.insert(0, f"Here **{min(holders)[1]}** is the cheapest SLARouter mode that holds the SLA on every "
                        "benchmark." if holders else "Here no SLARouter mode holds the SLA on every benchmark.")
    return lines
