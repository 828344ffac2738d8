"""Baseline routers SLARouter is compared against (paper Table 1), on one seeded stream.

Every method has the signature::

    method(data, embeddings, alpha, seed, feedback_rate, *, history=None, feedback=None, **params)
        -> MethodResult

``data``/``embeddings`` are the **stream** the method is evaluated on; its serving order
and feedback plan come from :func:`slarouter_core.simulator.stream_plan_full` with
``seed`` and the keyword ``feedback`` (a :class:`~slarouter_core.feedback.FeedbackConfig`;
None = IID, today's draws), so every method (SLARouter included, through
:func:`slarouter_router`) sees the same stream with the same feedback. What each method
does with each feedback kind is in ``docs/EXPERIMENTS.md`` ("Feedback models").
``history`` (a :class:`History`, from :func:`split_history`) is the disjoint, seeded
history split that only the offline methods (CARROT, Causal) learn from; the online
methods ignore it. See ``docs/EXPERIMENTS.md`` for the protocol.

Methods (``METHODS``, in :mod:`.registry`), one module each:

* ``single`` (param ``model``: name or index) and ``random``: reference points
  (:mod:`.static`, :mod:`.uniform_router`).
* ``static_mixture``: the text-blind optimum, an LP over call fractions
  (:func:`static_mixture_lp`) on the stream's per-model means, realised with exact counts
  (:mod:`.static`).
* ``oracle``: the per-request LP with every label known (:func:`oracle_lp`), rounded; a
  lower bound on the cost of any router at its satisfaction (:mod:`.oracle`).
* ``messplus``: MESS+ as published: exploration queries every model, is charged the sum of
  their costs and trains on all labels; the queue moves only on feedback (:mod:`.messplus_router`).
* ``carrot``: CARROT, offline with full feedback on the history split; kNN (cosine)
  quality and cost estimators, ``mu`` tuned on a validation part of the history
  (:mod:`.carrot_router`, estimators in :mod:`.knn`).
* ``causal``: Causal LLM routing, RM-Softmax on doubly-robust pseudo-outcomes from a
  uniform-logging observational log of the history split; ``lambda`` tuned by
  cross-fitting (:mod:`.causal_router`).
* ``slarouter``: SLARouter through :func:`simulator.simulate`, every ``RouterConfig`` /
  ``SimulationConfig`` field reachable as a param (``V``, ``mode``, ``c``, ...)
  (:mod:`.slarouter`).

Offline methods report the cost of collecting their training data as ``extra_cost``
(the paper adds it to their operating cost). What the methods share (the result type,
the history split, the common stream, the seed tags) is in :mod:`.common`.
"""

from __future__ import annotations

from ..simulator import stream_plan_full  # re-exported: the plan builder every method serves from
from .carrot_router import carrot, carrot_route
from .causal_router import causal, rm_softmax_fit
from .common import FRACTION_TOL, TRADEOFF_GRID, History, MethodResult, split_history
from .knn import K_GRID, KNNEstimator, knn_neighbours, select_k
from .messplus_router import PAPER_V, messplus
from .oracle import clairvoyant_oracle, oracle_lp, round_oracle
from .registry import METHODS, REFERENCE_METHODS, Method, check_params, info_json
from .slarouter import FEEDBACK_PARAM_ERROR, slarouter_configs, slarouter_router
from .static import exact_counts, single, static_mixture, static_mixture_lp
from .uniform_router import random_router

__all__ = [
    "FEEDBACK_PARAM_ERROR", "FRACTION_TOL", "K_GRID", "METHODS", "PAPER_V",
    "REFERENCE_METHODS", "TRADEOFF_GRID", "History", "KNNEstimator", "Method", "MethodResult",
    "carrot", "carrot_route", "causal", "check_params", "clairvoyant_oracle", "exact_counts",
    "info_json", "knn_neighbours", "messplus", "oracle_lp", "random_router", "rm_softmax_fit",
    "round_oracle", "select_k", "single", "slarouter_configs",
    "slarouter_router", "split_history", "static_mixture", "static_mixture_lp", "stream_plan_full",
]
