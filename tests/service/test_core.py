"""The service core without HTTP: configuration, batched embedding, cost estimates."""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time

import numpy as np
import pytest

from slarouter_core.encoders import HashingEncoder
from slarouter_core.router import MODES
from slarouter_core.service.core import RoutingService, ServiceConfig, wilson_lower
from slarouter_core.service.zoo import Zoo, ZooModel


def zoo() -> Zoo:
    return Zoo((ZooModel("a", "http://127.0.0.1:1/v1", "a", price_per_1k_input=1.0, price_per_1k_output=2.0,
                         expected_output_tokens=100),
                ZooModel("b", "http://127.0.0.1:1/v1", "b", price_per_request=1.0)))


class SlowEncoder(HashingEncoder):
    """Records the batch sizes it is asked for; slow enough that requests queue up."""

    def __init__(self):
        super().__init__(32)
        self.batches: list[int] = []

    def encode(self, texts, progress=None):
        self.batches.append(len(texts))
        time.sleep(0.02)
        return super().encode(texts)


class BrokenEncoder(HashingEncoder):
    def encode(self, texts, progress=None):
        raise RuntimeError("encoder exploded")


@pytest.mark.parametrize("kw, match", [
    ({"alpha": 1.2}, "alpha"), ({"alpha": 0.8, "mode": "nope"}, "mode must be one of paper, guarded, contextual"),
    ({"alpha": 0.8, "checkpoint_every_s": 0}, "checkpoint_every_s"),
    ({"alpha": 0.8, "instance": "a b"}, "instance"), ({"alpha": 0.8, "seed": -1}, "seed"),
])
def test_config_is_validated(kw, match):
    with pytest.raises(ValueError, match=match):
        ServiceConfig(**kw)


def test_every_router_mode_is_offered():
    for mode in MODES:
        assert ServiceConfig(alpha=0.8, mode=mode).router_config().mode == mode


def test_concurrent_requests_share_embedding_batches_and_get_their_own_vectors():
    enc = SlowEncoder()
    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8), encoder=enc)
    texts = [f"text number {i} " + "w " * i for i in range(24)]
    with cf.ThreadPoolExecutor(12) as pool:
        got = list(pool.map(svc.embed, texts))
    ref = HashingEncoder(32).encode(texts)
    assert np.allclose(np.array(got), ref)
    assert sum(enc.batches) == 24 and max(enc.batches) > 1


def test_an_encoder_error_reaches_the_request():
    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8), encoder=BrokenEncoder(16))
    with pytest.raises(RuntimeError, match="exploded"):
        svc.route("hello")
    assert svc.router.t == 0


def test_cost_estimate_learns_each_models_completion_length():
    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8), encoder=HashingEncoder(16))
    c = svc.estimate_costs(prompt_chars=4000)  # 1000 prompt tokens
    assert c == pytest.approx([1.0 + 2.0 * 100 / 1000, 1.0])
    assert svc.estimate_costs(4000, max_tokens=10)[0] == pytest.approx(1.0 + 2.0 * 10 / 1000)
    ticket = svc.route("hello")
    svc.complete(ticket, 0, {"prompt_tokens": 10, "completion_tokens": 300})
    assert svc.estimate_costs(4000)[0] == pytest.approx(1.0 + 2.0 * (100 + 300) / 2 / 1000)
    assert svc.stats[0].cost == pytest.approx(10 / 1000 + 2.0 * 300 / 1000)


def test_wilson_bound():
    assert np.isnan(wilson_lower(0, 0))
    assert 0 < wilson_lower(80, 100) < 0.8
    assert wilson_lower(800, 1000) > wilson_lower(80, 100)


def test_route_is_safe_from_many_threads():
    svc = RoutingService(zoo(), ServiceConfig(alpha=0.8, mode="guarded"), encoder=HashingEncoder(16))
    barrier = threading.Barrier(8)

    def go(i):
        barrier.wait()
        return [svc.route(f"q {i} {k}").t for k in range(25)]

    with cf.ThreadPoolExecutor(8) as pool:
        ts = sorted(t for part in pool.map(go, range(8)) for t in part)
    assert ts == list(range(1, 201)) and svc.router.t == 200
