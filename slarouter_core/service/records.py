"""The routing service's small records and checks: tickets, per-model statistics, circuit
breakers, backend usage and prompt cleaning, the Wilson bound, the embedding's journal
encoding, the refusal of JSON's NaN/Infinity constants, and a refit job's run."""

from __future__ import annotations

import base64
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

log = logging.getLogger("slarouter.service")

#: characters per token for the prompt-size estimate used in the cost of a decision
CHARS_PER_TOKEN = 4.0
#: one-sided 90% normal quantile (the router's certified bound uses the same)
Z90 = 1.2816
#: most texts one embedding batch takes from the waiting requests
MAX_EMBED_BATCH = 32
#: characters of a prompt that are embedded: the encoder truncates at 256 tokens anyway,
#: and this bounds the tokenizer's work on a huge prompt
MAX_EMBED_CHARS = 8192
#: largest token count a backend may report (more is a broken figure)
MAX_USAGE_TOKENS = 100_000_000


class FeedbackError(Exception):
    """Feedback that cannot be used; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


class BadJSON(ValueError):
    """A body that is not strict JSON (the message says why)."""


def no_json_constant(name: str) -> Any:
    """``parse_constant`` for the request bodies and the ledger: refuse NaN/Infinity, which JSON does not have."""
    raise BadJSON(f"{name} is not valid JSON")


@dataclass
class Ticket:
    """One routed request: what the router chose and the order to try the backends in."""

    request_id: str
    t: int
    model: int
    explored: bool
    order: tuple[int, ...]
    est_costs: tuple[float, ...] = ()
    text: str = ""
    started: float = field(default_factory=time.perf_counter)


@dataclass
class ModelStats:
    chosen: int = 0
    served: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_reports: int = 0
    cost: float = 0.0
    thumbs_up: int = 0
    thumbs_down: int = 0


@dataclass
class Breaker:
    """A model's circuit: ``failures`` in a row; open (skipped) until ``open_until``."""

    failures: int = 0
    open_until: float = 0.0
    opened: int = 0

    def is_open(self, now: float) -> bool:
        return now < self.open_until


def clean_usage(usage: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a backend's ``usage``, or None if it is missing or
    not two integers in [0, MAX_USAGE_TOKENS] (a broken figure must not reach the router)."""
    if not isinstance(usage, dict):
        return None
    out = []
    for k in ("prompt_tokens", "completion_tokens"):
        v = usage.get(k, 0)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_USAGE_TOKENS:
            return None
        out.append(v)
    return out[0], out[1]


def embeddable(text: str) -> str:
    """The part of a prompt the encoder sees: at most MAX_EMBED_CHARS characters, lone
    surrogates (valid JSON, not valid Unicode text) replaced so the tokenizer takes it."""
    t = text[:MAX_EMBED_CHARS]
    return t.encode("utf-8", "replace").decode("utf-8")


def wilson_lower(pos: float, n: float, z: float = Z90) -> float:
    """One-sided Wilson lower bound of a proportion (NaN without data)."""
    if n <= 0:
        return math.nan
    p = pos / n
    d = 1 + z * z / n
    return (p + z * z / (2 * n) - z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / d


def b64_vector(x: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(x, np.float32).tobytes()).decode()


def unb64_vector(s: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), np.float32).copy()


def run_refit(job) -> tuple[Any, bool]:
    """``(job.run(), False)``; an exception is logged and gives ``(None, True)``: nothing is
    installed (the same on a replay, which runs the same job on the same labels)."""
    try:
        return job.run(), False
    except Exception:  # a numerical failure must not take the service down
        log.exception("text model refit failed; serving on the current one")
        return None, True
