"""The kNN estimators CARROT and Causal routing share."""

from __future__ import annotations

import numpy as np

from slarouter_core import baselines as B


def test_select_k_prefers_smooth_neighbourhoods():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    Y = (rng.random((200, 1)) < 0.5).astype(float)  # labels independent of x: large k wins
    k, errors = B.select_k(X, Y, (1, 5, 40))
    assert k == 40 and errors[1] > errors[40]
    Y2 = (X[:, :1] > 0).astype(float)  # a clean boundary: small k beats k = n - 1
    k2, errors2 = B.select_k(X, Y2, (1, 5, 199))
    assert k2 in (1, 5) and errors2[k2] < errors2[199]
