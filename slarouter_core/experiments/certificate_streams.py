"""Streams whose truth is known, for checking the contextual policy's certificate alone.

The certificate's claims (an unbiased estimate, a bound that covers) hold only under
conditions on *how* feedback reaches it: whether a step goes to the judge may not depend
on its thumbs, and thumbs that arrive late must be rectified with the share of steps whose
thumbs were due. A run here feeds a :class:`~slarouter_core.policies.certificate.Certificate`
one such stream, with those conditions kept or broken on purpose, so that the tests and
``benchmarks/bench_judge_timing.py`` measure what each does to the estimate.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..judge import JudgeModel
from ..policies.certificate import Certificate


def known_truth_run(cert: Certificate, seed: int, n: int, *, phi: float = 0.2, judge: JudgeModel | None = None,
                    budget: float = 1.0, predicted: float = 0.6, delay: int = 0, judge_reads_rated: bool = False,
                    ages: bool = True, calibrate: bool = False) -> tuple[float, float, float, float]:
    """One stream: request i is satisfied with probability ``p_i`` (uniform on 0.3-0.95,
    mean 0.625), the text model predicts a constant ``predicted`` (badly wrong unless near
    0.625), thumbs come with probability ``phi``, ``delay`` requests after their request
    (those due after the stream's end never come). ``judge`` reads a share ``budget`` of
    the answers, drawn independently of the thumbs as ``FeedbackConfig(judge_fill=...)``
    does; ``judge_reads_rated``: every rated answer and ``budget`` of the rest instead (a
    selection the rectification cannot undo). ``calibrate``: the judge also reads the rated
    answers outside its draw once their thumbs came, to calibrate itself only
    (``Certificate.calibrate``, as ``judge_calibrate`` does). ``ages=False`` hands late
    thumbs to the certificate as if given with their step. Returns (truth, estimate,
    bound, the judge's verdicts taken as labels where there are no thumbs)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.3, 0.95, n)
    y = (rng.random(n) < p).astype(float)
    thumbs = rng.random(n) < phi
    verdict = judge.corrupt(y.astype(int), rng).astype(float) if judge is not None else None
    read = rng.random(n) < budget if budget < 1.0 else np.ones(n, bool)
    if judge_reads_rated:
        read |= thumbs
    late: deque = deque()  # (step, its prediction, its verdict) awaiting thumbs
    for i in range(n):
        j = None if verdict is None or not read[i] else float(verdict[i])
        if delay <= 0:
            cert.account(predicted, j, float(y[i]) if thumbs[i] else None)
            if calibrate and thumbs[i] and j is None and verdict is not None:
                cert.calibrate(predicted, float(verdict[i]), float(y[i]))
            continue
        _, g = cert.account(predicted, j, None)
        if thumbs[i]:
            late.append((i, g, j))
        while late and late[0][0] <= i - delay:
            k, gk, jk = late.popleft()
            cert.late_thumbs(predicted, gk, jk, float(y[k]), age=i - k if ages else 0)
            if calibrate and jk is None and verdict is not None:
                cert.calibrate(predicted, float(verdict[k]), float(y[k]))
    naive = np.where(thumbs, y, verdict if verdict is not None else predicted).mean()
    return float(y.mean()), cert.estimate(), cert.lower_bound(), float(naive)
