"""SLARouter as a method: exactly the simulator, configured by method params."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slarouter_core import baselines as B
from slarouter_core.router import RouterConfig
from slarouter_core.simulator import SimulationConfig, simulate

from .toy import ALPHA, RATE


def test_slarouter_method_is_the_simulator(split):
    stream, semb, _ = split
    r = B.slarouter_router(stream, semb, ALPHA, 5, RATE, V=1e-3, c=0.2)
    sim = simulate(stream, semb, SimulationConfig(RouterConfig(alpha=ALPHA, V=1e-3, c=0.2), feedback_rate=RATE, seed=5))
    a = sim.arrays()
    np.testing.assert_array_equal(r.model, a["model"])
    np.testing.assert_array_equal(r.order, a["row"])
    np.testing.assert_equal(dataclasses.asdict(r.summary), dataclasses.asdict(sim.summary()))
    assert np.all(r.info["final_v"] == 1e-3)
    ddv = B.slarouter_router(stream, semb, ALPHA, 5, RATE)
    assert ddv.info["config"]["settings"]["V"] is None
    with pytest.raises(ValueError, match="bad SLARouter parameter"):
        B.slarouter_router(stream, semb, ALPHA, 5, RATE, not_a_field=1)
    with pytest.raises(ValueError, match="mode"):
        B.slarouter_router(stream, semb, ALPHA, 5, RATE, mode="no-such-mode")
    # nested configs arrive as JSON dicts
    nested = B.slarouter_router(stream, semb, ALPHA, 5, RATE, V=1e-3, predictor={"lr": 0.05})
    assert nested.info["config"]["settings"]["predictor"]["lr"] == 0.05
    plain = B.slarouter_router(stream, semb, ALPHA, 5, RATE, V=1e-3)
    assert plain.info["config"]["settings"]["predictor"]["lr"] != 0.05
    assert not (np.array_equal(nested.model, plain.model) and np.array_equal(nested.q, plain.q))
    with pytest.raises(ValueError, match="bad SLARouter parameter"):
        B.check_params("slarouter", {"predictor": {"bogus": 1}})
    with pytest.raises(ValueError, match="alpha"):
        B.check_params("slarouter", {"alpha": 0.5})
    with pytest.raises(ValueError, match="muu"):
        B.check_params("carrot", {"muu": 1})
    B.check_params("carrot", {"mu": 0.5, "tuning": "holdout"})


def test_guarded_settings_are_method_params_and_refused_in_another_mode():
    from slarouter_core.baselines import slarouter_configs
    from slarouter_core.router import GuardedConfig

    cfg = slarouter_configs(0.7, 0.2, 1, {"mode": "guarded", "margin_z": 1.0, "policy": "thompson"})
    assert cfg.router.settings == GuardedConfig(margin_z=1.0, policy="thompson")
    with pytest.raises(ValueError, match="bad SLARouter parameter.*apply only to mode='guarded'"):
        slarouter_configs(0.7, 0.2, 1, {"margin_z": 1.0})
