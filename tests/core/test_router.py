from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from slarouter_core.policies.contextual import ContextualConfig
from slarouter_core.router import NO_FEEDBACK, GuardedConfig, RouterConfig, SLARouter, exploration_probability


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


# -- guarded mode (issue 5) -----------------------------------------------------------------
def guarded(alpha=0.6, **kw):
    return RouterConfig(alpha=alpha, mode="guarded").with_settings(**kw)


def test_default_mode_is_paper_and_settings_of_another_mode_are_refused():
    assert RouterConfig(alpha=0.5).mode == "paper"
    # a guarded or contextual setting in paper mode would be ignored: it is an error instead
    for flat in ({"policy": "thompson"}, {"margin_z": 1.0, "v_scale": 0.5}):
        with pytest.raises(ValueError, match="apply only to mode='guarded'"):
            RouterConfig.from_dict({"alpha": 0.5, **flat})
        with pytest.raises(ValueError, match="apply only to mode='guarded'"):
            RouterConfig(alpha=0.5).with_settings(**flat)
    with pytest.raises(ValueError, match="apply only to mode='contextual'"):
        RouterConfig(alpha=0.5, mode="guarded", contextual=ContextualConfig(delta=0.1))
    with pytest.raises(ValueError, match="unknown router setting"):
        RouterConfig.from_dict({"alpha": 0.5, "margin": 1.0})
    # flat guarded settings land in the guarded config, and round-trip through to_dict
    cfg = RouterConfig.from_dict({"alpha": 0.5, "mode": "guarded", "policy": "mixture", "margin_z": 1.0})
    assert cfg.settings == GuardedConfig(policy="mixture", margin_z=1.0)
    assert RouterConfig.from_dict(cfg.to_dict()) == cfg


def test_guarded_run_block_matches_per_request_loop():
    X, C, F = stream(n=400, seed=11)
    cfg = guarded()
    bt = SLARouter(cfg, 3, X.shape[1], seed=7).run_block(X, C, F)
    r = SLARouter(cfg, 3, X.shape[1], seed=7)
    steps = run_loop(r, X, C, F)
    # batched vs single-row predictions may differ in the last float bits only
    assert np.mean(bt.model == np.array([d.model for d, *_ in steps])) > 0.99
    assert bt.explored.tolist() == [d.explored for d, *_ in steps]


def test_guarded_chunked_blocks_are_bit_identical():
    X, C, F = stream(n=500, seed=2)
    cfg = guarded()
    full = SLARouter(cfg, 3, X.shape[1], seed=1).run_block(X, C, F)
    r = SLARouter(cfg, 3, X.shape[1], seed=1)
    parts, a = [], 0
    for k in (1, 37, 100, 2, 360):
        parts.append(r.run_block(X[a:], C[a:], F[a:], n=k))
        a += k
    assert np.array_equal(np.concatenate([p.model for p in parts]), full.model)
    assert np.array_equal(np.concatenate([p.q for p in parts]), full.q)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.floats(0.05, 1.0), alpha=st.floats(0.1, 0.9))
def test_dr_queue_step_is_the_doubly_robust_estimate(seed, rate, alpha):
    X, C, F = stream(n=60, seed=seed, rate=rate)
    r = SLARouter(guarded(alpha, margin_z=0.0), 3, X.shape[1], seed=seed)
    for i in range(len(X)):
        d = r.decide(X[i], C[i])
        m = d.model
        shat = float(r.policy.last_shat[m])
        phi = (r.n_feedback + 1.0) / (d.t + 1.0)
        before = r.policy.deficit
        f = int(F[i, m])
        r.observe(d, None if f == NO_FEEDBACK else f)
        s = shat if f == NO_FEEDBACK else shat + (f - shat) / phi
        assert r.policy.deficit == pytest.approx(before + alpha - s, abs=1e-9)
        assert r.q >= 0.0


