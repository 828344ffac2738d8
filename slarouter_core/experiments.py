"""Experiment runner: datasets x benchmarks x methods x seeds x parameters, tidy results.

The comparison of the paper (Table 2) as a grid of independent runs. One run = one
(dataset, benchmark, feedback rate, feedback model, seed, method spec). Per benchmark and
seed the rows are split once (:func:`baselines.split_history`, seeded) into a history
split for the offline methods and a stream every method is evaluated on; all methods get
the same stream with the same feedback plan, built from the cell's feedback model
(``GridConfig.feedback``: IID by default, or bursty, negativity-biased, delayed, drift,
judge labels; see ``docs/EXPERIMENTS.md``, "Feedback models"). Alpha is fixed per benchmark from the *full*
benchmark (default: midpoint of the two most expensive models' accuracy).

API for scripts and the dashboard::

    ds = load_dataset("../shared/data/messplus_llama3", encoder="minilm")
    cfg = GridConfig(methods=expand_presets(["single", "oracle", "slarouter"]),
                     exclude_benchmarks=("mmlu_abstract_algebra",))
    rows = run_grid(ds, cfg, backend="local", n_jobs=2, progress=lambda done, total: ...)
    agg = aggregate(rows)                       # mean +- std over seeds, SLA, cheapest
    print(format_overview(agg)); print(format_table(agg))

``rows`` has one row per run (see :data:`ROW_COLUMNS`); it does not depend on the
backend, the number of jobs, or the completion order. See ``docs/EXPERIMENTS.md``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .baselines import METHODS, PAPER_V, REFERENCE_METHODS, check_params, info_json, split_history
from .data import RoutingData, load_parquet, midpoint_alpha, paper_alpha
from .feedback import KINDS as FEEDBACK_KINDS
from .feedback import FeedbackConfig
from .importers import load_messplus
from .router import RouterConfig
from .simulator import PAPER_SEEDS, SimulationConfig, simulate

ProgressFn = Callable[[int, int], None]

#: the benchmark the paper comparison leaves out of the shared data (100 rows)
PAPER_EXCLUDE = ("mmlu_abstract_algebra",)
#: methods with a virtual queue (post-convergence satisfaction is defined for them)
QUEUE_METHODS = frozenset({"messplus", "slarouter"})
#: share of each benchmark used as the offline methods' history split
DEFAULT_HISTORY_FRACTION = 0.2


def load_any(path: str | Path, cost: str = "energy_joules") -> RoutingData:
    """A canonical parquet file, or MESS+ logs (a .csv/.json/.jsonl file or a folder)."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"data not found: {p}")
    if p.is_dir() or p.suffix.lower() in (".csv", ".json", ".jsonl"):
        return load_messplus(p, cost=cost)
    return load_parquet(p, cost=cost)


#: named alpha rules: halfway between the two most expensive models' accuracy, or the
#: paper's "1 point below the medium (second most expensive) model"
ALPHA_RULES = {"midpoint": midpoint_alpha, "paper": paper_alpha}
#: "meets alpha": whole-stream satisfaction >= alpha in at least this share of the seeds
#: (18 of 20); a mean over 3 seeds is met by the static mixture about half the time
MEET_SHARE = 0.9


def resolve_alpha(alpha: float | str, data: RoutingData | None) -> float:
    """A number in (0, 1), or a rule of :data:`ALPHA_RULES` ('midpoint', 'paper').

    ``data`` None only validates: a valid rule name then gives 0.5 as a stand-in."""
    rules = "', '".join(ALPHA_RULES)
    if isinstance(alpha, str):
        if alpha in ALPHA_RULES:
            if data is None:
                return 0.5
            return ALPHA_RULES[alpha](data)
        try:
            alpha = float(alpha)
        except ValueError:
            raise ValueError(f"alpha must be a number in (0, 1) or one of '{rules}', got {alpha!r}") from None
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be a number in (0, 1) or one of '{rules}', got {alpha!r}")
    return float(alpha)


def seeds_needed(n_seeds: int) -> int:
    """Seeds that must meet alpha for a method to 'meet alpha' (18 of 20, 3 of 3)."""
    return int(math.ceil(MEET_SHARE * n_seeds - 1e-9))


