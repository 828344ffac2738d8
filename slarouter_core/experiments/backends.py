"""Execution of a planned grid: in this process, in joblib worker processes, or on a Ray
cluster. Every backend returns the same rows in the grid's fixed order: each run's
random draws derive from its own seed, never from the execution order."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..data import RoutingData
from .datasets import Dataset, ProgressFn
from .grid import GridConfig, Task, plan_grid
from .runs import error_row, run_task

ERROR_POLICIES = ("raise", "record")


def _run_indexed(task: Task, payload: tuple[RoutingData, np.ndarray], on_error: str = "raise") -> tuple[int, dict]:
    try:
        return task.index, run_task(task, *payload)
    except ValueError as exc:
        if on_error == "raise":
            raise ValueError(f"{task.spec.name} on {task.dataset}/{task.benchmark}, seed {task.seed}: {exc}") from None
        return task.index, error_row(task, payload[0], str(exc))


def run_grid(datasets: Dataset | Sequence[Dataset], config: GridConfig = GridConfig(), *,
             backend: str = "local", n_jobs: int = 1, progress: ProgressFn | None = None,
             ray_address: str | None = None, on_error: str = "raise") -> pd.DataFrame:
    """Run every task of the grid; one tidy row per run, in the grid's fixed order.

    ``backend="local"``: ``n_jobs`` worker processes with joblib (1: in this process).
    ``backend="ray"``: a Ray runtime (``ray_address`` to join a cluster; otherwise a local
    one with ``n_jobs`` CPUs is started when none is running, and shut down afterwards).
    ``progress(done, total)`` is called after each finished run (from this process).
    Results are identical across backends and job counts: every random draw derives
    from the run's seed.

    Unknown methods or params fail before anything runs. A run that fails on its data
    (e.g. Causal with no labelled row in a tiny history) raises, naming the run, with
    ``on_error="raise"``; with ``on_error="record"`` it becomes a row with an ``error``
    message and empty metrics (``aggregate`` skips such rows), and the grid goes on.
    """
    if on_error not in ERROR_POLICIES:
        raise ValueError(f"on_error must be one of {ERROR_POLICIES}, got {on_error!r}")
    tasks, payloads = plan_grid(datasets, config)
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive integer, got {n_jobs!r}")
    total = len(tasks)
    rows: list[dict | None] = [None] * total
    done = 0

    def finished(i: int, row: dict) -> None:
        nonlocal done
        rows[i] = row
        done += 1
        if progress:
            progress(done, total)

    if backend == "local":
        if n_jobs == 1:
            for t in tasks:
                finished(*_run_indexed(t, payloads[(t.dataset, t.benchmark)], on_error))
        else:
            from joblib import Parallel, delayed

            par = Parallel(n_jobs=n_jobs, return_as="generator_unordered")
            for i, row in par(delayed(_run_indexed)(t, payloads[(t.dataset, t.benchmark)], on_error)
                              for t in tasks):
                finished(i, row)
    elif backend == "ray":
        _run_ray(tasks, payloads, n_jobs, ray_address, finished, on_error)
    else:
        raise ValueError(f"unknown backend {backend!r}: use 'local' or 'ray'")
    return pd.DataFrame(rows)


def _run_ray(tasks, payloads, n_jobs: int, address: str | None, finished, on_error: str) -> None:
    from ..ray_backend import start_ray

    ray, started = start_ray(address, n_jobs)
    try:
        remote = ray.remote(num_cpus=1)(_run_indexed)
        refs = {key: ray.put(p) for key, p in payloads.items()}
        pending = [remote.remote(t, refs[(t.dataset, t.benchmark)], on_error) for t in tasks]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                finished(*ray.get(ref))
    finally:
        if started:
            ray.shutdown()