def test_dr_queue_is_unbiased_where_the_paper_queue_is_not():
    """A predictor that is far too optimistic: the paper's substitution hides the deficit,
    the doubly-robust estimate recovers the true satisfaction on average."""
    rng = np.random.default_rng(0)
    n, alpha = 4000, 0.8
    X = rng.standard_normal((n, 8)).astype(np.float32)
    C = np.tile([1.0, 2.0, 3.0], (n, 1))
    labels = (rng.random((n, 3)) < 0.5).astype(np.int8)
    F = np.where((rng.random(n) < 0.3)[:, None], labels, NO_FEEDBACK).astype(np.int8)
    cfg = guarded(alpha, margin_z=0.0, levels=False, learn_from_all=False, c=0.0)
    r = SLARouter(cfg, 3, 8, seed=0)
    r.predictor.params["b2"][:] = 4.0  # shat ~ 0.98 everywhere, never trained (c=0)
    bt = r.run_block(X, C, F)
    true_sum = labels[np.arange(n), bt.model].sum()
    assert abs(bt.s_used.sum() - true_sum) < 0.1 * n * 0.5
    # the paper-style substitution would claim ~0.98 * 0.7 of the non-feedback steps
    paper_sum = np.where(bt.feedback >= 0, bt.feedback, bt.shat_served).sum()
    assert paper_sum - true_sum > 0.3 * n


def test_guard_escalates_to_most_expensive_under_deficit():
    X, C, F = stream(n=50, seed=4)
    r = SLARouter(guarded(0.9, guard_q=0.5, c=0.0), 3, X.shape[1], seed=0)
    r.policy.deficit = 100.0
    r.t = 1  # step 1 always explores
    d = r.decide(X[1], C[1])
    assert d.model == 2 and d.q > 0.5 and not d.explored
    r.observe(d, None)
    r2 = SLARouter(guarded(0.9, guard_q=None, c=0.0, v_scale=1e6), 3, X.shape[1], seed=0)
    r2.policy.deficit = 100.0
    r2.t = 1
    d2 = r2.decide(X[1], C[1])
    assert not d2.escalated


def test_banked_surplus_lowers_the_decision_queue_but_truncated_queue_forgets():
    X, C, F = stream(n=5, seed=4)
    a = SLARouter(guarded(0.5, margin_z=0.0, c=0.0), 3, X.shape[1], seed=0)
    b = SLARouter(guarded(0.5, margin_z=0.0, c=0.0, bank_surplus=False), 3, X.shape[1], seed=0)
    for r in (a, b):
        r.t = 1
        for i in range(4):
            d = r.decide(X[i], C[i])
            r.observe(d, 1)  # all satisfied: a surplus
        r.policy.q = 0.0
    assert a.policy.deficit < 0 and a.decision_queue() == 0.0
    a.policy.deficit += 0.5  # a small new deficit is still covered by the bank
    b.policy.q += 0.5
    assert a.decision_queue() == 0.0 and b.decision_queue() == pytest.approx(0.5)


def test_optimism_tries_untried_models():
    """Without optimism an untried model (prior mean 0.5 < alpha) is never picked by the
    exploitation rule; with the UCB bonus it is."""
    X, C, F = stream(n=1, seed=0)
    C0 = np.array([1.0, 1.0001, 1.0002])
    picks = {}
    for kappa in (0.0, 2.0):
        r = SLARouter(guarded(0.7, optimism=kappa, c=0.0, guard_q=None, margin_z=0.0, text_weight=0.0, V=1e-6,
                              policy="argmin"), 3, X.shape[1], seed=0)
        r.t = 10
        r.policy.deficit = 5.0
        r.policy.lpos[:] = [6.0, 0.0, 0.0]  # model 0: 6/10 labels positive; others untried
        r.policy.lcnt[:] = [10.0, 0.0, 0.0]
        r.policy.spread_sum = 1e-9
        picks[kappa] = r.decide(X[0], C0).model
    assert picks[0.0] == 0 and picks[2.0] != 0


def test_late_feedback_corrects_queue_and_trains():
    X, C, F = stream(n=30, seed=1)
    r = SLARouter(guarded(0.6, train_every=1, margin_z=0.0), 3, X.shape[1], seed=0)
    d = r.decide(X[0], C[0])
    r.observe(d, None)
    shat = float(r.policy.last_shat[d.model])
    before, v0 = r.policy.deficit, r.predictor.version
    r.late_feedback(1, 0)
    phi = (0 + 1.0) / (1 + 1.0)
    assert r.policy.deficit == pytest.approx(before + shat / phi)
    assert r.predictor.version == v0 + 1 and r.n_feedback == 1
    with pytest.raises(KeyError):
        r.late_feedback(1, 1)
    with pytest.raises(ValueError):
        r.late_feedback(1, 2)


