"""The routing service's state, independent of HTTP: embed, decide, account, feedback;
checkpoints and journal replay in :mod:`.persistence`, the small records in :mod:`.records`.

The router is not thread-safe: :meth:`RoutingService.route` runs ``decide`` and
``observe(decision, None)`` together under one lock (so a decision is never pending
outside it) and the backend call happens after the lock is released. Thumbs that arrive
later go to :meth:`SLARouter.late_feedback` under the same lock. A refit of the router's
text model that falls due runs on a worker thread outside the lock (the router serves on
its current model meanwhile), journaled where it was taken and where it was installed, so
a replay installs it at the same point. The service keeps its own
map request id -> router step ``t`` (saved as JSON next to the router's safetensors
checkpoint), so feedback can find its step after a restart.

Durability: every state change (decision, answer, failure, thumbs, judge verdict) is an
event appended to the SQLite journal (:mod:`.journal`) under the same lock, before the
reply that reports it; a restart loads the checkpoint and replays the events after it
(decisions are re-made from the journaled embedding and costs: the router is
deterministic given its state, and the replay checks that it chose the same model).

Isolation: backend usage is validated (bad figures are ignored and logged; the cost falls
back to the estimate), cost estimates are always finite and >= 0, one text that the
encoder rejects fails only its own request, and a checkpoint with negative or non-finite
accounting is refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import queue
import random
import threading
import time
import uuid
from collections import OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from ..encoders import DEFAULT_ENCODER_THREADS, TextEncoder
from ..policies.registry import DEFAULT_POLICY
from ..router import LATE_WINDOW, RouterConfig, SLARouter
from ..validation import Checked, Choice, Int, Range, param
from .journal import JOURNAL_FILE, Journal
from .persistence import Persistence
from .records import (CHARS_PER_TOKEN, MAX_EMBED_BATCH, Z90, Breaker, FeedbackError, ModelStats, Ticket, b64_vector,
                      clean_usage, embeddable, run_refit, wilson_lower)
from .onnx_encoder import RUNTIMES, service_encoder
from .zoo import Zoo

log = logging.getLogger("slarouter.service")
#: answered requests before ``/v1/state``'s pre-flight check reads the observed thumbs rate
PREFLIGHT_MIN_ANSWERED = 100

@dataclass(frozen=True)
class ServiceConfig(Checked):
    """Settings of one service replica (validated on construction)."""

    alpha: float
    mode: str = DEFAULT_POLICY
    encoder: str = "minilm"
    state_dir: str | None = None
    checkpoint_every_s: float = param(30.0, Range(low=0.0, low_open=True))
    seed: int = param(0, Int(low=0))
    instance: str = "slr"
    history: int = param(20_000, Int(low=1))
    #: largest request body in bytes (413 beyond)
    max_body_bytes: int = param(1_000_000, Int(low=1024))
    #: consecutive failures that open a model's circuit, and how long it then stays open
    breaker_failures: int = param(3, Int(low=1))
    breaker_cooldown_s: float = param(30.0, Range(low=0.0))
    #: how long the embedding worker waits for more texts while other chats are on their way
    embed_wait_ms: float = param(2.0, Range(low=0.0, high=100.0))
    #: the per-request forward of a transformer encoder: onnx (torch where it cannot), torchscript, eager
    encoder_runtime: str = param("onnx", Choice(RUNTIMES))
    #: intra-op threads of the ONNX Runtime session
    encoder_threads: int = param(DEFAULT_ENCODER_THREADS, Int(low=1))
    #: the mode's policy settings given explicitly (``slarouter serve --set KEY=VALUE``,
    #: e.g. ``sla_window``, ``delta``); the rest are the policy's defaults
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.settings, dict) or not all(isinstance(k, str) for k in self.settings):
            raise ValueError(f"settings must map setting names to values, got {self.settings!r}")
        try:  # the checkpoint's ledger records them
            json.dumps(self.settings, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(f"settings must be plain JSON values, got {self.settings!r}") from None
        self.router_config()  # alpha, mode and the settings are validated by RouterConfig
        super().__post_init__()
        if not isinstance(self.instance, str) or not self.instance.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"instance must be letters, digits, '-' or '_', got {self.instance!r}")

    def router_config(self) -> RouterConfig:
        return RouterConfig(alpha=self.alpha, mode=self.mode, **self.settings)


class RoutingService(Persistence):
    """Router + encoder + accounting + journal for one replica; thread-safe."""

    def __init__(self, zoo: Zoo, config: ServiceConfig, encoder: TextEncoder | None = None):
        self.zoo = zoo
        self.config = config
        # onnx: the per-request forward in ONNX Runtime (torch traced where it is unavailable)
        self.encoder = encoder if encoder is not None else service_encoder(config.encoder, config.encoder_runtime,
                                                                               config.encoder_threads)
        self._lock = threading.Lock()         # router, ledger, statistics and journal order
        self._embed_lock = threading.Lock()   # starts the one embedding thread (tokenizers are not thread-safe)
        self._embed_queue: queue.SimpleQueue = queue.SimpleQueue()
        self._embed_thread: threading.Thread | None = None
        self._io_lock = threading.Lock()      # one checkpoint writer at a time
        #: the text model's refits run on a worker thread, one at a time, outside the lock
        #: (a warm refit on a full label ring takes seconds); a checkpoint waits for one
        self._refit_idle = threading.Condition(self._lock)
        self._refit_busy = False
        self._refit_id = 0
        self.refits = {"done": 0, "failed": 0, "last_s": None}
        #: chats between arrival and their embedding (the worker waits for them to batch)
        self.incoming = 0
        M = len(zoo)
        self.stats = [ModelStats() for _ in range(M)]
        self.breakers = [Breaker() for _ in range(M)]
        #: id -> [t, chosen, served, status, feedback, predicted satisfaction, owner key id, judge verdict,
        #: judge call: None (not drawn), "due" (drawn, no verdict yet: thumbs wait for it), "done"]
        self.requests: OrderedDict[str, list] = OrderedDict()
        self.failed_requests = 0
        self.plug_sum = 0.0            # sum over steps of (feedback if given else predicted)
        self.last_v = math.nan
        self.usage_rejected = 0
        self.judge = {"calls": 0, "verdicts": 0, "failures": 0, "skipped": 0, "cost": 0.0, "calibration_calls": 0}
        self._judge_rng = random.Random(config.seed)
        self.trace: deque = deque(maxlen=config.history)
        self._preflight: tuple[tuple, dict] | None = None  # (thumbs rate, window), the check
        #: (embedding, decision under the lock, waiting for the lock) seconds, recent requests
        self.timings: deque = deque(maxlen=1000)
        self.started_at = time.time()
        self.restored = False
        self.replayed = 0
        #: router settings a restore kept from its checkpoint against this version's defaults
        self.kept_settings: list[str] = []
        self.router = SLARouter(self.router_config(), n_models=M, dim=int(self.encoder.dim), seed=config.seed)
        self.journal: Journal | None = None
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.state_dir, 0o700)
            self.journal = Journal(self.state_dir / JOURNAL_FILE)
            try:
                self.restore()
            except BaseException:  # a refused start leaves the state folder as it found it
                self.journal.close()
                raise
        self.router.defer_refits(True)
        with self._lock:
            self._start_refit()

    def router_config(self) -> RouterConfig:
        """The command line's router, with the zoo's stated accuracies as its prior where
        its policy takes one (a ``stated_levels`` setting)."""
        rc = self.config.router_config()
        if self.zoo.stated_levels and hasattr(rc.settings, "stated_levels"):
            rc = rc.with_settings(stated_levels=self.zoo.stated_levels)
        return rc

    # -- paths ------------------------------------------------------------------------
    @property
    def state_dir(self) -> Path | None:
        return None if self.config.state_dir is None else Path(self.config.state_dir)

    def _log(self, kind: str, body: dict) -> None:
        """Journal one event (called under ``self._lock``, so the journal's order is the router's)."""
        if self.journal is not None:
            self.journal.append(kind, body)

    # -- routing ----------------------------------------------------------------------
    def embed(self, text: str) -> np.ndarray:
        """The request's embedding. Concurrent requests are encoded together: one worker
        thread takes every text waiting (up to ``MAX_EMBED_BATCH``, waiting up to
        ``embed_wait_ms`` while more chats are on their way) as one batch, which keeps a
        single request's latency and multiplies throughput under load. A text the
        encoder rejects fails only its own request."""
        fut: Future = Future()
        self._submit(text, fut.set_result, fut.set_exception)
        return fut.result()

    async def aembed(self, text: str) -> np.ndarray:
        """:meth:`embed` for an event loop: the loop waits, no thread is held."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def ok(x):
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(x))

        def bad(e):
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_exception(e))

        self._submit(text, ok, bad)
        return await fut

    def _submit(self, text: str, ok, bad) -> None:
        self._embed_queue.put((embeddable(text), ok, bad))
        with self._embed_lock:
            if self._embed_thread is None:
                self._embed_thread = threading.Thread(target=self._embed_worker, name="slarouter-embed",
                                                      daemon=True)
                self._embed_thread.start()

    def _embed_worker(self) -> None:
        wait = self.config.embed_wait_ms / 1000.0
        while True:
            items = [self._embed_queue.get()]
            deadline = time.perf_counter() + wait
            while len(items) < MAX_EMBED_BATCH:
                try:
                    items.append(self._embed_queue.get_nowait())
                    continue
                except queue.Empty:
                    pass
                left = deadline - time.perf_counter()
                if left <= 0 or self.incoming <= len(items):  # nobody else is coming
                    break
                try:
                    items.append(self._embed_queue.get(timeout=left))
                except queue.Empty:
                    break
            try:
                X = np.asarray(self.encoder.encode([t for t, _, _ in items]), np.float32)
            except Exception as exc:  # noqa: BLE001 - find the culprit: each text alone
                if len(items) == 1:
                    items[0][2](exc)
                    continue
                for text, ok, bad in items:
                    try:
                        x = np.asarray(self.encoder.encode([text]), np.float32)[0]
                    except Exception as one:  # noqa: BLE001
                        bad(one)
                        continue
                    ok(x)
                continue
            for (_, ok, _), x in zip(items, X):
                ok(x)

    def estimate_costs(self, prompt_chars: int, max_tokens: int | None = None) -> np.ndarray:
        """Expected price of this request on each model: the prompt's estimated tokens and
        the model's mean reported completion length (its prior until it reports usage).
        Always finite and >= 0."""
        pt = prompt_chars / CHARS_PER_TOKEN
        out = np.empty(len(self.zoo))
        for j, (m, s) in enumerate(zip(self.zoo.models, self.stats)):
            ct = ((s.completion_tokens + m.expected_output_tokens) / (s.usage_reports + 1))
            if max_tokens is not None:
                ct = min(ct, float(max_tokens))
            out[j] = m.price(pt, ct)
        return np.clip(np.nan_to_num(out, nan=0.0, posinf=1e12), 0.0, 1e12)

    def _told_costs(self, costs: np.ndarray, now: float) -> np.ndarray:
        """What the router is told: a model whose circuit is open costs far more than any
        other, so the router avoids it unless nothing else can keep the SLA."""
        open_ = [j for j, b in enumerate(self.breakers) if b.is_open(now)]
        if not open_ or len(open_) == len(costs):
            return costs
        c = costs.copy()
        c[open_] = 1000.0 * max(float(costs.max()), 1e-6)
        return c

    def _order(self, d, now: float) -> tuple[int, ...]:
        """Failover order: the chosen model, then the others in the router's order of
        preference (its objective, lowest first); open circuits last."""
        scores = np.asarray(d.scores, np.float64)
        if not np.all(np.isfinite(scores)):
            scores = np.asarray(d.costs, np.float64)
        rest = [int(j) for j in np.argsort(scores, kind="stable") if j != d.model]
        order = [d.model] + rest
        return tuple(sorted(order, key=lambda j: self.breakers[j].is_open(now)))

    def route(self, text: str, prompt_chars: int | None = None, max_tokens: int | None = None,
              owner: str | None = None) -> Ticket:
        """Embed (outside the router lock), then decide, observe(None) and journal under it."""
        t0 = time.perf_counter()
        x = self.embed(text)
        return self._decide(x, text, prompt_chars, max_tokens, owner, time.perf_counter() - t0)

    async def aroute(self, text: str, prompt_chars: int | None = None, max_tokens: int | None = None,
                     owner: str | None = None) -> Ticket:
        """:meth:`route` for an event loop (the HTTP layer): the embedding is awaited, and
        the decision (well under a millisecond) runs in the loop, with no thread hop."""
        t0 = time.perf_counter()
        x = await self.aembed(text)
        return self._decide(x, text, prompt_chars, max_tokens, owner, time.perf_counter() - t0)

    def _decide(self, x: np.ndarray, text: str, prompt_chars: int | None, max_tokens: int | None,
                owner: str | None, embed_s: float) -> Ticket:
        t1 = time.perf_counter()
        costs = self.estimate_costs(len(text) if prompt_chars is None else prompt_chars, max_tokens)
        rid = f"{self.config.instance}-{uuid.uuid4().hex}"
        now = time.monotonic()
        with self._lock:
            t2 = time.perf_counter()
            told = self._told_costs(costs, now)
            d = self.router.decide(x, told)
            self.router.observe(d, None)
            self._log("route", {"rid": rid, "t": d.t, "model": d.model, "x": b64_vector(x),
                                "costs": [float(c) for c in told], "owner": owner})
            self._apply_route(rid, d, owner)
            self.timings.append((embed_s, time.perf_counter() - t2, t2 - t1))
            order = self._order(d, now)
        return Ticket(rid, d.t, d.model, bool(d.explored), order, tuple(float(c) for c in costs), text)

    def _apply_route(self, rid: str, d, owner: str | None) -> None:
        m = d.model
        self.stats[m].chosen += 1
        shat = float(d.shat[m]) if math.isfinite(float(d.shat[m])) else 0.0
        self.requests[rid] = [d.t, m, None, "routing", None, shat, owner, None, None]
        while len(self.requests) > LATE_WINDOW:
            self.requests.popitem(last=False)
        self.plug_sum += shat
        self.last_v = float(d.v)
        self.trace.append({"t": d.t, "model": m, "served": None, "explored": bool(d.explored),
                           "q": float(self.router.decision_queue()), "v": float(d.v), "shat": shat,
                           "est_costs": [float(c) for c in d.costs], "cost": None, "feedback": None,
                           "failed": False, "retried": False})

    def open_circuits(self) -> list[str]:
        now = time.monotonic()
        return [n for n, b in zip(self.zoo.names, self.breakers) if b.is_open(now)]

    def record_failure(self, ticket: Ticket, model: int) -> None:
        """A backend failure (not a client error, not a client disconnect)."""
        with self._lock:
            self.stats[model].failures += 1
            b = self.breakers[model]
            b.failures += 1
            if b.failures >= self.config.breaker_failures:
                if not b.is_open(time.monotonic()):
                    b.opened += 1
                    log.warning("circuit of %s open for %.0f s after %d failures in a row",
                                self.zoo.names[model], self.config.breaker_cooldown_s, b.failures)
                b.open_until = time.monotonic() + self.config.breaker_cooldown_s
            self._log("failure", {"model": model})

    def complete(self, ticket: Ticket, served: int, usage: Any) -> float:
        """The request was answered by ``served``; its cost from the reported usage (or,
        if the usage is missing or broken, the estimate made when routing)."""
        clean = clean_usage(usage)
        if clean is None and usage is not None:
            log.warning("ignoring a broken usage report from %s: %.200r", self.zoo.names[served], usage)
        with self._lock:
            self.breakers[served].failures = 0
            if clean is not None:
                cost = self.zoo.models[served].price(*clean)
            elif ticket.est_costs:
                cost = ticket.est_costs[served]
            else:
                cost = self.zoo.models[served].price_per_request
            cost = float(cost) if math.isfinite(cost) and cost >= 0 else 0.0
            ev = {"rid": ticket.request_id, "t": ticket.t, "served": served, "usage": clean, "cost": cost,
                  "chosen": ticket.model, "broken_usage": clean is None and usage is not None}
            self._log("complete", ev)
            self._apply_complete(ev)
        return cost

    def _apply_complete(self, ev: dict) -> None:
        s = self.stats[ev["served"]]
        s.served += 1
        if ev["usage"] is not None:
            pt, ct = ev["usage"]
            s.prompt_tokens += pt
            s.completion_tokens += ct
            s.usage_reports += 1
        if ev.get("broken_usage"):
            self.usage_rejected += 1
        s.cost += ev["cost"]
        rec = self.requests.get(ev["rid"])
        if rec is not None:
            rec[2], rec[3] = ev["served"], "answered"
        self._trace_update(ev["t"], served=ev["served"], cost=ev["cost"], retried=ev["served"] != ev["chosen"])

    def fail(self, ticket: Ticket) -> None:
        """No backend answered."""
        with self._lock:
            ev = {"rid": ticket.request_id, "t": ticket.t}
            self._log("fail", ev)
            self._apply_fail(ev)

    def _apply_fail(self, ev: dict) -> None:
        self.failed_requests += 1
        rec = self.requests.get(ev["rid"])
        if rec is not None:
            rec[3] = "failed"
        self._trace_update(ev["t"], failed=True)

    def _trace_update(self, t: int, **kw: Any) -> None:
        # recent rows are at the end; a row older than the history is simply not shown
        for row in reversed(self.trace):
            if row["t"] == t:
                row.update(kw)
                return
            if row["t"] < t:
                return

    # -- feedback ---------------------------------------------------------------------
    def feedback(self, request_id: str, satisfied: bool, owner: str | None = None) -> dict:
        """Thumbs for an earlier request (late, out of order, or never), from the API key
        that made it."""
        if not isinstance(request_id, str) or not request_id:
            raise FeedbackError(422, "request_id must be a non-empty string")
        if not isinstance(satisfied, bool):
            raise FeedbackError(422, "satisfied must be true or false")
        with self._lock:
            rec = self.requests.get(request_id)
            shown = request_id if len(request_id) <= 80 else request_id[:80] + "..."
            if rec is None:
                raise FeedbackError(404, f"unknown request_id {shown!r} (never served here, or older than "
                                         f"the last {LATE_WINDOW:,} requests)")
            t, chosen, served, status, given, shat, made_by, judged, _ = rec
            if made_by is not None and owner != made_by:
                raise FeedbackError(403, f"request {shown!r} was made with another API key: only that key "
                                         "may give its feedback")
            if given is not None:
                raise FeedbackError(409, f"feedback for {shown!r} was already given "
                                         f"({'satisfied' if given else 'not satisfied'})")
            if status == "failed":
                raise FeedbackError(409, f"request {shown!r} failed on every backend: nothing was served "
                                         "to give feedback on")
            if status == "routing":
                raise FeedbackError(409, f"request {shown!r} is still being answered: give feedback "
                                         "after the answer")
            ev = {"rid": request_id, "f": int(satisfied)}
            try:
                self._thumbs_to_router(rec, int(satisfied))
            except KeyError:
                if judged is not None and self.router.judge_use == "label":
                    raise FeedbackError(409, f"request {shown!r} was already labelled by the LLM judge "
                                             f"({'satisfied' if judged else 'not satisfied'}): paper mode takes "
                                             "the judge's verdict as the step's label") from None
                raise FeedbackError(410, f"the router no longer holds step {t} of request {shown!r} "
                                         "(too old, or lost in a restart): feedback not used") from None
            self._log("feedback", ev)
            who = self._apply_feedback(ev, rec)
            self._start_refit()
            return {"request_id": request_id, "accepted": True, "t": t,
                    "model": self.zoo.names[who], "q": float(self.router.decision_queue())}

    def _thumbs_to_router(self, rec: list, f: int) -> None:
        """Thumbs reach the router now, or with the judge's verdict they wait for (taken only
        if the router still holds the step). KeyError: it no longer does."""
        if not self._holds_thumbs(rec):
            self.router.late_feedback(rec[0], f)
        elif not self.router.awaits_feedback(rec[0]):
            raise KeyError(rec[0])

    def _holds_thumbs(self, rec: list) -> bool:
        """Whether thumbs for this request wait for its judge's verdict before reaching the
        router: a router that rectifies the judge's prediction with the thumbs (``judge_use``
        "estimate") must rectify the prediction the step ends with, which the verdict sets."""
        return rec[8] == "due" and self.router.judge_use == "estimate"

    def _apply_feedback(self, ev: dict, rec: list) -> int:
        t, chosen, served, _, _, shat, _, _, _ = rec
        f = ev["f"]
        rec[4] = bool(f)
        who = served if served is not None else chosen
        if f:
            self.stats[who].thumbs_up += 1
        else:
            self.stats[who].thumbs_down += 1
        self.plug_sum += f - shat
        self._trace_update(t, feedback=f)
        return who

    # -- judge ------------------------------------------------------------------------
    # Which answers the judge reads is drawn when the answer is served (the budget's seeded
    # draw), never after the user rated it: a judge that reads only the unrated answers makes
    # a step's prediction depend on its thumbs, which the estimate's rectification cannot undo
    # (a text model that over-predicts then lifts the estimate; see Certificate). The judge
    # reads rated answers too (its calibration pairs), and thumbs given before its verdict
    # wait for it (_holds_thumbs). Paper mode takes a verdict as a label: thumbs given before
    # the call win there, and the call is not made.
    def judge_assign(self, ticket: Ticket) -> bool:
        """Draw whether this answered request goes to the judge (journaled)."""
        j = self.zoo.judge
        if j is None:
            return False
        with self._lock:
            rec = self.requests.get(ticket.request_id)
            if rec is None or rec[3] != "answered" or self._judge_rng.random() >= j.budget:
                return False
            ev = {"rid": ticket.request_id, "t": ticket.t}
            self._log("judge_due", ev)
            self._apply_judge_due(ev)
            return True

    def _apply_judge_due(self, ev: dict) -> None:
        rec = self.requests.get(ev["rid"])
        if rec is not None:
            rec[8] = "due"

    def judge_wanted(self, request_id: str) -> bool:
        """Whether the judge call drawn for this request is still to be made (in paper mode,
        not once the user rated it)."""
        with self._lock:
            rec = self.requests.get(request_id)
            return (rec is not None and rec[8] == "due"
                    and (rec[4] is None or self.router.judge_use != "label"))

    def judge_dropped(self, ticket: Ticket, why: str) -> None:
        """A drawn judge call that will not be made (``why``: "skipped" at the concurrency
        bound, "rated" in paper mode, "lost" with a stopped process): no verdict, and thumbs
        waiting for one go to the router."""
        with self._lock:
            self._drop_judge(ticket.request_id, ticket.t, why)

    def _drop_judge(self, rid: str, t: int, why: str) -> None:
        ev = {"rid": rid, "t": t, "verdict": None, "cost": 0.0, "dropped": why}
        self._log("judge", ev)
        self._apply_judge(ev)

    def judge_result(self, ticket: Ticket, verdict: int | None, prompt_tokens: int | None = None,
                     completion_tokens: int | None = None, calibration: bool = False) -> None:
        """A judge call ended: its verdict (None: it failed; no label) reaches the router;
        ``calibration``: a call made only to calibrate the judge (:meth:`judge_calibrates`)."""
        j = self.zoo.judge
        cost = j.price(prompt_tokens or 0, completion_tokens or 0) if j is not None else 0.0
        with self._lock:
            ev = {"rid": ticket.request_id, "t": ticket.t, "verdict": verdict, "cost": float(cost)}
            if calibration:
                ev["calibration"] = True
            self._log("judge", ev)
            self._apply_judge(ev)
            self._start_refit()

    # Below a full budget the draw leaves the judge only its share of the rated answers to be
    # calibrated on. A rated answer outside the draw is judged too, once its thumbs came
    # (within calibrate_within_s of the reply, the answer kept till then): that verdict only
    # calibrates the judge (SLARouter.judge_calibration), so asking for it because the answer
    # was rated biases nothing.
    @property
    def calibrates_judge(self) -> bool:
        """Whether rated answers outside the judge's draw are read to calibrate it: a zoo
        judge with ``calibrate`` on and a router that calibrates one (``judge_use``
        "estimate")."""
        j = self.zoo.judge
        return j is not None and j.calibrate and self.router.judge_use == "estimate"

    def judge_calibrates(self, request_id: str) -> bool:
        """Whether this request's answer goes to the judge to calibrate it
        (:attr:`calibrates_judge`): outside the draw, and rated."""
        if not self.calibrates_judge:
            return False
        with self._lock:
            rec = self.requests.get(request_id)
            return rec is not None and rec[8] is None and rec[4] is not None

    # -- refits -----------------------------------------------------------------------
    def _start_refit(self) -> None:
        """Under ``self._lock``: hand the refit that is due (if any, and none is running) to
        a worker thread. Requests are served on the current text model meanwhile; the
        journal records where the refit was taken and where it was installed, so a replay
        installs it at the same point (the same decisions)."""
        if self._refit_busy:
            return  # the next one is taken when this one is installed
        job = self.router.take_refit()
        if job is None:
            return
        self._refit_id += 1
        self._log("refit", {"id": self._refit_id})
        self._refit_busy = True
        threading.Thread(target=self._refit_worker, args=(self._refit_id, job), name="slarouter-refit",
                         daemon=True).start()

    def _refit_worker(self, rid: int, job) -> None:
        t0 = time.perf_counter()
        result, failed = run_refit(job)
        with self._lock:
            try:
                self._log("refit_done", {"id": rid})
                self.router.apply_refit(result)
                self.refits["failed" if failed else "done"] += 1
                self.refits["last_s"] = time.perf_counter() - t0
            finally:  # never leave a checkpoint waiting for a refit that ended
                self._refit_busy = False
                self._refit_idle.notify_all()
            self._start_refit()

    def wait_refits(self, timeout: float | None = None) -> bool:
        """Wait until no refit is running (True) or ``timeout`` seconds passed (False)."""
        with self._lock:
            return self._refit_idle.wait_for(lambda: not self._refit_busy, timeout)

    def _apply_judge(self, ev: dict) -> None:
        rec = self.requests.get(ev["rid"])
        dropped = ev.get("dropped")
        if dropped is None:
            self.judge["calls"] += 1
            self.judge["cost"] += ev["cost"]
            if ev["verdict"] is None:
                self.judge["failures"] += 1
            elif ev.get("calibration"):
                self.judge["calibration_calls"] += 1
                self.router.judge_calibration(ev["t"], int(ev["verdict"]))
                return
            else:
                self.judge["verdicts"] += 1
                if rec is not None:
                    rec[7] = int(ev["verdict"])
                self.router.judge_verdict(ev["t"], int(ev["verdict"]))
        elif dropped == "skipped":
            self.judge["skipped"] += 1
        if rec is not None and rec[8] == "due":
            held = self._holds_thumbs(rec) and rec[4] is not None
            rec[8] = "done"
            if held:  # thumbs that waited for the verdict (or for the call's end)
                try:
                    self.router.late_feedback(rec[0], int(rec[4]))
                except KeyError:
                    log.info("thumbs for step %d: the router no longer holds it after its judge call", rec[0])

    def _release_lost_judge_calls(self) -> int:
        """At a restart: the judge calls drawn before it were lost with the process. Each is
        dropped (journaled, so a later replay drops it at the same point) and thumbs waiting
        for it reach the router. Returns how many."""
        lost = [(rid, rec[0]) for rid, rec in self.requests.items() if rec[8] == "due"]
        for rid, t in lost:
            self._drop_judge(rid, t, "lost")
        return len(lost)

    # -- state --------------------------------------------------------------------------
    def _estimate(self) -> tuple[float, float, str, float, str]:
        """(satisfaction estimate, its lower confidence bound, how the bound is made, its
        one-sided confidence, the requests both cover): the contextual mode's are of the
        current SLA window, at its own ``1 - delta``."""
        r = self.router
        at_z90 = NormalDist().cdf(Z90)  # a normal bound's confidence at Z90 (the Wilson bound's too)
        conf, covers = r.bound_scope(Z90) or (at_z90, "all requests")
        if r.t == 0:
            return math.nan, math.nan, "none", conf, covers
        est = r.satisfaction_estimate()
        if not math.isfinite(est):
            est, covers = self.plug_sum / r.t, "all requests"  # feedback where given, the prediction elsewhere
        lcb = float(r.certified_lower_bound(Z90))
        kind = f"router (one-sided {100 * conf:.0f}%, {covers})"
        if not math.isfinite(lcb):
            up = sum(s.thumbs_up for s in self.stats)
            n = up + sum(s.thumbs_down for s in self.stats)
            conf = at_z90
            lcb, kind = wilson_lower(up, n), f"Wilson one-sided {100 * conf:.0f}% on the thumbs received"
        return est, lcb, kind, conf, covers

    def preflight(self) -> dict | None:
        """The pre-flight check (:mod:`..preflight`) of this service's SLA from the zoo's
        stated accuracies and each model's price for a nominal request, text-blind and on
        the thumbs alone (a real judge's error rates are unknown): at the share of answered
        requests that got thumbs once ``PREFLIGHT_MIN_ANSWERED`` were answered, else at the
        benchmarks' 0.2, said as assumed. None without stated accuracies. It reads the
        counts under the lock and computes outside it (tens of milliseconds of LPs that no
        routing decision should wait for), memoised on the thumbs rate to 3 decimals."""
        if not self.zoo.stated_levels:
            return None
        from ..policies.contextual import DEFAULT_WINDOW
        from ..preflight import PreflightConfig, preflight
        from ..simulator import DEFAULT_FEEDBACK_RATE

        with self._lock:
            answered = sum(s.served for s in self.stats)
            thumbs = sum(s.thumbs_up + s.thumbs_down for s in self.stats)
            cert = getattr(self.router.policy, "cert", None)
            window = cert.window if cert is not None else DEFAULT_WINDOW
        observed = answered >= PREFLIGHT_MIN_ANSWERED and thumbs > 0
        rate = round(min(thumbs / answered, 1.0), 3) if observed else DEFAULT_FEEDBACK_RATE
        source = f"observed ({thumbs} thumbs on {answered} answers)" if observed else "assumed (too few answers yet)"
        key = (rate, window)
        if self._preflight is None or self._preflight[0] != key:
            settings = self.router.config.settings  # the router's claim where its policy states one
            claim = {k: getattr(settings, k) for k in ("delta", "guarantee") if hasattr(settings, k)}
            cfg = PreflightConfig(alpha=self.router.config.alpha, feedback_rate=max(rate, 1e-3), window=window,
                                  **claim)
            check = preflight(self.zoo.stated_levels, [m.nominal_price for m in self.zoo.models], cfg,
                              self.zoo.names)
            self._preflight = (key, {**check.to_dict(), "report": check.report()})
        return {**self._preflight[1], "feedback_rate_source": source}

    def _ledger_counts(self) -> tuple[int, int, int]:
        """Answered requests without thumbs, judge calls due, and thumbs held for a due
        verdict: one pass over the request ledger (up to 100,000 records, under the lock)."""
        pending = due = waiting = 0
        for v in self.requests.values():
            if v[4] is None:
                pending += v[3] == "answered"
            elif self._holds_thumbs(v):
                waiting += 1
            due += v[8] == "due"
        return pending, due, waiting

    def state(self, history: int = 0) -> dict:
        """Everything ``GET /v1/state`` shows (no API keys)."""
        now = time.monotonic()
        with self._lock:
            r = self.router
            est, lcb, kind, conf, covers = self._estimate()
            up = sum(s.thumbs_up for s in self.stats)
            down = sum(s.thumbs_down for s in self.stats)
            rows = list(self.trace)[-history:] if history > 0 else []
            model_cost = float(sum(s.cost for s in self.stats))
            pending, due, waiting = self._ledger_counts()
            out = {
                "t": r.t, "alpha": r.config.alpha, "mode": r.config.mode,
                "q": float(r.q), "decision_queue": float(r.decision_queue()),
                "v": None if not math.isfinite(self.last_v) else self.last_v,
                "encoder": self.encoder.spec, "instance": self.config.instance,
                # the per-request forward: "onnx", "torchscript" or "eager" (None: not a transformer)
                "encoder_runtime": getattr(self.encoder, "runtime", None),
                "encoder_traced": getattr(self.encoder, "traced_forward", None) is not None,
                "encoder_trace_problem": getattr(self.encoder, "trace_problem", None),
                "models": [{"name": m.name, "model": m.model, **s.__dict__,
                            "circuit_open": b.is_open(now), "circuit_opened": b.opened}
                           for m, s, b in zip(self.zoo.models, self.stats, self.breakers)],
                "cost_total": model_cost + float(self.judge["cost"]),
                "cost_models": model_cost,
                "requests_failed": self.failed_requests,
                "usage_rejected": self.usage_rejected,
                "feedback": {"satisfied": up, "unsatisfied": down,
                             "pending": pending},
                "satisfaction": {"estimate": _num(est), "lower_bound": _num(lcb), "bound": kind,
                                 "confidence": conf, "covers": covers,
                                 "sla_met": None if not math.isfinite(lcb) else bool(lcb >= r.config.alpha)},
                "sla": r.sla_status(),
                "judge": None if self.zoo.judge is None else {
                    **self.zoo.judge.public(), **self.judge,
                    # calls = verdicts (the draw's) + failures + calibration_calls (rated answers
                    # outside the draw, answered); calls drawn and not ended, and the thumbs
                    # waiting for their verdicts
                    "due": due, "thumbs_waiting": waiting},
                "timings_ms": _timings(self.timings),
                "refits": {**self.refits, "running": self._refit_busy},
                "restored": self.restored, "replayed_events": self.replayed,
                "kept_settings": list(self.kept_settings),
                "uptime_s": time.time() - self.started_at,
                "history": rows,
            }
        out["preflight"] = self.preflight()  # outside the lock: no routing decision waits for its LPs
        return json.loads(json.dumps(out))  # a deep copy, plain JSON types


def _timings(rows) -> dict:
    """p50 and p99 in ms of the embedding, the locked decision and the wait for the lock."""
    if not rows:
        return {}
    a = np.asarray(rows) * 1e3
    return {f"{name}_p{q}": float(np.percentile(a[:, j], q))
            for j, name in enumerate(("embed", "decide", "lock_wait")) for q in (50, 99)}


def _num(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None
