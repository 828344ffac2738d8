"""The ``contextual`` router mode (slarouter_core/policies/contextual.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slarouter_core.baselines import static_mixture_lp
from slarouter_core.data import from_frame
from slarouter_core.feedback import FeedbackConfig
from slarouter_core.policies.contextual import ContextualConfig
from slarouter_core.policies.text_model import (fit_multitask_logistic, multitask_predictions,
                                                 multitask_weights, price_for_target)
from slarouter_core.router import NO_FEEDBACK, RouterConfig, SLARouter
from slarouter_core.simulator import Simulation, SimulationConfig, simulate


def zoo(n: int, acc_easy, acc_hard, cost, seed: int = 0, dim: int = 8):
    """A stream whose text (embedding coordinate 0) says whether a request is easy or
    hard; model m solves easy requests with ``acc_easy[m]``, hard ones with ``acc_hard[m]``."""
    rng = np.random.default_rng(seed)
    hard = rng.random(n) < 0.5
    X = rng.standard_normal((n, dim)).astype(np.float32) * 0.3
    X[:, 0] = np.where(hard, 1.0, -1.0) + 0.1 * rng.standard_normal(n)
    frame = pd.DataFrame({"doc_id": np.arange(n), "benchmark": np.where(rng.random(n) < 0.5, "b1", "b2"),
                          "input_text": [f"request {i}" for i in range(n)]})
    for m, (pe, ph, c) in enumerate(zip(acc_easy, acc_hard, cost)):
        p = np.where(hard, ph, pe)
        frame[f"m{m}_solved"] = (rng.random(n) < p).astype(int)
        frame[f"m{m}_energy_joules"] = c * rng.uniform(0.9, 1.1, n)
    return from_frame(frame), X


def contextual(alpha: float, **kw) -> RouterConfig:
    return RouterConfig(alpha=alpha, mode="contextual", settings=ContextualConfig(**kw))


def static_cost(data, alpha: float) -> float:
    return static_mixture_lp(data.solved.mean(0), data.costs.mean(0), alpha)[1]


# -- it routes on the text and learns which model is good ------------------------------------
def test_routes_on_the_text_far_below_the_static_mixture():
    """The cheap model solves the easy half, only the dear one the hard half: a router that
    reads the text serves each half its own model; the text-blind mixture cannot."""
    data, X = zoo(4000, acc_easy=(0.97, 0.97), acc_hard=(0.15, 0.95), cost=(1.0, 10.0))
    alpha = 0.88
    mix = static_cost(data, alpha)
    met, ratios = 0, []
    for seed in range(5):
        a = simulate(data, X, SimulationConfig(contextual(alpha), seed=seed)).arrays()
        met += a["satisfied"].mean() >= alpha
        ratios.append(a["cost"].mean() / mix)
    assert met >= 4
    assert np.mean(ratios) < 0.8, ratios


def test_learns_which_model_is_good_not_the_cost_order():
    """The priciest model is the worst: the guarded mode escalates to it and misses alpha;
    the contextual mode finds the middle model and meets alpha."""
    data, X = zoo(3000, acc_easy=(0.5, 0.92, 0.6), acc_hard=(0.5, 0.92, 0.6), cost=(1.0, 5.0, 20.0))
    alpha = 0.85
    for seed in range(3):
        a = simulate(data, X, SimulationConfig(contextual(alpha), seed=seed)).arrays()
        assert a["satisfied"].mean() >= alpha
        worst = a["model"] == 2
        assert worst.mean() < 0.15 and worst[1500:].mean() < 0.05  # rarely, once learned
    g = simulate(data, X, SimulationConfig(RouterConfig(alpha=alpha, mode="guarded"), seed=0)).arrays()
    assert g["satisfied"].mean() < alpha  # the text-blind guard's assumption fails here


def test_clustered_fallback_serves_each_clusters_specialist():
    """Two cheap specialists each solve one half of the requests (the text tells which); the
    priciest model is a mediocre generalist with the best level overall. Behind its target
    (early in a stream), the clustered fallback serves each half its specialist once the
    labels of request-blind choices say so; the request-blind one (``clusters=0``) serves
    the generalist everywhere."""
    from dataclasses import replace

    from slarouter_core.policies.contextual import ContextualPolicy

    rng = np.random.default_rng(0)
    acc = {True: (0.95, 0.2, 0.8), False: (0.2, 0.95, 0.8)}  # by the sign of coordinate 0
    picks = {}
    for clusters in (16, 0):
        pol = ContextualPolicy(ContextualConfig(clusters=clusters, explore_c=0.0, delta=0.0013), alpha=0.9,
                               n_models=3, dim=8, seed=0)
        t = 0
        for _ in range(600):  # every model served alike, as exploration would
            t += 1
            x = (rng.standard_normal(8) * 0.2).astype(np.float32)
            x[0] = rng.choice([-1.0, 1.0])
            step = pol.choose(x, np.array([1.0, 1.2, 10.0]), t, 1.0, 0.0)
            m = t % 3
            pol.update(replace(step, model=m, blind=True), x, float(rng.random() < acc[bool(x[0] > 0)][m]))
        chosen = []
        for sign in (1.0, -1.0):
            x = np.zeros(8, np.float32)
            x[0] = sign
            t += 1
            step = pol.choose(x, np.array([1.0, 1.2, 10.0]), t, 1.0, 0.0)
            assert step.q >= 1e9  # no price reaches alpha 0.9: the fallback serves
            chosen.append(step.model)
            pol.update(step, x, None)
        picks[clusters] = chosen
    assert picks == {16: [0, 1], 0: [2, 2]}


def test_lower_bound_covers_the_realised_satisfaction():
    """The router's own 90% lower confidence bound sits below what it really delivered in
    (nearly) every seed, and is informative (within 5 points)."""
    data, X = zoo(3000, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    below = 0
    for seed in range(10):
        sim = simulate(data, X, SimulationConfig(contextual(0.85), seed=seed))
        lcb, sat = sim.router.certified_lower_bound(), sim.arrays()["satisfied"].mean()
        below += lcb <= sat
        assert sat - lcb < 0.05
    assert below >= 8


# -- only what a live router has -------------------------------------------------------------
def test_never_reads_the_benchmark_column():
    data, X = zoo(800, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    frame = data.frame.copy()
    frame["benchmark"] = np.where(frame["benchmark"] == "b1", "other", "b1")
    relabelled = from_frame(frame)
    cfg = SimulationConfig(contextual(0.8), seed=3)
    a, b = simulate(data, X, cfg).arrays(), simulate(relabelled, X, cfg).arrays()
    assert np.array_equal(a["model"], b["model"]) and np.array_equal(a["q"], b["q"])


# -- one rule, any chunking; checkpoints --------------------------------------------------------
def test_whole_chunked_and_per_request_runs_are_identical():
    data, X = zoo(900, acc_easy=(0.9, 0.95, 0.97), acc_hard=(0.3, 0.6, 0.9), cost=(1.0, 3.0, 10.0))
    cfg = SimulationConfig(contextual(0.8), seed=5)
    whole = simulate(data, X, cfg).arrays()
    sim = Simulation(data, X, cfg)
    rng = np.random.default_rng(1)
    while not sim.done:
        sim.step(int(rng.integers(1, 200)))
    chunked = sim.arrays()
    # per request through the online API, same stream and router seed
    ref = Simulation(data, X, cfg)
    r = SLARouter(cfg.router, data.n_models, X.shape[1], seed=ref.router.seed, stream_length=data.n_requests)
    models = []
    for i in range(data.n_requests):
        d = r.decide(ref._stream_x[i], ref._stream_costs[i])
        f = int(ref.feedback_plan[i, d.model])
        r.observe(d, None if f == NO_FEEDBACK else f)
        models.append(d.model)
    for k in ("model", "q", "s_used", "explored", "feedback", "shat_served"):
        assert np.array_equal(whole[k], chunked[k]), k
    assert np.array_equal(whole["model"], np.array(models))


def test_replans_price_with_the_current_models_predictions_predicting_only_new_rows(monkeypatch):
    """The reference window's predictions are kept between replans: at every replan they
    equal, bit for bit, the current model's predictions of the whole window, and between
    refits a replan predicts only the rows it has not seen."""
    from slarouter_core.policies.contextual import ContextualPolicy

    data, X = zoo(1500, acc_easy=(0.9, 0.95, 0.97), acc_hard=(0.3, 0.6, 0.9), cost=(1.0, 3.0, 10.0))
    sim = Simulation(data, X, SimulationConfig(contextual(0.8), seed=3))
    policy = sim.router.policy
    rows_predicted, checked = [], []
    predict = ContextualPolicy.predict

    def counting(self, rows):
        rows_predicted.append(len(np.atleast_2d(rows)))
        return predict(self, rows)

    original = ContextualPolicy.reference_predictions

    def checked_replan(self, n):
        before = len(rows_predicted)
        got = original(self, n).copy()
        if self.theta is not None:
            checked.append((self.version, sum(rows_predicted[before:])))
        assert np.array_equal(got, predict(self, self.ref_x[:n]))
        return got

    monkeypatch.setattr(ContextualPolicy, "predict", counting)
    monkeypatch.setattr(ContextualPolicy, "reference_predictions", checked_replan)
    sim.run()
    assert len(checked) > 100
    # after the first replan of a model version, a replan predicts at most the new rows
    later = [rows for (v, rows), (v0, _) in zip(checked[1:], checked) if v == v0]
    assert later and max(later) <= policy.config.replan, max(later)


@pytest.mark.parametrize("clusters", [0, 16])
def test_checkpoint_resumes_bit_for_bit_with_pending_late_feedback(tmp_path, clusters):
    data, X = zoo(700, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    cfg = contextual(0.8, clusters=clusters)
    C = data.costs

    def serve(r, rows, log):
        for i in rows:
            d = r.decide(X[i], C[i])
            r.observe(d, None)  # every verdict arrives later
            log.append(d.model)
            if i % 3 == 0:
                r.late_feedback(d.t, int(data.solved[i, d.model]))

    a = SLARouter(cfg, data.n_models, X.shape[1], seed=11)
    log_a: list[int] = []
    serve(a, range(400), log_a)
    path = a.save(tmp_path / "ctx.safetensors")
    b = SLARouter.load(path)
    assert len(b.policy.pending) == len(a.policy.pending) > 0
    t_pending = next(iter(a.policy.pending))
    for r in (a, b):
        r.late_feedback(t_pending, 1)
    log_b = list(log_a)
    serve(a, range(400, 700), log_a)
    serve(b, range(400, 700), log_b)
    assert log_a == log_b
    assert a.certified_lower_bound() == b.certified_lower_bound()
    assert (a.policy.centers is not None) == bool(clusters)
    if clusters:
        assert np.array_equal(a.policy.centers, b.policy.centers)
        assert np.array_equal(a.policy.cell_cnt, b.policy.cell_cnt)


# -- refits out of the request path (a service's worker runs them) ---------------------------
def _serve_deferred(r: SLARouter, data, X, rows, install_after: int, log: list) -> list:
    """Serve ``rows`` with every verdict late; a due refit is taken at once and installed
    ``install_after`` requests later (0: at once). Returns the jobs taken."""
    jobs, waiting = [], []
    for i in rows:
        d = r.decide(X[i], data.costs[i])
        r.observe(d, None)
        log.append(d.model)
        waiting = [(k - 1, job, res) for k, job, res in waiting]
        for _, job, res in [w for w in waiting if w[0] <= 0]:
            r.apply_refit(res)
        waiting = [w for w in waiting if w[0] > 0]
        if i % 2 == 0:
            r.late_feedback(d.t, int(data.solved[i, d.model]))
            job = r.take_refit()
            if job is not None:
                jobs.append(job)
                if install_after == 0:
                    r.apply_refit(job.run())
                else:
                    waiting.append((install_after, job, job.run()))
    return jobs


def _serve_until_refit_due(r: SLARouter, data, X) -> int:
    """Serve with thumbs on every request until a refit is due; returns the next row."""
    k = 0
    while not r.policy.refit_due:
        d = r.decide(X[k], data.costs[k])
        r.observe(d, int(data.solved[k, d.model]))
        k += 1
    return k


def test_a_deferred_refit_installed_at_once_decides_as_a_refit_in_place():
    data, X = zoo(600, acc_easy=(0.9, 0.95, 0.97), acc_hard=(0.3, 0.6, 0.9), cost=(1.0, 3.0, 10.0))
    cfg = contextual(0.8)
    inplace, deferred = (SLARouter(cfg, data.n_models, X.shape[1], seed=3) for _ in range(2))
    deferred.defer_refits(True)
    log_a: list[int] = []
    log_b: list[int] = []
    assert _serve_deferred(inplace, data, X, range(600), 0, log_a) == []  # nothing deferred
    jobs = _serve_deferred(deferred, data, X, range(600), 0, log_b)
    assert len(jobs) >= 5 and deferred.model_version == inplace.model_version >= 5
    assert log_a == log_b
    assert np.array_equal(inplace.policy.W, deferred.policy.W) and np.array_equal(inplace.policy.b, deferred.policy.b)


def test_a_deferred_refit_waits_for_its_installation():
    """Labels keep coming while a refit runs elsewhere: the policy serves on its current
    text model until the result is installed, and the job's labels are a copy."""
    data, X = zoo(600, acc_easy=(0.9, 0.95, 0.97), acc_hard=(0.3, 0.6, 0.9), cost=(1.0, 3.0, 10.0))
    r = SLARouter(contextual(0.8), data.n_models, X.shape[1], seed=3)
    r.defer_refits(True)
    i = _serve_until_refit_due(r, data, X)
    job = r.take_refit()
    assert job is not None and r.take_refit() is None and not r.policy.refit_due
    n_labels = len(job.y)
    version, W = r.model_version, r.policy.W.copy()
    for k in range(i, i + 40):  # more labels, no installation
        d = r.decide(X[k], data.costs[k])
        r.observe(d, int(data.solved[k, d.model]))
    assert r.model_version == version and np.array_equal(r.policy.W, W)
    assert len(job.y) == n_labels < r.policy.lab_n
    r.apply_refit(job.run())
    assert r.model_version == version + 1 and not np.array_equal(r.policy.W, W)


