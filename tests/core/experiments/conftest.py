"""A small two-benchmark dataset and one grid over it, shared by the experiments tests
(package scope: the grid runs once for all of them)."""

from __future__ import annotations

import numpy as np
import pytest

from slarouter_core import experiments as E
from slarouter_core.data import from_frame
from tests.conftest import make_frame

FAST = (E.PRESETS["single"], E.PRESETS["static_mixture"], E.PRESETS["oracle"], E.PRESETS["carrot"],
        E.PRESETS["causal"], E.PRESETS["messplus"], E.PRESETS["slarouter"], E.PRESETS["slarouter_ddv"])


def make_dataset(n: int = 240, seed: int = 0, name: str = "toy") -> E.Dataset:
    frame = make_frame(n=n, seed=seed)
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, 6)).astype(np.float32)
    return E.Dataset(name, from_frame(frame), emb)


@pytest.fixture(scope="package")
def toy():
    return make_dataset()


@pytest.fixture(scope="package")
def rows(toy):
    return E.run_grid(toy, E.GridConfig(methods=FAST, seeds=(42, 1)))
