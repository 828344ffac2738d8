"""The routing service's state, independent of HTTP: embed, decide, account, feedback,
checkpoints.

The router is not thread-safe: :meth:`RoutingService.route` runs ``decide`` and
``observe(decision, None)`` together under one lock (so a decision is never pending
outside it) and the backend call happens after the lock is released. Thumbs that arrive
later go to :meth:`SLARouter.late_feedback` under the same lock. The service keeps its own
map request id -> router step ``t`` (saved as JSON next to the router's safetensors
checkpoint), so feedback can find its step after a restart.
"""

from __future__ import annotations

import json
import math
import os
import queue
import threading
import time
import uuid
from collections import OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..encoders import TextEncoder, get_encoder
from ..router import LATE_WINDOW, RouterConfig, SLARouter
from ..validation import check_int, check_number
from .zoo import Zoo

ROUTER_FILE = "router.safetensors"
LEDGER_FILE = "service.json"
LEDGER_FORMAT = "slarouter-service-v1"
#: characters per token for the prompt-size estimate used in the cost of a decision
CHARS_PER_TOKEN = 4.0
#: one-sided 90% normal quantile (the router's certified bound uses the same)
Z90 = 1.2816
#: most texts one embedding batch takes from the waiting requests
MAX_EMBED_BATCH = 32