# -- method specs -------------------------------------------------------------------------
@dataclass(frozen=True)
class MethodSpec:
    """One method of :data:`baselines.METHODS` with fixed params, e.g.
    ``MethodSpec("slarouter", {"V": 1e-5})``. ``single`` without a ``model`` param
    expands to one run per model of each dataset. ``label`` names it in tables."""

    method: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}: choose from {', '.join(METHODS)}")
        if not isinstance(self.params, Mapping):
            raise TypeError("params must be a mapping")
        object.__setattr__(self, "params", dict(self.params))
        try:
            json.dumps(self.params)
        except TypeError:
            raise ValueError(f"params of {self.method} must be JSON values (numbers, strings, lists, dicts)") from None

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        if not self.params:
            return self.method
        return f"{self.method}(" + ",".join(f"{k}={v}" for k, v in sorted(self.params.items())) + ")"

    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True)


#: named method specs for the CLI and the dashboard (``single`` expands per model)
PRESETS: dict[str, MethodSpec] = {
    "single": MethodSpec("single"),
    "random": MethodSpec("random", label="random"),
    "static_mixture": MethodSpec("static_mixture", label="static mixture"),
    "oracle": MethodSpec("oracle", label="oracle"),
    "messplus": MethodSpec("messplus", label="MESS+"),
    "carrot": MethodSpec("carrot", label="CARROT"),
    "causal": MethodSpec("causal", label="Causal"),
    "slarouter": MethodSpec("slarouter", {"V": PAPER_V}, label="SLARouter (fixed V)"),
    "slarouter_ddv": MethodSpec("slarouter", {}, label="SLARouter (data-driven V)"),
    "slarouter_guarded": MethodSpec("slarouter", {"mode": "guarded"}, label="SLARouter (guarded)"),
    "slarouter_contextual": MethodSpec("slarouter", {"mode": "contextual"}, label="SLARouter (contextual)"),
}
#: the paper's presets, in its table order (``slarouter_guarded``, our improved mode, is
#: not a default: ask for it by name)
DEFAULT_METHODS: tuple[MethodSpec, ...] = tuple(PRESETS[k] for k in (
    "single", "random", "static_mixture", "oracle", "carrot", "causal", "messplus", "slarouter", "slarouter_ddv"))


def parse_method(text: str) -> MethodSpec:
    """A preset name, or ``method:key=value,key=value`` (values read as JSON when they
    parse, e.g. ``slarouter:V=0.0001,mode=paper`` or ``carrot:mu=0.5``)."""
    text = text.strip()
    if text in PRESETS:
        return PRESETS[text]
    name, _, rest = text.partition(":")
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}: use a preset ({', '.join(PRESETS)}) "
                         f"or method:key=value with a method of {', '.join(METHODS)}")
    params: dict[str, Any] = {}
    for key, value in _key_values(rest, text, "method"):
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return MethodSpec(name, params)


def _key_values(rest: str, text: str, what: str, known: set[str] | None = None) -> list[tuple[str, str]]:
    """The ``key=value`` pairs of a ``name:key=value,...`` spec, with a plain error."""
    pairs = []
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key or (known is not None and key not in known):
            allowed = f" with a key of {', '.join(sorted(known))}" if known is not None else ""
            raise ValueError(f"bad {what} parameter {item!r} in {text!r}: use key=value{allowed}")
        pairs.append((key, value))
    return pairs


def expand_presets(names: Iterable[str]) -> tuple[MethodSpec, ...]:
    return tuple(parse_method(n) for n in names)


# -- feedback models (a grid axis) --------------------------------------------------------
#: the FeedbackConfig fields that matter for each kind (the rest are ignored by it)
FEEDBACK_FIELDS: dict[str, tuple[str, ...]] = {
    "iid": (), "bursty": ("burst_length", "on_fraction"), "negative": ("negative_ratio",),
    "delayed": ("delay", "delay_dist"), "drift": ("drift_mix",),
}


def _feedback_presets() -> dict[str, FeedbackConfig]:
    from .judge import JUDGE_PRESETS

    out = {k: FeedbackConfig(kind=k) for k in FEEDBACK_KINDS}  # type: ignore[arg-type]
    for name, judge in JUDGE_PRESETS.items():
        out[f"judge-{name}"] = FeedbackConfig(judge=judge)
    return out


#: named feedback models: each kind with its defaults, and IID labels from the paper's
#: simulated judges (``judge-acpbench``, ``judge-gpqa``)
FEEDBACK_PRESETS: dict[str, FeedbackConfig] = _feedback_presets()


