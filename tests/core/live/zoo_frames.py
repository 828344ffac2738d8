"""Synthetic zoos of any size for the tests, priced in dollars (no energy column)."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: long provider-style names, as a real dollar zoo has them
ZOO_NAMES = ("meta-llama/Llama-3.2-1B-Instruct", "google/gemma-2-2b-it", "qwen/Qwen2.5-7B-Instruct",
             "meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mistral-Small-24B-Instruct",
             "google/gemma-2-27b-it", "qwen/Qwen2.5-32B-Instruct", "meta-llama/Llama-3.3-70B-Instruct",
             "qwen/Qwen2.5-72B-Instruct", "mistralai/Mistral-Large-2411",
             "meta-llama/Llama-3.1-405B-Instruct")


def dollar_zoo(n_models: int = 11, n: int = 880, benchmarks: int = 8, seed: int = 0) -> pd.DataFrame:
    """A canonical table with ``n_models`` models priced in ``cost_usd`` (1e-5 to 1e-2 $ per
    request, a few decades apart as real price lists are) and latency, on ``benchmarks``
    benchmarks; dearer models solve more, with a few exceptions so the frontier has kinks."""
    rng = np.random.default_rng(seed)
    names = [ZOO_NAMES[j] if j < len(ZOO_NAMES) else f"vendor/model-{j:02d}-Instruct" for j in range(n_models)]
    frame = pd.DataFrame({
        "doc_id": np.arange(n),
        "benchmark": [f"bench_{i % benchmarks}" for i in range(n)],
        "input_text": [f"request {i} on topic {i % 13}" for i in range(n)],
    })
    skill = np.linspace(0.25, 0.9, n_models) + rng.normal(0, 0.04, n_models)
    price = np.geomspace(1e-5, 1e-2, n_models)
    for j, name in enumerate(names):
        frame[f"{name}_solved"] = (rng.random(n) < skill[j]).astype(np.int8)
        frame[f"{name}_cost_usd"] = price[j] * rng.uniform(0.7, 1.3, n)
        frame[f"{name}_latency_ms"] = 200.0 * (1 + j) * rng.uniform(0.8, 1.2, n)
    return frame
