"""Importers from other routing-log formats into the canonical schema."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .data import DataValidationError, RoutingData, from_frame, parquet_cost_metrics

MESSPLUS_SUFFIXES = (".csv", ".json", ".jsonl")
#: the per-model metrics every MESS+ import has (energy_consumption_X, inference_time_X)
MESSPLUS_METRICS = ("energy_joules", "latency_ms")
_LABEL_RE = re.compile(r"^label_(.+)$")
_MEASURE_RE = re.compile(r"^(energy_consumption|inference_time)_(.+)$")


def is_messplus_path(path: str | Path) -> bool:
    """A folder or a .csv/.json/.jsonl file is read as MESS+ logs; anything else as parquet."""
    p = Path(path)
    return p.is_dir() or p.suffix.lower() in MESSPLUS_SUFFIXES


def file_cost_metrics(path: str | Path) -> list[str]:
    """The routing costs a file or folder offers, found before loading it (a parquet
    file's schema; MESS+ logs always give :data:`MESSPLUS_METRICS`), so that a page can
    show them and load with one the file has. A missing or unreadable path raises
    :class:`DataValidationError` as loading would."""
    if is_messplus_path(path):
        find_messplus_files(path)
        return list(MESSPLUS_METRICS)
    return parquet_cost_metrics(path)


def _read_messplus_file(path: Path) -> pd.DataFrame:
    try:
        if path.suffix.lower() == ".csv":
            return pd.read_csv(path)
        if path.suffix.lower() == ".jsonl":
            return pd.read_json(path, lines=True)
        with path.open("r", encoding="utf-8") as fh:
            payload = json.load(fh)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataValidationError([f"{path.name} could not be read as MESS+ "
                                   f"{path.suffix.lstrip('.').upper()} ({str(exc)[:200]})."]) from None
    if isinstance(payload, dict):
        # {"records": [...]} or {"data": [...]} or a column-oriented dict
        for key in ("records", "data", "rows"):
            if isinstance(payload.get(key), list):
                payload = payload[key]
                break
        else:
            try:
                return pd.DataFrame(payload)
            except ValueError as exc:
                raise DataValidationError([f"{path.name}: JSON object is not a table ({exc})."]) from None
    if not isinstance(payload, list) or not all(isinstance(r, dict) for r in payload):
        raise DataValidationError([f"{path.name}: expected a JSON list of records (objects)."])
    return pd.DataFrame.from_records(payload)


def find_messplus_files(path: str | Path) -> list[Path]:
    p = Path(path)
    if not p.exists():
        raise DataValidationError([f"Path not found: {p}."])
    if p.is_file():
        if p.suffix.lower() not in MESSPLUS_SUFFIXES:
            raise DataValidationError([f"{p.name}: MESS+ files are .csv, .json or .jsonl."])
        return [p]
    # hidden files and folders (".name", e.g. editor or tool state) are never data
    files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in MESSPLUS_SUFFIXES
                   and not any(part.startswith(".") for part in f.relative_to(p).parts))
    if not files:
        raise DataValidationError([f"No .csv/.json/.jsonl files under {p}."])
    return files


def messplus_to_frame(raw: pd.DataFrame, source: str = "input") -> tuple[pd.DataFrame, dict]:
    """Convert one MESS+ table (any set of model labels) to the canonical columns."""
    problems = []
    for col in ("doc_id", "input_text", "benchmark_name"):
        if col not in raw.columns:
            problems.append(f"{source}: missing MESS+ column {col!r}.")
    labels = [m.group(1) for c in raw.columns if isinstance(c, str) and (m := _LABEL_RE.match(c))]
    if not labels:
        problems.append(f"{source}: no 'label_<model>' columns, so no models were found.")
    for lab in labels:
        for prefix in ("energy_consumption_", "inference_time_"):
            if f"{prefix}{lab}" not in raw.columns:
                problems.append(f"{source}: model {lab!r} has label_{lab} but no {prefix}{lab}.")
    # the other way round: measurements of a model without its outcomes would drop it silently
    unlabelled: dict[str, list[str]] = {}
    for c in raw.columns:
        if isinstance(c, str) and (m := _MEASURE_RE.match(c)) and m.group(2) not in labels:
            unlabelled.setdefault(m.group(2), []).append(c)
    for lab, cols in unlabelled.items():
        problems.append(f"{source}: model {lab!r} has {', '.join(cols)} but no label_{lab} column (its 0/1 "
                        f"outcomes), so it cannot be routed: add label_{lab}, or remove its columns.")
    if problems:
        raise DataValidationError(problems)
    bench = raw["benchmark_name"]
    blank = bench.isna().to_numpy() | np.array([isinstance(v, str) and not v.strip() for v in bench], bool)
    if blank.any():
        problems.append(f"{source}: column benchmark_name has {int(blank.sum())} empty or null value(s) "
                        f"(first at row {int(np.flatnonzero(blank)[0])}): every request needs its benchmark.")
    for col in [f"label_{lab}" for lab in labels] + [f"{p}{lab}" for lab in labels
                                                      for p in ("energy_consumption_", "inference_time_")]:
        problems.extend(_non_numeric(raw[col], col, source))
    if problems:
        raise DataValidationError(problems)
    out = pd.DataFrame({
        "doc_id": raw["doc_id"],
        "benchmark": raw["benchmark_name"].astype(str),
        "input_text": raw["input_text"],
    })
    if "correct_answer" in raw.columns:
        out["correct_answer"] = raw["correct_answer"].astype("string")
    for lab in labels:
        out[f"{lab}_solved"] = pd.to_numeric(raw[f"label_{lab}"], errors="coerce")
        out[f"{lab}_energy_joules"] = pd.to_numeric(raw[f"energy_consumption_{lab}"], errors="coerce")
        out[f"{lab}_latency_ms"] = pd.to_numeric(raw[f"inference_time_{lab}"], errors="coerce") * 1000.0
    return out, {"labels": labels}


def _non_numeric(col: pd.Series, name: str, source: str) -> list[str]:
    """A problem when a column holds values that are present but not numbers (e.g. "yes")."""
    if pd.api.types.is_bool_dtype(col) or pd.api.types.is_numeric_dtype(col):
        return []
    num = pd.to_numeric(col, errors="coerce")
    bad = (num.isna() & col.notna()).to_numpy()
    if not bad.any():
        return []
    i = int(np.flatnonzero(bad)[0])
    what = "0 or 1" if name.startswith("label_") else "a number"
    return [f"{source}: column {name} has {int(bad.sum())} non-numeric value(s) (first at row {i}: "
            f"{col.iloc[i]!r}): use {what}."]


def import_messplus(path: str | Path) -> tuple[pd.DataFrame, dict]:
    """Read MESS+ logs (a file or a folder tree), deduplicate on (benchmark, doc_id).

    Returns the canonical frame and a report (files read, rows, duplicates dropped,
    conflicting duplicates). Every file must carry the same model labels.
    """
    files = find_messplus_files(path)
    frames = []
    label_sets = {}
    for f in files:
        frame, info = messplus_to_frame(_read_messplus_file(f), source=f.name)
        label_sets[f.name] = tuple(sorted(info["labels"]))
        frames.append(frame)
    distinct = sorted(set(label_sets.values()))
    if len(distinct) > 1:
        raise DataValidationError([f"Files disagree on the model labels: {distinct}. "
                                   "Import each zoo separately."])
    combined = pd.concat(frames, ignore_index=True)
    n_raw = len(combined)
    key = ["benchmark", "doc_id"]
    combined["doc_id"] = _normalise_ids(combined["doc_id"])
    dup_mask = combined.duplicated(subset=key, keep="first")
    value_cols = [c for c in combined.columns if c not in key]
    conflicting = int(combined.duplicated(subset=key, keep=False).sum()
                      - combined.duplicated(subset=key + value_cols, keep=False).sum()) if dup_mask.any() else 0
    # dropped rows that differ from the kept row of their (benchmark, doc_id)
    conflicting_dropped = int((dup_mask & ~combined.duplicated(subset=key + value_cols, keep="first")).sum())
    deduped = combined.loc[~dup_mask].sort_values(key, kind="stable").reset_index(drop=True)
    report = {
        "files": len(files),
        "rows_read": n_raw,
        "duplicates_dropped": int(dup_mask.sum()),
        "conflicting_duplicate_rows": conflicting,
        "conflicting_duplicates_dropped": conflicting_dropped,
        "rows": len(deduped),
        "models": list(distinct[0]) if distinct else [],
        "benchmarks": sorted(deduped["benchmark"].unique().tolist()),
    }
    return deduped, report


def _normalise_ids(ids: pd.Series) -> pd.Series:
    """Integer-valued ids become ints (CSV and JSON disagree on 1 vs 1.0); others strings."""
    num = pd.to_numeric(ids, errors="coerce")
    if num.notna().all() and np.all(np.mod(num.to_numpy(dtype=float), 1) == 0):
        return num.astype(np.int64)
    return ids.astype(str)


def load_messplus(path: str | Path, cost: str = "energy_joules") -> RoutingData:
    """Import MESS+ logs straight into validated :class:`RoutingData`."""
    frame, report = import_messplus(path)
    data = from_frame(frame, cost=cost, metadata={"source": str(path), "format": "messplus",
                                                  "import_report": report})
    return dataclasses.replace(data, warnings=data.warnings + tuple(import_warnings(report)))


def import_warnings(report: dict) -> list[str]:
    """Plain sentences on what the import dropped (duplicates, conflicting ones apart)."""
    out = []
    if report.get("duplicates_dropped"):
        conflicting = report.get("conflicting_duplicates_dropped", 0)
        out.append(f"dropped {report['duplicates_dropped']} duplicate (benchmark, doc_id) row(s), keeping the "
                   f"first of each; {conflicting} of them conflicted with the row kept (different outcomes, "
                   "costs or text)" if conflicting else
                   f"dropped {report['duplicates_dropped']} exact duplicate (benchmark, doc_id) row(s)")
    return out