def parse_feedback(value: FeedbackConfig | str | Mapping[str, Any]) -> FeedbackConfig:
    """A :class:`FeedbackConfig`, a preset name (:data:`FEEDBACK_PRESETS`), a dict of its
    fields, or ``kind:key=value,...`` (e.g. ``bursty:burst_length=20,on_fraction=0.5``,
    ``delayed:delay=200,delay_dist=geometric``, ``iid:judge=gpqa``)."""
    if isinstance(value, FeedbackConfig):
        return value
    if isinstance(value, Mapping):
        try:
            return FeedbackConfig.from_dict(dict(value))
        except TypeError as exc:
            raise ValueError(f"bad feedback model {dict(value)!r}: {exc}") from None
    if not isinstance(value, str):
        raise ValueError(f"a feedback model must be a FeedbackConfig, a preset name or kind:key=value, got {value!r}")
    text = value.strip()
    if text in FEEDBACK_PRESETS:
        return FEEDBACK_PRESETS[text]
    kind, _, rest = text.partition(":")
    if kind not in FEEDBACK_KINDS:
        raise ValueError(f"unknown feedback model {text!r}: use a preset ({', '.join(FEEDBACK_PRESETS)}) or "
                         f"kind:key=value with a kind of {', '.join(FEEDBACK_KINDS)}")
    from .judge import JUDGE_PRESETS

    kw: dict[str, Any] = {"kind": kind}
    known = {"burst_length", "on_fraction", "negative_ratio", "delay", "delay_dist", "drift_mix", "judge"}
    for key, raw in _key_values(rest, text, "feedback", known):
        if key == "judge":
            if raw not in JUDGE_PRESETS:
                raise ValueError(f"unknown judge {raw!r}: choose {', '.join(JUDGE_PRESETS)}")
            kw[key] = JUDGE_PRESETS[raw]
        elif key == "delay_dist":
            kw[key] = raw
        else:
            try:
                kw[key] = float(raw)
            except ValueError:
                raise ValueError(f"feedback parameter {key} must be a number, got {raw!r}") from None
    return FeedbackConfig(**kw)


def feedback_params(fcfg: FeedbackConfig) -> dict[str, Any]:
    """The parameters that matter for ``fcfg``'s kind, and its judge (if any)."""
    out: dict[str, Any] = {k: getattr(fcfg, k) for k in FEEDBACK_FIELDS[fcfg.kind]}
    if fcfg.judge is not None:
        out["judge"] = fcfg.judge.to_dict()
    return out


def feedback_name(fcfg: FeedbackConfig) -> str:
    """Short, unique-per-plan name: the kind, its non-default parameters, the judge."""
    base = FeedbackConfig()
    diff = [f"{k}={getattr(fcfg, k):g}" if isinstance(getattr(fcfg, k), float) else f"{k}={getattr(fcfg, k)}"
            for k in FEEDBACK_FIELDS[fcfg.kind] if getattr(fcfg, k) != getattr(base, k)]
    name = fcfg.kind + (f"({','.join(diff)})" if diff else "")
    if fcfg.judge is not None:
        name += f"+judge({fcfg.judge.name})"
    return name


# -- grid ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class GridConfig:
    """What to run. ``benchmarks`` None means every benchmark of each dataset except
    ``exclude_benchmarks``; ``feedback_rates``, ``feedback`` (feedback models: each a
    :class:`FeedbackConfig`, a preset name of :data:`FEEDBACK_PRESETS` or
    ``kind:key=value,...``) and several specs of one method (different params) are the
    parameter axes of the grid. In each cell every method runs on the same stream with
    the same feedback plan. ``mixed``: one stream over all selected benchmarks of a
    dataset (benchmark ``"a+b+..."``) instead of one per benchmark; workload drift
    (``drift``) needs it, since it changes the benchmark mix of the stream."""

    methods: tuple[MethodSpec, ...] = DEFAULT_METHODS
    seeds: tuple[int, ...] = PAPER_SEEDS
    benchmarks: tuple[str, ...] | None = None
    exclude_benchmarks: tuple[str, ...] = ()
    feedback_rates: tuple[float, ...] = (0.2,)
    alpha: float | str = "midpoint"
    history_fraction: float = DEFAULT_HISTORY_FRACTION
    feedback: tuple[FeedbackConfig, ...] = (FeedbackConfig(),)
    mixed: bool = False

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
        for r in self.feedback_rates:
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
                raise ValueError(f"feedback rates must be in [0, 1], got {r!r}")
        resolve_alpha(self.alpha, None)  # validates the number or the rule name
        f = self.history_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 <= f < 1.0:
            raise ValueError(f"history_fraction must be in [0, 1), got {f!r}")
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
                x.check_rate(float(r))  # e.g. bursty: rate / on_fraction must be <= 1
        if any(x.kind == "drift" for x in fb) and not self.mixed:
            raise ValueError("workload drift changes the benchmark mix of one stream: it needs mixed=True "
                             "(--mixed), one stream over several benchmarks")
        object.__setattr__(self, "feedback", fb)
        if not isinstance(self.mixed, bool):
            raise ValueError("mixed must be True or False")


