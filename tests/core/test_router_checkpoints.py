"""Checkpoints written before the policies became plug-in classes (tests/core/fixtures/
checkpoints_v1, made by the v1 router) load, and the router continues exactly as the v1
router did after loading them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slarouter_core.router import SLARouter

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints_v1"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_v1_checkpoint_loads_and_continues_identically(name):
    s = np.load(FIXTURES / "stream.npz")
    X, C, Y, F = s["X"], s["C"], s["Y"], s["F"]
    r = SLARouter.load(FIXTURES / f"{name}.safetensors")
    assert r.t == 200 and r.config.mode == name.split("_")[0]
    got = []
    for i in range(200, len(X)):
        d = r.decide(X[i], C[i])
        r.observe(d, int(Y[i, d.model]) if F[i] else None)
        got.append([int(d.model), float(d.q), float(d.v), float(r.decision_queue())])
    assert got == EXPECTED[name]
