"""Core figures, measured side by side in one run (issue #2).

1. SLARouter simulation with cached MiniLM embeddings on all 13,252 shared requests
   (one stream per benchmark, seed 42): requests/s of the vectorised simulator, side by
   side with two per-request loops over the same streams that must give the same
   decisions: (a) a literal loop of Algorithm 1 with a torch ``nn.Module`` predictor and
   autograd, as the paper describes it, and (b) our own online API (``decide``/``observe``,
   the NumPy predictor), the fastest per-request path we have.
2. Packaged MiniLM: time to embed the 13,252 prompts into an empty cache, then to read
   them back from the cache (pass --skip-embed to reuse the default cache instead).

Run: .venv/bin/python benchmarks/bench_core.py [--data ../shared/data/messplus_llama3]
     [--skip-embed] [--repeat N] [--skip-loops]

``--repeat N`` times the simulator N times and reports the best wall and CPU seconds
(on a shared machine the best of several is the figure to compare); ``--skip-loops``
leaves out the two per-request loops. To compare two versions of the library side by
side, run this script with ``PYTHONPATH`` set to each checkout in turn.
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
from slarouter_core.embedding_cache import EmbeddingCache
from slarouter_core.encoders import get_encoder
from slarouter_core.importers import load_messplus
from slarouter_core.policies.base import DRAW_PAGE
from slarouter_core.feedback import NO_FEEDBACK
from slarouter_core.router import RouterConfig, SLARouter
from slarouter_core.simulator import Simulation, SimulationConfig


def online_api_loop(sim: Simulation) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 one request at a time through the online API, on the same stream."""
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


