"""The ``Method`` protocol every baseline follows and the registry of methods by name.

The runner (``experiments``, the CLI) knows methods only through this registry, so a new
method is one module plus one entry here.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Protocol

import numpy as np

from ..data import RoutingData
from ..feedback import FeedbackConfig
from .carrot_router import carrot
from .causal_router import causal
from .common import History, MethodResult
from .messplus_router import messplus
from .oracle import clairvoyant_oracle
from .slarouter import FEEDBACK_PARAM_ERROR, slarouter_configs, slarouter_router
from .static import single, static_mixture
from .uniform_router import random_router


class Method(Protocol):
    def __call__(self, data: RoutingData, embeddings: np.ndarray, alpha: float, seed: int,
                 feedback_rate: float, *, history: History | None = None,
                 feedback: FeedbackConfig | None = None, **params: Any) -> MethodResult: ...


#: every method with the common signature, by name
METHODS: dict[str, Method] = {
    "single": single,
    "random": random_router,
    "static_mixture": static_mixture,
    "oracle": clairvoyant_oracle,
    "messplus": messplus,
    "carrot": carrot,
    "causal": causal,
    "slarouter": slarouter_router,
}
#: clairvoyant references (they use stream labels or stream means; not deployable)
REFERENCE_METHODS = frozenset({"oracle", "static_mixture"})


def check_params(method: str, params: dict[str, Any]) -> None:
    """Fail fast (ValueError) on params a method does not take, before any run starts."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: choose from {', '.join(METHODS)}")
    if "feedback" in params:
        raise ValueError(FEEDBACK_PARAM_ERROR)
    if method == "slarouter":
        slarouter_configs(0.5, 0.2, 0, params)
        return
    sig = inspect.signature(METHODS[method])
    named = {n for n, p in sig.parameters.items() if p.kind == p.KEYWORD_ONLY} - {"history", "feedback"}
    unknown = sorted(set(params) - named)
    if unknown:
        raise ValueError(f"bad parameters for {method}: {', '.join(unknown)} "
                         f"(it takes {', '.join(sorted(named)) or 'none'})")


def info_json(info: dict) -> str:
    """The scalar / short-list part of a result's ``info`` as JSON (arrays left out)."""
    keep = {}
    for k, v in info.items():
        if isinstance(v, np.ndarray):
            continue
        if isinstance(v, (list, tuple)) and len(v) > 32:
            continue
        keep[k] = v
    return json.dumps(keep, default=lambda o: o.item() if hasattr(o, "item") else str(o), sort_keys=True)
