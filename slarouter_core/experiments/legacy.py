"""The SLARouter-only grid of the CLI's ``simulate`` command: SLARouter on each whole
benchmark (no history split), one row per benchmark and seed."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..feedback import FeedbackConfig
from ..router import RouterConfig
from ..simulator import DEFAULT_FEEDBACK_RATE, PAPER_SEEDS, SimulationConfig, simulate
from .alpha import resolve_alpha
from .datasets import ProgressFn
from .feedback_axis import feedback_columns, parse_feedback
from .grid import rows_of
from .runs import call_columns, judge_columns


def run_slarouter_grid(data: RoutingData, embeddings: np.ndarray, router: RouterConfig | None = None,
                       alpha: float | str = "midpoint", benchmarks: Sequence[str] | None = None,
                       seeds: Iterable[int] = PAPER_SEEDS, feedback_rate: float = DEFAULT_FEEDBACK_RATE,
                       per_benchmark: bool = True, progress: ProgressFn | None = None,
                       feedback: FeedbackConfig | str | None = None,
                       judge_cost: float | None = None) -> pd.DataFrame:
    """SLARouter on each benchmark's own stream (or one mixed stream) for every seed,
    on the whole benchmark (no history split; see :func:`run_grid` for the comparison).
    ``feedback``: the feedback model (a :class:`FeedbackConfig`, preset name or
    ``kind:key=value``; default IID); workload drift needs ``per_benchmark=False``.
    ``judge_cost``: one judge call under judge fill-in (default :func:`runs.judge_call_cost`),
    added to ``operating_cost`` (columns ``judge_calls``, ``judge_call_cost``, ``judge_cost``);
    ``first_at_risk``: the router's first SLA-at-risk warning (request index; NaN if none)."""
    fcfg = parse_feedback(feedback) if feedback is not None else FeedbackConfig()
    fcfg.check_rate(float(feedback_rate))
    names = list(benchmarks) if benchmarks else data.benchmark_names
    data.select(names)  # validates the names
    groups = [[b] for b in names] if per_benchmark else [names]
    if fcfg.kind == "drift" and any(len(g) < 2 for g in groups):
        raise ValueError("workload drift changes the benchmark mix of one stream: run one mixed stream "
                         "(per_benchmark=False, --mixed) over at least two benchmarks")
    fcols = feedback_columns(fcfg)
    seeds = list(seeds)
    rows = []
    done, total = 0, len(groups) * len(seeds)
    bench = data.benchmarks
    for group in groups:
        sub = data.select(group)
        emb = rows_of(embeddings, np.isin(bench, group))
        a = resolve_alpha(alpha, sub)
        base = router if router is not None else RouterConfig(alpha=a)
        cfg = replace(base, alpha=a)
        for seed in seeds:
            sim = simulate(sub, emb, SimulationConfig(cfg, feedback_rate=feedback_rate, seed=seed, feedback=fcfg))
            s = sim.summary()
            judge = judge_columns(s, sub, judge_cost)
            at_risk = sim.router.sla_status().get("first_at_risk")
            row = {"benchmark": "+".join(group), "seed": seed, "method": "SLARouter",
                   "alpha": a, **_c_and_v(cfg),
                   "feedback_rate": feedback_rate, **fcols, "requests": s.requests,
                   "operating_cost": s.operating_cost_display + judge["judge_cost"], "cost_unit": s.display_unit,
                   "satisfaction": s.satisfaction, "post_convergence_satisfaction": s.post_convergence_satisfaction,
                   "sla_met": s.sla_met, "lcb": sim.router.certified_lower_bound(),
                   "first_at_risk": math.nan if at_risk is None else float(at_risk),
                   "explored": s.explored, "feedback": s.feedback, **judge,
                   "final_v": s.final_v, **call_columns(s)}
            rows.append(row)
            del sim  # the next seed's stream copy must not coexist with this one
            done += 1
            if progress:
                progress(done, total)
    return pd.DataFrame(rows)


def _c_and_v(cfg: RouterConfig) -> dict:
    """The row's c and V columns: the policy's settings, where it has them."""
    st = cfg.settings
    v = getattr(st, "V", None)
    return {"c": getattr(st, "c", float("nan")),
            "V": v if v is not None else "data-driven" if hasattr(st, "q_max") else "n/a"}
