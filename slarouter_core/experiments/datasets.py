"""Datasets for the grid: routing data (canonical parquet or MESS+ logs) with one
embedding row per request, so every run of a grid reads the same vectors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..data import RoutingData, load_parquet
from ..importers import load_messplus

#: ``progress(done, total)``, called after each finished unit of work
ProgressFn = Callable[[int, int], None]


def load_any(path: str | Path, cost: str = "energy_joules") -> RoutingData:
    """A canonical parquet file, or MESS+ logs (a .csv/.json/.jsonl file or a folder)."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"data not found: {p}")
    if p.is_dir() or p.suffix.lower() in (".csv", ".json", ".jsonl"):
        return load_messplus(p, cost=cost)
    return load_parquet(p, cost=cost)



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
    from ..embedding_cache import EmbeddingCache
    from ..encoders import LazyEncoder

    data = load_any(path, cost=cost)
    emb = EmbeddingCache(cache_dir).embed(data.texts, LazyEncoder(encoder), progress=progress)
    return Dataset(name or Path(path).name, data, emb)
