"""One run of the grid: split a benchmark into history and stream, run one method on the
stream, and return its tidy row (:data:`ROW_COLUMNS`, plus one ``calls_<model>`` column
per model), or an error row when the run cannot be done on its data."""

from __future__ import annotations

import math

import numpy as np

from ..baselines import METHODS, info_json, split_history
from ..data import RoutingData
from ..metrics import Summary
from .feedback_axis import feedback_columns
from .grid import Task


#: the columns of every tidy row; ``V`` is the spec's fixed V (NaN when V is data-driven
#: or the method has none), so a V sweep reads its x-axis without parsing labels.
#: ``operating_cost`` = ``stream_cost`` + ``training_cost`` + ``judge_cost`` (the LLM
#: judge's calls under judge fill-in: ``judge_calls`` x ``judge_call_cost``);
#: ``feedback`` counts thumbs only; ``first_at_risk``: the router's first at-risk
#: warning (request index; NaN if none, or for methods without one)
ROW_COLUMNS = ("dataset", "benchmark", "method", "method_key", "params", "V", "seed", "feedback_rate",
               "feedback_model", "feedback_kind", "feedback_params", "history_fraction", "alpha", "n_stream",
               "n_history", "cost_unit", "stream_cost", "training_cost", "operating_cost", "satisfaction",
               "post_convergence_satisfaction", "sla_met", "lcb", "first_at_risk", "explored", "feedback",
               "judge_calls", "judge_call_cost", "judge_cost", "final_q", "final_v", "tuned")


def run_task(task: Task, data: RoutingData, embeddings: np.ndarray) -> dict:
    """One run: split, route the stream, and the tidy row (plain Python values)."""
    from threadpoolctl import threadpool_limits

    stream, stream_emb, history = split_history(data, embeddings, task.seed, task.history_fraction)
    method = METHODS[task.spec.method]
    with threadpool_limits(limits=1):  # small matrices: one BLAS thread per worker is fastest
        try:
            r = method(stream, stream_emb, task.alpha, task.seed, task.feedback_rate,
                       history=history, feedback=task.feedback, **task.spec.params)
        except TypeError as exc:
            raise ValueError(f"bad parameters for {task.spec.method}: {exc}") from None
    s = r.summary
    scale = s.display_scale
    judge = judge_columns(s, data, task.judge_cost)
    at_risk = r.info.get("first_at_risk")
    row = {
        "dataset": task.dataset, "benchmark": task.benchmark, "method": task.spec.name,
        "method_key": task.spec.method, "params": task.spec.params_json(), "V": task.spec.fixed_v, "seed": task.seed,
        "feedback_rate": task.feedback_rate, **feedback_columns(task.feedback),
        "history_fraction": task.history_fraction, "alpha": task.alpha, "n_stream": stream.n_requests,
        "n_history": history.n,
        "cost_unit": s.display_unit, "stream_cost": s.operating_cost * scale,
        "training_cost": r.extra_cost * scale, "operating_cost": r.total_cost * scale + judge["judge_cost"],
        "satisfaction": s.satisfaction, "post_convergence_satisfaction": s.post_convergence_satisfaction,
        "sla_met": bool(s.satisfaction >= task.alpha), "lcb": float(r.info.get("lcb", math.nan)),
        "first_at_risk": math.nan if at_risk is None else float(at_risk),
        "explored": s.explored, "feedback": s.feedback, **judge,
        "final_q": s.final_q, "final_v": s.final_v, "tuned": info_json(r.info), **call_columns(s),
    }
    return row


def judge_columns(s: Summary, data: RoutingData, given: float | None) -> dict:
    """A row's judge columns in display units: calls, the price of one
    (:func:`judge_call_cost`) and their cost, which ``operating_cost`` includes."""
    call = judge_call_cost(data, given) * s.display_scale
    return {"judge_calls": s.judged, "judge_call_cost": call, "judge_cost": s.judged * call}


def call_columns(s: Summary) -> dict:
    """A row's ``calls_<model>`` columns: each model's share of the served requests."""
    return {f"calls_{m}": ratio for m, ratio in zip(s.models, s.call_ratio)}


def judge_call_cost(data: RoutingData, given: float | None) -> float:
    """One LLM-judge call in the data's cost unit: ``given``, or by default the cheapest
    model's mean cost per request on ``data`` (a judge reads the request and the answer,
    so it costs at least what the smallest model of the zoo does)."""
    if given is not None:
        return float(given)
    return float(np.asarray(data.costs, np.float64).mean(axis=0).min()) if data.n_requests else 0.0


def error_row(task: Task, data: RoutingData, message: str) -> dict:
    """The row of a run that failed: its identity, empty metrics and the ``error`` message."""
    row = {c: np.nan for c in ROW_COLUMNS}
    row.update({"dataset": task.dataset, "benchmark": task.benchmark, "method": task.spec.name,
                "method_key": task.spec.method, "params": task.spec.params_json(), "V": task.spec.fixed_v, "seed": task.seed,
                "feedback_rate": task.feedback_rate, **feedback_columns(task.feedback),
                "history_fraction": task.history_fraction, "alpha": task.alpha, "sla_met": False, "tuned": "{}",
                "error": message})
    for m in data.models:
        row[f"calls_{m}"] = np.nan
    return row
