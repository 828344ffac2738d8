"""Wall time of the whole comparison grid (issue #4 figure).

8 benchmarks of the shared data (all but mmlu_abstract_algebra) x 3 seeds (42, 1, 1234)
x every method preset (3 single models, random, static mixture, oracle, CARROT, Causal,
MESS+, SLARouter fixed V, SLARouter data-driven V), feedback rate 0.2, cached MiniLM
embeddings (the cache must be filled: `slarouter embed --data ... --encoder minilm`).
Prints the time to load + read embeddings, the grid's wall time, and the per-method
CPU time summed over runs (measured in a sequential pass when --per-method is given).

Run: .venv/bin/python benchmarks/bench_grid.py [--data ../shared/data/messplus_llama3] [--jobs 2]
     [--backend local|ray] [--out results.parquet]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from slarouter_core.experiments import PAPER_EXCLUDE, GridConfig, load_dataset, run_grid, write_results

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "messplus_llama3"))
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--backend", choices=["local", "ray"], default="local")
    ap.add_argument("--out", default=None, help="also write the tidy rows (.csv/.parquet)")
    ap.add_argument("--per-method", action="store_true", help="also time each method in one sequential pass")
    args = ap.parse_args()

    t0 = time.perf_counter()
    ds = load_dataset(args.data, encoder=args.encoder)
    t_load = time.perf_counter() - t0
    config = GridConfig(exclude_benchmarks=PAPER_EXCLUDE)
    t1 = time.perf_counter()
    rows = run_grid(ds, config, backend=args.backend, n_jobs=args.jobs)
    t_grid = time.perf_counter() - t1
    n_bench = rows["benchmark"].nunique()
    n_methods = rows["method"].nunique()
    print(f"machine: {os.cpu_count()} CPUs visible; load avg {os.getloadavg()[0]:.1f} at the end")
    print(f"load data + cached {args.encoder} embeddings: {t_load:.1f} s ({ds.data.n_requests} requests)")
    print(f"grid: {len(rows)} runs = {n_bench} benchmarks x {rows['seed'].nunique()} seeds x {n_methods} methods, "
          f"{args.backend} backend, {args.jobs} jobs: {t_grid:.1f} s wall")
    if args.out:
        write_results(rows, args.out)
        print(f"wrote {args.out}")
    if args.per_method:
        import pandas as pd

        from slarouter_core.experiments import plan_grid, run_task

        tasks, payloads = plan_grid(ds, config)
        spent: dict[str, float] = {}
        for t in tasks:
            s = time.perf_counter()
            run_task(t, *payloads[(t.dataset, t.benchmark)])
            spent[t.spec.name] = spent.get(t.spec.name, 0.0) + time.perf_counter() - s
        print(pd.Series(spent, name="sequential seconds (all 24 cells)").round(2).to_string())


if __name__ == "__main__":
    main()