def test_a_refit_installed_later_changes_the_decisions_only_from_there():
    data, X = zoo(600, acc_easy=(0.9, 0.95, 0.97), acc_hard=(0.3, 0.6, 0.9), cost=(1.0, 3.0, 10.0))
    logs = []
    for later in (0, 25):
        r = SLARouter(contextual(0.8), data.n_models, X.shape[1], seed=3)
        r.defer_refits(True)
        log: list[int] = []
        _serve_deferred(r, data, X, range(600), later, log)
        logs.append(log)
    # the first refit is due at the 16th thumbs (every other request, so at request 30): the
    # same decisions up to it, the one after it the first that may read the new model
    assert logs[0] != logs[1] and logs[0][:31] == logs[1][:31]


@pytest.mark.parametrize("max_labels", [16, 10_000])
def test_a_refit_job_holds_the_kept_labels_oldest_first(max_labels):
    data, X = zoo(300, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    r = SLARouter(contextual(0.8, max_labels=max_labels), data.n_models, X.shape[1], seed=3)
    r.defer_refits(True)
    for k in range(40):
        d = r.decide(X[k], data.costs[k])
        r.observe(d, int(data.solved[k, d.model]))
    job = r.take_refit()
    Xk, mk, yk, _ = r.policy.labels()
    assert len(job.y) == min(40, max_labels)
    assert np.array_equal(job.X, Xk) and np.array_equal(job.m, mk) and np.array_equal(job.y, yk)
    Xk = Xk.copy()
    r.policy.lab_x[:] = 0  # the job's labels are its own
    assert np.array_equal(job.X, Xk) and np.abs(job.X).sum() > 0


def test_a_checkpoint_keeps_a_due_refit(tmp_path):
    data, X = zoo(300, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    r = SLARouter(contextual(0.8), data.n_models, X.shape[1], seed=3)
    r.defer_refits(True)
    _serve_until_refit_due(r, data, X)
    back = SLARouter.load(r.save(tmp_path / "due.safetensors"))
    back.defer_refits(True)
    a, b = r.take_refit(), back.take_refit()
    assert a is not None and b is not None
    assert np.array_equal(a.run(), b.run())


def test_checkpoint_with_non_finite_state_does_not_load(tmp_path):
    import json

    from safetensors.numpy import load_file, save_file
    from safetensors import safe_open

    data, X = zoo(200, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    r = SLARouter(contextual(0.8), data.n_models, X.shape[1], seed=1)
    for i in range(100):
        r.observe(r.decide(X[i], data.costs[i]), int(data.solved[i, 0]))
    p = r.save(tmp_path / "c.safetensors")
    with safe_open(str(p), framework="numpy") as fh:
        meta = json.loads(fh.metadata()["slarouter"])
    meta["policy"]["certificate"]["dr"] = "nan"
    save_file(load_file(str(p)), str(p), metadata={"slarouter": json.dumps(meta)})
    with pytest.raises(ValueError, match="not finite"):
        SLARouter.load(p)


def test_delayed_feedback_reaches_the_policy():
    data, X = zoo(1500, acc_easy=(0.9, 0.95), acc_hard=(0.3, 0.9), cost=(1.0, 10.0))
    fb = FeedbackConfig(kind="delayed", delay=40.0)
    sim = simulate(data, X, SimulationConfig(contextual(0.8), seed=2, feedback=fb))
    a = sim.arrays()
    in_flight = len(sim._in_flight)  # verdicts due after the stream ended
    assert in_flight > 0
    assert sim.router.policy.n_feedback == int((a["feedback"] >= 0).sum()) - in_flight
    assert len(sim.router.policy.pending) == data.n_requests - sim.router.policy.n_feedback
    assert a["satisfied"].mean() >= 0.78
    # the certificate knows how late: each thumb came after the 39 requests that followed
    # its own (delay 40 counts its own position), and the window's last 39 await theirs
    cert = sim.router.policy.cert
    assert cert.delay_sum == 39 * cert.thumbs and cert.pending() == 39


# -- configuration ---------------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [({"delta": -1.0}, "delta must be"), ({"delta": 0.5}, "delta must be"),
                                       ({"guarantee": "always"}, "guarantee must be"), ({"sla_window": -5}, "sla_window must be"), ({"h": 0.0}, "h must be"),
                                       ({"replan": 0}, "replan must be"), ({"text": 1}, "text must be"),
                                       ({"c_shared": math.nan}, "c_shared must be"),
                                       ({"clusters": -1}, "clusters must be"), ({"clusters": 2.5}, "clusters must be"),
                                       ({"prior_labels": 0.0}, "prior_labels must be")])
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        ContextualConfig(**kw)


def test_contextual_settings_only_with_contextual_mode():
    with pytest.raises(ValueError, match="only to mode='contextual'"):
        RouterConfig(alpha=0.7, mode="guarded", contextual=ContextualConfig(delta=0.01))
    cfg = RouterConfig.from_dict(contextual(0.7, delta=0.01).to_dict())
    assert cfg.settings.delta == 0.01 and cfg.mode == "contextual"


def test_contextual_settings_may_be_given_flat_as_a_method_spec_gives_them():
    cfg = RouterConfig.from_dict({"alpha": 0.7, "mode": "contextual", "clusters": 0, "delta": 0.1,
                                  "guarantee": "anytime"})
    assert cfg.settings == ContextualConfig(clusters=0, delta=0.1, guarantee="anytime")
    assert cfg.with_settings(clusters=4).settings == ContextualConfig(clusters=4, delta=0.1, guarantee="anytime")
    with pytest.raises(ValueError, match="only to mode='contextual'"):
        RouterConfig.from_dict({"alpha": 0.7, "mode": "paper", "clusters": 5})


def test_decide_refuses_bad_costs():
    r = SLARouter(contextual(0.7), 2, 4, seed=0)
    with pytest.raises(ValueError, match="costs"):
        r.decide(np.zeros(4, np.float32), np.array([1.0, -1.0]))


# -- the pieces ------------------------------------------------------------------------------
def test_multitask_logistic_gradient_and_fit():
    rng = np.random.default_rng(0)
    n, D, M = 3000, 5, 3
    X = rng.standard_normal((n, D))
    m = rng.integers(0, M, n)
    w = np.array([1.5, -1.0, 0.0, 0.5, 0.0])
    b = np.array([-1.0, 0.0, 1.0])
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ w + b[m])))).astype(float)
    theta = fit_multitask_logistic(X, m, y, M, c_shared=100.0, c_model=0.01)
    assert np.allclose(theta[:D], w, atol=0.2)
    assert np.allclose(theta[-M:], b, atol=0.2)
    # warm start from the answer stays at the answer
    again = fit_multitask_logistic(X, m, y, M, c_shared=100.0, c_model=0.01, init=theta)
    assert np.allclose(again, theta, atol=1e-3)
    # its predictions: each model's probability from the shared direction, its offset and intercept
    P = multitask_predictions(theta, X, M)
    truth = 1 / (1 + np.exp(-(X @ w[:, None] + b)))
    assert P.shape == (n, M) and np.abs(P - truth).mean() < 0.05
    # a fit without offsets (c_model 0) has D + M parameters: every model shares the direction
    blind = fit_multitask_logistic(X, m, y, M, c_shared=100.0, c_model=0.0)
    W, b0 = multitask_weights(blind, D, M)
    assert len(blind) == D + M and np.array_equal(W[:, 0], W[:, 2]) and np.array_equal(b0, blind[-M:])