class FeedbackError(Exception):
    """Feedback that cannot be used; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


@dataclass(frozen=True)
class ServiceConfig:
    """Settings of one service replica (validated on construction)."""

    alpha: float
    mode: str = "paper"
    encoder: str = "minilm"
    state_dir: str | None = None
    checkpoint_every_s: float = 30.0
    seed: int = 0
    instance: str = "slr"
    history: int = 20_000

    def __post_init__(self) -> None:
        self.router_config()  # alpha and mode are validated by RouterConfig
        check_number("checkpoint_every_s", self.checkpoint_every_s, low=0.0, low_open=True)
        if not isinstance(self.instance, str) or not self.instance.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"instance must be letters, digits, '-' or '_', got {self.instance!r}")
        check_int("seed", self.seed, low=0)
        check_int("history", self.history, low=1)

    def router_config(self) -> RouterConfig:
        return RouterConfig(alpha=self.alpha, mode=self.mode)


@dataclass
class Ticket:
    """One routed request: what the router chose and the order to try the backends in."""

    request_id: str
    t: int
    model: int
    explored: bool
    order: tuple[int, ...]
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


def wilson_lower(pos: float, n: float, z: float = Z90) -> float:
    """One-sided Wilson lower bound of a proportion (NaN without data)."""
    if n <= 0:
        return math.nan
    p = pos / n
    d = 1 + z * z / n
    return (p + z * z / (2 * n) - z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / d


class RoutingService:
    """Router + encoder + accounting for one replica; thread-safe."""

    def __init__(self, zoo: Zoo, config: ServiceConfig, encoder: TextEncoder | None = None):
        self.zoo = zoo
        self.config = config
        # traced: the per-request forward without Python overhead (same vectors; see encoders)
        self.encoder = encoder if encoder is not None else get_encoder(config.encoder, traced=True)
        self._lock = threading.Lock()         # router, ledger and statistics
        self._embed_lock = threading.Lock()   # starts the one embedding thread (tokenizers are not thread-safe)
        self._embed_queue: queue.SimpleQueue = queue.SimpleQueue()
        self._embed_thread: threading.Thread | None = None
        self._io_lock = threading.Lock()      # one checkpoint writer at a time
        M = len(zoo)
        self.stats = [ModelStats() for _ in range(M)]
        #: id -> [t, chosen, served, status, feedback, predicted satisfaction of the chosen model]
        self.requests: OrderedDict[str, list] = OrderedDict()
        self.failed_requests = 0
        self.plug_sum = 0.0            # sum over steps of (feedback if given else predicted)
        self.last_v = math.nan
        self.trace: deque = deque(maxlen=config.history)
        #: (embedding, decision under the lock, waiting for the lock) seconds, recent requests
        self.timings: deque = deque(maxlen=1000)
        self.started_at = time.time()
        self.restored = False
        self.router = SLARouter(config.router_config(), n_models=M, dim=int(self.encoder.dim), seed=config.seed)
        if self.state_dir is not None:
            self.restore()

    # -- paths ------------------------------------------------------------------------
    @property
    def state_dir(self) -> Path | None:
        return None if self.config.state_dir is None else Path(self.config.state_dir)

    # -- routing ----------------------------------------------------------------------
    def embed(self, text: str) -> np.ndarray:
        """The request's embedding. Concurrent requests are encoded together: one worker
        thread takes every text waiting (up to ``MAX_EMBED_BATCH``) as one batch, which
        keeps a single request's latency and multiplies throughput under load."""
        fut: Future = Future()
        self._embed_queue.put((text, fut))
        with self._embed_lock:
            if self._embed_thread is None:
                self._embed_thread = threading.Thread(target=self._embed_worker, name="slarouter-embed",
                                                      daemon=True)
                self._embed_thread.start()
        return fut.result()

    def _embed_worker(self) -> None:
        while True:
            items = [self._embed_queue.get()]
            while len(items) < MAX_EMBED_BATCH:
                try:
                    items.append(self._embed_queue.get_nowait())
                except queue.Empty:
                    break
            try:
                X = np.asarray(self.encoder.encode([t for t, _ in items]), np.float32)
            except Exception as exc:  # every waiting request gets the error
                for _, fut in items:
                    fut.set_exception(exc)
                continue
            for (_, fut), x in zip(items, X):
                fut.set_result(x)

    def estimate_costs(self, prompt_chars: int, max_tokens: int | None = None) -> np.ndarray:
        """Expected price of this request on each model: the prompt's estimated tokens and
        the model's mean reported completion length (its prior until it reports usage)."""
        pt = prompt_chars / CHARS_PER_TOKEN
        out = np.empty(len(self.zoo))
        for j, (m, s) in enumerate(zip(self.zoo.models, self.stats)):
            ct = ((s.completion_tokens + m.expected_output_tokens) / (s.usage_reports + 1))
            if max_tokens is not None:
                ct = min(ct, float(max_tokens))
            out[j] = m.price(pt, ct)
        return out

    def route(self, text: str, prompt_chars: int | None = None, max_tokens: int | None = None) -> Ticket:
        """Embed (outside the router lock), then decide and observe(None) under it."""
        t0 = time.perf_counter()
        x = self.embed(text)
        t1 = time.perf_counter()
        costs = self.estimate_costs(len(text) if prompt_chars is None else prompt_chars, max_tokens)
        rid = f"{self.config.instance}-{uuid.uuid4().hex}"
        with self._lock:
            t2 = time.perf_counter()
            r = self.router
            d = r.decide(x, costs)
            r.observe(d, None)
            m = d.model
            self.stats[m].chosen += 1
            shat = float(d.shat[m])
            self.requests[rid] = [d.t, m, None, "routing", None, shat]
            while len(self.requests) > LATE_WINDOW:
                self.requests.popitem(last=False)
            self.plug_sum += shat
            self.last_v = float(d.v)
            self.trace.append({"t": d.t, "model": m, "served": None, "explored": bool(d.explored),
                               "q": float(r.decision_queue()), "v": float(d.v), "shat": shat,
                               "est_costs": [float(c) for c in costs], "cost": None, "feedback": None,
                               "failed": False, "retried": False})
            self.timings.append((t1 - t0, time.perf_counter() - t2, t2 - t1))
        M = len(self.zoo)
        return Ticket(rid, d.t, m, bool(d.explored), (m, (m + 1) % M))

    def record_failure(self, ticket: Ticket, model: int) -> None:
        with self._lock:
            self.stats[model].failures += 1

    def complete(self, ticket: Ticket, served: int, usage: dict | None) -> float | None:
        """The request was answered by ``served``; its cost from the reported usage."""
        cost = None
        with self._lock:
            s = self.stats[served]
            s.served += 1
            if usage:
                pt = int(usage.get("prompt_tokens") or 0)
                ct = int(usage.get("completion_tokens") or 0)
                cost = self.zoo.models[served].price(pt, ct)
                s.prompt_tokens += pt
                s.completion_tokens += ct
                s.usage_reports += 1
                s.cost += cost
            elif self.zoo.models[served].price_per_request:
                cost = self.zoo.models[served].price_per_request
                s.cost += cost
            rec = self.requests.get(ticket.request_id)
            if rec is not None:
                rec[2], rec[3] = served, "answered"
            self._trace_update(ticket.t, served=served, cost=cost, retried=served != ticket.model)
        return cost

    def fail(self, ticket: Ticket) -> None:
        """No backend answered."""
        with self._lock:
            self.failed_requests += 1
            rec = self.requests.get(ticket.request_id)
            if rec is not None:
                rec[3] = "failed"
            self._trace_update(ticket.t, failed=True)

    def _trace_update(self, t: int, **kw: Any) -> None:
        # recent rows are at the end; a row older than the history is simply not shown
        for row in reversed(self.trace):
            if row["t"] == t:
                row.update(kw)
                return
            if row["t"] < t:
                return

    # -- feedback ---------------------------------------------------------------------
    def feedback(self, request_id: str, satisfied: bool) -> dict:
        """Thumbs for an earlier request (late, out of order, or never)."""
        if not isinstance(request_id, str) or not request_id:
            raise FeedbackError(422, "request_id must be a non-empty string")
        if not isinstance(satisfied, bool):
            raise FeedbackError(422, "satisfied must be true or false")
        with self._lock:
            rec = self.requests.get(request_id)
            if rec is None:
                raise FeedbackError(404, f"unknown request_id {request_id!r} (never served here, or older than "
                                         f"the last {LATE_WINDOW:,} requests)")
            t, chosen, served, status, given, shat = rec
            if given is not None:
                raise FeedbackError(409, f"feedback for {request_id!r} was already given "
                                         f"({'satisfied' if given else 'not satisfied'})")
            if status == "failed":
                raise FeedbackError(409, f"request {request_id!r} failed on every backend: nothing was served "
                                         "to give feedback on")
            f = int(satisfied)
            try:
                self.router.late_feedback(t, f)
            except KeyError:
                raise FeedbackError(410, f"the router no longer holds step {t} of request {request_id!r} "
                                         "(too old, or lost in a restart): feedback not used") from None
            rec[4] = bool(satisfied)
            who = served if served is not None else chosen
            if satisfied:
                self.stats[who].thumbs_up += 1
            else:
                self.stats[who].thumbs_down += 1
            self.plug_sum += f - shat
            self._trace_update(t, feedback=f)
            return {"request_id": request_id, "accepted": True, "t": t,
                    "model": self.zoo.names[who], "q": float(self.router.decision_queue())}

    # -- state --------------------------------------------------------------------------
    def _estimate(self) -> tuple[float, float, str]:
        """(satisfaction estimate, its lower confidence bound, how the bound is made)."""
        r = self.router
        if r.t == 0:
            return math.nan, math.nan, "none"
        est = r.satisfaction_estimate()
        if not math.isfinite(est):
            est = self.plug_sum / r.t  # feedback where given, the router's prediction elsewhere
        lcb = float(r.certified_lower_bound(Z90))
        kind = "router (one-sided 90%)"
        if not math.isfinite(lcb):
            up = sum(s.thumbs_up for s in self.stats)
            n = up + sum(s.thumbs_down for s in self.stats)
            lcb, kind = wilson_lower(up, n), "Wilson one-sided 90% on the thumbs received"
        return est, lcb, kind

    def state(self, history: int = 0) -> dict:
        """Everything ``GET /v1/state`` shows (no API keys)."""
        with self._lock:
            r = self.router
            est, lcb, kind = self._estimate()
            up = sum(s.thumbs_up for s in self.stats)
            down = sum(s.thumbs_down for s in self.stats)
            rows = list(self.trace)[-history:] if history > 0 else []
            out = {
                "t": r.t, "alpha": r.config.alpha, "mode": r.config.mode,
                "q": float(r.q), "decision_queue": float(r.decision_queue()),
                "v": None if not math.isfinite(self.last_v) else self.last_v,
                "encoder": self.encoder.spec, "instance": self.config.instance,
                # traced: the fast per-request forward; otherwise why not (None: not a transformer)
                "encoder_traced": getattr(self.encoder, "traced_forward", None) is not None,
                "encoder_trace_problem": getattr(self.encoder, "trace_problem", None),
                "models": [{"name": m.name, "model": m.model, **s.__dict__}
                           for m, s in zip(self.zoo.models, self.stats)],
                "cost_total": float(sum(s.cost for s in self.stats)),
                "requests_failed": self.failed_requests,
                "feedback": {"satisfied": up, "unsatisfied": down,
                             "pending": sum(1 for v in self.requests.values() if v[4] is None and v[3] == "answered")},
                "satisfaction": {"estimate": _num(est), "lower_bound": _num(lcb), "bound": kind,
                                 "sla_met": None if not math.isfinite(lcb) else bool(lcb >= r.config.alpha)},
                "timings_ms": _timings(self.timings),
                "restored": self.restored, "uptime_s": time.time() - self.started_at,
                "history": rows,
            }
        return json.loads(json.dumps(out))  # a deep copy, plain JSON types

    # -- checkpoints ------------------------------------------------------------------
    def checkpoint(self) -> Path | None:
        """Router (safetensors) and ledger (JSON) to the state folder, atomically each."""
        d = self.state_dir
        if d is None:
            return None
        d.mkdir(parents=True, exist_ok=True)
        with self._io_lock:
            with self._lock:
                tmp_router = d / f".{ROUTER_FILE}.{os.getpid()}.tmp"
                self.router.save(tmp_router)
                doc = {"format": LEDGER_FORMAT, "t": self.router.t, "zoo": list(self.zoo.names),
                       "encoder": self.encoder.spec, "dim": int(self.encoder.dim),
                       "mode": self.router.config.mode, "alpha": self.router.config.alpha,
                       "requests": [[k, *v] for k, v in self.requests.items()],
                       "stats": [s.__dict__ for s in self.stats], "failed_requests": self.failed_requests,
                       "plug_sum": self.plug_sum, "last_v": _num(self.last_v)}
                payload = json.dumps(doc)
            tmp_ledger = d / f".{LEDGER_FILE}.{os.getpid()}.tmp"
            tmp_ledger.write_text(payload)
            os.replace(tmp_router, d / ROUTER_FILE)
            os.replace(tmp_ledger, d / LEDGER_FILE)
        return d

    def restore(self) -> bool:
        """Load the state folder's checkpoint if there is one (errors name the mismatch)."""
        d = self.state_dir
        rp, lp = d / ROUTER_FILE, d / LEDGER_FILE
        if not rp.exists() and not lp.exists():
            return False
        if not (rp.exists() and lp.exists()):
            raise ValueError(f"{d}: incomplete checkpoint (need both {ROUTER_FILE} and {LEDGER_FILE})")
        try:
            doc = json.loads(lp.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{lp}: not a service ledger ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != LEDGER_FORMAT:
            raise ValueError(f"{lp}: not a service ledger (format {doc.get('format') if isinstance(doc, dict) else None!r})")
        problems = []
        if doc["zoo"] != list(self.zoo.names):
            problems.append(f"models {doc['zoo']} (now {list(self.zoo.names)})")
        if doc["encoder"] != self.encoder.spec or doc["dim"] != int(self.encoder.dim):
            problems.append(f"encoder {doc['encoder']} (now {self.encoder.spec})")
        if doc["mode"] != self.config.mode or doc["alpha"] != self.config.alpha:
            problems.append(f"mode {doc['mode']} at alpha {doc['alpha']} (now {self.config.mode} at "
                            f"{self.config.alpha})")
        if problems:
            raise ValueError(f"{d} holds a checkpoint made with other settings: " + "; ".join(problems)
                             + ". Start with the same settings or point --state-dir at a new folder.")
        router = SLARouter.load(rp)
        if router.t != doc["t"]:
            raise ValueError(f"{d}: router step {router.t} does not match the ledger's {doc['t']}")
        self.router = router
        self.requests = OrderedDict((row[0], list(row[1:])) for row in doc["requests"])
        for rec in self.requests.values():
            if rec[3] == "routing":  # in flight when the service stopped: nothing was served
                rec[3] = "failed"
        self.stats = [ModelStats(**s) for s in doc["stats"]]
        self.failed_requests = int(doc["failed_requests"])
        self.plug_sum = float(doc["plug_sum"])
        self.last_v = math.nan if doc["last_v"] is None else float(doc["last_v"])
        self.restored = True
        return True


def _timings(rows) -> dict:
    """p50 and p99 in ms of the embedding, the locked decision and the wait for the lock."""
    if not rows:
        return {}
    a = np.asarray(rows) * 1e3
    return {f"{name}_p{q}": float(np.percentile(a[:, j], q))
            for j, name in enumerate(("embed", "decide", "lock_wait")) for q in (50, 99)}


def _num(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None
