"""Feedback by hand: one user's router on the per-request API (decide, then observe)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..router import NO_FEEDBACK, Decision, SLARouter
from ..simulator import stream_plan
from .settings import RunSettings

@dataclass
class HandRequest:
    """A request routed on the hand-feedback page, waiting for (or with) its verdict."""

    id: int
    text: str
    benchmark: str
    row: int | None  # data row when it came from the stream; None when typed
    decision: Decision
    embedding: np.ndarray
    q_before: float = 0.0  # the router's queue when the request arrived (paper mode: decision.q)
    q_after: float | None = None
    feedback: int | None = None
    shat_after: np.ndarray | None = None
    trained: bool = False
    source: str = "stream"
    stream_pos: int | None = None  # position in the seeded stream (None: typed)

    @property
    def answered(self) -> bool:
        return self.q_after is not None


class HandSession:
    """One user's router on the per-request API (decide, then observe) with hand feedback.

    Requests come from the seeded stream of the data or are typed in. The user answers
    with thumbs up (1) or down (0). With ``auto_feedback`` on, a stream request the user
    skips gets the simulated user's feedback (the logged label, at the stream's feedback
    rate) and ``serve_auto`` serves background traffic the same way; with it off, only the
    user's thumbs are feedback. ``learn_from_all``: Algorithm 1 trains the predictor only
    on feedback for explored requests; when True, every hand verdict also trains it.
    """

    def __init__(self, data: RoutingData, embeddings: np.ndarray, settings: RunSettings,
                 auto_feedback: bool = True, learn_from_all: bool = True):
        emb = np.asarray(embeddings, np.float32)
        if emb.shape[0] != data.n_requests:
            raise ValueError(f"embeddings must have one row per request ({data.n_requests}), got {emb.shape}")
        self.data = data
        self.embeddings = emb
        self.settings = settings
        self.config = settings.router_config(data)
        self.order, self.plan, router_seed = stream_plan(data.n_requests, data.solved,
                                                          float(settings.feedback_rate), int(settings.seed))
        self.router = SLARouter(self.config, data.n_models, emb.shape[1], seed=router_seed)
        self.auto_feedback = bool(auto_feedback)
        self.learn_from_all = bool(learn_from_all)
        self.position = 0  # next stream position
        self.next_id = 1
        self.current: HandRequest | None = None
        self.history: list[HandRequest] = []
        self.auto_served = 0
        self.mean_costs = data.costs.mean(axis=0)

    @property
    def q(self) -> float:
        """The queue the router's next decision uses (guarded mode: with its margin), so the
        Q shown beside the decision table is the Q in its ``Q*(alpha - shat)`` column."""
        return float(self.router.decision_queue())

    @property
    def stream_left(self) -> int:
        return self.data.n_requests - self.position

    def _close_pending(self) -> None:
        """Observe the open request without a hand verdict (auto feedback or none)."""
        cur = self.current
        if cur is None or cur.answered:
            return
        fb: int | None = None
        if self.auto_feedback and cur.stream_pos is not None:
            f = int(self.plan[cur.stream_pos, cur.decision.model])
            fb = None if f == NO_FEEDBACK else f
        self.router.observe(cur.decision, fb)
        cur.q_after = self.q
        cur.feedback = None
        cur.source += " (skipped" + (f", auto feedback {fb})" if fb is not None else ")")
        cur.shat_after = self.router.predict_satisfaction(cur.embedding)

    def next_from_stream(self) -> HandRequest:
        """Route the next request of the seeded stream."""
        if self.stream_left <= 0:
            raise ValueError("the stream is finished: reset the session or type a request")
        self._close_pending()
        pos = self.position
        row = int(self.order[pos])
        x = self.embeddings[row]
        d = self.router.decide(x, self.data.costs[row])
        req = HandRequest(id=self.next_id, text=str(self.data.frame["input_text"].iat[row]),
                          benchmark=str(self.data.frame["benchmark"].iat[row]), row=row, decision=d,
                          embedding=x, q_before=self.q, stream_pos=pos)
        self.position += 1
        self.next_id += 1
        self.current = req
        self.history.append(req)
        return req

    def route_text(self, text: str, embedding: np.ndarray, costs: np.ndarray | None = None) -> HandRequest:
        """Route a typed request (costs default to each model's mean cost on the data)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("type a request first: the text is empty")
        x = np.asarray(embedding, np.float32)
        if x.shape != (self.router.dim,):
            raise ValueError(f"the embedding has width {x.shape}, the router expects {self.router.dim}: "
                             "embed the text with the same encoder as the data")
        self._close_pending()
        c = self.mean_costs if costs is None else np.asarray(costs, np.float64)
        d = self.router.decide(x, c)
        req = HandRequest(id=self.next_id, text=text.strip(), benchmark="(typed)", row=None, decision=d,
                          embedding=x, q_before=self.q, source="typed")
        self.next_id += 1
        self.current = req
        self.history.append(req)
        return req

    def answer(self, feedback: int) -> HandRequest:
        """The user's verdict on the open request: 1 (thumbs up) or 0 (thumbs down)."""
        cur = self.current
        if cur is None or cur.answered:
            raise ValueError("no open request to answer: take the next request or type one")
        if feedback not in (0, 1) or isinstance(feedback, bool):
            raise ValueError(f"feedback must be 1 (up) or 0 (down), got {feedback!r}")
        version = self.router.model_version
        self.router.observe(cur.decision, int(feedback))
        if self.learn_from_all and not cur.decision.explored and self.config.mode == "paper":
            # Algorithm 1 learns from explored requests only; the demo option also learns here
            # (the guarded mode has its own learn_from_all switch, on by default)
            self.router.predictor.add(cur.embedding, cur.decision.model, float(feedback))
            self.router.predictor.train_step(self.router.buffer_rng)
        cur.trained = self.router.model_version != version
        cur.feedback = int(feedback)
        cur.q_after = self.q
        cur.shat_after = self.router.predict_satisfaction(cur.embedding)
        return cur

    def serve_auto(self, n: int) -> int:
        """Serve the next ``n`` stream requests without showing them (background traffic)."""
        self._close_pending()
        n = int(min(max(n, 0), self.stream_left))
        if n == 0:
            return 0
        a = self.position
        rows = self.order[a:]
        fb = self.plan[a:] if self.auto_feedback else np.full_like(self.plan[a:], NO_FEEDBACK)
        self.router.run_block(self.embeddings[rows], np.ascontiguousarray(self.data.costs[rows]), fb, n=n)
        self.position += n
        self.auto_served += n
        return n

    def explanation(self, req: HandRequest) -> pd.DataFrame:
        """Per model: shat, cost, V*C, Q*(alpha - shat), score; and after the verdict."""
        d = req.decision
        unit = self.data.cost_unit
        out = pd.DataFrame({
            "model": list(self.data.models),
            "shat": d.shat,
            f"cost ({unit})": d.costs,
            "V*C": d.cost_terms,
            "Q*(alpha-shat)": d.queue_terms,
            "score": d.scores,
            "chosen": [self.why(req) if j == d.model else "" for j in range(len(d.shat))],
        })
        if req.shat_after is not None:
            # paper mode: shat is the predictor's output; guarded mode adjusts it (levels, optimism)
            out["shat after" if self.config.mode == "paper" else "predictor after"] = req.shat_after
        return out

    @staticmethod
    def why(req: HandRequest) -> str:
        """How the served model was picked: explored, escalated by the guard, or lowest score."""
        d = req.decision
        if d.explored:
            return "explored"
        if getattr(d, "escalated", False):
            return "escalated (guard)"
        return "lowest score"

    def history_frame(self) -> pd.DataFrame:
        rows = []
        for r in self.history:
            rows.append({
                "id": r.id, "source": r.source, "benchmark": r.benchmark, "text": r.text,
                "model": self.data.models[r.decision.model], "explored": r.decision.explored,
                "shat_served": float(r.decision.shat[r.decision.model]),
                "your_feedback": {None: "", 1: "up", 0: "down"}[r.feedback],
                "q_before": r.q_before, "q_after": r.q_after, "v": r.decision.v,
                "predictor_trained": r.trained,
            })
        return pd.DataFrame(rows, columns=["id", "source", "benchmark", "text", "model", "explored",
                                           "shat_served", "your_feedback", "q_before", "q_after", "v",
                                           "predictor_trained"])

    def history_csv(self) -> bytes:
        return self.history_frame().to_csv(index=False).encode("utf-8")


