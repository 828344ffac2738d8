"""A fourth policy, written here and registered through the public registry, runs
everywhere the package's own policies run: ``simulate``, the experiments runner
(``compare``), the Live run page and the routing service. Nothing outside this file
names it: the CLI, the experiments, the service and the dashboard read the registry."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from slarouter_core import experiments as E
from slarouter_core.data import from_frame
from slarouter_core.embedding_cache import embed_texts
from slarouter_core.encoders import HashingEncoder
from slarouter_core.policies import Policy, PolicyConfig, PolicyInfo, PolicyStep, register, unregister
from slarouter_core.router import RouterConfig, SLARouter
from slarouter_core.service.core import RoutingService, ServiceConfig
from slarouter_core.service.zoo import Zoo, ZooModel
from slarouter_core.simulator import SimulationConfig, simulate
from tests.conftest import make_frame

from .conftest import open_app


@dataclass(frozen=True)
class CheapestConfig(PolicyConfig):
    """Its one setting: the prior satisfaction level it reports before any label."""

    prior: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.prior <= 1.0:
            raise ValueError(f"prior must be in [0, 1], got {self.prior!r}")


class CheapestPolicy(Policy):
    """Always the cheapest model of the request; counts labels per model."""

    config_cls = CheapestConfig
    info = PolicyInfo(label="cheapest", help="always the cheapest model.", queue_title="nothing (no queue)",
                      color="#123456", v_applies=False, claims_bound=False)

    def __init__(self, config: CheapestConfig, alpha: float, n_models: int, dim: int, seed: int = 0,
                 stream_length: int | None = None):
        self.config, self.alpha, self.M = config, float(alpha), int(n_models)
        self.pos, self.cnt = np.zeros(self.M), np.zeros(self.M)
        self.pending: dict[int, int] = {}
        self.n_feedback = 0

    def choose(self, x, costs, t, u_explore, u_choice) -> PolicyStep:
        m = int(np.argmin(costs))
        shat = self.predict(x)[0]
        return PolicyStep(t=t, model=m, explored=False, p_explore=0.0, shat=shat, q=0.0, v=0.0,
                          shat_served=float(shat[m]))

    def _learn(self, m: int, y: float) -> None:
        self.pos[m] += y
        self.cnt[m] += 1
        self.n_feedback += 1

    def update(self, step, x, feedback, judge=None) -> float:
        if feedback is None:
            self.pending[step.t] = step.model
            return step.shat_served
        self._learn(step.model, feedback)
        return float(feedback)

    def late_update(self, t: int, feedback: float) -> None:
        self._learn(self.pending.pop(int(t)), feedback)

    def decision_queue(self) -> float:
        return 0.0

    def predict(self, X) -> np.ndarray:
        level = (self.pos + self.config.prior) / (self.cnt + 1.0)
        return np.tile(level, (len(np.atleast_2d(X)), 1))

    def lower_bound(self, t: int, z: float) -> float:
        return math.nan

    def estimate(self, t: int) -> float:
        return float(self.pos.sum() / self.cnt.sum()) if self.cnt.sum() else math.nan

    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return ({"n_feedback": self.n_feedback, "pending": [[t, m] for t, m in self.pending.items()]},
                {"pos": self.pos, "cnt": self.cnt})

    def load_state(self, meta, arrays) -> None:
        self.n_feedback = int(meta["n_feedback"])
        self.pending = {int(t): int(m) for t, m in meta["pending"]}
        self.pos, self.cnt = np.array(arrays["pos"], np.float64), np.array(arrays["cnt"], np.float64)


@pytest.fixture(scope="module", autouse=True)
def cheapest():
    register("cheapest", CheapestPolicy)
    yield
    unregister("cheapest")


@pytest.fixture(scope="module")
def small():
    data = from_frame(make_frame(n=200, seed=5))
    return data, embed_texts(data.texts, "hashing:32")


def test_every_registered_policy_is_a_policy_the_router_builds(small):
    from slarouter_core.policies import REGISTRY

    data, X = small
    for name, cls in REGISTRY.items():
        r = SLARouter(RouterConfig(alpha=0.6, mode=name), data.n_models, X.shape[1], seed=0)
        assert isinstance(r.policy, Policy) and type(r.policy) is cls, name
        assert isinstance(cls.info, PolicyInfo) and isinstance(r.config.settings, cls.config_cls), name
        r.observe(r.decide(X[0], data.costs[0]), 1)
        assert r.n_feedback == 1 and isinstance(r.sla_status(), dict), name


def test_the_registry_checks_what_it_is_given():
    with pytest.raises(ValueError, match="taken"):
        register("paper", CheapestPolicy)
    with pytest.raises(TypeError, match="not a Policy"):
        register("other", CheapestConfig)
    with pytest.raises(ValueError, match="one of the package's"):
        unregister("paper")


def test_simulate_runs_it_and_its_settings_are_its_own(small):
    data, X = small
    cfg = RouterConfig(alpha=0.6, mode="cheapest", prior=0.9)
    assert cfg.settings == CheapestConfig(prior=0.9)
    with pytest.raises(ValueError, match="apply only to mode='paper'"):
        RouterConfig(alpha=0.6, mode="cheapest", c=0.3)
    sim = simulate(data, X, SimulationConfig(cfg, feedback_rate=0.5, seed=3))
    a = sim.arrays()
    assert np.array_equal(a["model"], np.argmin(data.costs[a["row"]], axis=1))
    assert sim.router.n_feedback == int((a["feedback"] >= 0).sum()) > 0
    assert RouterConfig.from_dict(cfg.to_dict()) == cfg


def test_its_checkpoint_round_trips(small, tmp_path):
    data, X = small
    r = SLARouter(RouterConfig(alpha=0.6, mode="cheapest"), data.n_models, X.shape[1], seed=1)
    for i in range(20):
        r.observe(r.decide(X[i], data.costs[i]), None if i % 3 else int(data.solved[i, 0]))
    b = SLARouter.load(r.save(tmp_path / "c.safetensors"))
    assert b.config == r.config and b.t == 20 and b.policy.pending == r.policy.pending
    np.testing.assert_array_equal(b.predict_satisfaction(X[0]), r.predict_satisfaction(X[0]))


def test_compare_runs_it_as_a_method_spec(small):
    data, X = small
    spec = E.parse_method("slarouter_cheapest")
    assert spec.params == {"mode": "cheapest"} and spec.label == "SLARouter (cheapest)"
    rows = E.run_grid(E.Dataset("toy", data, X), E.GridConfig(methods=(spec, E.parse_method("static_mixture")),
                                                              seeds=(1,)))
    mine = rows[rows["method"] == "SLARouter (cheapest)"]
    assert len(mine) == len(data.benchmark_names)
    assert all(json.loads(p)["mode"] == "cheapest" for p in mine["params"])


def test_the_service_routes_with_it_and_restores_it(tmp_path):
    zoo = Zoo((ZooModel("a", "http://127.0.0.1:1/v1", "a", price_per_request=1.0),
               ZooModel("b", "http://127.0.0.1:1/v1", "b", price_per_request=3.0)))

    def make():
        return RoutingService(zoo, ServiceConfig(alpha=0.8, mode="cheapest", state_dir=str(tmp_path)),
                              encoder=HashingEncoder(16))

    svc = make()
    for i in range(10):
        tk = svc.route(f"question {i}")
        assert tk.model == 0  # the cheaper backend
        svc.complete(tk, tk.order[0], {"prompt_tokens": 5, "completion_tokens": 5})
        svc.feedback(tk.request_id, i % 2 == 0)
    svc.checkpoint()
    assert svc.state()["mode"] == "cheapest"
    back = make()
    assert back.router.config.mode == "cheapest" and back.router.t == 10 and back.router.n_feedback == 10


def test_live_run_offers_and_streams_it():
    at = open_app("pages/live_run.py", routers="cheapest,paper", tick="150")
    assert "cheapest" in at.multiselect(key="w_routers").options
    at.button(key="w_step").click().run()
    assert not at.exception, [e.value for e in at.exception]
    live = at.session_state.live
    assert live.routers == ("cheapest", "paper") and live.t == 150
    a = live.sims["cheapest"].arrays()
    assert np.array_equal(a["model"], np.argmin(live.data.costs[a["row"]], axis=1))
    assert live.router_headline("cheapest")["color"] == "#123456"