def test_guarded_checkpoint_round_trip(tmp_path):
    X, C, F = stream(n=200, seed=9)
    cfg = guarded()
    a = SLARouter(cfg, 3, X.shape[1], seed=3)
    a.run_block(X[:120], C[:120], F[:120])
    path = a.save(tmp_path / "g.safetensors")
    b = SLARouter.load(path)
    assert b.config == cfg and b.policy.deficit == a.policy.deficit
    ra = a.run_block(X[120:], C[120:], F[120:])
    rb = b.run_block(X[120:], C[120:], F[120:])
    assert np.array_equal(ra.model, rb.model) and np.array_equal(ra.q, rb.q)


@pytest.mark.parametrize("kw", [dict(mode="fast"), dict(queue_update="ips"), dict(margin_z=-1),
                                dict(v_scale=0), dict(train_every=0), dict(guard_q=-1.0),
                                dict(optimism=float("nan")), dict(levels=1), dict(policy="thomson")])
def test_guarded_config_validation(kw):
    with pytest.raises(ValueError):
        RouterConfig.from_dict({"alpha": 0.5, "mode": "guarded", **kw})


def test_mixture_choice_is_the_cheapest_mix_reaching_the_target():
    from slarouter_core.policies.guarded_rule import mixture_pick as _mixture_choice

    cost = np.array([1.0, 5.0, 20.0])
    level = np.array([0.4, 0.7, 0.8])
    # target 0.75: mixing models 1 and 2 half-half (cost 12.5) beats 0 with 2 (w=0.875 -> 17.6)
    u = np.random.default_rng(0).random(20000)
    picks = np.array([_mixture_choice(cost, level, 0.75, x)[0] for x in u])
    assert set(picks.tolist()) == {1, 2}
    assert (picks == 2).mean() == pytest.approx(0.5, abs=0.02)
    assert _mixture_choice(cost, level, 0.3, 0.5) == (0, False)  # cheapest already enough
    assert _mixture_choice(cost, level, 0.95, 0.5) == (2, True)  # unreachable: escalate
    lv = np.array([0.9, 0.5, 0.6])  # the cheapest is the best: no mixing needed
    assert _mixture_choice(cost, lv, 0.85, 0.99)[0] == 0


def test_mixture_policy_runs_and_is_chunk_invariant():
    X, C, F = stream(n=400, seed=5)
    cfg = guarded(policy="mixture", margin_z=1.0)
    full = SLARouter(cfg, 3, X.shape[1], seed=2).run_block(X, C, F)
    r = SLARouter(cfg, 3, X.shape[1], seed=2)
    a = r.run_block(X, C, F, n=150)
    b = r.run_block(X[150:], C[150:], F[150:])
    assert np.array_equal(np.concatenate([a.model, b.model]), full.model)
    assert len(set(full.model.tolist())) > 1


def test_known_judge_error_rates_are_debiased_in_the_queue():
    """Labels from a judge with FPR/FNR: the DR sum is biased unless the router is told
    the rates, then it is unbiased for the true satisfaction."""
    from slarouter_core.judge import JudgeModel

    rng = np.random.default_rng(1)
    n, fpr, fnr = 6000, 0.15, 0.1
    X = rng.standard_normal((n, 8)).astype(np.float32)
    C = np.tile([1.0, 2.0, 3.0], (n, 1))
    truth = (rng.random((n, 3)) < 0.3).astype(np.int8)
    shown = JudgeModel(fpr, fnr).corrupt(truth, rng)
    F = np.where((rng.random(n) < 0.5)[:, None], shown, NO_FEEDBACK).astype(np.int8)
    errs = {}
    for known in (False, True):
        kw = dict(label_fpr=fpr, label_fnr=fnr) if known else {}
        cfg = guarded(0.5, margin_z=0.0, c=0.0, guard_q=None, levels=False, learn_from_all=False, **kw)
        bt = SLARouter(cfg, 3, 8, seed=0).run_block(X, C, F)
        errs[known] = (bt.s_used.sum() - truth[np.arange(n), bt.model].sum()) / n
    assert errs[False] > 0.05  # judge's false positives on a 30% base rate inflate it
    assert abs(errs[True]) < 0.02
    with pytest.raises(ValueError):
        guarded(0.5, label_fpr=0.6)


