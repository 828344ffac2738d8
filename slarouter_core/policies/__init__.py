"""Routing policies that plug into :class:`slarouter_core.router.SLARouter`.

A policy owns one routing rule and its state; the router keeps the online API
(``decide``/``observe``), the random draws tied to the step index, and checkpoints.
See :mod:`.base` for the protocol and :mod:`.contextual` for the text-aware policy.
"""

from .base import Policy, PolicyStep
from .contextual import ContextualConfig, ContextualPolicy

__all__ = ["ContextualConfig", "ContextualPolicy", "Policy", "PolicyStep"]
