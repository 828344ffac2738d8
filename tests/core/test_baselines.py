from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from slarouter_core import baselines as B
from slarouter_core.data import from_frame
from slarouter_core.router import RouterConfig
from slarouter_core.simulator import SimulationConfig, simulate, stream_plan

MODELS = ("small", "medium", "large")
ALPHA = 0.7
RATE = 0.5


def make_data(n: int = 300, seed: int = 0, informative: bool = True):
    """Three models; when ``informative`` the embedding says which models solve a request."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "doc_id": np.arange(n),
        "benchmark": np.where(np.arange(n) % 2 == 0, "a", "b"),
        "input_text": [f"q {i}" for i in range(n)],
    })
    hardness = rng.integers(0, 3, n)  # 0 easy (all solve), 1 medium+, 2 only large (mostly)
    for k, m in enumerate(MODELS):
        p = np.where(hardness <= k, 0.9, 0.15) if informative else np.full(n, 0.45 + 0.2 * k)
        frame[f"{m}_solved"] = (rng.random(n) < p).astype(int)
        frame[f"{m}_energy_joules"] = (10.0 ** (k + 1)) * rng.uniform(0.8, 1.2, n)
    emb = rng.normal(scale=0.3, size=(n, 8)).astype(np.float32)
    if informative:
        emb[np.arange(n), hardness] += 3.0
    return from_frame(frame), emb


@pytest.fixture(scope="module")
def split():
    data, emb = make_data()
    return B.split_history(data, emb, seed=42, history_fraction=0.3)


@pytest.fixture(scope="module")
def results(split):
    stream, semb, hist = split
    out = {}
    for name, f in B.METHODS.items():
        if name == "single":
            for m in stream.models:
                out[f"single:{m}"] = f(stream, semb, ALPHA, 42, RATE, history=hist, model=m)
        elif name == "slarouter":
            out["slarouter"] = f(stream, semb, ALPHA, 42, RATE, history=hist, V=1e-3)
        else:
            out[name] = f(stream, semb, ALPHA, 42, RATE, history=hist)
    return out


def test_split_history_is_a_seeded_partition():
    data, emb = make_data(n=101)
    s1, e1, h1 = B.split_history(data, emb, 7, 0.3)
    s2, e2, h2 = B.split_history(data, emb, 7, 0.3)
    s3, _, _ = B.split_history(data, emb, 8, 0.3)
    assert h1.n == round(0.3 * 101) and s1.n_requests + h1.n == 101
    ids_s, ids_h = set(s1.frame["doc_id"]), set(h1.data.frame["doc_id"])
    assert not ids_s & ids_h and len(ids_s | ids_h) == 101
    np.testing.assert_array_equal(s1.frame["doc_id"], s2.frame["doc_id"])
    assert not np.array_equal(s1.frame["doc_id"], s3.frame["doc_id"])
    # embeddings travel with their rows
    np.testing.assert_array_equal(e1, emb[s1.frame["doc_id"].to_numpy()])
    np.testing.assert_array_equal(h1.embeddings, emb[h1.data.frame["doc_id"].to_numpy()])
    with pytest.raises(ValueError, match="history_fraction"):
        B.split_history(data, emb, 7, 1.0)


def test_all_methods_share_the_stream(split, results):
    stream, _, _ = split
    order0, _, _ = stream_plan(stream.n_requests, stream.solved, RATE, 42)
    for name, r in results.items():
        np.testing.assert_array_equal(r.order, order0, err_msg=name)
        assert r.model.shape == (stream.n_requests,)
        assert r.summary.requests == stream.n_requests
        np.testing.assert_array_equal(r.satisfied, stream.solved[r.order, r.model])


def test_single_models_give_column_accuracy_and_cost(split, results):
    stream, _, _ = split
    for j, name in enumerate(stream.models):
        r = results[f"single:{name}"]
        assert r.summary.satisfaction == pytest.approx(stream.solved[:, j].mean(), abs=1e-12)
        assert r.summary.operating_cost == pytest.approx(stream.costs[:, j].sum())
        assert r.summary.call_ratio[j] == 1.0 and r.extra_cost == 0.0
    with pytest.raises(ValueError, match="unknown model"):
        B.single(stream, split[1], ALPHA, 0, RATE, model="huge")


def test_oracle_is_no_dearer_than_any_method_at_its_satisfaction(split, results):
    stream, _, _ = split
    oracle = results["oracle"]
    assert oracle.summary.satisfaction >= ALPHA
    assert oracle.info["lp_satisfaction"] >= ALPHA - 1e-9
    assert oracle.info["fractional_rows"] <= 1
    # integral rounding is at most one request's cost above the LP bound
    assert oracle.summary.operating_cost <= oracle.info["lp_cost"] + stream.costs.max() + 1e-6
    checked = 0
    for name, r in results.items():
        s = r.summary.satisfaction
        if name != "oracle" and s >= oracle.summary.satisfaction:
            assert oracle.summary.operating_cost <= r.total_cost + 1e-6, name
            checked += 1
        # the oracle LP at the method's own satisfaction is no dearer than the method
        _, cost_at_s, sat_at_s = B.oracle_lp(stream.solved, stream.costs, min(s, 0.999))
        assert sat_at_s >= min(s, 0.999) - 1e-9
        assert cost_at_s <= r.total_cost + 1e-6, name
    assert checked >= 2  # the large model at least reaches the oracle's satisfaction


def test_oracle_lp_matches_brute_force_on_tiny_instance():
    S = np.array([[1, 1], [0, 1], [0, 0], [1, 1]])
    C = np.array([[1.0, 5.0], [1.0, 4.0], [1.0, 9.0], [2.0, 3.0]])
    y, cost, sat = B.oracle_lp(S, C, 0.5)
    assert cost == pytest.approx(5.0) and sat >= 0.5 - 1e-9
    y, cost, sat = B.oracle_lp(S, C, 0.625)  # half of row 1 on the large model
    assert cost == pytest.approx(6.5) and sat == pytest.approx(0.625)
    assert B.round_oracle(y, S).tolist() == [0, 1, 0, 0]
    y, cost, sat = B.oracle_lp(S, C, 0.9)  # infeasible: cheapest routing at the maximum
    assert sat == pytest.approx(0.75) and cost == pytest.approx(1 + 4 + 1 + 2)


def test_static_mixture_lp_hits_alpha_exactly_when_feasible():
    acc = np.array([0.4, 0.6, 0.9])
    cost = np.array([1.0, 10.0, 100.0])
    for alpha in (0.45, 0.55, 0.7, 0.85, 0.9):
        f, ec, feasible = B.static_mixture_lp(acc, cost, alpha)
        assert feasible
        assert f.sum() == pytest.approx(1.0) and np.all(f >= 0)
        assert abs(f @ acc - alpha) <= 1e-9
        assert np.count_nonzero(f) <= 2
        assert ec == pytest.approx(f @ cost)
    f, ec, _ = B.static_mixture_lp(acc, cost, 0.55)  # hull: the cheap pair (0, 1)
    np.testing.assert_allclose(f, [0.25, 0.75, 0.0], atol=1e-12)
    f, ec, feasible = B.static_mixture_lp(acc, cost, 0.95)  # infeasible
    assert not feasible and f.tolist() == [0.0, 0.0, 1.0] and ec == 100.0


def test_static_mixture_realisation_uses_exact_counts(split, results):
    stream, _, _ = split
    r = results["static_mixture"]
    f = np.array(r.info["fractions"])
    assert r.info["feasible"]
    assert abs(r.info["expected_satisfaction"] - ALPHA) <= 1e-9
    assert abs(f @ stream.solved.mean(axis=0) - ALPHA) <= 1e-9
    counts = np.bincount(r.model, minlength=stream.n_models)
    assert counts.sum() == stream.n_requests
    np.testing.assert_array_less(np.abs(counts - f * stream.n_requests), 1.0 + 1e-9)
    assert B.exact_counts(np.array([1 / 3, 1 / 3, 1 / 3]), 10).sum() == 10


def test_messplus_exploration_charges_sum_of_all_costs(split):
    stream, semb, _ = split
    r = B.messplus(stream, semb, ALPHA, 42, 0.3, c=1e6)  # p_t = 1: every step explores
    assert r.explored.all()
    assert np.all(r.model == stream.n_models - 1)
    np.testing.assert_allclose(r.cost, stream.costs[r.order].sum(axis=1))
    assert r.summary.operating_cost == pytest.approx(stream.costs.sum())
    assert r.summary.satisfaction == pytest.approx(stream.solved[:, -1].mean())
    # mixed run: explored steps charged the sum, exploited steps the served model only
    r = B.messplus(stream, semb, ALPHA, 42, 0.3)
    C = stream.costs[r.order]
    np.testing.assert_allclose(r.cost[r.explored], C[r.explored].sum(axis=1))
    np.testing.assert_allclose(r.cost[~r.explored], C[~r.explored, r.model[~r.explored]])
    assert 0 < r.explored.sum() < len(r.explored)


def test_messplus_queue_frozen_without_feedback(split):
    stream, semb, _ = split
    r = B.messplus(stream, semb, ALPHA, 7, 0.3)
    _, plan, _ = stream_plan(stream.n_requests, stream.solved, 0.3, 7)
    gives = plan[:, 0] >= 0
    prev = np.concatenate([[0.0], r.q[:-1]])
    assert np.all(r.q[~gives] == prev[~gives])
    expected = np.maximum(0.0, prev[gives] + ALPHA - plan[gives, r.model[gives]])
    np.testing.assert_allclose(r.q[gives], expected)
    r0 = B.messplus(stream, semb, ALPHA, 7, 0.0)
    assert np.all(r0.q == 0.0) and r0.summary.feedback == 0


def test_carrot_extremes_of_mu(split):
    stream, semb, hist = split
    order, _, _ = stream_plan(stream.n_requests, stream.solved, RATE, 42)
    k = 10
    kappa = hist.data.costs.mean(axis=0).max()
    est = B.KNNEstimator(hist.embeddings, {"s": hist.data.solved, "c": hist.data.costs / kappa}, k)
    pred = est.predict(semb[order])
    r0 = B.carrot(stream, semb, ALPHA, 42, RATE, history=hist, mu=0.0, k=k, budget="full")
    r1 = B.carrot(stream, semb, ALPHA, 42, RATE, history=hist, mu=1.0, k=k, budget="full")
    # mu = 0: the highest predicted quality (ties: the cheaper model, i.e. the first)
    np.testing.assert_array_equal(r0.model, np.argmax(pred["s"], axis=1))
    assert np.all(pred["s"][np.arange(len(order)), r0.model] == pred["s"].max(axis=1))
    # mu = 1: the cheapest predicted cost, which here is always the small model
    np.testing.assert_array_equal(r1.model, np.argmin(pred["c"], axis=1))
    assert np.all(r1.model == 0)
    assert r0.summary.satisfaction > r1.summary.satisfaction
    assert r0.summary.operating_cost > r1.summary.operating_cost
    # training data = every model on every history request
    assert r0.extra_cost == pytest.approx(hist.data.costs.sum())
    assert r0.total_cost == pytest.approx(r0.summary.operating_cost + hist.data.costs.sum())


def test_carrot_tunes_mu_towards_alpha(split, results):
    stream, semb, hist = split
    r = results["carrot"]
    assert r.info["mu"] in B.TRADEOFF_GRID
    val = np.array(r.info["val_satisfaction"])
    assert len(val) == len(B.TRADEOFF_GRID)
    assert np.abs(val - ALPHA).min() == pytest.approx(abs(val[B.TRADEOFF_GRID.index(r.info["mu"])] - ALPHA))
    assert abs(r.summary.satisfaction - ALPHA) < 0.1
    h = B.carrot(stream, semb, ALPHA, 42, RATE, history=hist, tuning="holdout", budget="full")
    assert h.info["n_val"] == round(0.25 * hist.n)
    with pytest.raises(ValueError, match="history"):
        B.carrot(stream, semb, ALPHA, 42, RATE)


def test_select_k_prefers_smooth_neighbourhoods():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    Y = (rng.random((200, 1)) < 0.5).astype(float)  # labels independent of x: large k wins
    k, errors = B.select_k(X, Y, (1, 5, 40))
    assert k == 40 and errors[1] > errors[40]
    Y2 = (X[:, :1] > 0).astype(float)  # a clean boundary: small k beats k = n - 1
    k2, errors2 = B.select_k(X, Y2, (1, 5, 199))
    assert k2 in (1, 5) and errors2[k2] < errors2[199]


def test_rm_softmax_learns_the_best_action_per_context():
    rng = np.random.default_rng(0)
    n, M = 300, 3
    best = rng.integers(0, M, n)
    X = np.eye(M)[best] + rng.normal(scale=0.1, size=(n, M))
    Y = np.where(np.arange(M)[None] == best[:, None], 1.0, 0.0) + rng.normal(scale=0.1, size=(n, M))
    W, b = B.rm_softmax_fit(X, Y, steps=200)
    assert W.shape == (1, M, M) and b.shape == (1, M)
    route = np.argmax(X @ W[0] + b[0], axis=1)
    assert (route == best).mean() > 0.95
    # batched problems are independent: the same problem twice gives the same weights
    W2, _ = B.rm_softmax_fit(X, np.stack([Y, Y]), steps=200)
    np.testing.assert_allclose(W2[0], W2[1])
    np.testing.assert_allclose(W2[0], W[0], atol=1e-9)


def test_causal_log_cost_and_lambda(split, results):
    stream, semb, hist = split
    r = results["causal"]
    assert r.info["lambda"] in B.TRADEOFF_GRID
    # the log served every history request once (uniform logging): cost between the
    # cheapest and the dearest model's total, and about the mean of the model columns
    C = hist.data.costs
    assert C[:, 0].sum() < r.extra_cost < C[:, -1].sum()
    assert r.extra_cost == pytest.approx(C.mean(axis=1).sum(), rel=0.3)
    # matched budget: as many logged labels as an online router expects on the stream
    assert 0 < r.info["n_feedback"] <= hist.n
    # cost sensitivity: lambda = 1 is cheaper than lambda = 0
    lo = B.causal(stream, semb, ALPHA, 42, RATE, history=hist, lam=0.0)
    hi = B.causal(stream, semb, ALPHA, 42, RATE, history=hist, lam=1.0)
    assert hi.summary.operating_cost < lo.summary.operating_cost
    assert lo.summary.satisfaction >= hi.summary.satisfaction
    with pytest.raises(ValueError, match="feedback"):
        B.causal(stream, semb, ALPHA, 42, 0.0, history=hist)


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
    assert ddv.info["config"]["V"] is None
    with pytest.raises(ValueError, match="bad SLARouter parameter"):
        B.slarouter_router(stream, semb, ALPHA, 5, RATE, not_a_field=1)
    with pytest.raises(ValueError, match="mode"):
        B.slarouter_router(stream, semb, ALPHA, 5, RATE, mode="no-such-mode")
    # nested configs arrive as JSON dicts
    nested = B.slarouter_router(stream, semb, ALPHA, 5, RATE, V=1e-3, predictor={"lr": 0.05})
    assert nested.info["config"]["predictor"]["lr"] == 0.05
    plain = B.slarouter_router(stream, semb, ALPHA, 5, RATE, V=1e-3)
    assert plain.info["config"]["predictor"]["lr"] != 0.05
    assert not (np.array_equal(nested.model, plain.model) and np.array_equal(nested.q, plain.q))
    with pytest.raises(ValueError, match="bad SLARouter parameter"):
        B.check_params("slarouter", {"predictor": {"bogus": 1}})
    with pytest.raises(ValueError, match="alpha"):
        B.check_params("slarouter", {"alpha": 0.5})
    with pytest.raises(ValueError, match="muu"):
        B.check_params("carrot", {"muu": 1})
    B.check_params("carrot", {"mu": 0.5, "tuning": "holdout"})


def test_same_seed_same_result_different_seed_different_stream(split):
    stream, semb, hist = split
    for name in ("random", "static_mixture", "messplus", "carrot", "causal"):
        f = B.METHODS[name]
        a = f(stream, semb, ALPHA, 3, RATE, history=hist)
        b = f(stream, semb, ALPHA, 3, RATE, history=hist)
        c = f(stream, semb, ALPHA, 4, RATE, history=hist)
        np.testing.assert_array_equal(a.model, b.model, err_msg=name)
        np.testing.assert_array_equal(a.cost, b.cost, err_msg=name)
        np.testing.assert_equal(dataclasses.asdict(a.summary), dataclasses.asdict(b.summary))
        assert a.extra_cost == b.extra_cost
        assert not np.array_equal(a.order, c.order)


def test_bad_inputs_rejected(split):
    stream, semb, hist = split
    with pytest.raises(ValueError, match="alpha"):
        B.static_mixture(stream, semb, 1.5, 0, RATE)
    with pytest.raises(ValueError, match="out of range"):
        B.single(stream, semb, ALPHA, 0, RATE, model=5)
    with pytest.raises(ValueError, match="embeddings"):
        B.messplus(stream, semb[:10], ALPHA, 0, RATE)
    with pytest.raises(ValueError, match="feedback_rate"):
        B.random_router(stream, semb, ALPHA, 0, 1.5)
    with pytest.raises(ValueError, match="mu"):
        B.carrot(stream, semb, ALPHA, 0, RATE, history=hist, mu=2.0)
    with pytest.raises(ValueError, match="width"):
        B.carrot(stream, semb[:, :4], ALPHA, 0, RATE, history=hist)


# -- feedback models: every method on the same plan ---------------------------------------
from slarouter_core.feedback import FeedbackConfig  # noqa: E402
from slarouter_core.judge import GPQA_JUDGE  # noqa: E402
from slarouter_core.simulator import stream_plan_full  # noqa: E402


def _all_methods(stream, semb, hist, seed, feedback):
    out = {}
    for name, f in B.METHODS.items():
        kw = {"model": "medium"} if name == "single" else ({"V": 1e-3} if name == "slarouter" else {})
        out[name] = f(stream, semb, ALPHA, seed, RATE, history=hist, feedback=feedback, **kw)
    return out


@pytest.mark.parametrize("fcfg", [FeedbackConfig(kind="negative", negative_ratio=1.8),
                                  FeedbackConfig(kind="bursty", burst_length=10, on_fraction=0.6),
                                  FeedbackConfig(kind="drift", drift_mix=0.0)])
def test_every_method_gets_the_same_non_iid_plan(split, fcfg):
    stream, semb, hist = split
    order, fplan, _ = stream_plan_full(stream.n_requests, stream.solved, RATE, 5, True, fcfg, stream.benchmarks)
    iid_order, iid_plan, _ = stream_plan(stream.n_requests, stream.solved, RATE, 5)
    plan = fplan.feedback
    if fcfg.kind == "drift":  # the benchmark mix changes: first all of "a", then all of "b"
        assert not np.array_equal(order, iid_order)
        assert set(stream.benchmarks[order[: int((stream.benchmarks == "a").sum())]]) == {"a"}
    else:
        assert not np.array_equal(plan, iid_plan)
    res = _all_methods(stream, semb, hist, 5, fcfg)
    for name, r in res.items():
        np.testing.assert_array_equal(r.order, order, err_msg=name)
    for name in ("messplus", "slarouter"):  # online: the verdicts they saw are the plan's, for their models
        r = res[name]
        seen = plan[np.arange(stream.n_requests), r.model]
        assert r.summary.feedback == int((seen != -1).sum()), name
        if fcfg.kind == "negative":  # presence depends on the served model's label
            assert r.summary.feedback != int((iid_plan[np.arange(stream.n_requests), r.model] != -1).sum())


def test_iid_feedback_config_is_the_default_exactly(split):
    stream, semb, hist = split
    default = _all_methods(stream, semb, hist, 9, None)
    explicit = _all_methods(stream, semb, hist, 9, FeedbackConfig())
    for name in B.METHODS:
        a, b = default[name], explicit[name]
        np.testing.assert_array_equal(a.model, b.model, err_msg=name)
        np.testing.assert_array_equal(a.cost, b.cost, err_msg=name)
        np.testing.assert_equal(dataclasses.asdict(a.summary), dataclasses.asdict(b.summary))
    order, _, _ = stream_plan(stream.n_requests, stream.solved, RATE, 9)  # the old API's stream
    np.testing.assert_array_equal(default["messplus"].order, order)


def test_messplus_delayed_feedback(split):
    stream, semb, _ = split
    iid = B.messplus(stream, semb, ALPHA, 7, 0.3, V=1e-3)
    zero = B.messplus(stream, semb, ALPHA, 7, 0.3, V=1e-3, feedback=FeedbackConfig(kind="delayed", delay=0))
    np.testing.assert_array_equal(zero.model, iid.model)  # delay 0: the immediate path exactly
    np.testing.assert_array_equal(zero.q, iid.q)
    d = 40
    late = B.messplus(stream, semb, ALPHA, 7, 0.3, V=1e-3, feedback=FeedbackConfig(kind="delayed", delay=d))
    _, plan, _ = stream_plan(stream.n_requests, stream.solved, 0.3, 7)
    gives = np.flatnonzero(plan[np.arange(stream.n_requests), late.model] != -1)
    first_move = int(np.flatnonzero(late.q != 0)[0]) if (late.q != 0).any() else stream.n_requests
    # the queue cannot move before the first verdict arrives, d - 1 steps after it was given
    assert first_move >= gives[0] + d - 1
    # the queue replays the same verdicts, each d - 1 steps late
    q = 0.0
    expect = np.zeros(stream.n_requests)
    arrive = {int(i) + d - 1: int(i) for i in gives}
    for t in range(stream.n_requests):
        if t in arrive:
            j = arrive[t]
            q = max(0.0, q + ALPHA - plan[j, late.model[j]])
        expect[t] = q
    np.testing.assert_allclose(late.q, expect)
    assert not np.array_equal(late.model, iid.model)


def test_offline_methods_and_feedback_models(split):
    stream, semb, hist = split
    iid = B.causal(stream, semb, ALPHA, 3, RATE, history=hist, lam=0.3, budget="full")
    neg = B.causal(stream, semb, ALPHA, 3, RATE, history=hist, lam=0.3, budget="full",
                   feedback=FeedbackConfig(kind="negative", negative_ratio=1.9))
    assert neg.info["n_feedback"] > iid.info["n_feedback"]  # logged failures are labelled more often
    late = B.causal(stream, semb, ALPHA, 3, RATE, history=hist, lam=0.3, budget="full",
                    feedback=FeedbackConfig(kind="delayed"))
    np.testing.assert_array_equal(late.model, iid.model)  # offline: the log is complete before training
    c_iid = B.carrot(stream, semb, ALPHA, 3, RATE, history=hist, mu=0.0)
    c_burst = B.carrot(stream, semb, ALPHA, 3, RATE, history=hist, mu=0.0,
                       feedback=FeedbackConfig(kind="bursty", on_fraction=0.6))
    np.testing.assert_array_equal(c_burst.info["quality"], c_iid.info["quality"])  # fully labelled history
    c_judge = B.carrot(stream, semb, ALPHA, 3, RATE, history=hist, mu=0.0, feedback=FeedbackConfig(judge=GPQA_JUDGE))
    assert not np.array_equal(c_judge.info["quality"], c_iid.info["quality"])  # the judge labels its history
    assert c_judge.extra_cost == c_iid.extra_cost


def test_feedback_is_not_a_method_param(split):
    stream, semb, hist = split
    with pytest.raises(ValueError, match="not as a method param"):
        B.check_params("slarouter", {"feedback": {"kind": "bursty"}})
    with pytest.raises(ValueError, match="not as a method param"):
        B.check_params("messplus", {"feedback": {"kind": "bursty"}})
    with pytest.raises(TypeError, match="FeedbackConfig"):
        B.random_router(stream, semb, ALPHA, 0, RATE, feedback="bursty")
    with pytest.raises(ValueError, match="on_fraction"):
        B.messplus(stream, semb, ALPHA, 0, 0.5, feedback=FeedbackConfig(kind="bursty", on_fraction=0.25))


def test_offline_methods_get_the_online_feedback_budget(split):
    """CARROT and Causal see as many label events as an online router expects on the
    stream (rate * stream length), not every model's label on the whole history."""
    stream, semb, hist = split
    M = stream.n_models
    want = int(np.ceil(RATE * stream.n_requests / M))
    assert want < hist.n  # the budget binds on this split
    full = B.carrot(stream, semb, ALPHA, 5, RATE, history=hist, mu=0.5, k=5, budget="full")
    matched = B.carrot(stream, semb, ALPHA, 5, RATE, history=hist, mu=0.5, k=5)
    # the training cost is every model serving each history request it learns from
    per_request = hist.data.costs.sum(axis=1)
    assert full.extra_cost == pytest.approx(per_request.sum())
    assert matched.info["n_history"] == want and full.info["n_history"] == hist.n
    assert matched.extra_cost < full.extra_cost
    assert abs(want * M - RATE * stream.n_requests) <= M
    c_full = B.causal(stream, semb, ALPHA, 5, RATE, history=hist, lam=0.5, budget="full")
    c_matched = B.causal(stream, semb, ALPHA, 5, RATE, history=hist, lam=0.5)
    assert c_matched.info["n_feedback"] > c_full.info["n_feedback"]
    assert abs(c_matched.info["n_feedback"] - RATE * stream.n_requests) < 4 * np.sqrt(RATE * stream.n_requests)
    with pytest.raises(ValueError, match="budget"):
        B.carrot(stream, semb, ALPHA, 5, RATE, history=hist, budget="all")
