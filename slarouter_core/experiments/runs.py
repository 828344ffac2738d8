"""One run of the grid: split a benchmark into history and stream, run one method on the
stream, and return its tidy row (:data:`ROW_COLUMNS`, plus one ``calls_<model>`` column
per model), or an error row when the run cannot be done on its data."""

from __future__ import annotations

import math

import numpy as np

from ..baselines import METHODS, info_json, split_history
from ..data import RoutingData
from .feedback_axis import feedback_columns
from .grid import Task


#: the columns of every tidy row; ``V`` is the spec's fixed V (NaN when V is data-driven
#: or the method has none), so a V sweep reads its x-axis without parsing labels
ROW_COLUMNS = ("dataset", "benchmark", "method", "method_key", "params", "V", "seed", "feedback_rate",
               "feedback_model", "feedback_kind", "feedback_params", "history_fraction", "alpha", "n_stream",
               "n_history", "cost_unit", "stream_cost", "training_cost", "operating_cost", "satisfaction",
               "post_convergence_satisfaction", "sla_met", "lcb", "explored", "feedback", "final_q", "final_v", "tuned")


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
    scale = 1e-6 if s.cost_unit == "J" else 1.0
    row = {
        "dataset": task.dataset, "benchmark": task.benchmark, "method": task.spec.name,
        "method_key": task.spec.method, "params": task.spec.params_json(), "V": task.spec.fixed_v, "seed": task.seed,
        "feedback_rate": task.feedback_rate, **feedback_columns(task.feedback),
        "history_fraction": task.history_fraction, "alpha": task.alpha, "n_stream": stream.n_requests,
        "n_history": history.n,
        "cost_unit": s.display_unit, "stream_cost": s.operating_cost * scale,
        "training_cost": r.extra_cost * scale, "operating_cost": r.total_cost * scale,
        "satisfaction": s.satisfaction, "post_convergence_satisfaction": s.post_convergence_satisfaction,
        "sla_met": bool(s.satisfaction >= task.alpha), "lcb": float(r.info.get("lcb", math.nan)),
        "explored": s.explored, "feedback": s.feedback,
        "final_q": s.final_q, "final_v": s.final_v, "tuned": info_json(r.info),
    }
    for m, ratio in zip(s.models, s.call_ratio):
        row[f"calls_{m}"] = ratio
    return row


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
