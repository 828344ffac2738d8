"""Reproducing the paper: its protocol as one preset, its scoring beside ours, and its
published Table 2 beside our figures with a plain verdict per benchmark.

The paper's protocol (``--protocol paper``, the Experiments page's "Paper protocol"):
users' thumbs at feedback rate 0.2 and an LLM judge's verdict used as a label on every
other request (judge fill-in, ACPBench-grade judge), the paper's alpha rule
(:func:`alpha.paper_rule_alpha`), paper mode with V = 1e-5 and with data-driven V
(Q_max 30, eps 0.001), c = 0.1, SGD lr 0.006, batch 16 (the router's defaults), seeds
42 1 1234. The paper scores a method as meeting alpha when its *mean* satisfaction over
the seeds does; we ask it of 90% of the seeds. Both are shown."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..published import ZOO_NOTE, paper_table2
from ..simulator import PAPER_SEEDS


@dataclass(frozen=True)
class Protocol:
    """A named set of grid defaults; every setting given explicitly overrides it."""

    name: str
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    alpha: str
    judge_fill: str
    feedback_rate: float
    description: str

    @property
    def feedback(self) -> str:
        """The feedback preset of the protocol (IID thumbs, judge fill-in)."""
        return f"fill-{self.judge_fill}"


#: the paper's Table 2 methods (plus the static mixture and the oracle as references)
PAPER_METHODS = ("single", "static_mixture", "oracle", "carrot", "causal", "messplus", "slarouter", "slarouter_ddv")

PROTOCOLS: dict[str, Protocol] = {
    "paper": Protocol(
        name="paper", methods=PAPER_METHODS, seeds=PAPER_SEEDS, alpha="paper", judge_fill="acpbench",
        feedback_rate=0.2,
        description=("the paper's protocol: user thumbs at rate 0.2, an ACPBench-grade LLM judge's verdict as "
                     "the label of every other request, the paper's alpha rule, paper mode with V = 1e-5 and "
                     "data-driven V (Q_max 30, eps 0.001), c = 0.1, SGD lr 0.006, batch 16, seeds 42 1 1234")),
}


def _meets(flag: object) -> str:
    return "met" if bool(flag) else "missed"


def paper_scores(agg: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark and method, the paper's scoring beside ours: mean satisfaction over
    seeds against alpha, post-convergence satisfaction against alpha (queue methods), and
    our rule (seeds at or above alpha out of N, 90% needed)."""
    out = pd.DataFrame(index=agg.index)
    for col in ("dataset", "feedback_model", "feedback_rate", "alpha_setting"):
        if col in agg.columns and agg[col].nunique(dropna=False) > 1:
            out[col.replace("_", " ")] = agg[col]
    out["benchmark"] = agg["benchmark"]
    out["alpha (%)"] = (100 * agg["alpha"]).round(1)
    out["method"] = agg["method"].astype(str)
    out["mean over seeds (%)"] = (100 * agg["satisfaction_mean"]).round(2)
    out["paper: mean ≥ alpha"] = [_meets(m) for m in agg["mean_met"]]
    post = 100 * agg["post_convergence_mean"]
    out["post-convergence (%)"] = post.round(2)
    out["paper: post-convergence ≥ alpha"] = np.where(post.isna(), "–", [_meets(m) for m in agg["post_met"]])
    out["ours: seeds ≥ alpha"] = [f"{int(m)}/{int(n)}" for m, n in zip(agg["seeds_met"], agg["seeds"])]
    out["ours: SLA"] = [_meets(m) for m in agg["sla_met"]]
    out[f"cost ({agg['cost_unit'].iloc[0]})"] = agg["cost_mean"]
    if "judge_calls_mean" in agg.columns:
        out["judge calls"] = agg["judge_calls_mean"].round(1)
    return out.reset_index(drop=True)


