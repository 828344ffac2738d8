"""Fake OpenAI-compatible model servers on 127.0.0.1 and the routing service in front of them."""

from __future__ import annotations

import httpx
import pytest

from slarouter_core.encoders import HashingEncoder
from slarouter_core.service.auth import ApiKeys
from slarouter_core.service.core import RoutingService, ServiceConfig
from slarouter_core.service.fake_backend import FakeSpec, create_fake_app
from slarouter_core.service.server import BackgroundServer, create_app
from slarouter_core.service.zoo import Zoo, ZooModel

#: name -> (latency ms, completion tokens, price per 1k input, per 1k output, per request)
BACKENDS = {
    "small": (2.0, 8, 0.1, 0.2, 0.0),
    "medium": (10.0, 24, 0.5, 1.5, 0.0),
    "large": (25.0, 60, 0.0, 0.0, 1.0),
}


@pytest.fixture(scope="session")
def backends():
    servers = {n: BackgroundServer(create_fake_app(FakeSpec(n, lat, tok))).start()
               for n, (lat, tok, *_ ) in BACKENDS.items()}
    yield servers
    for s in servers.values():
        s.stop(grace_s=0.5)  # a test's hanging reply (timeouts) has nobody waiting for it


@pytest.fixture(autouse=True)
def _healthy(backends):
    """Every test starts with every backend answering."""
    yield
    for s in backends.values():
        httpx.post(f"{s.url}/control", json={"fail": "none"})


def calls(backends) -> dict[str, int]:
    return {n: httpx.get(f"{s.url}/stats").json()["calls"] for n, s in backends.items()}


def make_zoo(backends, names=("small", "medium", "large"), **overrides) -> Zoo:
    models = []
    for n in names:
        _, _, pin, pout, preq = BACKENDS[n]
        kw = dict(name=n, base_url=f"{backends[n].url}/v1", model=f"fake-{n}", price_per_1k_input=pin,
                  price_per_1k_output=pout, price_per_request=preq, timeout_s=5.0)
        kw.update(overrides.get(n, {}))
        models.append(ZooModel(**kw))
    return Zoo(tuple(models))


#: the API keys every test service accepts (two, to check that thumbs stay with their key)
KEY = "sk-test-service-key-0123456789"
OTHER_KEY = "sk-test-other-key-9876543210"


class Running:
    """A routing service listening on 127.0.0.1 (a real uvicorn server in a thread), with
    API keys; ``http`` is an httpx client that sends :data:`KEY`."""

    def __init__(self, zoo: Zoo, keys: tuple[str, ...] | None = (KEY, OTHER_KEY), **config):
        config.setdefault("alpha", 0.8)
        config.setdefault("encoder", "hashing")
        self.service = RoutingService(zoo, ServiceConfig(**config), encoder=HashingEncoder(64))
        api_keys = ApiKeys.from_keys(list(keys)) if keys else None
        self.server = BackgroundServer(create_app(self.service, api_keys=api_keys)).start()
        self.url = self.server.url
        self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)

    def client(self, key: str = KEY):
        from openai import OpenAI

        return OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=30)

    def stop(self) -> None:
        self.http.close()
        self.server.stop()


@pytest.fixture
def running(backends):
    started = []

    def start(zoo: Zoo | None = None, **config) -> Running:
        r = Running(zoo or make_zoo(backends), **config)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()