def test_multitask_logistic_per_model_products_reach_the_written_out_optimum():
    # the fit computes each model's logits and gradient over its own rows (two products of
    # the labels' size per evaluation); it must minimise the objective as written out with a
    # (n, D) gather of d[m] and one-hot sums: the same optimum, with and without the prior
    from scipy.optimize import minimize

    rng = np.random.default_rng(7)
    n, D, M = 900, 24, 3
    X = rng.standard_normal((n, D)).astype(np.float32).astype(np.float64)
    m = rng.integers(0, M, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X[:, 0] + 0.5 * m - 0.5 + X[:, 1] * (m == 2))))).astype(float)
    onehot = np.eye(M)[m]
    pa, pb = np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])
    centre = X.mean(axis=0)

    def written_out(theta, prior):
        w, d, b = theta[:D], theta[D:D + D * M].reshape(M, D), theta[-M:]
        z = X @ w + b[m] + np.einsum("ij,ij->i", X, d[m])
        r = 1.0 / (1.0 + np.exp(-z)) - y
        f = (np.logaddexp(0.0, z) - y * z).sum() + w @ w / (2 * 10.0) + 1e-4 * (b @ b) / 2 + (d * d).sum() / 2
        gw, gd, gb = X.T @ r + w / 10.0, (onehot * r[:, None]).T @ X + d, onehot.T @ r + 1e-4 * b
        if prior:
            zc = centre @ w + b + d @ centre
            rc = (pa + pb) / (1.0 + np.exp(-zc)) - pa
            f += (pa * np.logaddexp(0.0, -zc) + pb * np.logaddexp(0.0, zc)).sum()
            gw, gd, gb = gw + centre * rc.sum(), gd + np.outer(rc, centre), gb + rc
        return f, np.concatenate([gw, gd.ravel(), gb])

    for prior in (False, True):
        reference = minimize(written_out, np.zeros(D * (M + 1) + M), args=(prior,), jac=True,
                             method="L-BFGS-B", options={"maxiter": 500, "gtol": 1e-10, "ftol": 1e-15}).x
        theta = fit_multitask_logistic(X, m, y, M, 10.0, 1.0, prior=(pa, pb) if prior else None)
        assert np.abs(multitask_predictions(theta, X, M) - multitask_predictions(reference, X, M)).max() < 1e-4
        assert written_out(theta, prior)[0] <= written_out(reference, prior)[0] + 1e-6


