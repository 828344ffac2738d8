"""Checkpoints written before the policies became plug-in classes (tests/core/fixtures/
checkpoints_v1, made by the v1 router on an AVX2 machine) load, and the router continues
as the v1 router did after loading them: the same model at every step, the same V (it
depends on the costs only), and the queues within float rounding.

Why the queues are not compared bit for bit: the fixture's numbers came from BLAS
products whose rounding depends on the CPU (the SIMD width picks the kernel) and, before
issue 20, on the batch size. Since issue 20 the paper/guarded predictor sums in one fixed
order (the same bits on every CPU, alone or batched), which rounds differently from the
BLAS that recorded the fixture: each float32 prediction moves by < 2e-7, and a queue adds
at most one prediction's worth per step, so after k steps it may differ by k * 2e-7.
A contextual checkpoint of v1 predates the SLA-window certificate (issue 19): its state
(an anytime normal bound) cannot continue under today's rule, so loading it is refused
with a message that says so, rather than continuing with a different guarantee.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slarouter_core.router import SLARouter

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints_v1"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
#: tolerance on the queue per step since the checkpoint (see the module docstring)
Q_ATOL_PER_STEP = 2e-7


@pytest.mark.parametrize("name", sorted(k for k in EXPECTED if k != "contextual"))
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
    got, want = np.array(got), np.array(EXPECTED[name])
    assert got.shape == want.shape
    assert np.array_equal(got[:, 0], want[:, 0]), "models chosen"
    assert np.array_equal(got[:, 2], want[:, 2]), "V"
    bound = Q_ATOL_PER_STEP * np.arange(1, len(got) + 1)[:, None]
    gap = np.abs(got[:, [1, 3]] - want[:, [1, 3]])
    assert np.all(gap <= bound), f"queue off by {gap.max():.3g}"


def test_v1_contextual_checkpoint_is_refused_with_its_reason():
    with pytest.raises(ValueError, match="before the SLA-window certificate"):
        SLARouter.load(FIXTURES / "contextual.safetensors")
