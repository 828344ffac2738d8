"""SLARouter as one of the compared methods: :func:`simulator.simulate` on the common
stream, every ``RouterConfig`` / ``SimulationConfig`` field reachable as a method param.

Going through the simulator (not a copy of its loop) means the comparison runs exactly
the router the rest of the project ships.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..data import RoutingData
from ..feedback import FeedbackConfig
from ..router import RouterConfig
from ..simulator import SimulationConfig, simulate
from .common import History, MethodResult, check_alpha, check_embeddings, common_stream, feedback_or_default

_SIM_KEYS = {f.name for f in dataclasses.fields(SimulationConfig)} - {"router", "feedback_rate", "seed", "shuffle",
                                                                      "feedback"}
#: message for ``feedback`` given as a method param (it is a property of the run)
FEEDBACK_PARAM_ERROR = ("feedback is set per run for every method alike (GridConfig.feedback, "
                        "--feedback on the CLI, or the feedback= argument of a method), not as a method param")


def _coerce_field(cls: type, name: str, value: Any) -> Any:
    """A JSON dict given for a dataclass-valued field of ``cls`` becomes that dataclass
    (via its ``from_dict`` when it has one), so nested configs work as method params."""
    if not isinstance(value, dict):
        return value
    for f in dataclasses.fields(cls):
        if f.name != name:
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        if default is not None and dataclasses.is_dataclass(default):
            kind = type(default)
            return kind.from_dict(value) if hasattr(kind, "from_dict") else kind(**value)
    return value


def slarouter_configs(alpha: float, feedback_rate: float, seed: int, params: dict[str, Any],
                      feedback: FeedbackConfig | None = None) -> SimulationConfig:
    """The ``SimulationConfig`` (with its ``RouterConfig``) that ``params`` describe.

    ``params`` keys are ``RouterConfig`` fields or extra ``SimulationConfig`` fields
    (dicts for nested dataclass fields such as ``predictor``); unknown keys or bad values
    raise ValueError naming the problem.
    """
    params = dict(params)
    if "alpha" in params or "shuffle" in params:
        raise ValueError("alpha and shuffle are set by the run, not by method params")
    if "feedback" in params:
        raise ValueError(FEEDBACK_PARAM_ERROR)
    fcfg = feedback_or_default(feedback)
    sim_kw = {k: _coerce_field(SimulationConfig, k, params.pop(k)) for k in list(params) if k in _SIM_KEYS}
    try:
        # flat guarded settings (margin_z=..., policy=...) and nested dicts both work
        cfg = RouterConfig.from_dict({"alpha": alpha, **params})
        return SimulationConfig(cfg, feedback_rate=float(feedback_rate), seed=int(seed), feedback=fcfg, **sim_kw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad SLARouter parameter: {exc}") from None


def slarouter_router(data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
                     feedback_rate: float, *, history: History | None = None,
                     feedback: FeedbackConfig | None = None, **params: Any) -> MethodResult:
    """SLARouter through :func:`simulator.simulate` on the common stream.

    ``params`` are ``RouterConfig`` fields (``V``, ``c``, ``q_max``, ``eps``, ``mode``,
    ``predictor`` as a dict, and any field added later) or extra ``SimulationConfig``
    fields (see :func:`slarouter_configs`); ``alpha``, ``feedback_rate`` and ``seed`` come
    from the run. ``V`` absent or None means data-driven V. ``feedback`` (the run's
    feedback model) goes to ``SimulationConfig.feedback``: the simulator builds the same
    plan as :func:`common.common_stream` and handles every kind (delays included) in both modes.
    Under judge fill-in each mode uses the judge's verdicts its own way (paper mode: as
    labels, the paper's protocol; see ``SLARouter.judge_use``). ``info["first_at_risk"]``:
    the router's first at-risk warning at the end of the run (None if none).
    """
    alpha = check_alpha(alpha)
    X = check_embeddings(data, embeddings)
    sim_cfg = slarouter_configs(alpha, feedback_rate, seed, params, feedback)
    common_stream(data, seed, feedback_rate, feedback)  # same checks as the other methods
    sim = simulate(data, X, sim_cfg)
    a = sim.arrays()
    return MethodResult(name="slarouter", model=a["model"], order=a["row"], satisfied=a["satisfied"],
                        cost=np.asarray(a["cost"], np.float64), extra_cost=0.0, summary=sim.summary(),
                        explored=a["explored"], q=a["q"],
                        info={"config": sim_cfg.router.to_dict(), "final_v": float(a["v"][-1]),
                              "lcb": sim.router.certified_lower_bound(),
                              "first_at_risk": sim.router.sla_status()["first_at_risk"]})
