"""Paper mode on the shared data makes the decisions recorded before issue 20's refactor
(tests/core/fixtures/paper_decisions.npz, written by the code of commit ba213e6 with
``PYTHONPATH=. .venv/bin/python tests/core/test_router_paper_regression.py --record``).

The models chosen must be equal step for step. The queue is compared with a tolerance:
issue 20 changed how predictions are computed (one fixed order of float32 sums instead
of BLAS products, so that a row gets the same bits alone or in a batch, on any CPU), which
moves each prediction by float32 rounding (< 1e-7 of a probability, measured up to
1.5e-7); the queue adds at most one prediction per step, so after t steps it may differ
by t * 2e-7 (a decision would flip only on a near-tie of two scores; none does here).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from slarouter_core.data import midpoint_alpha
from slarouter_core.router import RouterConfig
from slarouter_core.simulator import Simulation, SimulationConfig

FIXTURE = Path(__file__).parent / "fixtures" / "paper_decisions.npz"
BENCHMARKS = ("sciq", "logiqa")
SEEDS = (42, 1)
SETTINGS = {"default": {}, "V=1e-5": {"V": 1e-5}}
#: tolerance on the queue per step served (see the module docstring)
Q_ATOL_PER_STEP = 2e-7


def cases():
    for b in BENCHMARKS:
        for seed in SEEDS:
            for label in SETTINGS:
                yield b, seed, label


def _key(b: str, seed: int, label: str) -> str:
    return f"{b}/{seed}/{label}"


def _simulations(data_dir: Path):
    """(key, simulation, embeddings) for every case, on hashing embeddings (no weights)."""
    from slarouter_core.embedding_cache import embed_texts
    from slarouter_core.importers import load_messplus

    data = load_messplus(data_dir)
    for b in BENCHMARKS:
        sub = data.select([b])
        X = embed_texts(sub.texts, "hashing")
        for seed in SEEDS:
            for label, settings in SETTINGS.items():
                cfg = RouterConfig(alpha=midpoint_alpha(sub), **settings)
                yield _key(b, seed, label), Simulation(sub, X, SimulationConfig(cfg, seed=seed))


def assert_queue_close(q: np.ndarray, expected: np.ndarray, key: str) -> None:
    gap = np.abs(q - expected)
    bound = Q_ATOL_PER_STEP * np.arange(1, len(q) + 1)
    assert len(q) == len(expected) and np.all(gap <= bound), \
        f"{key}: queue off by {gap.max():.3g} (bound {bound[np.argmax(gap - bound)]:.3g} at step {np.argmax(gap - bound) + 1})"


@pytest.fixture(scope="module")
def recorded():
    with np.load(FIXTURE) as z:
        return {k: z[k] for k in z.files}


def test_paper_mode_decisions_match_the_recorded_fixture(shared_data, recorded):
    keys = []
    for key, sim in _simulations(shared_data):
        keys.append(key)
        a = sim.run().arrays()
        np.testing.assert_array_equal(a["model"], recorded[f"{key}/model"], err_msg=key)
        assert_queue_close(a["q"], recorded[f"{key}/q"], key)
    assert sorted(f"{k}/{f}" for k in keys for f in ("model", "q")) == sorted(recorded)


def test_paper_mode_per_request_api_matches_the_fixture(shared_data, recorded):
    """The online API (decide/observe, one request at a time) on one recorded stream."""
    from slarouter_core.router import NO_FEEDBACK, SLARouter

    key, sim = next(iter(_simulations(shared_data)))
    r = SLARouter(sim.config.router, sim.data.n_models, sim.embeddings.shape[1], seed=sim.router.seed)
    X, C, F = sim.embeddings[sim.order], sim.data.costs[sim.order], sim.feedback_plan
    models, qs = np.empty(len(X), np.int64), np.empty(len(X))
    for i in range(len(X)):
        d = r.decide(X[i], C[i])
        f = int(F[i, d.model])
        r.observe(d, None if f == NO_FEEDBACK else f)
        models[i], qs[i] = d.model, r.q
    np.testing.assert_array_equal(models, recorded[f"{key}/model"])
    assert_queue_close(qs, recorded[f"{key}/q"], key)


def record(data_dir: Path) -> None:
    """Write the fixture from the current code (run only to re-record, and say why)."""
    out = {}
    for key, sim in _simulations(data_dir):
        a = sim.run().arrays()
        out[f"{key}/model"] = a["model"].astype(np.int8)
        out[f"{key}/q"] = a["q"]
    np.savez_compressed(FIXTURE, **out)
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size:,} bytes, {len(out) // 2} runs)")


if __name__ == "__main__":
    if "--record" not in sys.argv:
        sys.exit("usage: python tests/core/test_router_paper_regression.py --record [DATA_DIR]")
    args = [a for a in sys.argv[1:] if a != "--record"]
    from tests.conftest import SHARED_DATA

    record(Path(args[0]) if args else SHARED_DATA)
