from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data" / "messplus_llama3"


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """No test writes to the user's ~/.cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SLAROUTER_CACHE_DIR", str(tmp_path_factory.mktemp("slarouter-cache")))
    yield
    mp.undo()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def make_frame(n: int = 60, models=("small", "medium", "large"), seed: int = 0) -> pd.DataFrame:
    """A small canonical table with per-model outcomes and energy costs."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "doc_id": np.arange(n),
        "benchmark": np.where(np.arange(n) % 2 == 0, "alpha_bench", "beta_bench"),
        "input_text": [f"question number {i} about topic {i % 7}" for i in range(n)],
    })
    for k, m in enumerate(models):
        frame[f"{m}_solved"] = (rng.random(n) < 0.4 + 0.2 * k).astype(int)
        frame[f"{m}_energy_joules"] = (10.0 ** (k + 1)) * rng.uniform(0.8, 1.2, n)
        frame[f"{m}_latency_ms"] = 100.0 * (k + 1) * rng.uniform(0.8, 1.2, n)
    return frame
