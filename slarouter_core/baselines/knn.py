"""Cosine kNN regression: CARROT's quality and cost estimators and Causal routing's
outcome regressions, with k chosen by leave-one-out cross-validation.

Shared by both offline methods, so they estimate from the same neighbourhoods.
"""

from __future__ import annotations

import numpy as np

#: candidate neighbour counts for the kNN estimators (chosen by leave-one-out CV)
K_GRID = (1, 3, 5, 10, 20, 40, 80)


def _unit_rows(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, np.float32)
    norm = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norm, 1e-12)


def knn_neighbours(Q: np.ndarray, X: np.ndarray, k: int, exclude: np.ndarray | None = None,
                   chunk: int = 2048) -> np.ndarray:
    """Indices (len(Q), k) of the k most cosine-similar rows of X, most similar first.

    ``exclude[i]`` (an index into X, or -1) is left out for query i: leave-one-out when
    the queries are X itself. Ties go to the lower index (stable order).
    """
    Qn, Xn = _unit_rows(Q), _unit_rows(X)
    n = len(Xn)
    k = int(min(k, n - (0 if exclude is None else 1)))
    if k < 1:
        raise ValueError("kNN needs at least one reference row")
    out = np.empty((len(Qn), k), np.int64)
    for s in range(0, len(Qn), chunk):
        sims = Qn[s:s + chunk] @ Xn.T
        if exclude is not None:
            ex = np.asarray(exclude[s:s + chunk])
            rows = np.flatnonzero(ex >= 0)
            sims[rows, ex[rows]] = -np.inf
        # stable top-k: sort by (-sim, index)
        part = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        out[s:s + chunk] = part
    return out


def select_k(X: np.ndarray, Y: np.ndarray, k_grid: tuple[int, ...] = K_GRID) -> tuple[int, dict]:
    """k minimising the leave-one-out squared error of the kNN mean of ``Y`` (n, M).

    Leave-one-out is n-fold cross-validation, computed at once for every k from the
    cumulative sums of the sorted neighbours' targets. Ties go to the smaller k.
    """
    Y = np.asarray(Y, np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    n = len(Y)
    if n < 2:
        return 1, {}
    grid = sorted({int(k) for k in k_grid if 1 <= int(k) <= n - 1}) or [n - 1]
    idx = knn_neighbours(X, X, max(grid), exclude=np.arange(n))
    cum = np.cumsum(Y[idx], axis=1)  # (n, kmax, M)
    errors = {k: float(np.mean((cum[:, k - 1] / k - Y) ** 2)) for k in grid}
    best = min(grid, key=lambda k: (errors[k], k))
    return best, errors


class KNNEstimator:
    """Per-model means over the k nearest (cosine) reference rows.

    ``targets`` is a dict name -> (n, M) array (e.g. ``solved`` and normalised ``cost``);
    :meth:`predict` returns the same names with (len(Q), M) means.
    """

    def __init__(self, X: np.ndarray, targets: dict[str, np.ndarray], k: int):
        self.X = np.asarray(X, np.float32)
        self.targets = {name: np.asarray(v, np.float64) for name, v in targets.items()}
        self.k = int(k)

    def predict(self, Q: np.ndarray, exclude: np.ndarray | None = None) -> dict[str, np.ndarray]:
        idx = knn_neighbours(Q, self.X, self.k, exclude)
        return {name: v[idx].mean(axis=1) for name, v in self.targets.items()}
