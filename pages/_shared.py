"""Streamlit glue shared by the pages: session settings, cached loaders, error display.

Per-session state (settings, runs, routers, traces) lives in ``st.session_state`` only.
``st.cache_resource`` holds read-only things shared by all sessions: the frozen text
encoder, validated datasets (frozen, read-only arrays) and embeddings (read-only arrays).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from slarouter_core.data import DataValidationError, RoutingData, choose_cost, unit_of
from slarouter_core.embedding_cache import EmbeddingCache
from slarouter_core.encoders import EncoderUnavailableError, LazyEncoder, get_encoder
from slarouter_core.experiments import load_any
from slarouter_core.importers import file_cost_metrics
from slarouter_core.live import (DataSpec, RunSettings, settings_for_data, settings_from_query,
                                 settings_to_query)
from slarouter_core.live.tables import grid_columns, zoo_chart

REPO = Path(__file__).resolve().parents[1]
DEMO_PATH = REPO / "data" / "demo.parquet"
UPLOAD_DIR = Path(tempfile.gettempdir()) / "slarouter-uploads"


# -- session settings -------------------------------------------------------------------
def init_session() -> None:
    """First run of a browser session: settings come from the URL (or defaults)."""
    ss = st.session_state
    if "data_spec" not in ss:
        data, run, problems = settings_from_query(st.query_params.to_dict())
        ss.data_spec = data
        ss.run_settings = run
        ss.url_problems = problems


def sync_url() -> None:
    """Put the current settings in the URL so that it can be shared."""
    want = settings_to_query(st.session_state.data_spec, st.session_state.run_settings)
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)


def data_spec() -> DataSpec:
    return st.session_state.data_spec


def run_settings() -> RunSettings:
    return st.session_state.run_settings


def set_run_settings(new: RunSettings) -> None:
    st.session_state.run_settings = new


def set_data_spec(new: DataSpec) -> None:
    st.session_state.data_spec = new


# -- loading ------------------------------------------------------------------------------
def source_path(spec: DataSpec) -> Path:
    if spec.source == "demo":
        if not DEMO_PATH.exists():  # a checkout without the shipped file: regenerate it
            from slarouter_core.synthetic import generate_demo

            return generate_demo(Path(tempfile.gettempdir()) / "slarouter-demo.parquet")
        return DEMO_PATH
    return Path(spec.path).expanduser()


def _stamp(path: Path) -> float:
    try:
        return path.stat().st_mtime if path.is_file() else max(
            (f.stat().st_mtime for f in path.rglob("*") if f.is_file()), default=0.0)
    except OSError:
        return 0.0


@st.cache_resource(max_entries=8, show_spinner="Loading data...")
def _load(path: str, stamp: float, cost: str, benchmarks: tuple[str, ...]) -> RoutingData:
    data = load_any(path, cost=cost)
    return data.select(list(benchmarks) if benchmarks else None)


def load_data(spec: DataSpec) -> RoutingData:
    """Validated data for a spec (raises DataValidationError with plain sentences)."""
    p = source_path(spec)
    return _load(str(p), _stamp(p), spec.cost, spec.benchmarks)


@st.cache_data(max_entries=16, show_spinner=False)
def _zoo_chart(path: str, stamp: float, cost: str, benchmarks: tuple[str, ...], per_benchmark: bool,
               legend: bool, labels: bool, height: int) -> tuple[pd.DataFrame, dict]:
    return zoo_chart(_load(path, stamp, cost, benchmarks), per_benchmark=per_benchmark, legend=legend,
                     labels=labels, height=height)


def zoo_picture(spec: DataSpec, per_benchmark: bool = True, legend: bool = True, labels: bool = True,
                height: int = 200) -> tuple[pd.DataFrame, dict]:
    """:func:`zoo_chart` of the spec's data, kept per dataset: a 20-model zoo's frontiers
    take a few LPs per benchmark, which every rerun of a page would otherwise solve again."""
    p = source_path(spec)
    return _zoo_chart(str(p), _stamp(p), spec.cost, spec.benchmarks, per_benchmark, legend, labels, height)


def current_data() -> RoutingData:
    """The session's dataset. A link whose cost the file lacks loads with a cost the file
    has (:func:`choose_cost`); a dataset that cannot be loaded any more falls back to the
    demo; either way with a note that names the file as the user knows it. Stated
    accuracies that do not fit its zoo (a link's wrong count, or a zoo of other models
    than they were given for) are left out, with a note."""
    data = _load_current()
    ss = st.session_state
    run, note = settings_for_data(run_settings(), data, ss.get("stated_for"))
    if note:
        set_run_settings(run)
        ss.setdefault("url_problems", []).append(note[0].upper() + note[1:])
    ss.stated_for = tuple(data.models) if run.stated_levels else None
    return data


def _load_current() -> RoutingData:
    spec = data_spec()
    try:
        return load_data(spec)
    except (DataValidationError, ValueError, OSError) as exc:
        notes = st.session_state.setdefault("url_problems", [])
        if spec.source != "demo":
            try:
                cost = choose_cost(file_cost_metrics(source_path(spec)), spec.cost)
                if cost != spec.cost:
                    data = load_data(replace(spec, cost=cost))
                    set_data_spec(replace(spec, cost=cost))
                    notes.append(f"{display_name(spec)} has no cost '{spec.cost}': using '{cost}' "
                                 f"({unit_of(cost)}) instead.")
                    return data
            except (DataValidationError, ValueError, OSError):
                pass
        notes.append(f"Could not load {display_name(spec)}: {'; '.join(problem_lines(exc))} "
                     "Showing the built-in demo instead.")
        set_data_spec(replace(DataSpec(), encoder=spec.encoder))
        return load_data(data_spec())


def display_name(spec: DataSpec) -> str:
    """The dataset's name as the user knows it: an upload's own file name, never the name
    of the server's stored copy; a path as typed; the demo as such."""
    if spec.source == "demo":
        return "built-in demo"
    return st.session_state.get("upload_names", {}).get(spec.path, spec.path)