# -- guarded mode, Thompson sampling policy --------------------------------------------------
def test_thompson_policy_is_reproducible_for_a_seed():
    X, C, F = stream(n=400, seed=4)
    cfg = guarded(policy="thompson", margin_z=1.0)
    a = SLARouter(cfg, 3, X.shape[1], seed=9).run_block(X, C, F)
    b = SLARouter(cfg, 3, X.shape[1], seed=9).run_block(X, C, F)
    c = SLARouter(cfg, 3, X.shape[1], seed=10).run_block(X, C, F)
    assert np.array_equal(a.model, b.model) and np.array_equal(a.q, b.q)
    assert not np.array_equal(a.model, c.model)
    assert len(set(a.model.tolist())) == 3


@pytest.mark.parametrize("text_weight", [0.0, 1.0])
def test_thompson_run_block_matches_per_request_loop(text_weight):
    X, C, F = stream(n=500, seed=12)
    cfg = guarded(policy="thompson", margin_z=0.5, guard_q=None, text_weight=text_weight)
    bt = SLARouter(cfg, 3, X.shape[1], seed=3).run_block(X, C, F)
    steps = run_loop(SLARouter(cfg, 3, X.shape[1], seed=3), X, C, F)
    models = np.array([d.model for d, *_ in steps])
    if text_weight == 0.0:  # the predictor plays no part: identical to the last bit
        assert np.array_equal(bt.model, models)
        # bt.q[i] is the decision queue after step i, the one step i + 1 decides with
        assert np.array_equal(bt.q[:-1], np.array([d.q for d, *_ in steps[1:]]))
    else:  # batched vs single-row predictions may differ in the last float bits only
        assert np.mean(bt.model == models) > 0.99


def test_thompson_chunked_blocks_and_checkpoint_are_bit_identical(tmp_path):
    X, C, F = stream(n=500, seed=6)
    cfg = guarded(policy="thompson", margin_z=1.0, guard_q=5.0)
    full = SLARouter(cfg, 3, X.shape[1], seed=1).run_block(X, C, F)
    r = SLARouter(cfg, 3, X.shape[1], seed=1)
    parts, a = [], 0
    for k in (1, 37, 100, 2):
        parts.append(r.run_block(X[a:], C[a:], F[a:], n=k))
        a += k
    r2 = SLARouter.load(r.save(tmp_path / "ts.safetensors"))
    parts.append(r2.run_block(X[a:], C[a:], F[a:]))
    assert np.array_equal(np.concatenate([p.model for p in parts]), full.model)
    assert np.array_equal(np.concatenate([p.q for p in parts]), full.q)


def test_thompson_samples_follow_the_beta_posterior():
    from slarouter_core.policies.guarded_rule import TS_TRIES
    from slarouter_core.policies.guarded_rule import thompson_levels as _thompson_levels

    rng = np.random.default_rng(0)
    lpos, lcnt = np.array([0.0, 2.5, 40.0]), np.array([0.0, 9.0, 50.0])
    n = 20000
    S = np.empty((n, 3))
    for i in range(n):
        D = np.concatenate([rng.standard_normal((6, TS_TRIES)), rng.random((6, TS_TRIES + 1))], axis=1)
        _thompson_levels(lpos, lcnt, np.zeros(3), np.zeros(3), 1.0, 1.0, True, D, S[i])
    A, B = 1.0 + lpos, 1.0 + lcnt - lpos
    mean, var = A / (A + B), A * B / ((A + B) ** 2 * (A + B + 1))
    assert np.allclose(S.mean(axis=0), mean, atol=0.01)
    assert np.allclose(S.var(axis=0), var, rtol=0.1)


def test_thompson_picks_models_as_their_posteriors_say():
    """Under a large deficit (cost negligible) the sampled argmin picks each model with the
    probability that its posterior sample is the highest: the well-labelled good model
    almost always, the untried one sometimes, the known-bad one never."""
    X, C, _ = stream(n=3000, seed=1)
    r = SLARouter(guarded(0.9, policy="thompson", c=0.0, guard_q=None, text_weight=0.0, V=1e-9),
                  3, X.shape[1], seed=0)
    r.policy.lpos[:] = [2.0, 95.0, 0.0]
    r.policy.lcnt[:] = [100.0, 100.0, 0.0]
    r.policy.deficit = 1e6
    picks = []
    for i in range(len(X)):
        d = r.decide(X[i], C[i])
        r.observe(d, None)
        picks.append(d.model)
    freq = np.bincount(picks[1:], minlength=3) / (len(picks) - 1)  # step 1 always explores
    # P(Beta(96, 6) > Uniform(0, 1)) = E[Beta(96, 6)] = 96 / 102
    assert freq[1] == pytest.approx(96 / 102, abs=0.02)
    assert freq[0] < 0.002
    assert freq[2] == pytest.approx(6 / 102, abs=0.02)


