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
import streamlit as st

from slarouter_core.data import DataValidationError, RoutingData
from slarouter_core.encoders import EmbeddingCache, EncoderUnavailableError, get_encoder
from slarouter_core.experiments import load_any
from slarouter_core.live import DataSpec, LazyEncoder, RunSettings, settings_from_query, settings_to_query

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


def current_data() -> RoutingData:
    """The session's dataset; if it cannot be loaded any more, back to the demo with a note."""
    spec = data_spec()
    try:
        return load_data(spec)
    except (DataValidationError, ValueError, OSError) as exc:
        st.session_state.setdefault("url_problems", []).append(
            f"Could not load {spec.path or spec.source}: {exc}. Showing the built-in demo instead.")
        set_data_spec(replace(DataSpec(), encoder=spec.encoder))
        return load_data(data_spec())


def save_upload(name: str, payload: bytes) -> Path:
    """Write an uploaded file under a content-addressed name (kept, never unpickled)."""
    suffix = Path(name).suffix.lower()
    UPLOAD_DIR.mkdir(parents=True, exist_ok=True)
    path = UPLOAD_DIR / f"{hashlib.sha1(payload).hexdigest()[:16]}{suffix}"
    if not path.exists():
        tmp = path.with_name(path.name + f".{os.getpid()}.part")
        tmp.write_bytes(payload)
        tmp.replace(path)
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


def show_problems(exc: Exception, names: dict[str, str] | None = None) -> None:
    """A validation error as plain sentences, one per line; ``names`` maps server paths
    (an upload's stored copy) to the names the user knows (the uploaded file's name)."""
    problems = [str(p) for p in (getattr(exc, "problems", None) or [str(exc)])]
    for path, name in (names or {}).items():
        problems = [p.replace(path, name).replace(Path(path).name, name) for p in problems]
    st.error("The data could not be used:\n\n" + "\n".join(f"- {p}" for p in problems))


def fmt(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{digits}g}"