def protocol_summary(agg: pd.DataFrame, method_key: str = "slarouter") -> pd.DataFrame:
    """One row per setting (alpha rule, feedback model, feedback rate) and SLARouter variant:
    on how many benchmarks it meets alpha by the mean over seeds, post-convergence, and by
    our rule; its cost over the static mixture's (geometric mean over benchmarks); and,
    where it meets alpha by the mean, its cost over the cheapest single model that does."""
    if "method_key" not in agg.columns:
        return pd.DataFrame()
    setting = [k for k in ("dataset", "alpha_setting", "feedback_model", "feedback_rate")
               if k in agg.columns and (k in ("feedback_model", "feedback_rate") or agg[k].nunique() > 1)]
    rows = []
    for key, block in agg.groupby(setting + ["method"], sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        if (block["method_key"] != method_key).all():
            continue
        ratios, single_ratios = [], []
        for _, r in block.iterrows():
            same = agg[agg["benchmark"] == r["benchmark"]]
            for k, v in zip(setting, key):
                same = same[same[k] == v]
            mix = same.loc[same["method_key"] == "static_mixture", "cost_mean"]
            if len(mix) and mix.iloc[0] > 0:
                ratios.append(r["cost_mean"] / mix.iloc[0])
            singles = same[(same["method_key"] == "single") & same["mean_met"]]
            if r["mean_met"] and len(singles):
                single_ratios.append(r["cost_mean"] / singles["cost_mean"].min())
        n = len(block)
        row = {("alpha" if k == "alpha_setting" else k.replace("_", " ")): v for k, v in zip(setting, key)}
        row.update({
            "method": key[-1],
            "meets alpha, mean over seeds": f"{int(block['mean_met'].sum())}/{n}",
            "post-convergence": f"{int(block['post_met'].sum())}/{n}",
            "ours (seeds ≥ alpha)": f"{int(block['sla_met'].sum())}/{n}",
            "cost ÷ static mixture (geo. mean)": round(float(np.exp(np.mean(np.log(ratios)))), 2) if ratios else math.nan,
            "where met: cost ÷ cheapest single meeting alpha": (
                f"{min(single_ratios):.2f}-{max(single_ratios):.2f}x" if single_ratios else "–"),
            "judge calls (mean)": round(float(block["judge_calls_mean"].mean()), 1)
            if "judge_calls_mean" in block.columns else math.nan,
        })
        rows.append(row)
    return pd.DataFrame(rows)


def _cheapest_meeting(costs: dict[str, float], sats: dict[str, float], alpha: float) -> tuple[str | None, float]:
    ok = {m: c for m, c in costs.items() if sats[m] >= alpha}
    if not ok:
        return None, math.nan
    m = min(ok, key=ok.get)
    return m, float(ok[m])


def published_comparison(agg: pd.DataFrame) -> pd.DataFrame:
    """SLARouter's published Table 2 row beside our SLARouter rows, for the benchmarks both
    have. Per benchmark: alpha, satisfaction minus alpha (mean over seeds), cost over the
    cheapest single model that meets alpha (by the mean), each published and measured,
    and a plain verdict: the paper's claim on that benchmark is that SLARouter meets alpha
    at a cost at or below that single model's."""
    table = paper_table2()
    if "method_key" not in agg.columns:
        return pd.DataFrame()
    keys = [k for k in ("dataset", "feedback_model", "feedback_rate", "alpha_setting")
            if k in agg.columns and agg[k].nunique(dropna=False) > 1]
    rows = []
    for _, r in agg[agg["method_key"] == "slarouter"].iterrows():
        key = table.key(str(r["benchmark"]))
        if key is None:
            continue
        same = agg[(agg["benchmark"] == r["benchmark"])]
        for k in keys:
            same = same[same[k] == r[k]]
        singles = same[same["method_key"] == "single"]
        ours_single, ours_cost = _cheapest_meeting(dict(zip(singles["method"], singles["cost_mean"])),
                                                   dict(zip(singles["method"], singles["satisfaction_mean"])),
                                                   float(r["alpha"]))
        pub = table.method(key)
        pa = table.alpha(key)
        single = table.single(key)
        pub_single, pub_cost = _cheapest_meeting({m: v["cost"] for m, v in single.items()},
                                                 {m: v["satisfaction"] for m, v in single.items()}, pa)
        pub_ratio = pub["cost"] / pub_cost if pub_single else math.nan
        ratio = float(r["cost_mean"]) / ours_cost if ours_single else math.nan
        gap, pub_gap = 100 * (r["satisfaction_mean"] - r["alpha"]), 100 * (pub["satisfaction"] - pa)
        row = {k.replace("_", " "): r[k] for k in keys}
        row.update({
            "benchmark": r["benchmark"], "method": r["method"],
            "alpha published (%)": round(100 * pa, 1), "alpha ours (%)": round(100 * float(r["alpha"]), 1),
            "satisfaction published (%)": round(100 * pub["satisfaction"], 1),
            "satisfaction ours, mean over seeds (%)": round(100 * float(r["satisfaction_mean"]), 1),
            "− alpha published (pp)": round(pub_gap, 1), "− alpha ours (pp)": round(float(gap), 1),
            "seeds ≥ alpha (ours)": f"{int(r['seeds_met'])}/{int(r['seeds'])}",
            "cost ÷ cheapest single meeting alpha, published": round(pub_ratio, 2),
            "cost ÷ cheapest single meeting alpha, ours": round(ratio, 2),
            "verdict": verdict(gap, ratio, pub_gap, pub_ratio),
        })
        rows.append(row)
    return pd.DataFrame(rows)


def verdict(gap_pp: float, ratio: float, pub_gap_pp: float, pub_ratio: float) -> str:
    """The plain verdict on one benchmark: does our run show what the paper shows there
    (meets alpha by the mean over seeds; costs at most the cheapest single model that
    meets alpha), and by how much it does not."""
    claims_cheap = not math.isnan(pub_ratio) and pub_ratio <= 1.0
    if pub_gap_pp < 0:
        return f"the paper does not claim alpha here ({pub_gap_pp:+.1f} pp); ours {gap_pp:+.1f} pp"
    if gap_pp < 0:
        below = f"{-gap_pp:.1f} pp" if -gap_pp >= 0.05 else "less than 0.1 pp"
        return f"not reproduced: {below} below alpha (published {pub_gap_pp:+.1f} pp)"
    if claims_cheap and not (ratio <= 1.0):
        dear = "no single model meets alpha" if math.isnan(ratio) else f"{ratio:.2f}x"
        return (f"partly: meets alpha (+{gap_pp:.1f} pp) but costs {dear} the cheapest single model that meets "
                f"it (published {pub_ratio:.2f}x)")
    cost = "" if math.isnan(ratio) else f" at {ratio:.2f}x the cheapest single model meeting it"
    if cost and not math.isnan(pub_ratio):
        cost += f" (published {pub_ratio:.2f}x)"
    return f"reproduced: meets alpha (+{gap_pp:.1f} pp){cost}"


def format_paper_section(agg: pd.DataFrame) -> str:
    """Markdown: the paper's scoring beside ours, and the published figures beside ours
    (when the data has benchmarks the paper has)."""
    from .markdown import markdown_table

    summary = protocol_summary(agg)
    text = ""
    if not summary.empty:
        text += ("### SLARouter per setting, scored three ways\n\n" + markdown_table(summary) + "\n\n")
    text += ("### Scored the paper's way beside ours\n\n"
            "The paper counts alpha as met when the **mean over seeds** reaches it (and reports "
            "**post-convergence** satisfaction, the stream's second half); we ask it of 90% of the seeds "
            "(seeds ≥ alpha out of N).\n\n" + markdown_table(paper_scores(agg)) + "\n\n")
    side = published_comparison(agg)
    table = paper_table2()
    text += "### Beside the published Table 2\n\n" + ZOO_NOTE + "\n\n"
    if side.empty:
        text += ("None of these benchmarks is in the published table (it has "
                 f"{', '.join(table.benchmark_keys)}), or no SLARouter run was made.\n")
    else:
        text += markdown_table(side) + "\n"
    return text
