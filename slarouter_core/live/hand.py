"""Feedback by hand: routers on the per-request API (decide, then observe), one verdict at a
time. :class:`HandSession` is one router; :class:`HandRouters` sends each request to several
routers (one session each, on the same stream) and hands one verdict to the routers that
served the judged answer."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..feedback import VerdictsInFlight
from ..policies.registry import DEFAULT_POLICY
from ..policies.registry import info as policy_info
from ..router import NO_FEEDBACK, Decision, SLARouter
from ..serving import serve_stream
from ..simulator import stream_plan_full
from .charts import ChartFrame, color_encoding
from .settings import RunSettings

#: the two bars per model of the estimate chart
WHEN = ("before", "after")
#: its bars where the policy decides with values of its own (see :func:`shat_bars`)
OWN_WHEN = ("decided with", "predictor before", "predictor after")
#: the "after" bars of the before/after estimate chart (a blue that reads as "now")
AFTER_COLOR = "#1f6feb"
_FEEDBACK_TEXT = {None: "", 1: "up", 0: "down"}


@dataclass
class HandRequest:
    """A request routed by one router on the hand-feedback page, waiting for (or with) its verdict."""

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
    router: str = DEFAULT_POLICY
    #: the router's estimate per model (``predict_satisfaction``) when it decided: the same
    #: estimator as ``shat_after``, so that before and after compare like with like
    shat_before: np.ndarray | None = None
    #: whether the served model solved this request in the log (None: typed, no log)
    logged: int | None = None

    @property
    def answered(self) -> bool:
        return self.q_after is not None


class HandSession:
    """One user's router on the per-request API (decide, then observe) with hand feedback.

    Requests come from the seeded stream of the data or are typed in. The user answers
    with thumbs up (1) or down (0). With ``auto_feedback`` on, a stream request the user
    skips gets the simulated user's feedback and ``serve_auto`` serves background traffic
    the same way; with it off, only the user's thumbs are feedback. The simulated users
    follow the settings' feedback model through the plan the simulator builds
    (``stream_plan_full``): the same request order and verdicts as a Live run, and under
    ``delayed`` each automatic verdict reaches the router that many requests later.
    ``learn_from_all``: Algorithm 1 trains the predictor only on feedback for explored
    requests; when True, every hand verdict also trains it. ``mode`` picks the router
    (default: the settings' ``mode``).
    """

    def __init__(self, data: RoutingData, embeddings: np.ndarray, settings: RunSettings,
                 auto_feedback: bool = True, learn_from_all: bool = True, mode: str | None = None):
        emb = np.asarray(embeddings, np.float32)
        if emb.shape[0] != data.n_requests:
            raise ValueError(f"embeddings must have one row per request ({data.n_requests}), got {emb.shape}")
        self.data = data
        self.embeddings = emb
        self.settings = settings
        sim = settings.simulation_config(data, mode)
        self.config = sim.router
        self.mode = self.config.mode
        self.order, plan, router_seed = stream_plan_full(
            data.n_requests, data.solved, sim.feedback_rate, sim.seed, sim.shuffle, sim.feedback,
            data.benchmarks if sim.feedback.kind == "drift" else None)
        self.plan = plan.feedback
        self.delay = plan.delay  # None unless the feedback model delays verdicts
        self.router = SLARouter(self.config, data.n_models, emb.shape[1], seed=router_seed,
                                stream_length=data.n_requests)
        self.auto_feedback = bool(auto_feedback)
        self.learn_from_all = bool(learn_from_all)
        self.position = 0  # next stream position
        self.next_id = 1
        self.current: HandRequest | None = None
        self.history: list[HandRequest] = []
        self.auto_served = 0
        self.n_feedback = 0  # verdicts the router received (hand and automatic)
        self.mean_costs = data.costs.mean(axis=0)
        #: automatic verdicts on their way (delayed feedback): stream position at which they
        #: arrive -> [(router step, verdict)]
        self._in_flight = VerdictsInFlight()
        #: (requests served, queue) after every step, for the session's Q chart
        self.q_log: list[tuple[int, float]] = [(0, self.q)]

    @property
    def q(self) -> float:
        """The queue the router's next decision uses (guarded mode: with its margin), so the
        Q shown beside the decision table is the Q in its ``Q*(alpha - shat)`` column."""
        return float(self.router.decision_queue())

    @property
    def stream_left(self) -> int:
        return self.data.n_requests - self.position

    def _train_on_hand_verdict(self, req: HandRequest, feedback: int) -> None:
        """The demo option ``learn_from_all`` for a policy that learns from explored
        requests only (Algorithm 1): the router's ``observe`` ignores a verdict on an
        exploited one; ``teach`` gives the predictor that label outside the rule (queue
        untouched). Other policies learn from every label already."""
        self.router.teach(req.embedding, req.decision.model, int(feedback))

    # -- serving ------------------------------------------------------------------------
    def _auto_verdict(self, pos: int, model: int) -> int | None:
        f = int(self.plan[pos, model]) if self.auto_feedback else NO_FEEDBACK
        return None if f == NO_FEEDBACK else f

    def _deliver_due(self, pos: int) -> None:
        """Hand the router every delayed verdict due before stream position ``pos`` is served."""
        for t, f in self._in_flight.arriving(pos):
            try:
                self.router.late_feedback(t, f)
            except KeyError:  # older than the router keeps unanswered steps
                continue
            self.n_feedback += 1
            self.q_log.append((self.router.t, self.q))

    def _observe_auto(self, decision: Decision, pos: int | None) -> int | None:
        """Observe a step without a hand verdict; the simulated user's verdict (stream
        requests, auto feedback on) comes now or, under delayed feedback, later."""
        fb = None if pos is None else self._auto_verdict(pos, decision.model)
        if fb is not None and self.delay is not None:  # as the simulator: observed now, judged later
            self.router.observe(decision, None)  # the router keeps the step for late_feedback
            if self._in_flight.send(pos, int(self.delay[pos]), decision.t, fb):
                self.router.late_feedback(decision.t, fb)
                self.n_feedback += 1
        else:
            self.router.observe(decision, fb)
            self.n_feedback += fb is not None
        self.q_log.append((self.router.t, self.q))
        return fb

    def skip(self) -> None:
        """Close the open request without a hand verdict (automatic feedback, or none)."""
        cur = self.current
        if cur is None or cur.answered:
            return
        fb = self._observe_auto(cur.decision, cur.stream_pos)
        cur.q_after = self.q
        cur.feedback = None
        late = fb is not None and self.delay is not None and int(self.delay[cur.stream_pos]) > 0
        cur.source += " (skipped" + (f", auto feedback {fb}" + (" on its way" if late else "") + ")"
                                     if fb is not None else ")")
        cur.shat_after = self.router.predict_satisfaction(cur.embedding)

    def _open(self, req_kw: dict, x: np.ndarray, costs: np.ndarray) -> HandRequest:
        shat_before = self.router.predict_satisfaction(x)
        d = self.router.decide(x, costs)
        row = req_kw.get("row")
        req = HandRequest(id=self.next_id, decision=d, embedding=x, q_before=self.q, router=self.mode,
                          shat_before=shat_before,
                          logged=None if row is None else int(self.data.solved[row, d.model]), **req_kw)
        self.next_id += 1
        self.current = req
        self.history.append(req)
        return req

    def next_from_stream(self) -> HandRequest:
        """Route the next request of the seeded stream."""
        if self.stream_left <= 0:
            raise ValueError("the stream is finished: reset the session or type a request")
        self.skip()
        pos = self.position
        self._deliver_due(pos)
        row = int(self.order[pos])
        req = self._open({"text": str(self.data.frame["input_text"].iat[row]),
                          "benchmark": str(self.data.frame["benchmark"].iat[row]), "row": row, "stream_pos": pos},
                         self.embeddings[row], self.data.costs[row])
        self.position += 1
        return req

    def route_text(self, text: str, embedding: np.ndarray, costs: np.ndarray | None = None) -> HandRequest:
        """Route a typed request (costs default to each model's mean cost on the data)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("type a request first: the text is empty")
        x = np.asarray(embedding, np.float32)
        if x.shape != (self.router.dim,):
            raise ValueError(f"the embedding has width {x.shape}, the router expects {self.router.dim}: "
                             "embed the text with the same encoder as the data")
        self.skip()
        c = self.mean_costs if costs is None else np.asarray(costs, np.float64)
        return self._open({"text": text.strip(), "benchmark": "(typed)", "row": None, "source": "typed"}, x, c)

    def answer(self, feedback: int) -> HandRequest:
        """The user's verdict on the open request: 1 (thumbs up) or 0 (thumbs down)."""
        cur = self.current
        if cur is None or cur.answered:
            raise ValueError("no open request to answer: take the next request or type one")
        if feedback not in (0, 1) or isinstance(feedback, bool):
            raise ValueError(f"feedback must be 1 (up) or 0 (down), got {feedback!r}")
        version = self.router.model_version
        self.router.observe(cur.decision, int(feedback))
        self.n_feedback += 1
        if self.learn_from_all and not cur.decision.explored and not self.router.learns_from_every_label:
            self._train_on_hand_verdict(cur, int(feedback))
        cur.trained = self.router.model_version != version
        cur.feedback = int(feedback)
        cur.q_after = self.q
        cur.shat_after = self.router.predict_satisfaction(cur.embedding)
        self.q_log.append((self.router.t, cur.q_after))
        return cur

    def serve_auto(self, n: int) -> int:
        """Serve the next ``n`` stream requests without showing them (background traffic)."""
        self.skip()
        n = int(min(max(n, 0), self.stream_left))
        if n == 0:
            return 0
        a = self.position
        # the stream from position a on (rows beyond a + n are the batched path's lookahead)
        rows = self.order[a:]
        fb = self.plan[a:] if self.auto_feedback else np.full_like(self.plan[a:], NO_FEEDBACK)
        t0 = self.router.t

        def event(kind: str) -> None:  # delayed feedback: as each verdict lands and each step ends
            self.n_feedback += kind in ("late", "now")
            if kind != "now":
                self.q_log.append((self.router.t, self.q))

        bt = serve_stream(self.router, self.embeddings[rows], np.ascontiguousarray(self.data.costs[rows]), fb, 0, n,
                          None if self.delay is None else self.delay[a:], self._in_flight, event, pos0=a)
        if self.delay is None:
            self.n_feedback += int(np.sum(np.asarray(bt.feedback) != NO_FEEDBACK))
            self.q_log += list(zip(range(t0 + 1, t0 + n + 1), map(float, bt.q)))
        self.position += n
        self.auto_served += n
        return n

    # -- what the page shows ---------------------------------------------------------------
    def explanation(self, req: HandRequest) -> pd.DataFrame:
        """Per model: shat, cost, V*C, Q*(alpha - shat), score; and after the verdict (Q
        under the name the policy gives it: the contextual policy's is its price)."""
        d = req.decision
        unit = self.data.cost_unit
        q = policy_info(self.mode).score_multiplier
        out = pd.DataFrame({
            "model": list(self.data.models),
            "shat": d.shat,
            f"cost ({unit})": d.costs,
            "V*C": d.cost_terms,
            f"{q}*(alpha-shat)": d.queue_terms,
            "score": d.scores,
            "chosen": [self.why(req) if j == d.model else "" for j in range(len(d.shat))],
        })
        if req.shat_after is not None:
            out["predictor after" if self.decided_own_shat(req) else "shat after"] = req.shat_after
        return out

    @staticmethod
    def decided_own_shat(req: HandRequest) -> bool:
        """Whether the decision's shat (the table's) differs from the predictor's estimate
        (``shat_before``): the predictor's output itself in Algorithm 1, but a policy may
        decide with values of its own (a draw from its posterior, an optimistic bound)."""
        return req.shat_before is not None and not np.array_equal(req.decision.shat, req.shat_before)

    @staticmethod
    def why(req: HandRequest) -> str:
        """How the served model was picked: explored, escalated by the guard, the contextual
        fallback's choice by price (the cheapest repayment of a shortfall, or a dear model's
        draw thinned at its cost ratio: ``Decision.repaid`` marks both), or lowest score."""
        d = req.decision
        if d.explored:
            return "explored"
        if getattr(d, "escalated", False):
            return "escalated (guard)"
        if getattr(d, "repaid", False):
            return "fallback by price (cheapest repayment or a thinned draw)"
        return "lowest score"

    def logged_outcome(self, req: HandRequest) -> str:
        """What the log says about the served answer, in words: the page asks "was this
        answer good?" and, without the answer's text, this is what the user can judge."""
        model = self.data.models[req.decision.model]
        if req.logged is None:
            return (f"Typed request: there is no logged answer of {model} to show (only requests from the "
                    "data have one). Judge the choice itself, or ask a running service below for the real answer.")
        verdict = "solved this request (a correct answer)" if req.logged else \
            "did not solve this request (a wrong answer)"
        return f"Logged outcome: in the data, {model} {verdict}."

    def shat_chart(self, req: HandRequest) -> ChartFrame:
        """The router's estimate per model before and after the verdict, as grouped bars;
        where the policy decided with a shat of its own, that too (:meth:`shat_note`)."""
        if self.decided_own_shat(req):
            return shat_bars(self.data.models, req.shat_before, req.shat_after, self.config.alpha,
                             f"{self.mode}: the shat it decided with, and its predictor's estimate",
                             decided=req.decision.shat)
        return shat_bars(self.data.models, req.shat_before, req.shat_after, self.config.alpha,
                         f"{self.mode}: shat before and after your verdict")

    def shat_note(self, req: HandRequest) -> str:
        """Why the chart's predictor bars differ from the table's shat, or "" where they are
        the same values. Without it the bars read as a bug: a predictor with no feedback yet
        says its prior (e.g. 50% for every model) while the table shows the values drawn or
        bounded from it."""
        if not self.decided_own_shat(req):
            return ""
        return (f"{self.mode} does not decide with its predictor's estimate itself: the table's shat (the "
                "\"decided with\" bars) is derived from it for this request (e.g. drawn from its posterior or "
                "an optimistic bound), so the two differ; \"predictor before\" is the estimate the "
                "decision started from (its prior where it has no feedback yet), \"predictor after\" the "
                "estimate once your verdict has been learnt from.")

    def history_frame(self) -> pd.DataFrame:
        rows = []
        for r in self.history:
            rows.append({
                "id": r.id, "router": r.router, "source": r.source, "benchmark": r.benchmark, "text": r.text,
                "model": self.data.models[r.decision.model], "explored": r.decision.explored,
                "logged_outcome": "" if r.logged is None else ("solved" if r.logged else "not solved"),
                "shat_served": float(r.decision.shat[r.decision.model]),
                "your_feedback": _FEEDBACK_TEXT[r.feedback],
                "q_before": r.q_before, "q_after": r.q_after, "v": r.decision.v,
                "predictor_trained": r.trained,
            })
        return pd.DataFrame(rows, columns=HISTORY_COLUMNS)

    def history_csv(self) -> bytes:
        return self.history_frame().to_csv(index=False).encode("utf-8")


HISTORY_COLUMNS = ["id", "router", "source", "benchmark", "text", "model", "explored", "logged_outcome",
                   "shat_served", "your_feedback", "q_before", "q_after", "v", "predictor_trained"]


@dataclass
class HandRound:
    """One request as every router of a :class:`HandRouters` saw it."""

    id: int
    requests: dict[str, HandRequest]
    feedback: int | None = None
    judged: tuple[str, ...] = field(default=())  # the routers the verdict went to

    @property
    def first(self) -> HandRequest:
        return next(iter(self.requests.values()))

    @property
    def text(self) -> str:
        return self.first.text

    @property
    def benchmark(self) -> str:
        return self.first.benchmark

    @property
    def answered(self) -> bool:
        return all(r.answered for r in self.requests.values())

    def answers(self) -> dict[int, tuple[str, ...]]:
        """Served model -> the routers that chose it (in router order): one answer each."""
        out: dict[int, tuple[str, ...]] = {}
        for mode, r in self.requests.items():
            out[r.decision.model] = out.get(r.decision.model, ()) + (mode,)
        return out


class HandRouters:
    """Several routers on one hand-fed stream: each request (from the stream or typed) goes
    to every router, each decides on its own, and one thumbs press is the verdict on one
    answer. It goes to the routers that served that answer (the same model for the same
    request is the same answer); the others close the request without a hand verdict (the
    simulated user's, with automatic feedback on). Where the routers chose different
    models, the caller says which router's answer was judged.

    Each router is a :class:`HandSession` with the same settings but its own mode, so all
    see the same request order and feedback plan.
    """

    def __init__(self, data: RoutingData, embeddings: np.ndarray, settings: RunSettings,
                 routers: tuple[str, ...] | list[str] | None = None, auto_feedback: bool = True,
                 learn_from_all: bool = True):
        routers = tuple(routers) if routers else (settings.mode,)
        if len(set(routers)) != len(routers):
            raise ValueError(f"routers must be distinct, got {routers!r}")
        self.data = data
        self.routers = routers
        self.sessions = {m: HandSession(data, embeddings, settings, auto_feedback, learn_from_all, mode=m)
                         for m in routers}
        self.current: HandRound | None = None
        self.rounds: list[HandRound] = []

    @property
    def primary(self) -> HandSession:
        return self.sessions[self.routers[0]]

    @property
    def auto_feedback(self) -> bool:
        return self.primary.auto_feedback

    @auto_feedback.setter
    def auto_feedback(self, on: bool) -> None:
        for s in self.sessions.values():
            s.auto_feedback = bool(on)

    @property
    def learn_from_all(self) -> bool:
        return self.primary.learn_from_all

    @learn_from_all.setter
    def learn_from_all(self, on: bool) -> None:
        for s in self.sessions.values():
            s.learn_from_all = bool(on)

    @property
    def position(self) -> int:
        return self.primary.position

    @property
    def stream_left(self) -> int:
        return self.primary.stream_left

    @property
    def auto_served(self) -> int:
        return self.primary.auto_served

    def _round(self, requests: dict[str, HandRequest]) -> HandRound:
        rnd = HandRound(id=next(iter(requests.values())).id, requests=requests)
        self.current = rnd
        self.rounds.append(rnd)
        return rnd

    def next_from_stream(self) -> HandRound:
        """The next stream request, routed by every router."""
        if self.stream_left <= 0:
            raise ValueError("the stream is finished: reset the session or type a request")
        return self._round({m: s.next_from_stream() for m, s in self.sessions.items()})

    def route_text(self, text: str, embedding: np.ndarray, costs: np.ndarray | None = None) -> HandRound:
        """A typed request, routed by every router (see :meth:`HandSession.route_text`)."""
        self.primary.route_text(text, embedding, costs)  # checks first: nothing changes on a bad input
        requests = {m: (s.current if m == self.routers[0] else s.route_text(text, embedding, costs))
                    for m, s in self.sessions.items()}
        return self._round(requests)

    def answer(self, feedback: int, router: str | None = None) -> HandRound:
        """The user's verdict on the answer of ``router`` (needed when the routers chose
        different models); it goes to every router that served that same model."""
        cur = self.current
        if cur is None or cur.answered:
            raise ValueError("no open request to answer: take the next request or type one")
        answers = cur.answers()
        if router is None:
            if len(answers) > 1:
                raise ValueError("the routers chose different models: say which router's answer you judge")
            router = self.routers[0]
        if router not in cur.requests:
            raise ValueError(f"no router {router!r} here: choose one of {', '.join(self.routers)}")
        judged = answers[cur.requests[router].decision.model]
        self.sessions[judged[0]].answer(feedback)  # validates the verdict before anything else moves
        for m in judged[1:]:
            self.sessions[m].answer(feedback)
        for m in self.routers:
            if m not in judged:
                self.sessions[m].skip()
        cur.feedback = int(feedback)
        cur.judged = judged
        return cur

    def serve_auto(self, n: int) -> int:
        """Background traffic: the next ``n`` stream requests served by every router (an open
        request closes first, without a hand verdict)."""
        return min(s.serve_auto(n) for s in self.sessions.values())

    def history_frame(self) -> pd.DataFrame:
        """Every request of every router, newest round last (column ``router``)."""
        frames = [s.history_frame() for s in self.sessions.values()]
        out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=HISTORY_COLUMNS)
        order = {m: i for i, m in enumerate(self.routers)}
        return out.sort_values(["id", "router"], key=lambda c: c.map(order) if c.name == "router" else c,
                               kind="stable").reset_index(drop=True)

    def history_csv(self) -> bytes:
        return self.history_frame().to_csv(index=False).encode("utf-8")

    def q_chart(self, max_points: int = 500) -> ChartFrame:
        """Each router's queue over the session (requests it served on the x axis), with a
        point where a hand verdict landed."""
        rows = []
        for m, s in self.sessions.items():
            log = np.asarray(s.q_log, np.float64)
            keep = np.unique(np.linspace(0, len(log) - 1, min(len(log), max_points)).round().astype(int))
            rows += [{"t": int(t), "series": m, "value": float(q), "kind": "queue"} for t, q in log[keep]]
            rows += [{"t": int(r.decision.t), "series": m, "value": float(r.q_after), "kind": "your verdict"}
                     for r in s.history if r.feedback is not None]
        frame = pd.DataFrame(rows, columns=["t", "series", "value", "kind"])
        color = color_encoding("series", list(self.routers), self.data.models, "router")
        # fixed domains while there is (almost) nothing to draw: a frame, not bare axes
        last = int(frame["t"].max()) if len(frame) else 0
        top = float(frame["value"].max()) if len(frame) else 0.0
        x = {"field": "t", "type": "quantitative", "title": "requests served (by hand and in the background)",
             "scale": {"domain": [0, max(last, 10)]}, "axis": {"format": "d"}}
        y = {"field": "value", "type": "quantitative", "title": "Q",
             "scale": {"domain": [0.0, top * 1.1 if top > 0 else 1.0]}}
        spec = {"title": "Queue Q over this session (points: your verdicts)", "height": 180, "layer": [
            {"transform": [{"filter": "datum.kind == 'queue'"}], "mark": {"type": "line", "interpolate": "step-after"},
             "encoding": {"x": x, "y": y, "color": color}},
            {"transform": [{"filter": "datum.kind == 'your verdict'"}],
             "mark": {"type": "point", "filled": True, "size": 60},
             "encoding": {"x": x, "y": y, "color": color,
                          "tooltip": [{"field": "series", "title": "router"}, {"field": "t", "title": "request"},
                                      {"field": "value", "title": "Q after", "format": ".4g"}]}}]}
        return ChartFrame("hand_q", frame, spec)


