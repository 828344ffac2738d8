"""An encoder that opens cached datasets without loading its weights."""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

class LazyEncoder:
    """An encoder's spec, width and cache id without loading its weights.

    The embedding cache only needs ``cache_id`` and ``dim`` to serve cached texts, so a
    dataset whose embeddings are all cached opens without importing torch or loading the
    model; ``encode`` loads it (through ``loader``) the first time it is really needed.
    Works for ``minilm`` and ``hf:<local folder>``; other specs are loaded at once.
    """

    def __init__(self, spec: str, loader: Callable[[], Any]):
        from pathlib import Path

        from ..encoders import TransformerEncoder, minilm_path

        self.spec = spec
        self._loader = loader
        self._encoder = None
        source = None
        if spec == "minilm":
            source = minilm_path()
        elif spec.startswith("hf:") and Path(spec[3:].strip()).is_dir():
            source = Path(spec[3:].strip())
        config = source / "config.json" if source is not None else None
        if config is not None and config.is_file():
            self.dim = int(json.loads(config.read_text())["hidden_size"])
            facade = TransformerEncoder.__new__(TransformerEncoder)  # cache_id reads spec and source only
            facade.spec, facade.source = spec, str(source)
            self._cache_id = facade.cache_id()
        else:
            self._encoder = loader()
            self.dim = int(self._encoder.dim)
            self._cache_id = self._encoder.cache_id()

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def cache_id(self) -> str:
        return self._cache_id

    def encode(self, texts, progress=None) -> np.ndarray:
        if self._encoder is None:
            self._encoder = self._loader()
        return self._encoder.encode(texts, progress=progress)