def test_level_prior_keeps_a_model_with_unanimous_labels_from_predicting_certainty():
    # 11 thumbs up of 11 for model 1, mixed labels for model 0: without a prior model 1's
    # intercept runs off and it "solves" every request; with Beta(1, 1) pseudo-labels at the
    # labels' mean embedding it predicts about 12 / 13 there, as the level posterior does
    rng = np.random.default_rng(3)
    D, M = 16, 2
    X = rng.standard_normal((71, D)) / 4
    m = np.r_[np.zeros(60, np.int64), np.ones(11, np.int64)]
    y = np.r_[(rng.random(60) < 0.5).astype(float), np.ones(11)]
    bare = multitask_predictions(fit_multitask_logistic(X, m, y, M, 10.0, 1.0), X, M)
    prior = (np.ones(M), np.ones(M))
    theta = fit_multitask_logistic(X, m, y, M, 10.0, 1.0, prior=prior)
    P = multitask_predictions(theta, X, M)
    assert bare[:, 1].min() > 0.999
    at_centre = multitask_predictions(theta, X.mean(0, keepdims=True), M)[0]
    assert abs(at_centre[1] - 12 / 13) < 0.03 and P[:, 1].max() < 0.99
    assert abs(at_centre[0] - (y[:60].sum() + 1) / 62) < 0.05
    # the gradient the fit uses matches the objective (the prior's terms included)
    rng2 = np.random.default_rng(4)
    X2, m2 = rng2.standard_normal((40, 3)), rng2.integers(0, 2, 40)
    y2 = (rng2.random(40) < 0.6).astype(float)
    a2, b2 = np.array([3.0, 0.5]), np.array([1.0, 2.0])
    t2 = fit_multitask_logistic(X2, m2, y2, 2, 2.0, 0.5, prior=(a2, b2))

    def objective(theta):
        W, b = multitask_weights(theta, 3, 2)
        z = (X2 @ W + b)[np.arange(40), m2]
        zc = X2.mean(0) @ W + b
        w, d = theta[:3], theta[3:9].reshape(2, 3)
        return (np.sum(np.logaddexp(0, z) - y2 * z) + np.sum(a2 * np.logaddexp(0, -zc) + b2 * np.logaddexp(0, zc))
                + w @ w / 4.0 + (d * d).sum() / 1.0 + 1e-4 * (b @ b) / 2)

    # the fit is the objective's minimum: no small step in any coordinate lowers it
    f0 = objective(t2)
    for k in range(len(t2)):
        for eps in (1e-3, -1e-3):
            step = t2.copy()
            step[k] += eps
            assert objective(step) >= f0 - 1e-7


@pytest.mark.parametrize("level_prior", [False, True])
def test_policy_fits_its_levels_prior_into_the_text_model_when_asked(level_prior):
    # model 1 answers 20 thumbs up of 20: the bare fit predicts certainty everywhere; with
    # level_prior the policy's Beta(1, 1) level prior keeps it near 21 / 22
    r = SLARouter(contextual(0.7, level_prior=level_prior, min_labels=16), 2, 8, seed=0)
    pol = r.policy
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((60, 8)) / 4).astype(np.float32)
    for i, x in enumerate(X):
        m = int(i % 3 == 0)
        pol._learn(m, 0.5, x, 1.0 if m else float(rng.random() < 0.5), 2, 0.5)
    assert pol.theta is not None
    p1 = pol.predict(X)[:, 1]
    if level_prior:
        assert 0.85 < float(np.median(p1)) < 0.98
    else:
        assert p1.min() > 0.999


# -- an LLM judge's verdicts teach the text model (judge_labels) ---------------------------------
def _judged_run(judge_labels: bool = True, judge_fill: bool = True, seed: int = 1, **kw):
    from slarouter_core.judge import ACPBENCH_JUDGE

    data, X = zoo(1500, acc_easy=(0.9, 0.95), acc_hard=(0.15, 0.9), cost=(1.0, 10.0), seed=2)
    fb = FeedbackConfig(judge_fill=ACPBENCH_JUDGE if judge_fill else None)
    sim = Simulation(data, X, SimulationConfig(contextual(0.85, judge_labels=judge_labels, **kw), seed=seed,
                                               feedback=fb, feedback_rate=0.2))
    return sim, X


def test_judged_answers_teach_the_text_model_from_enough_calibration_pairs_on():
    """With a judge reading every answer and thumbs on a fifth of them, the text model learns from
    the calibrated verdicts on the unrated answers too, but only from the
    ``JUDGE_LABEL_PAIRS``-th calibration pair on: it then tells the cheap model's easy
    requests from its hard ones far better than the thumbs alone teach it."""
    from slarouter_core.policies.contextual import JUDGE_LABEL_PAIRS

    sim, X = _judged_run(True)
    pol = sim.router.policy
    for _ in range(900):  # one step at a time: nothing learned from the judge before enough pairs
        before = pol.cert.pairs_n
        taken = pol.n_judge_labels
        sim.step(1)
        if before < JUDGE_LABEL_PAIRS:
            assert pol.n_judge_labels == taken
    assert pol.n_judge_labels > 200 and pol.lab_n == pol.n_feedback + pol.n_judge_labels
    _, _, y, _ = pol.labels()
    assert np.any((y > 0) & (y < 1))  # soft labels: calibrated verdicts, not raw 0/1
    off, _ = _judged_run(False)
    off.step(900)
    assert off.router.policy.n_judge_labels == 0 and off.router.policy.lab_n == off.router.policy.n_feedback
    truth = np.where(X[:, 0] > 0, 0.15, 0.9)  # the cheap model 0 on each request (hard, easy)

    def error(sim):
        return float(np.abs(sim.router.policy.predict(X)[:, 0] - truth).mean())

    errors = {True: [error(sim)], False: [error(off)]}
    for seed in (2, 3):  # 0.36x-0.71x of the error by seed: compared over three
        for on in (True, False):
            other, _ = _judged_run(on, seed=seed)
            other.step(900)
            errors[on].append(error(other))
    assert np.mean(errors[True]) < 0.75 * np.mean(errors[False]), errors


def _served_with_late_verdicts(n: int = 400, check=None, **kw):
    """A router in the service's order: half the answers rated at once with the judge's
    verdict (calibration pairs), the other half observed without thumbs and judged later
    (``check(policy, pairs, soft)`` after each such verdict, with the calibration pairs
    and soft labels before it)."""
    data, X = zoo(n, acc_easy=(0.9, 0.95), acc_hard=(0.15, 0.9), cost=(1.0, 10.0), seed=4)
    r = SLARouter(contextual(0.85, **kw), data.n_models, X.shape[1], seed=0)
    pol = r.policy
    judged = []
    for i in range(n):
        d = r.decide(X[i], data.costs[i])
        y = int(data.solved[i, d.model])
        if i % 2 == 0:  # thumbs, with the judge's verdict on the same answer: a calibration pair
            r.observe(d, y, judge=y)
        else:
            r.observe(d, None)
            pairs, soft = pol.cert.pairs_n, pol.n_judge_labels
            r.judge_verdict(d.t, y)
            if check is not None:
                check(pol, pairs, soft)
            judged.append((d.t, y))
    return r, judged


