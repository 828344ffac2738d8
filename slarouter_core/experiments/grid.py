"""What a grid runs: its configuration (methods, seeds, benchmarks, feedback rates and
models, alpha) and its plan, a fixed-order list of tasks with the per-benchmark data they
read. The order never depends on how the tasks are executed."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from ..baselines import check_params
from ..data import RoutingData
from ..feedback import FeedbackConfig
from ..simulator import DEFAULT_FEEDBACK_RATE, PAPER_SEEDS
from ..validation import Bool, Checked, Range, param
from .alpha import resolve_alpha
from .datasets import Dataset
from .feedback_axis import feedback_name, parse_feedback
from .specs import DEFAULT_METHODS, MethodSpec

#: the benchmark the paper comparison leaves out of the shared data (100 rows)
PAPER_EXCLUDE = ("mmlu_abstract_algebra",)
#: share of each benchmark used as the offline methods' history split
DEFAULT_HISTORY_FRACTION = 0.2


@dataclass(frozen=True)
class GridConfig(Checked):
    """What to run. ``benchmarks`` None means every benchmark of each dataset except
    ``exclude_benchmarks``; ``feedback_rates``, ``feedback`` (feedback models: each a
    :class:`FeedbackConfig`, a preset name of :data:`FEEDBACK_PRESETS` or
    ``kind:key=value,...``) and several specs of one method (different params) are the
    parameter axes of the grid. In each cell every method runs on the same stream with
    the same feedback plan. ``mixed``: one stream over all selected benchmarks of a
    dataset (benchmark ``"a+b+..."``) instead of one per benchmark; workload drift
    (``drift``) needs it, since it changes the benchmark mix of the stream.
    ``judge_cost``: what one LLM-judge call costs in the data's cost unit (judge fill-in
    charges it per judged request); None: the cheapest model's mean cost per request on
    each benchmark, a judge being at least as dear as the smallest model of the zoo."""

    methods: tuple[MethodSpec, ...] = DEFAULT_METHODS
    seeds: tuple[int, ...] = PAPER_SEEDS
    benchmarks: tuple[str, ...] | None = None
    exclude_benchmarks: tuple[str, ...] = ()
    feedback_rates: tuple[float, ...] = (DEFAULT_FEEDBACK_RATE,)
    alpha: float | str = "midpoint"
    history_fraction: float = param(DEFAULT_HISTORY_FRACTION, Range(low=0.0, high=1.0, high_open=True))
    feedback: tuple[FeedbackConfig, ...] = (FeedbackConfig(),)
    mixed: bool = param(False, Bool())
    judge_cost: float | None = param(None, Range(low=0.0, optional=True))

    def __post_init__(self) -> None:
        for name in ("methods", "seeds", "feedback_rates", "exclude_benchmarks"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.benchmarks is not None:
            object.__setattr__(self, "benchmarks", tuple(self.benchmarks))
            if not self.benchmarks:
                raise ValueError("benchmarks is empty: give at least one, or None for all")
        if not self.methods or not all(isinstance(m, MethodSpec) for m in self.methods):
            raise ValueError("methods must be a non-empty sequence of MethodSpec")
        if not self.seeds:
            raise ValueError("give at least one seed")
        for s in self.seeds:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
                raise ValueError(f"seeds must be non-negative integers, got {s!r}")
        if not self.feedback_rates:
            raise ValueError("give at least one feedback rate")
        resolve_alpha(self.alpha, None)  # validates the number or the rule name
        super().__post_init__()  # the declared rules
        fb = self.feedback
        if isinstance(fb, (FeedbackConfig, str, Mapping)):
            fb = (fb,)
        fb = tuple(parse_feedback(x) for x in fb)
        if not fb:
            raise ValueError("give at least one feedback model (FeedbackConfig() is IID)")
        names = [feedback_name(x) for x in fb]
        if len(set(names)) != len(names):
            raise ValueError(f"feedback models must differ, got {names}")
        for x in fb:
            for r in self.feedback_rates:
                x.check_rate(r, "feedback rates")  # in [0, 1]; bursty: rate / on_fraction <= 1
        if any(x.kind == "drift" for x in fb) and not self.mixed:
            raise ValueError("workload drift changes the benchmark mix of one stream: it needs mixed=True "
                             "(--mixed), one stream over several benchmarks")
        object.__setattr__(self, "feedback", fb)
        if self.judge_cost is not None:
            object.__setattr__(self, "judge_cost", float(self.judge_cost))


@dataclass(frozen=True)
class Task:
    """One run of the grid (what a worker receives besides its benchmark's data)."""

    index: int
    dataset: str
    benchmark: str
    alpha: float
    seed: int
    feedback_rate: float
    history_fraction: float
    spec: MethodSpec
    feedback: FeedbackConfig = FeedbackConfig()
    judge_cost: float | None = None


def _slim(data: RoutingData) -> RoutingData:
    """The arrays the methods need, without the text columns (cheaper to ship)."""
    keep = [c for c in ("doc_id", "benchmark") if c in data.frame.columns]
    return replace(data, frame=data.frame[keep])


def plan_grid(datasets: Dataset | Sequence[Dataset], config: GridConfig
              ) -> tuple[list[Task], dict[tuple[str, str], tuple[RoutingData, np.ndarray]]]:
    """The runs of the grid, in a fixed order, and the per-benchmark payloads they use."""
    if isinstance(datasets, Dataset):
        datasets = [datasets]
    if not datasets:
        raise ValueError("no dataset given")
    names = [d.name for d in datasets]
    if len(set(names)) != len(names):
        raise ValueError(f"dataset names must be unique, got {names}")
    tasks: list[Task] = []
    payloads: dict[tuple[str, str], tuple[RoutingData, np.ndarray]] = {}
    for ds in datasets:
        if config.benchmarks is not None:
            ds.data.select(config.benchmarks)  # unknown names are an error
            benches = [b for b in config.benchmarks if b not in config.exclude_benchmarks]
        else:
            benches = [b for b in ds.data.benchmark_names if b not in config.exclude_benchmarks]
        if not benches:
            raise ValueError(f"no benchmark left to run in {ds.name!r}")
        cells = [benches] if config.mixed else [[b] for b in benches]
        if any(f.kind == "drift" for f in config.feedback) and len(benches) < 2:
            raise ValueError(f"workload drift needs at least two benchmarks in the mixed stream of {ds.name!r}, "
                             f"got {benches}")
        specs: list[MethodSpec] = []
        for spec in config.methods:
            check_params(spec.method, {k: v for k, v in spec.params.items()
                                       if not (spec.method == "single" and k == "model")})
            if spec.method == "single" and "model" not in spec.params:
                specs.extend(MethodSpec("single", {"model": m}, label=f"{m} only") for m in ds.data.models)
            else:
                specs.append(spec)
        bench_of = ds.data.benchmarks
        emb = np.asarray(ds.embeddings, np.float32)
        for cell in cells:
            b = "+".join(cell)
            sub = ds.data.select(cell)
            alpha = resolve_alpha(config.alpha, sub)
            payloads[(ds.name, b)] = (_slim(sub), rows_of(emb, np.isin(bench_of, cell)))
            for rate in config.feedback_rates:
                for fcfg in config.feedback:
                    for seed in config.seeds:
                        for spec in specs:
                            tasks.append(Task(len(tasks), ds.name, b, alpha, int(seed), float(rate),
                                              float(config.history_fraction), spec, fcfg,
                                              config.judge_cost))
    return tasks, payloads


def rows_of(emb: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The masked rows, without a copy when every row is selected (a one-benchmark or
    mixed grid over 10M requests must not hold the embedding matrix twice)."""
    return np.ascontiguousarray(emb) if mask.all() else np.ascontiguousarray(emb[mask])
