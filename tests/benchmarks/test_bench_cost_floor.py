"""The cost-floor benchmark's arithmetic: context accuracies, the split of a run's cost
(time-shares and oracle-priced routing are tested with the core, tests/core/test_preflight.py)."""

import math

import numpy as np
import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def floor():
    return load_script("bench_cost_floor")


def test_context_accuracy_is_each_contexts_own_mean(floor):
    solved = np.array([[1, 0], [0, 0], [1, 1], [1, 1]], float)
    P = floor.context_accuracy(solved, np.array([0, 0, 1, 1]))
    assert np.array_equal(P, [[0.5, 0], [0.5, 0], [1, 1], [1, 1]])


def test_the_split_records_what_each_decision_saw(floor, monkeypatch):
    """The run's split reads the predictions each choice used (the served model's is the
    step's own ``shat_served``), the fallback's steps as off the plan, and prices every
    column at the satisfaction the run delivered."""
    from slarouter_core.data import from_frame
    from slarouter_core.synthetic import generate_demo_frame

    data = from_frame(generate_demo_frame(600, seed=3))
    X = np.random.default_rng(0).normal(size=(data.n_requests, 8)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    runs = []
    real = floor.cost_split
    monkeypatch.setattr(floor, "cost_split", lambda data, X, sim, seen, capped, judge, seed: runs.append(
        (sim, seen, capped)) or real(data, X, sim, seen, capped, judge, seed))
    margin, cost, splits, (p, y) = floor.router_runs(data, X, 0.6, [0], judge=False)  # below the midpoint: the plan reaches it
    sim, seen, capped = runs[0]
    a = sim.arrays()
    assert np.array_equal(seen[np.arange(len(seen)), a["model"]], a["shat_served"])
    blind = a["explored"].astype(bool) | capped  # the steps the text did not choose, and only those
    assert np.array_equal(p, a["shat_served"][blind]) and np.array_equal(y, a["satisfied"][blind])
    assert 0 < capped.sum() < len(capped)  # the fallback served some steps, the plan others
    sat, router, own, last, uniform, off_plan, predicted, delivered, *shares = splits[0]
    assert np.allclose(shares, np.bincount(a["model"], minlength=data.n_models) / len(a["model"]))
    assert sat == pytest.approx(a["satisfied"].mean()) and router == pytest.approx(cost)
    assert off_plan == pytest.approx(1 - (~a["explored"] & ~capped).mean())
    assert delivered == pytest.approx(a["satisfied"][~a["explored"] & ~capped].mean())
    assert all(np.isfinite([own, last, uniform])) and margin > 0


def test_the_calibration_slope_reads_over_confidence(floor):
    """Outcomes drawn at the predictions read a slope near 1; the same outcomes against
    predictions spread twice as wide on the logit scale read near one half."""
    rng = np.random.default_rng(0)
    z = rng.normal(0.5, 1.2, 20_000)
    y = (rng.random(len(z)) < 1 / (1 + np.exp(-z))).astype(float)
    parts, slope = floor.calibration_row(1 / (1 + np.exp(-z)), y)
    assert slope == pytest.approx(1.0, abs=0.05) and len(parts) == floor.CALIBRATION_PARTS
    assert all(abs(a - b) < 0.03 for a, b in parts)
    wide, slope_wide = floor.calibration_row(1 / (1 + np.exp(-2 * z)), y)
    assert slope_wide == pytest.approx(0.5, abs=0.03)
    assert wide[0][0] < wide[0][1] and wide[-1][0] > wide[-1][1]  # low ones under, high ones over
    assert np.isnan(floor.calibration_row(np.full(10, 0.7), y[:10])[1])


def test_an_encoder_that_is_not_there_is_refused_before_any_run(floor, capsys):
    with pytest.raises(SystemExit) as stop:
        floor.main(["--encoder", "hf:/nonexistent/model"])
    assert stop.value.code == 2 and "not available" in capsys.readouterr().err


def test_the_offline_text_model_is_penalised_as_the_router_is(floor, monkeypatch):
    """The text floor's fit reads the router's own ``c_shared`` and ``c_model`` (its offsets
    were once held ten times looser than the shared direction, whatever the router's)."""
    from slarouter_core.data import from_frame
    from slarouter_core.policies.contextual import ContextualConfig
    from slarouter_core.synthetic import generate_demo_frame

    data = from_frame(generate_demo_frame(300, seed=1))
    X = np.random.default_rng(0).normal(size=(data.n_requests, 8))
    seen = []
    real = floor.fit_multitask_logistic
    monkeypatch.setattr(floor, "fit_multitask_logistic",
                        lambda X, m, y, M, cs, cm: seen.append((cs, cm)) or real(X, m, y, M, cs, cm))
    cost = floor.learned_cost(data, X, 0.6, 3.0, 0.25, judge=False, fits=2)
    assert seen == [(3.0, 0.25)] * 2 and math.isfinite(cost) and cost > 0
    rows = []
    monkeypatch.setattr(floor, "fit_multitask_logistic",
                        lambda X, m, y, M, cs, cm: rows.append(len(y)) or real(X, m, y, M, cs, cm))
    floor.learned_cost(data, X, 0.6, 3.0, 0.25, judge=False, fits=1)  # a fifth of the requests
    floor.learned_cost(data, X, 0.6, 3.0, 0.25, judge=True, fits=1)  # every request
    floor.learned_cost(data, X, 0.6, 3.0, 0.25, judge=True, fits=1, labels=50)
    floor.learned_cost(data, X, 0.6, 3.0, 0.25, judge=False, fits=1, labels=500)  # no more than a fifth
    assert rows == [60, 300, 50, 60]
    labelled = []
    monkeypatch.setattr(floor, "fit_multitask_logistic", lambda X, m, y, M, cs, cm: labelled.append(
        np.bincount(m, minlength=M)) or real(X, m, y, M, cs, cm))
    floor.learned_cost(data, X, 0.6, 3.0, 0.25, judge=True, fits=1,
                       shares=np.eye(data.n_models)[-1])  # every label on the last model, as a router serving it
    floor.learned_cost(data, X, 0.6, 3.0, 0.25, judge=True, fits=1)
    assert labelled[0][-1] == 300 and labelled[0][:-1].sum() == 0 and (labelled[1] > 0).all()
    defaults, args = ContextualConfig(), floor.build_parser().parse_args([])
    assert (args.c_shared, args.c_model) == (defaults.c_shared, defaults.c_model)
    assert floor.build_parser().parse_args(["--c-model", "1"]).c_model == 1.0


def test_the_learning_curve_ends_on_the_floor_and_averages_the_stream_between_its_points(floor):
    from slarouter_core.data import from_frame
    from slarouter_core.synthetic import generate_demo_frame

    data = from_frame(generate_demo_frame(1200, seed=2))
    X = np.random.default_rng(1).normal(size=(data.n_requests, 8))
    for judge, full in ((False, 240), (True, 1200)):
        points, mean = floor.learning_curve(data, X, 0.6, 10.0, 0.1, judge)
        sizes = [k for k, _ in points]
        assert sizes == [k for k in floor.CURVE_LABELS if k < full] + [full]
        # the last point is the floor on every label the stream gives, the same draws
        assert points[-1][1] == floor.learned_cost(data, X, 0.6, 10.0, 0.1, judge)
        costs = [c for _, c in points]
        assert min(costs) <= mean <= max(costs)
