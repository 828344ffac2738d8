"""Core figures, measured side by side in one run (issue #2).

1. SLARouter simulation with cached MiniLM embeddings on all 13,252 shared requests
   (one stream per benchmark, seed 42): requests/s of the vectorised simulator, and the
   same streams through a literal per-request loop of Algorithm 1 (decide/observe with a
   per-request predictor forward); checks both give the same decisions.
2. Packaged MiniLM: time to embed the 13,252 prompts into an empty cache, then to read
   them back from the cache (pass --skip-embed to reuse the default cache instead).

Run: .venv/bin/python benchmarks/bench_core.py [--data ../shared/data/messplus_llama3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from slarouter_core.data import midpoint_alpha
from slarouter_core.encoders import EmbeddingCache, get_encoder
from slarouter_core.importers import load_messplus
from slarouter_core.router import NO_FEEDBACK, RouterConfig, SLARouter
from slarouter_core.simulator import Simulation, SimulationConfig


def literal_loop(sim: Simulation) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 one request at a time, through the online API, on the same stream."""
    router = SLARouter(sim.config.router, sim.data.n_models, sim.embeddings.shape[1], seed=sim.router.seed)
    X = sim.embeddings[sim.order]
    C = sim.data.costs[sim.order]
    F = sim.feedback_plan
    models = np.empty(len(X), np.int64)
    qs = np.empty(len(X))
    for i in range(len(X)):
        d = router.decide(X[i], C[i])
        f = int(F[i, d.model])
        router.observe(d, None if f == NO_FEEDBACK else f)
        models[i] = d.model
        qs[i] = router.q
    return models, qs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / "../shared/data/messplus_llama3"))
    ap.add_argument("--skip-embed", action="store_true", help="use the default cache, do not time a cold embed")
    args = ap.parse_args()
    if not Path(args.data).exists():
        print(f"shared data not found at {args.data}; nothing to measure")
        return 0
    print(f"cores: {os.cpu_count()}")
    data = load_messplus(args.data)
    texts = data.texts
    enc = get_encoder("minilm")
    if args.skip_embed:
        cache = EmbeddingCache()
        X = cache.embed(texts, enc)
    else:
        tmp = tempfile.mkdtemp(prefix="slarouter-bench-")
        cache = EmbeddingCache(tmp)
        t = time.perf_counter()
        X = cache.embed(texts, enc)
        cold = time.perf_counter() - t
        print(f"MiniLM cold embed of {len(texts)} prompts ({len(set(texts))} unique): {cold:.1f} s (target <= 60 s)")
    t = time.perf_counter()
    X2 = cache.embed(texts, enc)
    warm = time.perf_counter() - t
    assert np.array_equal(X, X2)
    print(f"MiniLM cached read of {len(texts)} prompts: {warm:.2f} s (target <= 2 s)")

    # warm-up (numba compile / cache load), not timed
    bench = data.benchmarks
    names = data.benchmark_names
    sims = []
    for b in names:
        sub = data.select([b])
        sims.append(Simulation(sub, X[bench == b], SimulationConfig(RouterConfig(alpha=midpoint_alpha(sub)), seed=42)))
    Simulation(data.select([names[0]]), X[bench == names[0]],
               SimulationConfig(RouterConfig(alpha=0.5), seed=0)).step(50)

    t = time.perf_counter()
    for s in sims:
        s.run()
    fast = time.perf_counter() - t
    n = sum(s.n_requests for s in sims)
    t = time.perf_counter()
    same = total = 0
    qdiff = 0.0
    for s in sims:
        models, qs = literal_loop(s)
        a = s.arrays()
        same += int((models == a["model"]).sum())
        total += len(models)
        qdiff = max(qdiff, float(np.max(np.abs(qs - a["q"]))))
    slow = time.perf_counter() - t
    print(f"simulator: {n} requests in {fast:.3f} s = {n / fast:,.0f} requests/s (target >= 20,000)")
    print(f"literal per-request loop: {slow:.2f} s = {n / slow:,.0f} requests/s")
    print(f"speed-up: {slow / fast:.1f}x (target >= 20x); same decisions on {same}/{total} requests; "
          f"max |Q difference| {qdiff:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
