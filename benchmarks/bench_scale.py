"""Scale figures (issue 11): every router mode is linear in the stream length.

Times one simulated stream (feedback rate 0.2, seed 42) of 100k and of 400k synthetic
requests for each router mode, and prints the ratio (linear: about 4; target <= 6). The
requests are synthetic (3 models, 64-dim random embeddings whose direction carries the
outcome, energy-like costs) so that the figure is about the router, not the encoder.

Run: .venv/bin/python benchmarks/bench_scale.py [--sizes 100000 400000] [--modes paper guarded] [--dim 384]

``--dim 384`` gives the requests MiniLM's embedding width (the default 64 keeps the
figure about the router).
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import numpy as np
import pandas as pd

from slarouter_core.data import from_frame
from slarouter_core.router import RouterConfig, policy_names
from slarouter_core.simulator import SimulationConfig, simulate


def synthetic(n: int, d: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    hard = X[:, 0] + 0.5 * rng.standard_normal(n).astype(np.float32)
    frame = pd.DataFrame({"doc_id": np.arange(n), "benchmark": "synthetic",
                          "input_text": np.full(n, "request", dtype=object)})
    for k, (name, joules) in enumerate((("small", 300.0), ("medium", 1000.0), ("large", 4000.0))):
        frame[f"{name}_solved"] = (rng.random(n) < 1 / (1 + np.exp(hard - 0.8 * k))).astype(np.int8)
        frame[f"{name}_energy_joules"] = joules * rng.uniform(0.7, 1.3, n)
    return from_frame(frame), X


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 400_000])
    ap.add_argument("--modes", nargs="+", default=list(policy_names()), choices=list(policy_names()))
    ap.add_argument("--alpha", type=float, default=0.6)
    ap.add_argument("--dim", type=int, default=64, help="embedding width of the synthetic requests")
    args = ap.parse_args()
    print(f"cores: {os.cpu_count()}; load average {'/'.join(f'{v:.1f}' for v in os.getloadavg())}; "
          f"embedding width {args.dim}")
    data, X = synthetic(max(args.sizes), args.dim)
    # warm-up: compile the kernels once so that no timing includes compilation
    small = data.select(None)._subset(np.arange(data.n_requests) < 2000)
    for mode in args.modes:
        simulate(small, X[:2000], SimulationConfig(RouterConfig(alpha=args.alpha, mode=mode),
                                                   feedback_rate=0.2, seed=42))
    for mode in args.modes:
        times = {}
        for n in args.sizes:
            sub = data if n == data.n_requests else data._subset(np.arange(data.n_requests) < n)
            cfg = SimulationConfig(RouterConfig(alpha=args.alpha, mode=mode), feedback_rate=0.2, seed=42)
            gc.collect()
            start = time.perf_counter()
            sim = simulate(sub, X[:n], cfg)
            times[n] = time.perf_counter() - start
            s = sim.summary()
            print(f"{mode:>10}: {n:>9,} requests in {times[n]:7.2f} s = {n / times[n]:>9,.0f} requests/s "
                  f"(satisfaction {s.satisfaction:.3f}, cost {s.operating_cost:.3g})", flush=True)
            del sim
        lo, hi = min(args.sizes), max(args.sizes)
        if hi > lo:
            ratio = times[hi] / times[lo]
            print(f"{mode:>10}: {hi:,} / {lo:,} time ratio {ratio:.2f} "
                  f"(size ratio {hi / lo:g}; target <= {1.5 * hi / lo:g}) {'OK' if ratio <= 1.5 * hi / lo else 'TOO SLOW'}",
                  flush=True)


if __name__ == "__main__":
    main()
