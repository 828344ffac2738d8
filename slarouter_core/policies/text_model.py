"""The contextual policy's text model and plan price: a multi-task logistic regression on
the frozen embedding, k-means of the recent requests, and the smallest price at which the
per-request plan reaches a target rate (docs/IMPROVED.md, "contextual")."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize

#: price used when the target cannot be reached: argmin(c - lam * p) then serves the
#: model with the highest predicted satisfaction (ties: the cheaper)
PRICE_CAP = 1e9


def fit_multitask_logistic(X: np.ndarray, m: np.ndarray, y: np.ndarray, n_models: int,
                           c_shared: float, c_model: float, init: np.ndarray | None = None,
                           prior: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Parameters ``[w (D), d (D*M), b (M)]`` of ``logit_m(x) = x.(w + d_m) + b_m``.

    Minimises the summed log loss plus ``|w|^2 / (2 c_shared) + |d|^2 / (2 c_model)``
    (``c_model`` 0: no offsets). ``prior`` ``(a, b)``: each model's Beta(a_m, b_m) prior on
    its satisfaction at the labels' mean embedding, as ``a_m`` satisfied and ``b_m``
    unsatisfied pseudo-labels there. Without it a model whose few labels are all equal
    gets an intercept that only a tiny penalty keeps finite: 11 thumbs up of 11 predicted
    satisfaction 1.000 for every request (a model 87% accurate), and the plan trusted it.
    Deterministic for the same inputs.
    """
    X = np.asarray(X, np.float64)
    n, D = X.shape
    M = int(n_models)
    m = np.asarray(m, np.int64)
    y = np.asarray(y, np.float64)
    use_d = c_model > 0
    if prior is not None:
        pa, pb = (np.asarray(v, np.float64).reshape(M) for v in prior)
        centre = X.mean(axis=0) if n else np.zeros(D)
    # with offsets, each model's rows gathered once and the whole matrix let go: model k's
    # logits are one product with w + d_k, and the shared gradient is the sum of the
    # models' (two products of the labels' size per evaluation, not six; no second copy
    # of the embeddings kept while a refit runs)
    rows = [np.flatnonzero(m == k) for k in range(M)] if use_d else []
    X_rows = [X[r] for r in rows]
    if use_d:
        del X

    def unpack(theta):
        w = theta[:D]
        d = theta[D:D + D * M].reshape(M, D) if use_d else np.zeros((M, D))
        b = theta[-M:]
        return w, d, b

    def fun(theta):
        w, d, b = unpack(theta)
        if use_d:
            z = np.empty(n)
            for k, (r_k, X_k) in enumerate(zip(rows, X_rows)):
                z[r_k] = X_k @ (w + d[k])
            z += b[m]
        else:
            z = X @ w + b[m]
        # log(1 + e^z) - y z, stably
        loss = np.logaddexp(0.0, z) - y * z
        r = 1.0 / (1.0 + np.exp(-z)) - y
        f = loss.sum() + w @ w / (2 * c_shared) + 1e-4 * (b @ b) / 2
        gb = np.bincount(m, weights=r, minlength=M) + 1e-4 * b
        if use_d:
            gx = np.stack([X_k.T @ r[r_k] for r_k, X_k in zip(rows, X_rows)])
            gw = gx.sum(axis=0) + w / c_shared
            gd = gx + d / c_model
        else:
            gw = X.T @ r + w / c_shared
            gd = None
        if prior is not None:  # the pseudo-labels at the centre: a_m satisfied, b_m not
            zc = centre @ w + b + (d @ centre if use_d else 0.0)
            rc = (pa + pb) / (1.0 + np.exp(-zc)) - pa
            f += (pa * np.logaddexp(0.0, -zc) + pb * np.logaddexp(0.0, zc)).sum()
            gw = gw + centre * rc.sum()
            gb = gb + rc
            gd = gd + np.outer(rc, centre) if use_d else None
        parts = [gw]
        if use_d:
            f += (d * d).sum() / (2 * c_model)
            parts.append(gd.ravel())
        parts.append(gb)
        return f, np.concatenate(parts)

    size = D + (D * M if use_d else 0) + M
    x0 = np.zeros(size) if init is None or len(init) != size else np.asarray(init, np.float64)
    res = minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": 200})
    return res.x


def multitask_weights(theta: np.ndarray, dim: int, n_models: int) -> tuple[np.ndarray, np.ndarray]:
    """``(W (D, M), b (M))`` of a :func:`fit_multitask_logistic` fit: model m's logit is
    ``x . W[:, m] + b[m]`` (a fit without offsets has ``D + M`` parameters)."""
    D, M = int(dim), int(n_models)
    w = theta[:D]
    d = theta[D:D + D * M].reshape(M, D) if len(theta) == D + D * M + M else np.zeros((M, D))
    return (w[None, :] + d).T.copy(), theta[-M:].copy()


def multitask_predictions(theta: np.ndarray, X: np.ndarray, n_models: int) -> np.ndarray:
    """(n, M) predicted satisfaction of a :func:`fit_multitask_logistic` fit."""
    X = np.asarray(X, np.float64)
    W, b = multitask_weights(theta, X.shape[1], n_models)
    return 1.0 / (1.0 + np.exp(-(X @ W + b)))


def kmeans(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    """``k`` centres of ``X`` (scikit-learn's k-means++ start and Lloyd iterations, seeded:
    the same centres for the same inputs, whatever the thread count)."""
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=k, n_init=1, max_iter=50, random_state=int(seed)).fit(np.asarray(X, np.float32))
    return km.cluster_centers_.astype(np.float32)


def price_for_target(P: np.ndarray, C: np.ndarray, tau: float, iters: int = 50) -> float:
    """Smallest price ``lam`` with ``mean_i P[i, argmin_m C[i, m] - lam P[i, m]] >= tau``.

    0 when the cheapest choice already reaches ``tau``; ``PRICE_CAP`` when no price
    does (then the rule serves each request's best-predicted model).
    """
    n = len(P)
    if n == 0:
        return PRICE_CAP
    rows = np.arange(n)

    def rate(lam: float) -> float:
        return float(P[rows, np.argmin(C - lam * P, axis=1)].mean())

    if rate(0.0) >= tau:
        return 0.0
    scale = max(float(np.abs(C).mean()), 1e-300) / max(float(P.std()), 1e-3)
    lo, hi = scale * 1e-6, scale * 1e6
    if rate(hi) < tau:
        return PRICE_CAP
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        if rate(mid) >= tau:
            hi = mid
        else:
            lo = mid
        if hi <= lo * (1 + 1e-6):
            break
    return hi
