"""Routing policies that plug into :class:`slarouter_core.router.SLARouter`.

A policy owns one routing rule and its state; the router keeps the online API
(``decide``/``observe``), the random draws tied to the step index, and checkpoints.
:mod:`.base` holds the abstract base and what every policy shares (step draws, pending late
feedback, the batched trace), :mod:`.schedule` the exploration schedule and V (MESS+ uses
them too), :mod:`.registry` the name -> class registry, :mod:`.compat` the old formats,
and one module per policy: :mod:`.paper` (Algorithm 1 as published),
:mod:`.guarded` and :mod:`.contextual` (docs/IMPROVED.md).
"""

from .base import BlockTrace, PendingFeedback, Policy, PolicyConfig, PolicyInfo, PolicyStep, StepDraws
from .contextual import ContextualConfig, ContextualPolicy
from .guarded import GuardedConfig, GuardedPolicy
from .paper import PaperConfig, PaperPolicy
from .registry import REGISTRY, policy_class, register, unregister

__all__ = ["BlockTrace", "ContextualConfig", "ContextualPolicy", "GuardedConfig", "GuardedPolicy", "PaperConfig",
           "PaperPolicy", "PendingFeedback", "Policy", "PolicyConfig", "PolicyInfo", "PolicyStep", "REGISTRY",
           "StepDraws", "policy_class", "register", "unregister"]