def torch_literal_loop(sim: Simulation) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 as a researcher would first write it: a torch ``nn.Module`` predictor,
    one request at a time (forward in eval mode, argmin, queue update; on exploration
    feedback append to D, sample a mini-batch, autograd step). It draws the same random
    numbers as our router (policy uniforms, mini-batch indices, dropout masks) and starts
    from the same weights, so its decisions can be compared one for one."""
    import torch

    torch.set_grad_enabled(False)
    cfg = sim.config.router
    pcfg = cfg.predictor
    ref = SLARouter(cfg, sim.data.n_models, sim.embeddings.shape[1], seed=sim.router.seed)
    pred = ref.predictor
    D, M = pred.dim, pred.n_models
    net = torch.nn.Sequential(torch.nn.Dropout(pcfg.dropout), torch.nn.Linear(D, D), torch.nn.LayerNorm(D),
                              torch.nn.ReLU(), torch.nn.Dropout(pcfg.dropout), torch.nn.Linear(D, M))
    for (name, module, attr) in (("w1", 1, "weight"), ("b1", 1, "bias"), ("ln_w", 2, "weight"),
                                 ("ln_b", 2, "bias"), ("w2", 5, "weight"), ("b2", 5, "bias")):
        getattr(net[module], attr).copy_(torch.from_numpy(pred.params[name]))
    net.eval()
    params = {"w1": net[1].weight, "b1": net[1].bias, "ln_w": net[2].weight, "ln_b": net[2].bias,
              "w2": net[5].weight, "b2": net[5].bias}
    momentum = {k: torch.zeros_like(v) for k, v in params.items()}
    started = {k: torch.zeros(M if k in ("w2", "b2") else 1, dtype=torch.bool) for k in params}
    X = torch.from_numpy(np.ascontiguousarray(sim.embeddings[sim.order]))
    C = sim.data.costs[sim.order]
    F = sim.feedback_plan
    n = len(X)
    U = ref.draws.rng.random((-(-n // DRAW_PAGE) * DRAW_PAGE, 2))
    buf_x, buf_m, buf_s = [], [], []
    n_pos, n_neg = np.zeros(M), np.zeros(M)
    q, spread = 0.0, 0.0
    models = np.empty(n, np.int64)
    qs = np.empty(n)
    for i in range(n):
        t = i + 1
        explore = t == 1 or U[i, 0] < min(1.0, cfg.c / t ** 0.25)
        shat = torch.sigmoid(net(X[i:i + 1]))[0].numpy().astype(np.float64)
        spread += float(C[i, -1] - C[i, 0])
        v = cfg.V if cfg.V is not None else cfg.q_max * cfg.eps / (spread / t)
        m = min(int(U[i, 1] * M), M - 1) if explore else int(np.argmin(v * C[i] + q * (cfg.alpha - shat)))
        f = int(F[i, m])
        q = max(0.0, q + cfg.alpha - (float(f) if f >= 0 else shat[m]))
        if explore and f >= 0:
            buf_x.append(X[i]); buf_m.append(m); buf_s.append(float(f))
            (n_pos if f else n_neg)[m] += 1
            k = min(len(buf_m), pcfg.batch_size)
            idx = np.sort(ref.policy.buffer_rng.choice(len(buf_m), size=k, replace=False)) if k < len(buf_m) \
                else np.arange(len(buf_m))
            xb = torch.stack([buf_x[j] for j in idx])
            keep = 1.0 - pcfg.dropout
            d1 = torch.from_numpy((pred.rng.random(tuple(xb.shape)) >= pcfg.dropout).astype(np.float32) / np.float32(keep))
            d2 = torch.from_numpy((pred.rng.random((k, D)) >= pcfg.dropout).astype(np.float32) / np.float32(keep))
            mb = torch.tensor([buf_m[j] for j in idx])
            target = torch.zeros(k, M)
            target[torch.arange(k), mb] = torch.tensor([buf_s[j] for j in idx])
            mask = torch.zeros(k, M)
            mask[torch.arange(k), mb] = 1.0
            pw = torch.ones(M)
            ok = (n_pos > 0) & (n_neg > 0)
            pw[torch.from_numpy(ok)] = torch.from_numpy((n_neg[ok] / n_pos[ok]).astype(np.float32))
            with torch.enable_grad():
                for p in params.values():
                    p.requires_grad_(True); p.grad = None
                h = net[3](net[2](net[1](xb * d1))) * d2
                logits = net[5](h)
                loss = (torch.nn.functional.binary_cross_entropy_with_logits(
                    logits, target, pos_weight=pw, reduction="none") * mask).sum() / mask.sum()
                loss.backward()
            observed = mask.any(dim=0)
            total = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params.values())))
            scale = min(1.0, pcfg.clip_norm / (total + 1e-6))
            for name, p in params.items():
                p.requires_grad_(False)
                d = p.grad * scale + pcfg.weight_decay * p
                buf, st = momentum[name], started[name]
                rows = torch.nonzero(observed).flatten().tolist() if name in ("w2", "b2") else [None]
                for r in rows:
                    sl = slice(None) if r is None else r
                    j = 0 if r is None else r
                    buf[sl] = pcfg.momentum * buf[sl] + d[sl] if bool(st[j]) else d[sl]
                    st[j] = True
                    p[sl] -= pcfg.lr * buf[sl]
        models[i] = m
        qs[i] = q
    return models, qs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / "../shared/data/messplus_llama3"))
    ap.add_argument("--skip-embed", action="store_true", help="use the default cache, do not time a cold embed")
    ap.add_argument("--repeat", type=int, default=1, help="time the simulator this many times, report the best")
    ap.add_argument("--skip-loops", action="store_true", help="do not run the per-request loops")
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

    walls, cpus = [], []
    for _ in range(max(1, args.repeat)):
        runs = [Simulation(s.data, s.embeddings, s.config) for s in sims]
        t, c = time.perf_counter(), time.process_time()
        for s in runs:
            s.run()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    sims = runs
    fast = min(walls)
    n = sum(s.n_requests for s in sims)
    def compare(loop) -> tuple[float, int, int, float]:
        t = time.perf_counter()
        same = total = 0
        qdiff = 0.0
        for s in sims:
            models, qs = loop(s)
            a = s.arrays()
            same += int((models == a["model"]).sum())
            total += len(models)
            qdiff = max(qdiff, float(np.max(np.abs(qs - a["q"]))))
        return time.perf_counter() - t, same, total, qdiff

    print(f"simulator: {n} requests in {fast:.3f} s = {n / fast:,.0f} requests/s (target >= 20,000)"
          + (f"; best of {len(walls)}, CPU {min(cpus):.3f} s, median wall {np.median(walls):.3f} s"
             if len(walls) > 1 else ""))
    if args.skip_loops:
        return 0
    for label, loop, target in (
            ("literal Algorithm 1 loop (torch predictor, autograd)", torch_literal_loop, " (target >= 20x)"),
            ("per-request online API (decide/observe, NumPy predictor)", online_api_loop, "")):
        slow, same, total, qdiff = compare(loop)
        print(f"{label}: {slow:.2f} s = {n / slow:,.0f} requests/s; simulator speed-up {slow / fast:.1f}x"
              f"{target}; same decisions on {same}/{total} requests; max |Q difference| {qdiff:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