def test_a_verdict_that_arrives_after_the_reply_teaches_the_text_model_once():
    """The service's order: the step is observed without thumbs, the judge's verdict comes
    later (``judge_verdict``); it becomes a soft label once the calibration has its pairs,
    and a second verdict for the same answer is not learned again."""
    from slarouter_core.policies.contextual import JUDGE_LABEL_PAIRS

    def check(pol, pairs, taken):
        assert pol.n_judge_labels == taken + (pairs >= JUDGE_LABEL_PAIRS)

    r, judged = _served_with_late_verdicts(600, check)
    pol = r.policy
    assert pol.n_judge_labels > 200
    taken = pol.n_judge_labels
    r.judge_verdict(judged[-1][0], 1)  # judged already: nothing new
    assert pol.n_judge_labels == taken


def test_late_thumbs_take_the_place_of_the_judges_soft_label():
    """Thumbs that arrive after the judge's verdict was learned replace its soft label in
    the text model's labels: one label per answer, the thumbs' value, counted as thumbs."""
    r, judged = _served_with_late_verdicts()
    pol = r.policy
    t, y = judged[-1]
    slot = pol.pending[t][6]
    assert slot is not None and pol.lab_y[slot] not in (0.0, 1.0)  # a soft label
    kept, soft, thumbs = pol.lab_n, pol.n_judge_labels, pol.n_feedback
    r.late_feedback(t, 1 - y)
    assert pol.lab_n == kept and pol.lab_y[slot] == 1 - y
    assert pol.n_judge_labels == soft - 1 and pol.n_feedback == thumbs + 1
    t0, y0 = judged[0]  # judged before the calibration had its pairs: no soft label to replace
    assert pol.pending[t0][6] is None
    r.late_feedback(t0, y0)
    assert pol.lab_n == kept + 1 and pol.lab_y[(kept) % pol.config.max_labels] == y0


@pytest.mark.parametrize("max_labels", [20_000, 64])
def test_a_checkpoint_keeps_where_a_pending_soft_label_is(tmp_path, max_labels):
    """The slot survives a save and load (the ring is stored oldest first, so a ring that
    wrapped loads in another order), and late thumbs then replace the same label in both
    routers, bit for bit; a soft label the ring has dropped is not replaced."""
    r, judged = _served_with_late_verdicts(max_labels=max_labels)
    assert (r.policy.lab_n > max_labels) == (max_labels == 64)
    b = SLARouter.load(r.save(tmp_path / "late.safetensors"))
    t, y = judged[-1]
    assert b.policy.pending[t][6] is not None
    for router in (r, b):
        router.late_feedback(t, 1 - y)
    for a, c in zip(r.policy.labels(), b.policy.labels()):
        assert np.array_equal(a, c)
    if max_labels == 64:
        old = next(tt for tt, _ in judged if r.policy.pending.get(tt, (None,) * 7)[6] is not None
                   and r.policy.lab_n - r.policy.pending[tt][6] > max_labels)
        assert b.policy.pending[old][6] is None  # dropped from the ring: stored as none


@pytest.mark.parametrize("setting", ["judge_labels", "judge_levels"])
def test_the_judge_settings_change_nothing_without_a_judge(setting):
    a, _ = _judged_run(judge_fill=False, **{setting: True})
    b, _ = _judged_run(judge_fill=False, **{setting: False})
    a.step(500)
    b.step(500)
    for k in ("model", "s_used", "q"):
        assert np.array_equal(a.arrays()[k], b.arrays()[k])


def test_a_checkpoint_keeps_the_judge_labels_count(tmp_path):
    sim, X = _judged_run(True)
    sim.step(400)
    r = sim.router
    assert r.policy.n_judge_labels > 0
    b = SLARouter.load(r.save(tmp_path / "j.safetensors"))
    assert b.policy.n_judge_labels == r.policy.n_judge_labels
    assert b.policy.next_fit == r.policy.next_fit and b.policy.lab_n == r.policy.lab_n


# -- judge_levels: each model's level read from the judge's verdicts, corrected by its error rates ---
def _judged_blind_steps(levels, n, fpr, fnr, rate: float = 0.2, seed: int = 0, **kw):
    """A contextual policy given ``n`` request-blind steps of each model (satisfied with
    probability ``levels[m]``), a judge's verdict on every answer (error rates ``fpr[m]``,
    ``fnr[m]`` on model m's answers) and thumbs on a share ``rate`` of them, the models'
    steps taking turns (``test_certificate.blind_steps`` serves one model with one judge)."""
    from slarouter_core.policies.base import PolicyStep
    from slarouter_core.policies.contextual import ContextualPolicy

    rng = np.random.default_rng(seed)
    M = len(levels)
    pol = ContextualPolicy(ContextualConfig(**kw), alpha=0.7, n_models=M, dim=4, seed=0)
    x = np.zeros(4, np.float32)
    t = 0
    for _ in range(n):
        for m in range(M):
            t += 1
            y = float(rng.random() < levels[m])
            verdict = float(rng.random() >= fnr[m]) if y else float(rng.random() < fpr[m])
            step = PolicyStep(t=t, model=m, explored=True, p_explore=1.0, shat=np.full(M, 0.5), q=0.0,
                              v=1.0, shat_served=0.5, blind=True)
            pol.update(step, x, y if rng.random() < rate else None, judge=verdict)
    return pol


def test_judge_levels_read_a_biased_judges_verdicts_through_its_measured_error_rates():
    """A judge that says yes to 30% of wrong answers and no to 15% of right ones reads
    model 0 (50%) at 57.5% and model 1 (80%) at 74%; corrected by its error rates as the
    thumbed answers measure them, the levels are within a few points of the truth. Such a
    judge is worth fewer labels than the thumbs (its errors are measured on them); one
    with the paper's ACPBench error rates is worth more, and the levels read whichever
    says more."""
    pol = _judged_blind_steps([0.5, 0.8], 6000, fpr=[0.3, 0.3], fnr=[0.15, 0.15], dr_levels=False, sla_window=20_000)
    raw = pol.judge_v / pol.judge_n
    level, eff = pol.judge_evidence()
    assert np.all(np.abs(raw - [0.5, 0.8]) > 0.05), raw
    assert np.all(np.abs(level - [0.5, 0.8]) < 0.05), level
    assert np.all(eff < pol.blind_cnt), (eff, pol.blind_cnt)
    good = _judged_blind_steps([0.5, 0.8], 1000, fpr=[0.066, 0.066], fnr=[0.049, 0.049], dr_levels=False)
    good_level, good_eff = good.judge_evidence()
    assert np.all(np.abs(good_level - [0.5, 0.8]) < 0.04) and np.all(good_eff > 1.5 * good.blind_cnt), (good_level, good_eff)
    for p in (pol, good):
        mean, _ = p.blind_posterior()
        lv, ef = p.judge_evidence()
        use = (ef > p.blind_cnt) & (ef >= p.config.min_labels)
        assert use.any() == (p is good)
        assert np.allclose(mean, p.level_mean(np.where(use, lv * ef, p.blind_pos), np.where(use, ef, p.blind_cnt)))


def test_judge_levels_correct_each_models_own_error_rates_once_its_pairs_say_so():
    """A judge that errs on one model's answers only (false positives on model 0's): the
    pooled rates would read it far too high; its own thumbed answers correct it."""
    pol = _judged_blind_steps([0.5, 0.8], 6000, fpr=[0.4, 0.02], fnr=[0.05, 0.05], dr_levels=False, sla_window=20_000)
    level, _ = pol.judge_evidence()
    assert abs(level[0] - 0.5) < 0.04 and abs(level[1] - 0.8) < 0.03, level


def test_judge_levels_trust_the_thumbs_where_the_judge_says_little():
    """A judge at chance (half its verdicts wrong) says nothing of the level: the levels are the thumbs'."""
    pol = _judged_blind_steps([0.5, 0.8], 600, fpr=[0.5, 0.5], fnr=[0.5, 0.5], dr_levels=False)
    _, eff = pol.judge_evidence()
    assert not eff.any()
    assert np.array_equal(pol.blind_evidence()[1], pol.blind_cnt)
    off = _judged_blind_steps([0.5, 0.8], 600, fpr=[0.3, 0.3], fnr=[0.05, 0.05], dr_levels=False, judge_levels=False)
    assert np.array_equal(off.blind_evidence()[1], off.blind_cnt)  # switched off: the thumbs alone


