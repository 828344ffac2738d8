"""One stream runner: serve stream positions ``[a, b)`` of a seeded plan with a router.

The simulator (hence Live run and the experiments) and the hand-feedback session's
background traffic serve their streams through :func:`serve_stream`, so that the same
plan gives the same decisions wherever it is served. Feedback known at once goes
through the router's batched path (``SLARouter.run_block``); delayed feedback is served
one request at a time, each verdict reaching the router when its delay has passed
(:class:`feedback.VerdictsInFlight`), by :func:`router.serve_requests`, the per-request
loop that is also the router's own block path for a policy without a batched one.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .feedback import VerdictsInFlight
from .policies.base import BlockTrace
from .router import SLARouter, serve_requests


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
    return serve_requests(router, X, costs, plan, a, b, delay, in_flight, on_event, pos0)
