"""Embedding-cache and memory figures (issue 11).

1. A run's peak memory does not depend on how much else is cached. The same
   ``slarouter simulate`` (600 synthetic requests, hashing encoder) runs in a fresh
   process against (a) an empty cache, (b) a cache that also holds 1M other 384-wide
   vectors (1.5 GB on disk), cold for the run's texts, then (c) warm. Target: (b) and (c)
   <= 1.5 x (a). Peak memory = the child's maximum resident set (``wait4``).
2. Memory per request at 1M requests: one process embeds 1M synthetic requests through
   the cache (hashing encoder) and simulates them (paper mode); its peak RSS is printed
   next to the size of the embedding matrix itself.

Everything is written under a temporary folder (``--tmp``, default the system's) that is
removed at the end, also on errors (about 3 GB at the default sizes).

Run: .venv/bin/python benchmarks/bench_cache.py [--cached 1000000] [--requests 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

from slarouter_core.data import write_parquet
from slarouter_core.embedding_cache import ENCODE_BLOCK, _write_part
from slarouter_core.encoders import HashingEncoder

PY = sys.executable


def synthetic_frame(n: int, seed: int = 0, tag: str = "req") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    topics = np.array(["tax", "cats", "physics", "poetry", "cooking", "football", "history", "rust"])
    t = rng.integers(0, len(topics), n)
    frame = pd.DataFrame({"doc_id": np.arange(n), "benchmark": "synthetic",
                          "input_text": [f"{tag} {i}: a question about {topics[k]} number {i % 977}"
                                         for i, k in enumerate(t)]})
    for k, (name, joules) in enumerate((("small", 300.0), ("medium", 1000.0), ("large", 4000.0))):
        frame[f"{name}_solved"] = (rng.random(n) < 0.45 + 0.15 * k).astype(np.int8)
        frame[f"{name}_energy_joules"] = joules * rng.uniform(0.7, 1.3, n)
    return frame


def fill(cache_root: Path, n: int, dim: int = 384) -> float:
    """n random vectors under the hashing encoder's folder, in parts of ENCODE_BLOCK."""
    enc = HashingEncoder(dim)
    d = cache_root / enc.cache_id()
    d.mkdir(parents=True, exist_ok=True)
    (d / "encoder.json").write_text(f'{{"spec": "{enc.spec}", "dim": {dim}}}')
    rng = np.random.default_rng(1)
    start = time.perf_counter()
    for a in range(0, n, ENCODE_BLOCK):
        b = min(n, a + ENCODE_BLOCK)
        keys = np.array([hashlib.sha1(f"filler text {i}".encode()).digest() for i in range(a, b)], dtype="S20")
        _write_part(d, keys, rng.standard_normal((b - a, dim), dtype=np.float32))
    return time.perf_counter() - start


def run_child(argv: list[str], env: dict) -> tuple[float, float, str]:
    """(peak RSS in MB, wall seconds, output) of a child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"child failed: {' '.join(argv)}\n{out[-2000:]}")
    return usage.ru_maxrss / 1024, wall, out


def du(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cached", type=int, default=1_000_000, help="other vectors in the large cache")
    ap.add_argument("--run", type=int, default=600, help="requests of the measured simulate run")
    ap.add_argument("--requests", type=int, default=1_000_000, help="requests of the memory-per-request run (0: skip)")
    ap.add_argument("--tmp", default=None, help="scratch folder (removed at the end)")
    args = ap.parse_args()
    print(f"cores: {os.cpu_count()}; load average {'/'.join(f'{v:.1f}' for v in os.getloadavg())}")
    tmp = Path(tempfile.mkdtemp(prefix="slarouter-bench-cache-", dir=args.tmp))
    try:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        data = write_parquet(synthetic_frame(args.run), tmp / "run.parquet")
        cmd = [PY, "-m", "slarouter_core.cli", "simulate", "--data", str(data), "--encoder", "hashing",
               "--seeds", "42", "--alpha", "0.6"]
        empty, big = tmp / "empty", tmp / "big"
        rss_a, wall_a, _ = run_child(cmd + ["--cache-dir", str(empty)], env)
        print(f"1. simulate, {args.run} requests, empty cache:                 peak RSS {rss_a:7.0f} MB, {wall_a:5.1f} s")
        took = fill(big, args.cached)
        print(f"   filled a cache with {args.cached:,} other vectors (width 384): {du(big):.2f} GB in {took:.1f} s")
        rss_b, wall_b, _ = run_child(cmd + ["--cache-dir", str(big)], env)
        print(f"   same run, {args.cached:,}-vector cache, its texts not cached: peak RSS {rss_b:7.0f} MB, "
              f"{wall_b:5.1f} s  ({rss_b / rss_a:.2f} x empty; target <= 1.5)")
        rss_c, wall_c, _ = run_child(cmd + ["--cache-dir", str(big)], env)
        print(f"   same run again (its texts now cached):                peak RSS {rss_c:7.0f} MB, "
              f"{wall_c:5.1f} s  ({rss_c / rss_a:.2f} x empty; target <= 1.5)")
        shutil.rmtree(big)
        if args.requests:
            n = args.requests
            data = write_parquet(synthetic_frame(n, seed=2, tag="big"), tmp / "many.parquet")
            driver = textwrap.dedent(f"""
                import resource, sys, time
                import numpy as np
                from slarouter_core.data import load_parquet
                from slarouter_core.embedding_cache import EmbeddingCache
                from slarouter_core.encoders import get_encoder
                from slarouter_core.router import RouterConfig
                from slarouter_core.simulator import SimulationConfig, simulate
                t0 = time.perf_counter()
                data = load_parquet({str(data)!r})
                base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                X = EmbeddingCache(sys.argv[1]).embed(data.texts, get_encoder("hashing"))
                t1 = time.perf_counter()
                emb_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                sim = simulate(data, X, SimulationConfig(RouterConfig(alpha=0.6), feedback_rate=0.2, seed=42))
                t2 = time.perf_counter()
                print(f"{{base:.0f}} {{emb_peak:.0f}} {{X.nbytes / 2**20:.0f}} {{t1 - t0:.1f}} {{t2 - t1:.1f}} "
                      f"{{sim.summary().satisfaction:.3f}}")
            """)
            cache = tmp / "many-cache"
            for label in ("cold (embeds all)", "warm (all cached)"):
                rss, wall, out = run_child([PY, "-c", driver, str(cache)], env)
                base, emb_peak, emb_mb, t_emb, t_sim, sat = out.split()[-6:]
                print(f"2. {n:,} requests, {label}: peak RSS {rss:,.0f} MB = {rss * 2**20 / n / 1e3:.2f} KB per request "
                      f"(embedding matrix {emb_mb} MB = {float(emb_mb) * 2**20 / n / 1e3:.2f} KB per request; "
                      f"after loading the data {base} MB; after embedding {emb_peak} MB); "
                      f"embed {t_emb} s, simulate {t_sim} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"removed {tmp}")


if __name__ == "__main__":
    main()