def test_judge_levels_find_the_best_model_sooner_with_a_judge():
    """With a judge reading every answer, the fallback serves the best model (92% and 82%,
    against the next one's 75% and 65%, alpha 83%) on more of a stream's first half, and the
    stream is satisfied more often, than when the levels read the judge only through the
    doubly-robust values (same seeds, same verdicts)."""
    from slarouter_core.judge import ACPBENCH_JUDGE

    data, X = zoo(800, acc_easy=(0.3, 0.75, 0.92), acc_hard=(0.2, 0.65, 0.82), cost=(1.0, 3.0, 10.0), seed=5)
    share, sat = {}, {}
    for on in (True, False):
        runs = []
        for seed in range(6):
            sim = Simulation(data, X, SimulationConfig(contextual(0.83, judge_levels=on), seed=seed, feedback_rate=0.2,
                                                       feedback=FeedbackConfig(judge_fill=ACPBENCH_JUDGE)))
            sim.step(800)
            a = sim.arrays()
            runs.append((float(np.mean(a["model"][:400] == 2)), float(a["satisfied"].mean())))
        share[on], sat[on] = np.mean(runs, axis=0)
    assert share[True] > share[False] + 0.08 and sat[True] > sat[False], (share, sat)


def test_judge_levels_survive_a_checkpoint_and_an_older_one_loads_without_them(tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    sim, _ = _judged_run(True)
    sim.step(400)
    r = sim.router
    pol = r.policy
    assert pol.judge_n.any() and pol.pair_tp.any()
    path = r.save(tmp_path / "jl.safetensors")
    back = SLARouter.load(path).policy
    for k in pol._BLIND_JUDGE:
        assert np.array_equal(getattr(back, k), getattr(pol, k)), k
    with safe_open(str(path), framework="numpy") as fh:
        meta = fh.metadata()
    arrays = load_file(str(path))
    older = {k: v for k, v in arrays.items() if not k.split(".")[-1] in pol._BLIND_JUDGE}
    save_file(older, str(tmp_path / "old.safetensors"), metadata=meta)
    old = SLARouter.load(tmp_path / "old.safetensors").policy
    assert not any(getattr(old, k).any() for k in pol._BLIND_JUDGE)
    arrays = dict(arrays)
    arrays[next(k for k in arrays if k.endswith("contextual.judge_n"))] = -np.ones(pol.M)
    save_file(arrays, str(tmp_path / "bad.safetensors"), metadata=meta)
    with pytest.raises(ValueError, match="judge_n"):
        SLARouter.load(tmp_path / "bad.safetensors")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(2, 4), st.floats(0.0, 1.0), st.integers(0, 10_000))
def test_price_reaches_the_target_when_it_can(n, M, tau, seed):
    rng = np.random.default_rng(seed)
    P = rng.random((n, M))
    C = rng.random((n, M)) * 10
    lam = price_for_target(P, C, tau)
    rows = np.arange(n)
    rate = P[rows, np.argmin(C - lam * P, axis=1)].mean()
    if P.max(axis=1).mean() >= tau + 1e-9:
        assert rate >= tau - 1e-9
    if lam == 0.0:
        assert P[rows, np.argmin(C, axis=1)].mean() >= tau


# -- stated accuracies: a prior the thumbs overrule ------------------------------------------
def test_stated_levels_are_the_prior_of_each_models_level():
    r = SLARouter(contextual(0.7, stated_levels=(0.5, 0.8, 0.6), stated_weight=20.0), 3, 4, seed=0)
    pol = r.policy
    assert np.allclose(pol.blind_posterior()[0], (0.5, 0.8, 0.6))
    assert np.allclose(pol.predict(np.zeros((2, 4)))[0], (0.5, 0.8, 0.6))  # before the first fit
    blank = SLARouter(contextual(0.7), 3, 4, seed=0).policy
    assert np.allclose(blank.blind_posterior()[0], 0.5)  # Beta(1, 1) without them
    with pytest.raises(ValueError, match="gives 2 levels for a zoo of 3 models"):
        SLARouter(contextual(0.7, stated_levels=(0.5, 0.8)), 3, 4, seed=0)


@pytest.mark.parametrize("levels, match", [((0.5, 1.2), r"stated_levels\[1\] must be"), ("0.5", "list of numbers"),
                                           ((math.nan,), r"stated_levels\[0\] must be")])
def test_bad_stated_levels_are_refused(levels, match):
    with pytest.raises(ValueError, match=match):
        ContextualConfig(stated_levels=levels)


def test_stated_levels_survive_a_checkpoint(tmp_path):
    r = SLARouter(contextual(0.7, stated_levels=[0.5, 0.8]), 2, 4, seed=0)
    b = SLARouter.load(r.save(tmp_path / "s.safetensors"))
    assert b.config.settings.stated_levels == (0.5, 0.8)
    assert np.allclose(b.policy.blind_posterior()[0], (0.5, 0.8))


def test_a_stated_best_model_is_served_before_any_label():
    """No thumbs at all: without statements the fallback can only guess; with them it
    serves the model stated best (not the dearest, a decoy)."""
    acc = (0.55, 0.78, 0.66)
    data, X = zoo(1500, acc_easy=acc, acc_hard=acc, cost=(1.0, 5.0, 40.0))
    stated = simulate(data, X, SimulationConfig(contextual(0.75, stated_levels=acc), feedback_rate=0.0,
                                                seed=0)).arrays()
    blind = simulate(data, X, SimulationConfig(contextual(0.75), feedback_rate=0.0, seed=0)).arrays()
    assert (stated["model"] == 1).mean() > 0.75  # all but the exploration
    assert (blind["model"] == 1).mean() < 0.6
    assert stated["satisfied"].mean() > blind["satisfied"].mean()


def test_the_thumbs_overrule_a_wrong_statement():
    """The dearest model is stated the best (0.9) and is the worst (0.3): the thumbs
    write it off and the SLA holds."""
    data, X = zoo(3000, acc_easy=(0.6, 0.9, 0.3), acc_hard=(0.6, 0.9, 0.3), cost=(1.0, 5.0, 40.0))
    for seed in range(2):
        a = simulate(data, X, SimulationConfig(contextual(0.8, stated_levels=(0.6, 0.7, 0.9)), feedback_rate=0.2,
                                               seed=seed)).arrays()
        assert a["satisfied"].mean() >= 0.8
        assert (a["model"][1500:] == 2).mean() < 0.05


@pytest.mark.parametrize("fallback", ["thompson", "level", "request"])
def test_the_reported_fallback_model_is_the_one_the_fallback_serves(fallback):
    """``fallback_model`` (what ``--misses`` reports) names the model the configured fallback
    serves every request, not the Thompson fallback's under another fallback; the per-request
    fallback has no one model."""
    from slarouter_core.policies.text_model import PRICE_CAP

    acc = (0.55, 0.78, 0.66)
    data, X = zoo(800, acc_easy=acc, acc_hard=acc, cost=(1.0, 5.0, 40.0))
    # model 1 stated far above the others and worth many labels, no thumbs: the Thompson
    # fallback serves it; the level fallback, every level optimistic to 1 without thumbs,
    # serves the cheapest
    sim = simulate(data, X, SimulationConfig(contextual(0.75, fallback=fallback, stated_levels=acc,
                                                        stated_weight=1000.0), feedback_rate=0.0, seed=0))
    a, policy = sim.arrays(), sim.router.policy
    if fallback == "request":
        assert policy.fallback_model() is None
        return
    served = {"thompson": 1, "level": 0}[fallback]
    assert policy.fallback_model() == served
    assert (a["model"][~a["explored"]] == served).mean() > 0.95
    if fallback == "level":
        # now model 0 has the best mean level (61/102) and model 1 the best optimistic one
        # (2/4 on 2 thumbs): the level fallback serves and reports model 1
        policy.prior_a[:] = 1.0
        policy.prior_b[:] = 1.0
        policy.blind_pos[:] = (60.0, 1.0, 0.0)
        policy.blind_cnt[:] = (100.0, 2.0, 50.0)
        policy.blind_n[:] = 0.0  # thumbs-only levels
        assert int(np.argmax(policy.blind_posterior()[0])) == 0
        policy.lam = PRICE_CAP
        step = policy.choose(X[0], data.costs[0], t=801, u_explore=1.0, u_choice=0.5)
        assert step.model == policy.fallback_model() == 1