@dataclass(frozen=True)
class Dataset:
    """A named dataset with one embedding row per request."""

    name: str
    data: RoutingData
    embeddings: np.ndarray

    def __post_init__(self) -> None:
        emb = np.asarray(self.embeddings)
        if emb.ndim != 2 or emb.shape[0] != self.data.n_requests:
            raise ValueError(f"embeddings of {self.name!r} must be (n_requests={self.data.n_requests}, D), "
                             f"got {emb.shape}")


def load_dataset(path: str | Path, encoder: str = "minilm", cost: str = "energy_joules",
                 cache_dir: str | Path | None = None, name: str | None = None,
                 progress: ProgressFn | None = None) -> Dataset:
    """Load data (``load_any``) and its embeddings (cached by ``EmbeddingCache``)."""
    from .encoders import EmbeddingCache, get_encoder

    data = load_any(path, cost=cost)
    emb = EmbeddingCache(cache_dir).embed(data.texts, get_encoder(encoder), progress=progress)
    return Dataset(name or Path(path).name, data, emb)


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


ERROR_POLICIES = ("raise", "record")

ROW_COLUMNS = ("dataset", "benchmark", "method", "method_key", "params", "seed", "feedback_rate",
               "feedback_model", "feedback_kind", "feedback_params", "history_fraction", "alpha", "n_stream", "n_history", "cost_unit", "stream_cost",
               "training_cost", "operating_cost", "satisfaction", "post_convergence_satisfaction",
               "sla_met", "lcb", "explored", "feedback", "final_q", "final_v", "tuned")


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
            payloads[(ds.name, b)] = (_slim(sub), _rows_of(emb, np.isin(bench_of, cell)))
            for rate in config.feedback_rates:
                for fcfg in config.feedback:
                    for seed in config.seeds:
                        for spec in specs:
                            tasks.append(Task(len(tasks), ds.name, b, alpha, int(seed), float(rate),
                                              float(config.history_fraction), spec, fcfg))
    return tasks, payloads