# -- hardening (issue 11) -------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["paper", "guarded"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_decide_refuses_non_finite_embeddings(mode, bad):
    X, C, F = stream(n=20, seed=4)
    r = SLARouter(RouterConfig(alpha=0.6, mode=mode), 3, X.shape[1], seed=0)
    x = X[0].copy()
    x[5] = bad
    with pytest.raises(ValueError, match="NaN or infinite"):
        r.decide(x, C[0])
    assert r.t == 0
    d = r.decide(X[0], C[0])  # nothing pending: the router goes on with clean input
    r.observe(d, 1)
    assert np.all(np.isfinite(r.predict_satisfaction(X[1])))


def _rewrite_checkpoint(path, edit_meta=None, edit_tensors=None):
    import json as _json

    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
    with safe_open(str(path), framework="numpy") as fh:
        meta = _json.loads(fh.metadata()["slarouter"])
    tensors = load_file(str(path))
    if edit_meta:
        edit_meta(meta)
    if edit_tensors:
        edit_tensors(tensors)
    save_file(tensors, str(path), metadata={"slarouter": _json.dumps(meta)})


@pytest.mark.parametrize("edit", [
    dict(edit_meta=lambda m: m["policy"].update(q="nan")),
    dict(edit_meta=lambda m: m["policy"].update(q="inf")),
    dict(edit_meta=lambda m: m["policy"].update(spread_sum="-inf")),
    dict(edit_meta=lambda m: m["policy"]["guarded"].update(deficit="nan")),
    dict(edit_meta=lambda m: m["policy"]["guarded"]["lpos"].__setitem__(0, "nan")),
    dict(edit_tensors=lambda t: t[min(k for k in t if k.startswith("policy.predictor.param."))].reshape(-1).__setitem__(
        0, np.inf)),
])
def test_checkpoint_with_non_finite_state_does_not_load(tmp_path, edit):
    X, C, F = stream(n=100, seed=9)
    r = SLARouter(guarded(), 3, X.shape[1], seed=3)
    r.run_block(X, C, F)
    path = r.save(tmp_path / "g.safetensors")
    SLARouter.load(path)  # the untouched file loads
    _rewrite_checkpoint(path, **edit)
    with pytest.raises(ValueError, match="corrupt SLARouter checkpoint.*NaN or infinite"):
        SLARouter.load(path)


@pytest.mark.parametrize("mode", ["guarded", "paper"])
def test_pending_late_feedback_survives_a_checkpoint(tmp_path, mode):
    X, C, F = stream(n=300, seed=11, rate=0.0)
    cfg = guarded(train_every=1) if mode == "guarded" else RouterConfig(alpha=0.6, c=0.5)
    a = SLARouter(cfg, 3, X.shape[1], seed=5)
    if mode == "guarded":
        a.run_block(X[:150], C[:150], F[:150], n=100)  # rows 100.. are lookahead only
        for i in range(100, 150):
            d = a.decide(X[i], C[i])
            a.observe(d, None)
    else:
        for i in range(150):
            d = a.decide(X[i], C[i])
            a.observe(d, None)
    pending = list(a.policy.pending.steps)
    assert len(pending) == 150
    b = SLARouter.load(a.save(tmp_path / "late.safetensors"))
    assert list(b.policy.pending.steps) == pending
    rng = np.random.default_rng(0)
    for t in rng.permutation(pending)[:60].tolist():
        v = int(rng.random() < 0.5)
        a.late_feedback(t, v)
        b.late_feedback(t, v)
    assert b.n_feedback == a.n_feedback == 60 and b.q == a.q
    if mode == "guarded":
        assert b.policy.deficit == a.policy.deficit and np.array_equal(b.policy.lpos, a.policy.lpos)
    assert b.predictor.version == a.predictor.version > 0
    ra = a.run_block(X[150:], C[150:], F[150:])
    rb = b.run_block(X[150:], C[150:], F[150:])
    assert np.array_equal(ra.model, rb.model) and np.array_equal(ra.q, rb.q)
    with pytest.raises(KeyError):
        b.late_feedback(pending[0] if pending[0] not in b.policy.pending.steps else -1, 1)