def test_the_memoised_blind_posterior_follows_every_change_of_what_it_reads():
    """The request-blind levels are read several times a step and memoised on what they
    are computed from: in-place writes (a checkpoint, forgetting, a test) and every served
    step show at once, and the memo cannot be written through."""
    data, X = zoo(400, [0.9, 0.6], [0.5, 0.2], [10.0, 1.0], seed=2)
    r = SLARouter(contextual(0.7), data.n_models, X.shape[1], seed=0)
    pol = r.policy
    for i in range(300):
        d = r.decide(X[i], data.costs[i])
        r.observe(d, int(data.solved[i, d.model]) if i % 3 == 0 else None)
        mean, size = pol.blind_posterior()
        pos, cnt = pol.blind_evidence()
        assert np.array_equal(mean, pol.level_mean(pos, cnt)) and np.array_equal(size, cnt + pol.prior_a + pol.prior_b)
    with pytest.raises(ValueError):
        mean[0] = 0.5
    pol.blind_cnt[0] += 50  # written in place
    pos, cnt = pol.blind_evidence()
    assert np.array_equal(pol.blind_posterior()[0], pol.level_mean(pos, cnt))
    pol.prior_a = pol.prior_a * 3  # replaced
    assert np.array_equal(pol.blind_posterior()[1], pol.blind_evidence()[1] + pol.prior_a + pol.prior_b)


# -- thin_fallback: the Thompson fallback pays a dearer, worse model only its cost ratio -------
def _fallback_policy(levels, counts, costs, alpha: float = 0.7, **kw):
    """A contextual policy whose request-blind thumbs put each model at ``levels`` on
    ``counts`` labels, its models costing ``costs`` on average."""
    from slarouter_core.policies.contextual import ContextualPolicy

    pol = ContextualPolicy(ContextualConfig(dr_levels=False, **kw), alpha=alpha, n_models=len(levels), dim=4, seed=0)
    cnt = np.asarray(counts, float)
    pol.blind_cnt[:], pol.blind_pos[:] = cnt, np.round(np.asarray(levels) * cnt)
    pol.cost_sum[:], pol.ref_n = np.asarray(costs, float) * 100, 100
    return pol


def test_the_fallback_thins_a_dearer_worse_model_at_its_cost_ratio_to_the_model_that_carries_alpha():
    """Model 1 carries alpha (85% on 200 labels); model 2, ten times dearer and below it
    on 3 of 4 thumbs, often draws above it: each of its picks is kept at 2/20, the rest
    served by the draw's best model not thinned. A dearer model that looks better, or a
    zoo where none reaches alpha yet, is not thinned; without ``thin_fallback`` the
    draws fall as they are."""
    from slarouter_core.policies.contextual import _BEST_DRAWS

    costs = (1.0, 2.0, 20.0)
    # every draw's best serves (not the repayer least per point, nor a committed model)
    kw = dict(repay_cost=False, commit=1.0)
    pol = _fallback_policy((0.3, 0.85, 0.75), (100, 200, 4), costs, **kw)
    assert np.allclose(pol.fallback_weights(), (1.0, 1.0, 0.1))
    off = _fallback_policy((0.3, 0.85, 0.75), (100, 200, 4), costs, thin_fallback=False, **kw)
    assert np.array_equal(off.fallback_weights(), np.ones(3))
    shares = {}
    for name, p in (("on", pol), ("off", off)):
        share = np.zeros(3)
        for k in range(50):
            share += p.thompson_shares(np.random.default_rng(k))[2]
        shares[name] = share / 50
    assert shares["off"][2] > 0.15  # a thinly labelled model draws high often
    assert shares["on"][2] < 0.25 * shares["off"][2]
    assert shares["on"][1] > shares["off"][1] and shares["on"][0] == pytest.approx(shares["off"][0], abs=1.5 / _BEST_DRAWS)
    # a dearer model above the reference's level, or no model reaching alpha: every draw kept
    assert np.array_equal(_fallback_policy((0.3, 0.85, 0.95), (100, 200, 20), costs).fallback_weights(), np.ones(3))
    assert np.array_equal(_fallback_policy((0.3, 0.6, 0.5), (100, 200, 4), costs).fallback_weights(), np.ones(3))
    # the reference is the cheapest model at or above alpha: a dearer one above alpha but below it is thinned
    assert np.allclose(_fallback_policy((0.72, 0.85, 0.71), (100, 200, 40), costs).fallback_weights(), (1.0, 1.0, 0.05))


def test_the_fallback_serves_its_thinned_pick_without_repay_cost_too():
    """Thinning reaches the served model whichever options are on: without ``repay_cost``
    (the ``--ablate repay`` runs) a capped step serves the Thompson fallback's own pick,
    the thinned one, not the best level of its first draw (the dearer, worse model then
    served as often as without thinning)."""
    from slarouter_core.policies.contextual import PRICE_CAP

    costs = np.array([1.0, 2.0, 20.0])
    served = {}
    for thin in (True, False):
        pol = _fallback_policy((0.3, 0.85, 0.75), (100, 200, 4), costs, repay_cost=False, commit=1.0,
                               explore_c=0.0, thin_fallback=thin)
        pol.lam = PRICE_CAP  # no price reaches the target: the fallback serves
        steps = [t for t in range(2, 400) if t % pol.config.replan]  # no replan resets the price
        models = np.array([pol.choose(np.zeros(4, np.float32), costs, t, 1.0, 0.5).model for t in steps])
        served[thin] = (models == 2).mean()
        if thin:  # each step serves the pick its own draws give
            picks = [pol.thompson_shares(np.random.Generator(np.random.PCG64([pol.seed, t])))[3] for t in steps]
            assert np.array_equal(models, picks)
    assert served[False] > 0.1  # a thinly labelled model draws high often
    assert served[True] < 0.25 * served[False]


def test_thinning_the_fallback_spends_less_on_a_dear_model_that_is_not_the_best():
    """A 60x model below a 2x model that carries alpha: over seeds 0-7 the runs that thin
    the fallback serve it less and cost less, at the same satisfaction (one point). Not
    to none: where it drew lucky thumbs first it looks the better model and is not
    thinned until its level falls below the 2x model's."""
    acc = (0.3, 0.85, 0.7)
    data, X = zoo(1500, acc_easy=acc, acc_hard=acc, cost=(1.0, 2.0, 60.0), seed=4)
    runs = {}
    for thin in (False, True):
        arrays = [simulate(data, X, SimulationConfig(contextual(0.7, thin_fallback=thin), seed=seed)).arrays()
                  for seed in range(8)]
        runs[thin] = (np.mean([(a["model"] == 2).mean() for a in arrays]), np.mean([a["cost"].mean() for a in arrays]),
                      np.mean([a["satisfied"].mean() for a in arrays]))
    assert runs[True][0] < 0.85 * runs[False][0]  # 4.4% of requests against 5.4%
    assert runs[True][1] < 0.92 * runs[False][1]  # 12% less
    assert runs[True][2] > runs[False][2] - 0.01


