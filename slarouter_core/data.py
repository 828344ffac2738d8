"""The canonical routing dataset: one row per request, per-model outcomes and costs.

Schema (the paper's parquet, Appendix B "Dataset"):
``doc_id, benchmark, input_text`` (required), ``correct_answer`` (optional), and per model
``{model}_solved`` (0/1, required) plus numeric per-model columns such as
``{model}_energy_joules``, ``{model}_latency_ms``, ``{model}_prompt_tokens``,
``{model}_completion_tokens`` or any ``{model}_<metric>`` (e.g. ``{model}_cost_usd``).
Models are discovered from the ``_solved`` columns and ordered by ascending mean cost. A
name with per-model columns like theirs but no ``_solved`` column is never dropped without
a word: a warning names it and its missing column (an error when fewer than two models
remain). The costs a file offers can be read before loading it (:func:`parquet_cost_metrics`,
:func:`choose_cost`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

REQUIRED_COLUMNS = ("doc_id", "benchmark", "input_text")
OPTIONAL_COLUMNS = ("correct_answer",)
SOLVED_SUFFIX = "_solved"
DEFAULT_COST = "energy_joules"
METADATA_KEY = b"slarouter"

#: Units of the per-model metrics we know; any other metric is shown by its own name.
KNOWN_UNITS = {
    "energy_joules": "J",
    "latency_ms": "ms",
    "prompt_tokens": "tokens",
    "completion_tokens": "tokens",
    "cost_usd": "USD",
    "usd": "USD",
    "dollars": "USD",
}


class DataValidationError(ValueError):
    """Raised with every problem found in a dataset, each as a plain sentence."""

    def __init__(self, problems: Sequence[str]):
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems) if self.problems else "invalid data")


def unit_of(metric: str) -> str:
    """Unit label for a per-model metric such as ``energy_joules`` or ``cost_usd``."""
    if metric in KNOWN_UNITS:
        return KNOWN_UNITS[metric]
    for suffix, unit in KNOWN_UNITS.items():
        if metric.endswith(suffix):
            return unit
    return metric


@dataclass(frozen=True)
class RoutingData:
    """A validated dataset with outcomes and the selected cost as dense arrays.

    ``solved`` and ``costs`` are (N, M) arrays whose columns follow ``models``, which are
    ordered by ascending mean of the selected cost metric.
    """

    frame: pd.DataFrame
    models: tuple[str, ...]
    cost_metric: str
    solved: np.ndarray
    costs: np.ndarray
    metadata: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def cost_unit(self) -> str:
        return unit_of(self.cost_metric)

    @property
    def n_requests(self) -> int:
        return int(self.solved.shape[0])

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def texts(self) -> list[str]:
        return self.frame["input_text"].tolist()

    @property
    def benchmarks(self) -> np.ndarray:
        return self.frame["benchmark"].to_numpy(dtype=object)

    @property
    def benchmark_names(self) -> list[str]:
        return sorted(self.frame["benchmark"].unique().tolist())

    @property
    def synthetic(self) -> bool:
        return bool(self.metadata.get("synthetic", False))

    @property
    def cost_metrics(self) -> list[str]:
        """Every numeric per-model metric present for all models (selectable as cost)."""
        return available_metrics(self.frame, self.models)

    def select(self, benchmarks: Iterable[str] | None) -> "RoutingData":
        """Rows of the given benchmarks (all when None); unknown names are an error."""
        if benchmarks is None:
            return self
        wanted = list(dict.fromkeys(benchmarks))
        if not wanted:
            raise DataValidationError(["No benchmark selected: choose at least one."])
        self._check_known(wanted)
        mask = self.frame["benchmark"].isin(wanted).to_numpy()
        return self._subset(mask)

    def without(self, benchmarks: Iterable[str]) -> "RoutingData":
        """Rows of every benchmark but the given ones (a paper stream leaves one out);
        unknown names are an error, as in :meth:`select`, so a typo never keeps a benchmark."""
        drop = list(dict.fromkeys(benchmarks))
        self._check_known(drop)
        return self.select([b for b in self.benchmark_names if b not in drop])

    def take(self, rows: Sequence[int]) -> "RoutingData":
        """The requests at positions ``rows``, in that order, each at most once: a stream
        served in a given order (``SimulationConfig(shuffle=False)``), e.g. one SLA window
        of some requests and the next of others."""
        idx = np.asarray(rows)
        if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
            raise DataValidationError(["rows must be a 1-D sequence of integer positions"])
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_requests):
            raise DataValidationError([f"rows must lie in [0, {self.n_requests}), got {idx.min()} to {idx.max()}"])
        if len(np.unique(idx)) != len(idx):
            raise DataValidationError(["rows name a request twice: each request must appear once"])
        return self._subset(idx.astype(np.int64))

    def _check_known(self, names: list[str]) -> None:
        known = set(self.benchmark_names)
        unknown = [b for b in names if b not in known]
        if unknown:
            raise DataValidationError(
                [f"Unknown benchmark {', '.join(map(repr, unknown))}: the data has "
                 f"{', '.join(self.benchmark_names)}."]
            )

    def _subset(self, rows: np.ndarray) -> "RoutingData":
        """The rows a boolean mask or integer positions pick, in that order."""
        return RoutingData(
            frame=self.frame.iloc[rows].reset_index(drop=True),
            models=self.models,
            cost_metric=self.cost_metric,
            solved=_readonly(self.solved[rows]),
            costs=_readonly(self.costs[rows]),
            metadata=self.metadata,
            warnings=self.warnings,
        )

    def with_cost(self, metric: str) -> "RoutingData":
        """The same rows with another per-model metric as the routing cost."""
        return from_frame(self.frame, cost=metric, metadata=self.metadata)

    def summary(self) -> pd.DataFrame:
        """Per benchmark and model: rows, accuracy, mean cost (in ``cost_unit``)."""
        rows = []
        bench = self.frame["benchmark"].to_numpy()
        for b in self.benchmark_names + ["(all)"]:
            mask = np.ones(len(bench), bool) if b == "(all)" else bench == b
            for j, m in enumerate(self.models):
                rows.append({
                    "benchmark": b,
                    "model": m,
                    "rows": int(mask.sum()),
                    "accuracy": float(self.solved[mask, j].mean()),
                    f"mean cost ({self.cost_unit})": float(self.costs[mask, j].mean()),
                })
        return pd.DataFrame(rows)


def _plain(value):
    """A NumPy scalar as the Python value it holds, so messages read 5, not np.int64(5)."""
    return value.item() if isinstance(value, np.generic) else value


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def discover_models(columns: Iterable[str]) -> list[str]:
    """Model names from ``{model}_solved`` columns, in column order."""
    return [c[: -len(SOLVED_SUFFIX)] for c in columns
            if isinstance(c, str) and c.endswith(SOLVED_SUFFIX) and len(c) > len(SOLVED_SUFFIX)]


def available_metrics(frame: pd.DataFrame, models: Sequence[str]) -> list[str]:
    """Metric suffixes ``X`` such that ``{model}_X`` is numeric for every model."""
    if not models:
        return []
    first = models[0]
    metrics = []
    for col in frame.columns:
        if not (isinstance(col, str) and col.startswith(first + "_")):
            continue
        metric = col[len(first) + 1:]
        if metric == "solved":
            continue
        cols = [f"{m}_{metric}" for m in models]
        if all(c in frame.columns and pd.api.types.is_numeric_dtype(frame[c]) for c in cols):
            metrics.append(metric)
    return metrics


def cost_metrics_of(frame: pd.DataFrame) -> list[str]:
    """The routing costs a table offers (``X`` with ``{model}_X`` numeric for every model
    found from its ``_solved`` columns), readable before the table is validated: a page
    shows them first and loads with one the file has (:func:`choose_cost`)."""
    return available_metrics(frame, discover_models(frame.columns))


def choose_cost(available: Sequence[str], preferred: str = DEFAULT_COST) -> str:
    """The cost to load a file with: ``preferred`` (the user's current choice) if the file
    has it, else ``energy_joules`` if it has that, else its first metric.

    Why: a file in dollars or milliseconds only must load as it is, not fail on the
    previous dataset's joules. With no metric at all ``preferred`` is returned, so that
    validation names the missing columns.
    """
    available = list(available)
    for choice in (preferred, DEFAULT_COST):
        if choice in available:
            return choice
    return available[0] if available else preferred


def models_without_outcomes(frame: pd.DataFrame, models: Sequence[str]) -> dict[str, list[str]]:
    """Names that carry per-model columns like the models do (``{name}_energy_joules``)
    but no ``{name}_solved``: models that discovery would leave out without a word.

    The suffixes compared are those every found model has (with no model found, the
    known metrics such as ``energy_joules``). Returns each such name with its columns.
    """
    cols = [c for c in frame.columns if isinstance(c, str)]
    known = set(models)
    if models:
        suffixes = {c[len(models[0]) + 1:] for c in cols if c.startswith(models[0] + "_")} - {"solved"}
        suffixes = {x for x in suffixes if x and all(f"{m}_{x}" in frame.columns for m in models)}
    else:
        suffixes = set(KNOWN_UNITS)
    out: dict[str, list[str]] = {}
    for c in cols:
        if c in REQUIRED_COLUMNS or c in OPTIONAL_COLUMNS or c.endswith(SOLVED_SUFFIX):
            continue
        for x in sorted(suffixes, key=len, reverse=True):
            name = c[: -len(x) - 1]
            if c.endswith("_" + x) and name and name not in known:
                out.setdefault(name, []).append(c)
                break
    return out


def _without_outcomes_sentence(name: str, columns: Sequence[str], zoo: Sequence[str] = ()) -> str:
    """One model without outcomes, named with its columns; ``zoo``: the models kept."""
    head = f"Model {name!r} left out of the zoo: " if zoo else f"Model {name!r} "
    return (head + f"{'it ' if zoo else ''}has {', '.join(columns)} but no {name}{SOLVED_SUFFIX} "
            f"column, so it cannot be routed. Add {name}{SOLVED_SUFFIX} (0/1 per request) to route it"
            + (f"; the zoo is {', '.join(zoo)}." if zoo else "."))


def from_frame(frame: pd.DataFrame, cost: str = DEFAULT_COST,
               metadata: dict | None = None) -> RoutingData:
    """Validate a canonical frame and build :class:`RoutingData`.

    Every problem is collected so that one error names them all.
    """
    if not isinstance(frame, pd.DataFrame):
        raise DataValidationError([f"Expected a table (pandas DataFrame), got {type(frame).__name__}."])
    problems: list[str] = []
    warnings: list[str] = []
    cols = list(frame.columns)
    dup = sorted({str(c) for c in cols if cols.count(c) > 1})
    if dup:
        raise DataValidationError([f"Duplicate column names: {', '.join(dup)}. Each column must appear once."])
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        problems.append(f"Missing required column(s): {', '.join(missing)}. "
                        f"The canonical schema needs {', '.join(REQUIRED_COLUMNS)} and per model "
                        "{model}_solved plus a cost column such as {model}_energy_joules.")
    models = discover_models(cols)
    # a model whose outcome column is missing is never dropped without a word
    orphans = models_without_outcomes(frame, models)
    if len(models) == 0:
        problems.append("No models found: add one '{model}_solved' column (0/1) per model.")
    elif len(models) == 1:
        problems.append(f"Only one model found ({models[0]}): routing needs at least two "
                        "'{model}_solved' columns.")
    if len(models) < 2:
        problems.extend(_without_outcomes_sentence(n, c) for n, c in orphans.items())
    else:  # a loud warning: the file still loads (a column such as total_energy_joules is no model)
        warnings.extend(_without_outcomes_sentence(n, c, models) for n, c in orphans.items())
    if len(frame) == 0:
        problems.append("The table has no rows.")
    if problems:
        raise DataValidationError(problems)

    n = len(frame)
    solved = np.zeros((n, len(models)), dtype=np.int8)
    for j, m in enumerate(models):
        col = frame[f"{m}_solved"]
        values = pd.to_numeric(col, errors="coerce") if not pd.api.types.is_bool_dtype(col) else col.astype(float)
        bad_type = values.isna() & col.notna()
        if bad_type.any():
            problems.append(f"Column {m}_solved has non-numeric values (first at row "
                            f"{int(np.flatnonzero(bad_type.to_numpy())[0])}): use 0 or 1.")
            continue
        if col.isna().any():
            problems.append(f"Column {m}_solved has {int(col.isna().sum())} missing value(s) "
                            f"(first at row {int(np.flatnonzero(col.isna().to_numpy())[0])}): every row "
                            "needs a 0/1 outcome per model.")
            continue
        arr = values.to_numpy(dtype=float)
        nonbin = ~np.isin(arr, (0.0, 1.0))
        if nonbin.any():
            i = int(np.flatnonzero(nonbin)[0])
            problems.append(f"Column {m}_solved must be binary (0/1) but row {i} has {arr[i]:g}.")
            continue
        solved[:, j] = arr.astype(np.int8)

    costs = np.zeros((n, len(models)), dtype=np.float64)
    cost_cols = [f"{m}_{cost}" for m in models]
    absent = [c for c in cost_cols if c not in frame.columns]
    if absent:
        metrics = available_metrics(frame, models)
        problems.append(f"Cost column(s) missing for cost '{cost}': {', '.join(absent)}. "
                        + (f"Available per-model metrics: {', '.join(metrics)}." if metrics
                           else "No numeric per-model metric is present for every model."))
    else:
        for j, c in enumerate(cost_cols):
            col = frame[c]
            if pd.api.types.is_bool_dtype(col) or not pd.api.types.is_numeric_dtype(col):
                problems.append(f"Column {c} must be numeric (a cost in {unit_of(cost)}), "
                                f"found type {col.dtype}.")
                continue
            arr = col.to_numpy(dtype=float)
            nan = ~np.isfinite(arr)
            if nan.any():
                problems.append(f"Column {c} has {int(nan.sum())} missing or infinite value(s) "
                                f"(first at row {int(np.flatnonzero(nan)[0])}): fill or drop those rows.")
                continue
            neg = arr < 0
            if neg.any():
                i = int(np.flatnonzero(neg)[0])
                problems.append(f"Column {c} has {int(neg.sum())} negative cost(s) (first at row {i}: "
                                f"{arr[i]:g}): costs must be >= 0.")
                continue
            with np.errstate(over="ignore"):
                total = float(np.sum(arr))
            if not math.isfinite(total):
                i = int(np.argmax(arr))
                problems.append(f"Column {c} sums past the largest float (its largest cost is {arr[i]:g}, at "
                                f"row {i}): totals would be infinite; use a larger unit or fix the value.")
                continue
            if np.all(arr == 0):
                warnings.append(f"Model {models[j]} costs 0 on every row in {c}: "
                                "check that its price was not left out.")
            costs[:, j] = arr

    text = frame["input_text"]
    empty = text.isna() | ~text.map(lambda v: isinstance(v, str)) | (text.astype(str).str.strip() == "")
    if empty.any():
        problems.append(f"Column input_text has {int(empty.sum())} empty or non-text value(s) "
                        f"(first at row {int(np.flatnonzero(empty.to_numpy())[0])}): every request needs its text.")
    bench = frame["benchmark"]
    bad_bench = bench.isna() | (bench.astype(str).str.strip() == "")
    if bad_bench.any():
        problems.append(f"Column benchmark has {int(bad_bench.sum())} empty value(s) "
                        f"(first at row {int(np.flatnonzero(bad_bench.to_numpy())[0])}).")
    if frame["doc_id"].isna().any():
        problems.append(f"Column doc_id has {int(frame['doc_id'].isna().sum())} missing value(s).")
    else:
        key = frame["benchmark"].astype(str) + "\x00" + frame["doc_id"].astype(str)
        dups = key.duplicated()
        if dups.any():
            i = int(np.flatnonzero(dups.to_numpy())[0])
            problems.append(f"{int(dups.sum())} duplicate (benchmark, doc_id) pair(s), first at row {i} "
                            f"({_plain(frame['benchmark'].iloc[i])!r}, {_plain(frame['doc_id'].iloc[i])!r}): "
                            "each request must appear once.")
    if not problems:
        with np.errstate(over="ignore"):
            grand = float(costs.max(axis=1).sum())
        if not math.isfinite(grand):
            problems.append(f"The costs in {', '.join(cost_cols)} sum past the largest float when added up "
                            "over requests: totals would be infinite; use a larger unit or fix the values.")
    if problems:
        raise DataValidationError(problems)

    order = np.argsort(costs.mean(axis=0), kind="stable")
    models_sorted = tuple(models[i] for i in order)
    canonical = frame.copy()
    canonical["benchmark"] = canonical["benchmark"].astype(str)
    canonical = canonical.reset_index(drop=True)
    return RoutingData(
        frame=canonical,
        models=models_sorted,
        cost_metric=cost,
        solved=_readonly(solved[:, order]),
        costs=_readonly(costs[:, order]),
        metadata=dict(metadata or {}),
        warnings=tuple(warnings),
    )


def _check_parquet_path(p: Path) -> None:
    """A plain error when ``p`` is missing, a folder or not named as parquet."""
    if not p.exists():
        raise DataValidationError([f"File not found: {p}."])
    if p.is_dir():
        raise DataValidationError([f"{p} is a folder: give a .parquet file (or import a MESS+ folder "
                                   "with 'slarouter import messplus')."])
    if p.suffix.lower() not in (".parquet", ".pq"):
        hint = (" It looks like MESS+ data: convert it with 'slarouter import messplus'."
                if p.suffix.lower() in (".csv", ".json", ".jsonl") else "")
        raise DataValidationError([f"{p.name} is not a parquet file (expected .parquet).{hint}"])


def _not_parquet(p: Path, exc: Exception) -> DataValidationError:
    return DataValidationError([f"{p.name} could not be read as parquet ({type(exc).__name__}: "
                                f"{str(exc)[:200]}). Is it a parquet file?"])


def parquet_cost_metrics(path: str | Path) -> list[str]:
    """The routing costs a parquet file offers, from its schema alone (no rows read), so a
    page can show them before loading; unreadable files raise as loading would."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    _check_parquet_path(p)
    try:
        schema = pq.read_schema(p)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _not_parquet(p, exc) from None
    names = schema.names
    if len(set(names)) < len(names):
        return []  # loading names the duplicates
    return cost_metrics_of(schema.empty_table().to_pandas())


def read_parquet_frame(path: str | Path) -> tuple[pd.DataFrame, dict]:
    """Read a parquet file and its ``slarouter`` metadata, with a plain error otherwise."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    _check_parquet_path(p)
    try:
        names = pq.read_schema(p).names
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise DataValidationError([f"Duplicate column names: {', '.join(dup)}. Each column must appear once."])
        table = pq.read_table(p)
    except (pa.ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, DataValidationError):
            raise
        raise _not_parquet(p, exc) from None
    meta = {}
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw:
        try:
            parsed = json.loads(raw.decode("utf-8"))
            meta = parsed if isinstance(parsed, dict) else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            meta = {}
    return table.to_pandas(), meta


def load_parquet(path: str | Path, cost: str = DEFAULT_COST,
                 benchmarks: Iterable[str] | None = None) -> RoutingData:
    """Load and validate a canonical parquet file."""
    frame, meta = read_parquet_frame(path)
    meta.setdefault("source", str(path))
    return from_frame(frame, cost=cost, metadata=meta).select(benchmarks)


def write_parquet(frame: pd.DataFrame, path: str | Path, metadata: dict | None = None) -> Path:
    """Write a canonical frame with our JSON metadata in the parquet schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
    existing = dict(table.schema.metadata or {})
    existing[METADATA_KEY] = json.dumps(metadata or {}, sort_keys=True).encode("utf-8")
    table = table.replace_schema_metadata(existing)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, p)
    return p


def midpoint_alpha(data: RoutingData, lower: int = -2, upper: int = -1) -> float:
    """Alpha halfway between two models' accuracy (default: the two most expensive)."""
    acc = data.solved.mean(axis=0)
    value = float((acc[lower] + acc[upper]) / 2)
    return math.floor(value * 1000 + 0.5) / 1000


def paper_alpha(data: RoutingData, model: int = -2, below: float = 0.01) -> float:
    """The paper's rule: alpha ``below`` (1 point) under one model's accuracy (default:
    the second most expensive, the "medium" model of a small/medium/large zoo)."""
    acc = data.solved.mean(axis=0)
    value = float(acc[model] - below)
    return math.floor(value * 1000 + 0.5) / 1000
