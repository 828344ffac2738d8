from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from slarouter_core.router import NO_FEEDBACK, RouterConfig, SLARouter, exploration_probability


def stream(n=600, d=16, m=3, rate=0.2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    C = np.sort(rng.uniform(1, 100, (n, m)), axis=1) * np.array([1, 5, 20])[:m]
    labels = (rng.random((n, m)) < np.linspace(0.3, 0.8, m)).astype(np.int8)
    F = np.where((rng.random(n) < rate)[:, None], labels, NO_FEEDBACK).astype(np.int8)
    return X, C, F


def run_loop(router, X, C, F):
    out = []
    for i in range(len(X)):
        d = router.decide(X[i], C[i])
        f = int(F[i, d.model])
        q_before = router.q
        router.observe(d, None if f == NO_FEEDBACK else f)
        out.append((d, f, q_before, router.q))
    return out


@settings(max_examples=25, deadline=None)
@given(alpha=st.floats(0.05, 0.95), c=st.floats(0.0, 2.0), seed=st.integers(0, 10_000),
       rate=st.floats(0.0, 1.0))
def test_queue_update_is_exact_and_never_negative(alpha, c, seed, rate):
    X, C, F = stream(n=80, rate=rate, seed=seed)
    router = SLARouter(RouterConfig(alpha=alpha, c=c), 3, X.shape[1], seed=seed)
    for d, f, q_before, q_after in run_loop(router, X, C, F):
        assert q_before == d.q
        s = d.shat[d.model] if f == NO_FEEDBACK else f
        assert q_after == max(0.0, d.q + alpha - s)
        assert q_after >= 0.0


@settings(max_examples=20, deadline=None)
@given(alpha=st.floats(0.05, 0.95), seed=st.integers(0, 10_000), V=st.floats(1e-6, 1e-1))
def test_exploitation_takes_the_argmin(alpha, seed, V):
    X, C, F = stream(n=80, seed=seed)
    router = SLARouter(RouterConfig(alpha=alpha, c=0.3, V=V), 3, X.shape[1], seed=seed)
    steps = run_loop(router, X, C, F)
    assert steps[0][0].explored  # t = 1 always explores
    for d, *_ in steps:
        expected = V * d.costs + d.q * (alpha - d.shat)
        np.testing.assert_allclose(d.scores, expected)
        if not d.explored:
            assert d.model == int(np.argmin(expected))


@pytest.mark.parametrize("c", [0.0, 0.1, 0.5, 1.5])
def test_exploration_schedule_statistics(c):
    n = 20_000
    X = np.zeros((n, 4), np.float32)
    C = np.tile([1.0, 2.0, 3.0], (n, 1))
    F = np.full((n, 3), NO_FEEDBACK, np.int8)
    router = SLARouter(RouterConfig(alpha=0.5, c=c), 3, 4, seed=3)
    bt = router.run_block(X, C, F)
    p = exploration_probability(np.arange(1, n + 1), c)
    p[0] = 1.0
    mean, sd = p.sum(), math.sqrt((p * (1 - p)).sum())
    assert abs(bt.explored.sum() - mean) <= 5 * sd + 1e-9
    if c == 0.0:
        assert bt.explored.sum() == 1
    assert bt.explored[p >= 1.0].all()  # min(1, c/t^(1/4)) = 1 means always
    # when exploring, the model is uniform
    counts = np.bincount(bt.model[bt.explored], minlength=3)
    if counts.sum() > 300:
        expected = counts.sum() / 3
        assert ((counts - expected) ** 2 / expected).sum() < 20  # chi-square, 2 dof


def test_run_block_matches_per_request_loop():
    X, C, F = stream(n=2000, d=32)
    cfg = RouterConfig(alpha=0.6, c=0.4)
    a = SLARouter(cfg, 3, 32, seed=11)
    b = SLARouter(cfg, 3, 32, seed=11)
    bt = a.run_block(X, C, F)
    steps = run_loop(b, X, C, F)
    assert bt.trained.sum() > 20
    assert np.array_equal(bt.model, [d.model for d, *_ in steps])
    np.testing.assert_allclose(bt.q, [q for *_, q in steps], atol=1e-5)
    np.testing.assert_allclose(bt.v, [d.v for d, *_ in steps])


def test_chunked_blocks_are_bit_identical():
    X, C, F = stream(n=1500, d=16)
    cfg = RouterConfig(alpha=0.6, c=0.5)
    full = SLARouter(cfg, 3, 16, seed=5).run_block(X, C, F)
    r = SLARouter(cfg, 3, 16, seed=5)
    parts, i = [], 0
    for k in [1, 7, 250, 3, 600, 1000]:
        k = min(k, len(X) - i)
        parts.append(r.run_block(X[i:], C[i:], F[i:], n=k))
        i += k
    assert np.array_equal(np.concatenate([p.model for p in parts]), full.model)
    assert np.array_equal(np.concatenate([p.q for p in parts]), full.q)


def test_checkpoint_round_trip(tmp_path):
    X, C, F = stream(n=900, d=16)
    cfg = RouterConfig(alpha=0.6, c=0.5)
    r = SLARouter(cfg, 3, 16, seed=2)
    r.run_block(X[:400], C[:400], F[:400])
    path = r.save(tmp_path / "r.safetensors")
    r2 = SLARouter.load(path)
    a = run_loop(r, X[400:], C[400:], F[400:])
    b = run_loop(r2, X[400:], C[400:], F[400:])
    assert [d.model for d, *_ in a] == [d.model for d, *_ in b]
    assert [q for *_, q in a] == [q for *_, q in b]
    assert np.array_equal(a[-1][0].shat, b[-1][0].shat)


@pytest.mark.parametrize("content", [b"", b"garbage" * 50, b"PAR1" + b"\x00" * 100])
def test_loading_non_checkpoints_fails_clearly(tmp_path, content):
    p = tmp_path / "x.safetensors"
    p.write_bytes(content)
    with pytest.raises(ValueError, match="checkpoint"):
        SLARouter.load(p)


def test_safetensors_without_our_metadata(tmp_path):
    from safetensors.numpy import save_file
    p = tmp_path / "w.safetensors"
    save_file({"w": np.zeros(3, np.float32)}, str(p))
    with pytest.raises(ValueError, match="not a SLARouter checkpoint"):
        SLARouter.load(p)


@pytest.mark.parametrize("kw", [dict(alpha=0), dict(alpha=1), dict(alpha=-0.1), dict(alpha=1.5),
                                dict(alpha=float("nan")), dict(alpha="0.5"), dict(alpha=True),
                                dict(alpha=0.5, c=-1), dict(alpha=0.5, V=0), dict(alpha=0.5, V=-1e-5),
                                dict(alpha=0.5, q_max=0), dict(alpha=0.5, eps=-1)])
def test_config_validation(kw):
    with pytest.raises(ValueError):
        RouterConfig(**kw)


def test_data_driven_v_uses_mean_cost_gap():
    router = SLARouter(RouterConfig(alpha=0.5, c=0.0, q_max=30, eps=0.001), 2, 4, seed=0)
    for gap in (1000.0, 3000.0):
        d = router.decide(np.zeros(4, np.float32), np.array([0.0, gap]))
        router.observe(d, None)
    assert d.v == pytest.approx(30 * 0.001 / 2000.0)


def test_observe_protocol_errors():
    router = SLARouter(RouterConfig(alpha=0.5), 2, 4, seed=0)
    d = router.decide(np.zeros(4, np.float32), np.array([1.0, 2.0]))
    with pytest.raises(RuntimeError):
        router.decide(np.zeros(4, np.float32), np.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        router.observe(d, 0.5)
    router.observe(d, 1)
    with pytest.raises(RuntimeError):
        router.observe(d, 1)
