"""The synthetic data generator (slarouter_core/synthetic.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from slarouter_core.data import from_frame, load_parquet
from slarouter_core.synthetic import (DEMO_MODELS, DIFFICULTY_PHRASES, SPECIALIST_MODELS, demo_difficulty,
                                      generate_demo_frame, random_zoo_models)

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo.parquet"


def test_the_shipped_demo_is_what_the_generator_writes():
    shipped = load_parquet(DEMO)
    fresh = from_frame(generate_demo_frame(shipped.n_requests, 0))
    assert list(fresh.texts) == list(shipped.texts)
    assert np.array_equal(fresh.solved, shipped.solved) and np.allclose(fresh.costs, shipped.costs)


def test_specialists_beat_the_priciest_model_on_every_topic():
    data = from_frame(generate_demo_frame(2000, 1, SPECIALIST_MODELS))
    costs = data.costs.mean(0)
    dearest = int(np.argmax(costs))
    assert data.models[dearest] == SPECIALIST_MODELS[-1][0]
    for topic in data.benchmark_names:
        acc = data.solved[data.benchmarks == topic].mean(0)
        assert int(np.argmax(acc)) != dearest, topic
        assert acc.max() - acc[dearest] > 0.05, topic


def test_difficulty_is_read_from_the_lead_phrase():
    frame = generate_demo_frame(400, 3)
    d = demo_difficulty(frame["input_text"])
    assert set(np.unique(d)) <= {1, 2, 3, 4}
    # harder requests are solved less often by every model
    for m, *_ in DEMO_MODELS:
        rates = [frame[f"{m}_solved"][d == k].mean() for k in (1, 2, 3, 4)]
        assert rates[0] > rates[3], m
    assert demo_difficulty([DIFFICULTY_PHRASES[3][0] + " x", "no lead phrase"]).tolist() == [3, 0]


def test_a_per_topic_skill_must_name_every_topic():
    models = (("partial", {"coding": 3.0}, 10.0, 100.0),)
    with pytest.raises(ValueError, match="no skill for topic"):
        generate_demo_frame(50, 0, models)


def test_random_zoos_are_seeded_and_use_their_cost_range():
    a, b, c = random_zoo_models(11, 5), random_zoo_models(11, 5), random_zoo_models(11, 6)
    assert a == b and a != c and len(a) == 11
    costs = np.array([m[2] for m in a])
    assert np.all((costs >= 0.1) & (costs <= 20.0))
    data = from_frame(generate_demo_frame(300, 0, a))
    assert data.n_models == 11