# -- fallback_contenders: the Thompson fallback draws a dearer model only while it may be best --
def test_the_fallback_draws_a_dearer_model_only_while_it_may_be_the_best():
    """The leader at 90% on 100 thumbs (cost 1); eight models ten times dearer at 1 of 2
    thumbs each (Beta(2, 2), whose 95% quantile stays under the leader's mean: written off)
    and a cheaper model at 0 of 2. Each of the eight draws above the leader now and then,
    together on about a quarter of the draws: with ``fallback_contenders`` none of them is
    drawn, the cheaper model still is (its draws are how a best model written off on its
    first thumbs comes back), and a dear model that may be best is drawn as before."""
    levels = (0.9,) + (0.5,) * 8 + (0.0,)
    counts = (100,) + (2,) * 8 + (2,)
    costs = (1.0,) + (10.0,) * 8 + (0.5,)
    kw = dict(repay_cost=False, commit=1.0, thin_fallback=False)  # every draw's best serves
    on = _fallback_policy(levels, counts, costs, alpha=0.85, fallback_contenders=True, **kw)
    off = _fallback_policy(levels, counts, costs, alpha=0.85, **kw)  # the default: every model drawn
    assert np.array_equal(on.fallback_drawable(), [True] + [False] * 8 + [True])
    shares = {}
    for name, p in (("on", on), ("off", off)):
        shares[name] = np.mean([p.thompson_shares(np.random.default_rng(k))[2] for k in range(50)], axis=0)
    assert shares["off"][1:9].sum() > 0.1  # the written-off dear models draw high often
    assert shares["on"][1:9].sum() == 0.0
    assert shares["on"][0] > shares["off"][0]
    # the cheap model keeps its draws: on 0 of 2 (Beta(1, 3)) rarely, but not never
    draws = on.thompson_shares(np.random.default_rng(0))[1]
    assert draws[:, 9].min() > 0.0 and np.all(draws[:, 1:9] == 0.0)
    # a dear model that may still be the best (5 of 6 thumbs) stays drawable
    may = _fallback_policy((0.9, 0.83, 0.0), (100, 6, 2), (1.0, 10.0, 0.5), alpha=0.85)
    assert np.array_equal(may.fallback_drawable(), [True, True, True])
    # the leader is always drawable, however dear
    dear_leader = _fallback_policy((0.5, 0.9), (2, 100), (1.0, 50.0), alpha=0.85)
    assert dear_leader.fallback_drawable()[1]


def test_the_fallback_spends_less_on_dear_written_off_models():
    """Eight dear models at 55% against a cheap 90% model, alpha 0.89 (just under it, so
    the fallback serves most of the stream and no model's level reaches alpha early, when
    ``thin_fallback`` cannot act): over seeds 0-5 the runs that draw only contenders serve
    the dear models less (13.7% of requests against 16.7%), cost less (15% less) and
    satisfy no fewer requests (1.5 points more)."""
    acc = (0.9,) + (0.55,) * 8
    data, X = zoo(1500, acc_easy=acc, acc_hard=acc, cost=(1.0,) + tuple(8.0 + 4 * i for i in range(8)), seed=5)
    runs = {}
    for on in (False, True):
        arrays = [simulate(data, X, SimulationConfig(contextual(0.89, fallback_contenders=on), seed=seed)).arrays()
                  for seed in range(6)]
        runs[on] = (np.mean([(a["model"] > 0).mean() for a in arrays]), np.mean([a["cost"].mean() for a in arrays]),
                    np.mean([a["satisfied"].mean() for a in arrays]))
    assert runs[True][0] < 0.9 * runs[False][0], runs
    assert runs[True][1] < 0.9 * runs[False][1], runs
    assert runs[True][2] > runs[False][2] - 0.01, runs


# -- plan_calibration (opt-in): the plan's picks, calibrated ---------------------------------
def _curse_zoo():
    """A cheap model whose success the text says little about, 32 embedding dimensions of
    noise for its offsets to fit: the plan picks it where its errors favour it."""
    return zoo(3000, acc_easy=(0.75, 0.95), acc_hard=(0.45, 0.9), cost=(1.0, 10.0), dim=32)


def test_plan_calibration_learns_the_over_prediction_of_the_plans_picks_and_delivers_more():
    data, X = _curse_zoo()
    alpha = 0.85
    sat = {}
    for on in (False, True):
        sat[on] = []
        for seed in range(4):
            sim = simulate(data, X, SimulationConfig(contextual(alpha, plan_calibration=on), seed=seed))
            pol = sim.router.policy
            over = pol.plan_over / (pol.plan_n + 32.0)
            if on:  # the cheap model's picks over-predicted by points; the dear model's not
                assert over[0] > 0.05 and abs(over[1]) < 0.03, over
            else:
                assert not pol.plan_n.any() and not pol.plan_over.any()
            sat[on].append(sim.arrays()["satisfied"].mean())
    # the plan stops counting on the cheap model's favourable errors: the runs end nearer
    # the path they steer by instead of below it
    assert np.mean(sat[True]) > np.mean(sat[False]) + 0.005, sat


def test_plan_levels_subtract_each_models_shrunk_over_prediction():
    from slarouter_core.policies.base import PolicyStep
    from slarouter_core.policies.contextual import PLAN_CALIBRATION_KEEP, PLAN_CALIBRATION_PRIOR, ContextualPolicy

    pol = ContextualPolicy(ContextualConfig(plan_calibration=True), alpha=0.8, n_models=2, dim=3, seed=0)
    x = np.zeros(3, np.float32)
    for t in range(1, 41):  # plan steps of model 0: predicted 0.9, thumbs down
        pol.update(PolicyStep(t=t, model=0, explored=False, p_explore=0.0, shat=np.array([0.9, 0.9]), q=1.0,
                              v=1.0, shat_served=0.9, blind=False), x, 0.0)
    for t in range(41, 61):  # request-blind steps (exploration, the fallback) do not count
        pol.update(PolicyStep(t=t, model=1, explored=True, p_explore=1.0, shat=np.array([0.9, 0.9]), q=1.0,
                              v=1.0, shat_served=0.9, blind=True), x, 0.0)
    w = PLAN_CALIBRATION_KEEP ** np.arange(40)
    expect = 0.9 * w.sum() / (w.sum() + PLAN_CALIBRATION_PRIOR)
    got = pol.plan_levels(np.array([[0.9, 0.9]]))
    assert got[0, 0] == pytest.approx(0.9 - expect) and got[0, 1] == 0.9
    assert pol.plan_levels(np.array([[0.1, 0.5]]))[0, 0] == 0.0  # never below 0
    off = ContextualPolicy(ContextualConfig(), alpha=0.8, n_models=2, dim=3, seed=0)
    P = np.array([[0.9, 0.4]])
    assert off.plan_levels(P) is P


def test_plan_calibration_survives_a_checkpoint_and_an_older_one_starts_uncorrected(tmp_path):
    from safetensors.numpy import load_file, save_file
    from safetensors import safe_open

    data, X = _curse_zoo()
    r = SLARouter(contextual(0.85, plan_calibration=True), data.n_models, X.shape[1], seed=2)
    for i in range(1500):
        d = r.decide(X[i], data.costs[i])
        r.observe(d, int(data.solved[i, d.model]) if i % 5 == 0 else None)
    pol = r.policy
    assert pol.plan_n.any()
    back = SLARouter.load(r.save(tmp_path / "cal.safetensors")).policy
    assert np.array_equal(back.plan_over, pol.plan_over) and np.array_equal(back.plan_n, pol.plan_n)
    p = tmp_path / "cal.safetensors"
    with safe_open(str(p), framework="numpy") as fh:
        meta = fh.metadata()
    arrays = load_file(str(p))
    older = {k: v for k, v in arrays.items() if not k.endswith(("plan_over", "plan_n"))}
    save_file(older, str(tmp_path / "old.safetensors"), metadata=meta)
    old = SLARouter.load(tmp_path / "old.safetensors").policy
    assert not old.plan_over.any() and not old.plan_n.any()
    arrays = dict(arrays)
    arrays[next(k for k in arrays if k.endswith("contextual.plan_n"))] = -np.ones(data.n_models)
    save_file(arrays, str(tmp_path / "bad.safetensors"), metadata=meta)
    with pytest.raises(ValueError, match="plan_n"):
        SLARouter.load(tmp_path / "bad.safetensors")
