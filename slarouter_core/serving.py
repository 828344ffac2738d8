"""One stream runner: serve stream positions ``[a, b)`` of a seeded plan with a router.

The simulator (hence Live run and the experiments) and the hand-feedback session's
background traffic serve their streams through :func:`serve_stream`, so that the same
plan gives the same decisions wherever it is served. Feedback known at once goes
through the router's batched path (``SLARouter.run_block``); delayed feedback is served
one request at a time, each verdict reaching the router when its delay has passed
(:class:`feedback.VerdictsInFlight`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .feedback import NO_FEEDBACK, VerdictsInFlight, judge_of, thumbs_of
from .policies.base import BlockTrace
from .router import SLARouter


def serve_stream(router: SLARouter, X, costs: np.ndarray, plan: np.ndarray, a: int, b: int,
                 delay: np.ndarray | None = None, in_flight: VerdictsInFlight | None = None,
                 on_event: Callable[[str], None] | None = None, pos0: int = 0) -> BlockTrace:
    """Serve positions ``[a, b)`` of the stream (rows of ``X``, ``costs``, ``plan``).

    ``plan[i, m]``: the feedback code if model m serves position i (thumbs, a judge's
    verdict, both, or ``NO_FEEDBACK``). Without ``delay`` the router serves the block at
    once (rows beyond ``b`` are its lookahead). With ``delay`` (per position), the judge
    reads the answer at once and the user's thumbs reach the router ``delay[i]``
    positions later, through ``in_flight`` (kept by the caller across calls).
    ``on_event(kind)`` is called after each delayed verdict delivered before a position
    (``"late"``), after a verdict with delay 0 (``"now"``), and after each position
    (``"step"``). ``pos0``: the stream position of row 0, when the caller passes the
    stream from there on (``in_flight`` keeps stream positions). The trace's ``s_used`` is NaN under delay (the queue step is split
    between the step and the verdict's arrival) and its ``q`` the decision queue.
    """
    if delay is None:
        return router.run_block(X[a:], costs[a:], plan[a:], n=b - a)
    if in_flight is None:
        raise ValueError("delayed feedback needs the verdicts in flight (a VerdictsInFlight)")
    n = b - a
    out = {k: np.zeros(n, dt) for k, dt in (("model", np.int64), ("explored", bool), ("feedback", np.int8),
                                             ("shat_served", np.float64), ("q", np.float64), ("v", np.float64),
                                             ("trained", bool))}
    for k, i in enumerate(range(a, b)):
        for t, f in in_flight.arriving(pos0 + i):
            try:
                router.late_feedback(t, f)
            except KeyError:  # older than the router keeps unanswered steps
                continue
            if on_event:
                on_event("late")
        version = router.model_version
        d = router.decide(X[i], costs[i])
        f = int(plan[i, d.model])
        thumb, judge = int(thumbs_of(f)), int(judge_of(f))
        router.observe(d, None, judge=None if judge == NO_FEEDBACK else judge)
        if thumb != NO_FEEDBACK and in_flight.send(pos0 + i, int(delay[i]), d.t, thumb):
            router.late_feedback(d.t, thumb)
            if on_event:
                on_event("now")
        out["model"][k] = d.model
        out["explored"][k] = d.explored
        out["feedback"][k] = f
        out["shat_served"][k] = d.shat_served
        out["q"][k] = router.decision_queue()
        out["v"][k] = d.v
        out["trained"][k] = router.model_version != version
        if on_event:
            on_event("step")
    return BlockTrace(s_used=np.full(n, np.nan), **out)