def _rows_of(emb: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The masked rows, without a copy when every row is selected (a one-benchmark or
    mixed grid over 10M requests must not hold the embedding matrix twice)."""
    return np.ascontiguousarray(emb) if mask.all() else np.ascontiguousarray(emb[mask])


def run_task(task: Task, data: RoutingData, embeddings: np.ndarray) -> dict:
    """One run: split, route the stream, and the tidy row (plain Python values)."""
    from threadpoolctl import threadpool_limits

    stream, stream_emb, history = split_history(data, embeddings, task.seed, task.history_fraction)
    method = METHODS[task.spec.method]
    with threadpool_limits(limits=1):  # small matrices: one BLAS thread per worker is fastest
        try:
            r = method(stream, stream_emb, task.alpha, task.seed, task.feedback_rate,
                       history=history, feedback=task.feedback, **task.spec.params)
        except TypeError as exc:
            raise ValueError(f"bad parameters for {task.spec.method}: {exc}") from None
    s = r.summary
    scale = 1e-6 if s.cost_unit == "J" else 1.0
    row = {
        "dataset": task.dataset, "benchmark": task.benchmark, "method": task.spec.name,
        "method_key": task.spec.method, "params": task.spec.params_json(), "seed": task.seed,
        "feedback_rate": task.feedback_rate, **_feedback_cols(task.feedback),
        "history_fraction": task.history_fraction, "alpha": task.alpha, "n_stream": stream.n_requests, "n_history": history.n,
        "cost_unit": s.display_unit, "stream_cost": s.operating_cost * scale,
        "training_cost": r.extra_cost * scale, "operating_cost": r.total_cost * scale,
        "satisfaction": s.satisfaction, "post_convergence_satisfaction": s.post_convergence_satisfaction,
        "sla_met": bool(s.satisfaction >= task.alpha), "lcb": float(r.info.get("lcb", math.nan)),
        "explored": s.explored, "feedback": s.feedback,
        "final_q": s.final_q, "final_v": s.final_v, "tuned": info_json(r.info),
    }
    for m, ratio in zip(s.models, s.call_ratio):
        row[f"calls_{m}"] = ratio
    return row


def _feedback_cols(fcfg: FeedbackConfig) -> dict:
    return {"feedback_model": feedback_name(fcfg), "feedback_kind": fcfg.kind,
            "feedback_params": json.dumps(feedback_params(fcfg), sort_keys=True)}


def _error_row(task: Task, data: RoutingData, message: str) -> dict:
    row = {c: np.nan for c in ROW_COLUMNS}
    row.update({"dataset": task.dataset, "benchmark": task.benchmark, "method": task.spec.name,
                "method_key": task.spec.method, "params": task.spec.params_json(), "seed": task.seed,
                "feedback_rate": task.feedback_rate, **_feedback_cols(task.feedback),
                "history_fraction": task.history_fraction, "alpha": task.alpha, "sla_met": False, "tuned": "{}", "error": message})
    for m in data.models:
        row[f"calls_{m}"] = np.nan
    return row


def _run_indexed(task: Task, payload: tuple[RoutingData, np.ndarray], on_error: str = "raise") -> tuple[int, dict]:
    try:
        return task.index, run_task(task, *payload)
    except ValueError as exc:
        if on_error == "raise":
            raise ValueError(f"{task.spec.name} on {task.dataset}/{task.benchmark}, seed {task.seed}: {exc}") from None
        return task.index, _error_row(task, payload[0], str(exc))


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
    from .ray_backend import start_ray

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


# -- the old SLARouter-only grid (CLI ``simulate``) ----------------------------------------
def run_slarouter_grid(data: RoutingData, embeddings: np.ndarray, router: RouterConfig | None = None,
                       alpha: float | str = "midpoint", benchmarks: Sequence[str] | None = None,
                       seeds: Iterable[int] = PAPER_SEEDS, feedback_rate: float = 0.2,
                       per_benchmark: bool = True, progress: ProgressFn | None = None,
                       feedback: FeedbackConfig | str | None = None) -> pd.DataFrame:
    """SLARouter on each benchmark's own stream (or one mixed stream) for every seed,
    on the whole benchmark (no history split; see :func:`run_grid` for the comparison).
    ``feedback``: the feedback model (a :class:`FeedbackConfig`, preset name or
    ``kind:key=value``; default IID); workload drift needs ``per_benchmark=False``."""
    fcfg = parse_feedback(feedback) if feedback is not None else FeedbackConfig()
    fcfg.check_rate(float(feedback_rate))
    names = list(benchmarks) if benchmarks else data.benchmark_names
    data.select(names)  # validates the names
    groups = [[b] for b in names] if per_benchmark else [names]
    if fcfg.kind == "drift" and any(len(g) < 2 for g in groups):
        raise ValueError("workload drift changes the benchmark mix of one stream: run one mixed stream "
                         "(per_benchmark=False, --mixed) over at least two benchmarks")
    fcols = _feedback_cols(fcfg)
    seeds = list(seeds)
    rows = []
    done, total = 0, len(groups) * len(seeds)
    bench = data.benchmarks
    for group in groups:
        sub = data.select(group)
        emb = _rows_of(embeddings, np.isin(bench, group))
        a = resolve_alpha(alpha, sub)
        base = router if router is not None else RouterConfig(alpha=a)
        cfg = replace(base, alpha=a)
        for seed in seeds:
            sim = simulate(sub, emb, SimulationConfig(cfg, feedback_rate=feedback_rate, seed=seed, feedback=fcfg))
            s = sim.summary()
            row = {"benchmark": "+".join(group), "seed": seed, "method": "SLARouter",
                   "alpha": a, "c": cfg.c, "V": cfg.V if cfg.V is not None else "data-driven",
                   "feedback_rate": feedback_rate, **fcols, "requests": s.requests,
                   "operating_cost": s.operating_cost_display, "cost_unit": s.display_unit,
                   "satisfaction": s.satisfaction, "post_convergence_satisfaction": s.post_convergence_satisfaction,
                   "sla_met": s.sla_met, "lcb": sim.router.certified_lower_bound(),
                   "explored": s.explored, "feedback": s.feedback, "final_v": s.final_v}
            for m, r in zip(s.models, s.call_ratio):
                row[f"calls_{m}"] = r
            rows.append(row)
            del sim  # the next seed's stream copy must not coexist with this one
            done += 1
            if progress:
                progress(done, total)
    return pd.DataFrame(rows)


# -- aggregation and reports --------------------------------------------------------------
def _group_keys(results: pd.DataFrame) -> list[str]:
    keys = [k for k in ("dataset", "benchmark", "feedback_rate", "feedback_model") if k in results.columns]
    if "alpha_setting" in results.columns:  # an alpha sweep: one group per setting
        keys.insert(2, "alpha_setting")
    return keys


def aggregate(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds per (dataset, benchmark, feedback rate, method).

    ``seeds_met``: seeds whose whole-stream satisfaction >= alpha; ``sla_met``: at least
    :func:`seeds_needed` of them (18 of 20). ``lcb_mean``: the method's own end-of-stream
    lower confidence bound on its satisfaction (NaN for methods that claim none). ``reference``: the
    clairvoyant oracle and static mixture (they read stream labels or stream means, so
    they are bounds, not routers). ``cheapest``: per group, the deployable method with
    the lowest mean operating cost among those meeting the SLA. Costs include the
    offline methods' training cost (column ``training_cost_mean`` shows it).
    """
    if "error" in results.columns:
        results = results[results["error"].isna()]
    if results.empty:
        raise ValueError("no results to aggregate")
    keys = _group_keys(results) + ["method"]
    results = results.assign(seed_met=results["satisfaction"] >= results["alpha"])
    if "lcb" not in results.columns:
        results = results.assign(lcb=math.nan)
    call_cols = [c for c in results.columns if c.startswith("calls_")]
    g = results.groupby(keys, sort=False, dropna=False)
    spec = dict(alpha=("alpha", "first"), seeds=("seed", "count"),
                cost_mean=("operating_cost", "mean"), cost_std=("operating_cost", "std"),
                satisfaction_mean=("satisfaction", "mean"), satisfaction_std=("satisfaction", "std"),
                seeds_met=("seed_met", "sum"),
                post_convergence_mean=("post_convergence_satisfaction", "mean"),
                converged=("post_convergence_satisfaction", "count"),
                cost_unit=("cost_unit", "first"))
    if "training_cost" in results.columns:
        spec["training_cost_mean"] = ("training_cost", "mean")
    spec["lcb_mean"] = ("lcb", "mean")
    if "method_key" in results.columns:
        spec["method_key"] = ("method_key", "first")
    out = g.agg(**spec).reset_index()
    for c in call_cols:
        out[c] = g[c].mean().to_numpy()
    if "method_key" in out.columns:  # only queue-based methods have a convergence point
        out.loc[~out["method_key"].isin(QUEUE_METHODS), ["post_convergence_mean", "converged"]] = np.nan
    out["cost_std"] = out["cost_std"].fillna(0.0)
    out["satisfaction_std"] = out["satisfaction_std"].fillna(0.0)
    out["seeds_met"] = out["seeds_met"].astype(int)
    out["sla_met"] = out["seeds_met"] >= out["seeds"].map(seeds_needed)
    out["reference"] = out["method_key"].isin(REFERENCE_METHODS) if "method_key" in out else False
    out["cheapest"] = False
    gk = _group_keys(out)
    for _, idx in (out.groupby(gk, sort=False).groups.items() if gk else [(None, out.index)]):
        cand = out.loc[idx]
        cand = cand[cand["sla_met"] & ~cand["reference"]]
        if len(cand):
            out.loc[cand["cost_mean"].idxmin(), "cheapest"] = True
    return out


def _fmt_group_title(r: pd.Series, keys: list[str]) -> str:
    parts = []
    if "dataset" in keys:
        parts.append(str(r["dataset"]))
    if "benchmark" in keys:
        parts.append(f"**{r['benchmark']}**")
    title = " / ".join(parts) if parts else "all"
    extra = f"alpha = {100 * r['alpha']:.1f}%"
    if "feedback_rate" in keys:
        extra += f", feedback rate {r['feedback_rate']:g}"
    if "feedback_model" in keys and r["feedback_model"] != "iid":
        extra += f", feedback {r['feedback_model']}"
    return f"{title} ({extra})"


def _fmt_post(r: pd.Series) -> str:
    """Post-convergence satisfaction (the stream's second half, a start fixed in advance;
    see :class:`metrics.Summary`) over the seeds that have it ("k/n seeds"); "–" for
    methods without a queue."""
    conv = r.get("converged", np.nan)
    if pd.isna(conv):
        return "–" if pd.isna(r.get("post_convergence_mean", np.nan)) else f"{100 * r['post_convergence_mean']:.1f}"
    if conv == 0:
        return "not converged"
    return f"{100 * r['post_convergence_mean']:.1f} ({int(conv)}/{int(r['seeds'])} seeds)"


def format_table(agg: pd.DataFrame) -> str:
    """Markdown in the shape of the paper's Table 2: one table per benchmark, rows =
    methods; operating cost (incl. training cost) and request satisfaction as mean ± std
    over seeds, post-convergence satisfaction (queue methods), model call ratio, SLA met/missed; the cheapest deployable method meeting
    the SLA in bold and marked "cheapest"; reference bounds marked "(ref)"."""
    call_cols = [c for c in agg.columns if c.startswith("calls_")]
    models = "/".join(c[len("calls_"):] for c in call_cols)
    unit = agg["cost_unit"].iloc[0] if len(agg) else "MJ"
    keys = _group_keys(agg)
    blocks = []
    groups = agg.groupby(keys, sort=False) if keys else [(None, agg)]
    for _, block in groups:
        first = block.iloc[0]
        lines = [_fmt_group_title(first, keys), "",
                 f"| method | operating cost ({unit}) | request satisfaction (%) | post-conv. (%) | "
                 f"model call ratio ({models}) | seeds ≥ alpha | own LCB (%) | SLA |",
                 "|---|---|---|---|---|---|---|---|"]
        for _, r in block.iterrows():
            ratio = "/".join("-" if pd.isna(r[c]) else f"{100 * r[c]:.0f}%" for c in call_cols)
            name = str(r["method"]) + (" (ref)" if r.get("reference", False) else "")
            cost = f"{r['cost_mean']:.3f} ± {r['cost_std']:.3f}"
            sat = f"{100 * r['satisfaction_mean']:.1f} ± {100 * r['satisfaction_std']:.1f}"
            post = _fmt_post(r)
            sla = "met" if r["sla_met"] else "missed"
            met = f"{int(r['seeds_met'])}/{int(r['seeds'])}" if "seeds_met" in r else "–"
            lcb = r.get("lcb_mean", math.nan)
            lcb = "–" if pd.isna(lcb) else f"{100 * lcb:.1f}"
            if r.get("cheapest", False):
                name, cost, sat, sla = f"**{name}**", f"**{cost}**", f"**{sat}**", "**met, cheapest**"
            lines.append(f"| {name} | {cost} | {sat} | {post} | {ratio} | {met} | {lcb} | {sla} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def overview(agg: pd.DataFrame) -> pd.DataFrame:
    """Per method across benchmarks: SLA met count, cheapest count, mean satisfaction
    minus alpha (points), and the geometric mean of its cost over the static mixture's
    and the oracle's cost on the same benchmark (when those were run)."""
    keys = _group_keys(agg)
    ref_cost = {}
    for key in ("static_mixture", "oracle"):
        if "method_key" in agg.columns and (agg["method_key"] == key).any():
            ref_cost[key] = agg[agg["method_key"] == key].set_index(keys)["cost_mean"]
    rows = []
    several = "feedback_model" in agg.columns and agg["feedback_model"].nunique() > 1
    by = ["method", "feedback_model"] if several else ["method"]
    for key, block in agg.groupby(by, sort=False):
        method = f"{key[0]} [feedback {key[1]}]" if several else key[0]
        row = {"method": method, "benchmarks": len(block), "sla_met": int(block["sla_met"].sum()),
               "cheapest": int(block["cheapest"].sum()),
               "satisfaction_minus_alpha_pp": float(100 * (block["satisfaction_mean"] - block["alpha"]).mean()),
               "cost_mean": float(block["cost_mean"].mean())}
        for key, series in ref_cost.items():
            ratio = block.set_index(keys)["cost_mean"] / series.reindex(block.set_index(keys).index)
            ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
            row[f"cost_vs_{key}"] = float(np.exp(np.log(ratio).mean())) if len(ratio) else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def format_overview(agg: pd.DataFrame) -> str:
    ov = overview(agg)
    cols = [c for c in ("cost_vs_static_mixture", "cost_vs_oracle") if c in ov.columns]
    head = ("| method | SLA met | cheapest | satisfaction − alpha (pp, mean) | mean cost |"
            + "".join(f" cost ÷ {c[len('cost_vs_'):].replace('_', ' ')} (geo. mean) |" for c in cols))
    lines = [head, "|---|---|---|---|---|" + "---|" * len(cols)]
    unit = agg["cost_unit"].iloc[0] if len(agg) else ""
    for _, r in ov.iterrows():
        line = (f"| {r['method']} | {r['sla_met']}/{r['benchmarks']} | {r['cheapest']} | "
                f"{r['satisfaction_minus_alpha_pp']:+.1f} | {r['cost_mean']:.3f} {unit} |")
        line += "".join(f" {r[c]:.2f}× |" for c in cols)
        lines.append(line)
    return "\n".join(lines)


def gaps(agg: pd.DataFrame, method_key: str = "slarouter") -> pd.DataFrame:
    """Per benchmark, each method of ``method_key`` next to the references: satisfaction
    minus alpha (points), SLA met, and its cost divided by the static mixture's, the
    oracle's and the cheapest compliant method's cost on the same benchmark."""
    if "method_key" not in agg.columns:
        raise ValueError("gaps() needs runner results (a method_key column)")
    keys = _group_keys(agg)
    rows = []
    for _, block in (agg.groupby(keys, sort=False) if keys else [(None, agg)]):
        def cost_of(mask):
            sel = block[mask]
            return float(sel["cost_mean"].iloc[0]) if len(sel) else math.nan

        mix = cost_of(block["method_key"] == "static_mixture")
        orc = cost_of(block["method_key"] == "oracle")
        best = block[block["cheapest"]]
        for _, r in block[block["method_key"] == method_key].iterrows():
            row = {k: r[k] for k in keys}
            row.update(method=r["method"], alpha=r["alpha"],
                       gap_pp=100 * (r["satisfaction_mean"] - r["alpha"]), sla_met=bool(r["sla_met"]),
                       cost=r["cost_mean"], cost_vs_static_mixture=r["cost_mean"] / mix,
                       cost_vs_oracle=r["cost_mean"] / orc,
                       cheapest_compliant=(best["method"].iloc[0] if len(best) else "none"),
                       cost_vs_cheapest_compliant=(r["cost_mean"] / best["cost_mean"].iloc[0] if len(best) else math.nan))
            rows.append(row)
    return pd.DataFrame(rows)


def format_gaps(agg: pd.DataFrame, method_key: str = "slarouter") -> str:
    g = gaps(agg, method_key)
    if g.empty:
        return f"(no {method_key} runs)"
    unit = agg["cost_unit"].iloc[0]
    lines = [f"| benchmark | method | alpha (%) | satisfaction − alpha (pp) | SLA | cost ({unit}) | "
             "÷ static mixture | ÷ oracle | cheapest compliant (÷ its cost) |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in g.iterrows():
        bench = r.get("benchmark", "all")
        if r.get("feedback_model", "iid") != "iid":
            bench = f"{bench} [feedback {r['feedback_model']}]"
        cc = r["cheapest_compliant"]
        cc = f"{cc} ({r['cost_vs_cheapest_compliant']:.2f}×)" if cc != "none" else "none"
        lines.append(f"| {bench} | {r['method']} | {100 * r['alpha']:.1f} | {r['gap_pp']:+.1f} | "
                     f"{'met' if r['sla_met'] else 'missed'} | {r['cost']:.3f} | {r['cost_vs_static_mixture']:.2f}× | "
                     f"{r['cost_vs_oracle']:.2f}× | {cc} |")
    return "\n".join(lines)


def write_results(results: pd.DataFrame, path: str | Path) -> Path:
    """Tidy rows to ``.parquet`` or ``.csv`` (by suffix)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() == ".parquet":
        results.to_parquet(p, index=False)
    elif p.suffix.lower() == ".csv":
        results.to_csv(p, index=False)
    elif p.suffix.lower() == ".json":
        p.write_text(results.to_json(orient="records", indent=2))
    else:
        raise ValueError(f"results file must end in .csv, .parquet or .json, got {p.name}")
    return p


def write_report(results: pd.DataFrame, markdown: str | Path | None = None,
                 table_csv: str | Path | None = None) -> str:
    """The Table-2 report as Markdown (overview + per-benchmark tables); optionally
    written to ``markdown`` and the aggregated table to ``table_csv``. Returns the text."""
    agg = aggregate(results)
    text = "### Overview\n\n" + format_overview(agg) + "\n\n"
    if "method_key" in agg.columns and (agg["method_key"] == "slarouter").any():
        text += "### SLARouter against the references\n\n" + format_gaps(agg) + "\n\n"
    text += "### Per benchmark\n\n" + format_table(agg) + "\n"
    if markdown:
        p = Path(markdown)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    if table_csv:
        p = Path(table_csv)
        p.parent.mkdir(parents=True, exist_ok=True)
        agg.to_csv(p, index=False)
    return text
