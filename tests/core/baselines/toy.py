"""The toy routing problem the baseline tests share: three models, and embeddings that
(when informative) say which models solve a request, so a learned router can win."""

from __future__ import annotations

import numpy as np
import pandas as pd

from slarouter_core.data import from_frame

MODELS = ("small", "medium", "large")
ALPHA = 0.7
RATE = 0.5


def make_data(n: int = 300, seed: int = 0, informative: bool = True):
    """Three models; when ``informative`` the embedding says which models solve a request."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "doc_id": np.arange(n),
        "benchmark": np.where(np.arange(n) % 2 == 0, "a", "b"),
        "input_text": [f"q {i}" for i in range(n)],
    })
    hardness = rng.integers(0, 3, n)  # 0 easy (all solve), 1 medium+, 2 only large (mostly)
    for k, m in enumerate(MODELS):
        p = np.where(hardness <= k, 0.9, 0.15) if informative else np.full(n, 0.45 + 0.2 * k)
        frame[f"{m}_solved"] = (rng.random(n) < p).astype(int)
        frame[f"{m}_energy_joules"] = (10.0 ** (k + 1)) * rng.uniform(0.8, 1.2, n)
    emb = rng.normal(scale=0.3, size=(n, 8)).astype(np.float32)
    if informative:
        emb[np.arange(n), hardness] += 3.0
    return from_frame(frame), emb