def shat_bars(models: tuple[str, ...] | list[str], before: np.ndarray | None, after: np.ndarray | None,
              alpha: float, title: str, decided: np.ndarray | None = None) -> ChartFrame:
    """Grouped bars of an estimate per model, before and (once given) after a verdict, with
    alpha as a labelled rule: the bar that moved is the model the verdict was about.
    ``decided``: the shat a policy decided with where it is not the estimate itself, drawn
    first (:data:`OWN_WHEN`), so that the chart shows the table's values too."""
    names = WHEN if decided is None else OWN_WHEN
    series = ([] if decided is None else [(names[0], decided)]) + list(zip(names[-2:], (before, after)))
    parts = [(w, v) for w, v in series if v is not None]
    colors = ["#b8c4d6", AFTER_COLOR] if decided is None else ["#e8a33d", "#b8c4d6", AFTER_COLOR]
    frame = pd.DataFrame({"model": [m for _, v in parts for m in models],
                          "when": [w for w, v in parts for _ in models],
                          "shat": np.concatenate([np.asarray(v, np.float64) for _, v in parts]) if parts
                          else np.zeros(0)})
    when_color = {"field": "when", "type": "nominal", "sort": list(names),
                  "scale": {"domain": list(names), "range": colors},
                  "legend": {"title": None, "orient": "bottom"}}
    one = {"values": [{"rule": float(alpha), "label": f"alpha = {100 * alpha:.1f}%"}]}
    spec = {"title": title, "height": 170, "layer": [
        {"mark": {"type": "bar"},
         "encoding": {"x": {"field": "model", "type": "nominal", "sort": list(models), "title": None,
                            "axis": {"labelAngle": -40, "labelLimit": 0, "labelOverlap": False}},
                      "xOffset": {"field": "when", "sort": list(names)},
                      "y": {"field": "shat", "type": "quantitative", "title": "shat", "scale": {"domain": [0, 1]},
                            "axis": {"format": "%"}},
                      "color": when_color,
                      "tooltip": [{"field": "model"}, {"field": "when"}, {"field": "shat", "format": ".3f"}]}},
        {"data": one, "mark": {"type": "rule", "strokeDash": [6, 4], "color": "#c0392b"},
         "encoding": {"y": {"field": "rule", "type": "quantitative"}}},
        {"data": one, "mark": {"type": "text", "align": "left", "dx": 4, "dy": -7, "color": "#c0392b"},
         "encoding": {"y": {"field": "rule", "type": "quantitative"}, "x": {"value": 0}, "text": {"field": "label"}}}]}
    return ChartFrame("shat", frame, spec)
