"""Runs over benchmarks x seeds, with tidy results (one row per run) and aggregation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from .data import RoutingData, load_parquet, midpoint_alpha
from .importers import load_messplus
from .router import RouterConfig
from .simulator import PAPER_SEEDS, SimulationConfig, simulate

ProgressFn = Callable[[int, int], None]


def load_any(path: str | Path, cost: str = "energy_joules") -> RoutingData:
    """A canonical parquet file, or MESS+ logs (a .csv/.json/.jsonl file or a folder)."""
    p = Path(path)
    if p.is_dir() or p.suffix.lower() in (".csv", ".json", ".jsonl"):
        return load_messplus(p, cost=cost)
    return load_parquet(p, cost=cost)


def resolve_alpha(alpha: float | str, data: RoutingData) -> float:
    """A number in (0, 1), or 'midpoint': halfway between the two most expensive models."""
    if isinstance(alpha, str):
        if alpha == "midpoint":
            return midpoint_alpha(data)
        try:
            alpha = float(alpha)
        except ValueError:
            raise ValueError(f"alpha must be a number in (0, 1) or 'midpoint', got {alpha!r}") from None
    return alpha


def run_slarouter_grid(data: RoutingData, embeddings: np.ndarray, router: RouterConfig | None = None,
                       alpha: float | str = "midpoint", benchmarks: Sequence[str] | None = None,
                       seeds: Iterable[int] = PAPER_SEEDS, feedback_rate: float = 0.2,
                       per_benchmark: bool = True, progress: ProgressFn | None = None) -> pd.DataFrame:
    """SLARouter on each benchmark's own stream (or one mixed stream) for every seed."""
    names = list(benchmarks) if benchmarks else data.benchmark_names
    data.select(names)  # validates the names
    groups = [[b] for b in names] if per_benchmark else [names]
    seeds = list(seeds)
    rows = []
    done, total = 0, len(groups) * len(seeds)
    bench = data.benchmarks
    for group in groups:
        sub = data.select(group)
        emb = embeddings[np.isin(bench, group)]
        a = resolve_alpha(alpha, sub)
        base = router if router is not None else RouterConfig(alpha=a)
        cfg = replace(base, alpha=a)
        for seed in seeds:
            s = simulate(sub, emb, SimulationConfig(cfg, feedback_rate=feedback_rate, seed=seed)).summary()
            row = {"benchmark": "+".join(group), "seed": seed, "method": "SLARouter",
                   "alpha": a, "c": cfg.c, "V": cfg.V if cfg.V is not None else "data-driven",
                   "feedback_rate": feedback_rate, "requests": s.requests,
                   "operating_cost": s.operating_cost_display, "cost_unit": s.display_unit,
                   "satisfaction": s.satisfaction, "post_convergence_satisfaction": s.post_convergence_satisfaction,
                   "sla_met": s.sla_met, "explored": s.explored, "feedback": s.feedback, "final_v": s.final_v}
            for m, r in zip(s.models, s.call_ratio):
                row[f"calls_{m}"] = r
            rows.append(row)
            done += 1
            if progress:
                progress(done, total)
    return pd.DataFrame(rows)


def aggregate(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds per (benchmark, method); SLA judged on the mean."""
    keys = [k for k in ("benchmark", "method") if k in results.columns]
    call_cols = [c for c in results.columns if c.startswith("calls_")]
    g = results.groupby(keys, sort=False)
    out = g.agg(alpha=("alpha", "first"), seeds=("seed", "count"),
                cost_mean=("operating_cost", "mean"), cost_std=("operating_cost", "std"),
                satisfaction_mean=("satisfaction", "mean"), satisfaction_std=("satisfaction", "std"),
                post_convergence_mean=("post_convergence_satisfaction", "mean"),
                cost_unit=("cost_unit", "first")).reset_index()
    for c in call_cols:
        out[c] = g[c].mean().to_numpy()
    out["sla_met"] = out["satisfaction_mean"] >= out["alpha"]
    return out


def format_table(agg: pd.DataFrame) -> str:
    """A Markdown table in the shape of the paper's Table 2."""
    call_cols = [c for c in agg.columns if c.startswith("calls_")]
    models = "/".join(c[len("calls_"):] for c in call_cols)
    unit = agg["cost_unit"].iloc[0] if len(agg) else "MJ"
    lines = [f"| benchmark | method | alpha | operating cost ({unit}) | request satisfaction (%) | "
             f"model call ratio ({models}) | SLA |",
             "|---|---|---|---|---|---|---|"]
    for _, r in agg.iterrows():
        std_c = 0.0 if pd.isna(r["cost_std"]) else r["cost_std"]
        std_s = 0.0 if pd.isna(r["satisfaction_std"]) else r["satisfaction_std"]
        ratio = "/".join(f"{100 * r[c]:.0f}%" for c in call_cols)
        lines.append(f"| {r['benchmark']} | {r['method']} | {r['alpha']:.3f} | {r['cost_mean']:.3f} ± {std_c:.3f} | "
                     f"{100 * r['satisfaction_mean']:.1f} ± {100 * std_s:.1f} | {ratio} | "
                     f"{'met' if r['sla_met'] else 'missed'} |")
    return "\n".join(lines)
