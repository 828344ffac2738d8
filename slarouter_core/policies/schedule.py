"""Schedules every online rule shares: the exploration probability, the data-driven V and
the running share of steps with a label.

One place, used by the router's policies and by the MESS+ baseline, so that the paper's
schedule cannot drift between them.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def exploration_probability(t: np.ndarray | int, c: float, power: float = 0.25) -> np.ndarray | float:
    """p_t = min(1, c / t^power); the paper's schedule is power 1/4."""
    return np.minimum(1.0, c / np.power(np.asarray(t, dtype=np.float64), power))


def data_driven_v(q_max: float, eps: float, spread_sum: np.ndarray | float,
                  t: np.ndarray | int) -> np.ndarray | float:
    """V_t = q_max * eps / DeltaC_t, DeltaC_t the running mean cost gap (most minus least
    expensive model) over the first ``t`` requests; ``q_max * eps`` before any gap is seen.

    Scalars in, a float out; arrays in, an array out (the batched paths)."""
    spread = np.asarray(spread_sum, dtype=np.float64)
    tt = np.asarray(t, dtype=np.float64)
    base = float(q_max) * float(eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where((tt > 0) & (spread > 0), base / (spread / np.maximum(tt, 1.0)), base)
    return float(v) if v.ndim == 0 else v


@njit(cache=True, nogil=True)
def v_at(fixed_v: float, q_max: float, eps: float, spread_sum: float, t: int) -> float:
    """One step's V, for compiled rules: ``fixed_v`` when > 0, else :func:`data_driven_v`
    (the same arithmetic, scalar)."""
    if fixed_v > 0:
        return fixed_v
    if t == 0 or spread_sum <= 0:
        return q_max * eps
    return q_max * eps / (spread_sum / t)


@njit(cache=True, nogil=True)
def p_explore_at(c: float, t: int) -> float:
    """One step's :func:`exploration_probability` (power 1/4), for compiled rules."""
    return min(1.0, c / (float(t) ** 0.25))


@njit(cache=True, nogil=True)
def label_share(steps: float, labels: float, lag: float) -> float:
    """The running share of steps with a label (Laplace-smoothed, so predictable), among the
    steps whose labels were due: all but the last ``lag`` (the labels' mean delay). Dividing
    late labels by the share of *all* steps inflated every doubly-robust correction. One
    place for the guarded rule and the contextual policy's certificate."""
    due = max(steps - lag, labels)
    return min(1.0, (labels + 1.0) / (due + 1.0))