def problem_lines(exc: Exception) -> list[str]:
    """An error's problems as plain sentences, each upload's stored copy (its path or file
    name) replaced by the name of the file the user uploaded."""
    problems = [str(p) for p in (getattr(exc, "problems", None) or [str(exc)])]
    for path, name in st.session_state.get("upload_names", {}).items():
        problems = [p.replace(path, name).replace(str(Path(path).parent) + "/", "") for p in problems]
    return problems


def _upload_file_name(name: str) -> str:
    """The uploaded file's own name, safe as one path component."""
    base = Path(str(name).replace("\\", "/").replace("\x00", "")).name.strip()
    return base if base not in ("", ".", "..") else "upload" + Path(str(name)).suffix.lower()


def save_upload(name: str, payload: bytes) -> Path:
    """Write an uploaded file, kept under its own name in a folder named by its content
    (never unpickled): messages that name the file then name the user's file."""
    folder = UPLOAD_DIR / hashlib.sha1(payload).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / _upload_file_name(name)
    if not path.exists():
        tmp = folder / f".{path.name}.{os.getpid()}.part"
        tmp.write_bytes(payload)
        tmp.replace(path)
    st.session_state.setdefault("upload_names", {})[str(path)] = Path(path).name
    return path


@st.cache_resource(max_entries=4, show_spinner="Loading the text encoder...")
def encoder(spec: str):
    return get_encoder(spec)


class _EmbeddingStore:
    """Read-only embedding arrays shared by all sessions, most recent 8 kept in memory.

    Not an ``st.cache_*`` function because computing shows a progress bar in the caller's
    page (cached functions cannot draw into outside elements); the disk cache underneath
    makes a recomputation after eviction or restart cheap.
    """

    def __init__(self, size: int = 8):
        self.size = size
        self.items: dict[tuple, np.ndarray] = {}
        self.lock = threading.Lock()

    def get(self, key: tuple) -> np.ndarray | None:
        with self.lock:
            return self.items.get(key)

    def put(self, key: tuple, value: np.ndarray) -> None:
        value.setflags(write=False)
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.pop(next(iter(self.items)))


@st.cache_resource
def _embedding_store() -> _EmbeddingStore:
    return _EmbeddingStore()


def embeddings(data: RoutingData, spec: DataSpec | None = None) -> np.ndarray | None:
    """Embeddings of the session's data with its encoder, with a progress bar; None on error."""
    spec = spec or data_spec()
    p = source_path(spec)
    key = (str(p), _stamp(p), spec.cost, spec.benchmarks, spec.encoder)
    store = _embedding_store()
    emb = store.get(key)
    if emb is not None:
        return emb
    bar = st.empty()

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"Embedding requests with {spec.encoder}: {done:,}/{total:,}")

    progress(0, data.n_requests)
    try:
        lazy = LazyEncoder(spec.encoder, lambda: encoder(spec.encoder))  # no model load when all cached
        emb = EmbeddingCache().embed(data.texts, lazy, progress=progress)
    except EncoderUnavailableError as exc:
        bar.empty()
        st.error(f"{exc} Pick another encoder on the Data page.")
        return None
    bar.empty()
    store.put(key, emb)
    return emb


def fmt(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{digits}g}"


def fitted_grid(table: pd.DataFrame, short: dict[str, str] | None = None, number_format: str = "%.4g",
                **overrides) -> dict:
    """``column_config`` that shows every column and cell whole (:func:`grid_columns`);
    ``overrides``: column configs of columns that need a type of their own (e.g. checkbox)."""
    config: dict = {}
    for col, c in grid_columns(table, short, number_format).items():
        kind = st.column_config.NumberColumn if c["format"] else st.column_config.Column
        extra = {"format": c["format"]} if c["format"] else {}
        config[col] = kind(c["label"], width=c["width"], help=c["help"], **extra)
    for col, cfg in overrides.items():
        config[col] = {**config.get(col, {}), **{k: v for k, v in cfg.items() if v is not None}}
    return config