def test_late_window_drops_the_oldest_steps_first(monkeypatch):
    import slarouter_core.policies.base as base

    monkeypatch.setattr(base, "LATE_WINDOW", 40)
    X, C, F = stream(n=400, seed=2, rate=0.0)
    r = SLARouter(guarded(), 3, X.shape[1], seed=1)
    r.run_block(X[:100], C[:100], F[:100])
    assert list(r.policy.pending.steps) == list(range(61, 101))
    for t in (61, 75, 100):  # out-of-order answers leave holes; the window still drops the oldest
        r.late_feedback(t, 1)
    for i in range(100, 130):
        r.observe(r.decide(X[i], C[i]), None)
    assert list(r.policy.pending.steps) == list(range(90, 100)) + list(range(101, 131))
    r.run_block(X[130:], C[130:], F[130:])
    assert list(r.policy.pending.steps) == list(range(361, 401))


# -- every policy: one rule, three paths ------------------------------------------------------
EVERY_POLICY = {
    "paper": RouterConfig(alpha=0.6, c=0.5),
    "guarded": RouterConfig(alpha=0.6, mode="guarded"),
    "guarded-mixture": RouterConfig(alpha=0.6, mode="guarded", settings=GuardedConfig(policy="mixture")),
    "guarded-thompson": RouterConfig(alpha=0.6, mode="guarded", settings=GuardedConfig(policy="thompson")),
    "contextual": RouterConfig(alpha=0.6, mode="contextual"),
}


@pytest.mark.parametrize("name", sorted(EVERY_POLICY))
def test_whole_chunked_and_per_request_paths_agree_for_every_policy(name):
    """Whole and chunked runs are bit-identical, and so is the per-request API for the
    predictor policies (their predictions sum in one fixed order, whatever the batch).
    The contextual policy predicts with a BLAS product (``X @ W``), whose rounding may
    differ between one row and many, hence its tolerance."""
    cfg = EVERY_POLICY[name]
    X, C, F = stream(n=700, d=16, seed=4)
    whole = SLARouter(cfg, 3, 16, seed=9).run_block(X, C, F)
    r = SLARouter(cfg, 3, 16, seed=9)
    parts, i = [], 0
    for k in (1, 5, 130, 64, 500):
        k = min(k, len(X) - i)
        parts.append(r.run_block(X[i:], C[i:], F[i:], n=k))
        i += k
    for field in ("model", "explored", "feedback", "q", "s_used", "v"):
        assert np.array_equal(np.concatenate([getattr(p, field) for p in parts]), getattr(whole, field)), field
    loop = SLARouter(cfg, 3, 16, seed=9)
    steps = []
    for j in range(len(X)):
        d = loop.decide(X[j], C[j])
        f = int(F[j, d.model])
        loop.observe(d, None if f == NO_FEEDBACK else f)
        steps.append((d.model, loop.decision_queue(), d.v))
    assert np.array_equal(whole.model, [s[0] for s in steps])
    if cfg.mode == "contextual":
        np.testing.assert_allclose(whole.q, [s[1] for s in steps], atol=1e-9)
    else:
        assert np.array_equal(whole.q, [s[1] for s in steps])
    assert np.array_equal(whole.v, [s[2] for s in steps])


@pytest.mark.parametrize("mode", ["paper", "guarded", "contextual"])
def test_a_router_says_which_steps_still_await_their_late_feedback(mode):
    r = SLARouter(RouterConfig(alpha=0.7, mode=mode), 2, 4, seed=0)
    rng = np.random.default_rng(0)
    d = r.decide(rng.normal(size=4).astype(np.float32), np.array([1.0, 2.0]))
    r.observe(d, None)
    assert r.awaits_feedback(d.t) and not r.awaits_feedback(d.t + 1)
    r.late_feedback(d.t, 1)
    assert not r.awaits_feedback(d.t)
