from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slarouter_core import experiments as E
from slarouter_core.baselines import oracle_lp
from slarouter_core.data import from_frame, midpoint_alpha, write_parquet
from tests.conftest import make_frame

FAST = (E.PRESETS["single"], E.PRESETS["static_mixture"], E.PRESETS["oracle"], E.PRESETS["carrot"],
        E.PRESETS["causal"], E.PRESETS["messplus"], E.PRESETS["slarouter"], E.PRESETS["slarouter_ddv"])


def make_dataset(n: int = 240, seed: int = 0, name: str = "toy") -> E.Dataset:
    frame = make_frame(n=n, seed=seed)
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, 6)).astype(np.float32)
    return E.Dataset(name, from_frame(frame), emb)


@pytest.fixture(scope="module")
def toy():
    return make_dataset()


@pytest.fixture(scope="module")
def rows(toy):
    return E.run_grid(toy, E.GridConfig(methods=FAST, seeds=(42, 1)))


def test_grid_shape_and_tidy_rows(toy, rows):
    n_methods = len(FAST) - 1 + toy.data.n_models  # "single" expands per model
    assert len(rows) == 2 * 2 * n_methods  # benchmarks x seeds x methods
    for col in E.ROW_COLUMNS:
        assert col in rows.columns
    assert {f"calls_{m}" for m in toy.data.models} <= set(rows.columns)
    np.testing.assert_allclose(rows[[f"calls_{m}" for m in toy.data.models]].sum(axis=1), 1.0)
    # operating cost = stream cost + training cost; only offline methods pay training
    np.testing.assert_allclose(rows["operating_cost"], rows["stream_cost"] + rows["training_cost"])
    offline = rows["method_key"].isin(["carrot", "causal"])
    assert (rows.loc[offline, "training_cost"] > 0).all()
    assert (rows.loc[~offline, "training_cost"] == 0).all()
    assert set(rows["method"]) >= {"small only", "large only", "SLARouter (fixed V)", "SLARouter (data-driven V)"}


def test_alpha_rule_and_common_stream(toy, rows):
    for b, block in rows.groupby("benchmark"):
        # alpha: midpoint of the two dearest models' accuracy on the FULL benchmark
        assert (block["alpha"] == midpoint_alpha(toy.data.select([b]))).all()
        n = int((toy.data.benchmarks == b).sum())
        assert (block["n_history"] == round(0.2 * n)).all()
        assert (block["n_stream"] + block["n_history"] == n).all()


def test_oracle_cost_below_every_method_at_equal_satisfaction(toy, rows):
    from slarouter_core.baselines import split_history

    for (b, seed), block in rows.groupby(["benchmark", "seed"]):
        oracle = block[block["method_key"] == "oracle"].iloc[0]
        sub = toy.data.select([b])
        emb = toy.embeddings[toy.data.benchmarks == b]
        stream, _, _ = split_history(sub, emb, int(seed), 0.2)
        for _, r in block.iterrows():
            if r["satisfaction"] >= oracle["satisfaction"]:
                assert oracle["operating_cost"] <= r["operating_cost"] + 1e-9, r["method"]
            s = min(r["satisfaction"], 0.999)
            _, cost, _ = oracle_lp(stream.solved, stream.costs, s)
            assert cost / 1e6 <= r["operating_cost"] + 1e-9, r["method"]


def test_runner_is_deterministic_across_calls_and_jobs(toy, rows):
    cfg = E.GridConfig(methods=FAST, seeds=(42, 1))
    again = E.run_grid(toy, cfg)
    pd.testing.assert_frame_equal(rows, again)
    seen = []
    par = E.run_grid(toy, cfg, n_jobs=2, progress=lambda d, t: seen.append((d, t)))
    pd.testing.assert_frame_equal(rows, par)
    assert seen[-1] == (len(rows), len(rows)) and [d for d, _ in seen] == list(range(1, len(rows) + 1))
    other = E.run_grid(toy, E.GridConfig(methods=FAST, seeds=(43,)))
    assert not np.allclose(other["satisfaction"].to_numpy(), rows[rows["seed"] == 42]["satisfaction"].to_numpy())


def test_ray_backend_gives_the_same_rows_as_local(toy):
    ray = pytest.importorskip("ray")
    cfg = E.GridConfig(methods=(E.PRESETS["oracle"], E.PRESETS["carrot"], E.PRESETS["slarouter"]),
                       seeds=(42,), benchmarks=("alpha_bench",))
    local = E.run_grid(toy, cfg)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        assert ray.is_initialized()
        seen = []
        remote = E.run_grid(toy, cfg, backend="ray", progress=lambda d, t: seen.append(d))
        assert ray.is_initialized()  # a runtime we did not start is left running
    finally:
        ray.shutdown()
    pd.testing.assert_frame_equal(local, remote)
    assert sorted(seen) == [1, 2, 3]


def test_parameter_axes(toy):
    cfg = E.GridConfig(methods=(E.MethodSpec("slarouter", {"V": 1e-3}), E.MethodSpec("slarouter", {"V": 1e-6}),
                                E.MethodSpec("carrot", {"mu": 0.0}), E.MethodSpec("carrot", {"mu": 1.0})),
                       seeds=(42,), feedback_rates=(0.1, 0.5), benchmarks=("beta_bench",))
    rows = E.run_grid(toy, cfg)
    assert len(rows) == 2 * 4
    assert set(rows["method"]) == {"slarouter(V=0.001)", "slarouter(V=1e-06)", "carrot(mu=0.0)", "carrot(mu=1.0)"}
    assert set(rows["feedback_rate"]) == {0.1, 0.5}
    fixed = rows[rows["method"] == "slarouter(V=0.001)"]
    assert (fixed["final_v"] == 1e-3).all()
    c0 = rows[rows["method"] == "carrot(mu=0.0)"].set_index("feedback_rate")
    c1 = rows[rows["method"] == "carrot(mu=1.0)"].set_index("feedback_rate")
    assert (c1["stream_cost"] < c0["stream_cost"]).all()
    # feedback reaches SLARouter: more feedback, more observed labels
    fb = fixed.set_index("feedback_rate")["feedback"]
    assert fb[0.5] > fb[0.1]


def test_aggregate_marks_sla_and_cheapest_compliant():
    base = dict(dataset="d", benchmark="b", feedback_rate=0.2, alpha=0.7, cost_unit="MJ",
                post_convergence_satisfaction=np.nan, training_cost=0.0)
    rows = []
    for seed in (1, 2):
        rows += [
            dict(base, method="cheap-miss", method_key="single", seed=seed, operating_cost=1.0, satisfaction=0.6),
            dict(base, method="mid-met", method_key="carrot", seed=seed, operating_cost=2.0 + seed, satisfaction=0.72),
            dict(base, method="dear-met", method_key="single", seed=seed, operating_cost=9.0, satisfaction=0.9),
            dict(base, method="oracle", method_key="oracle", seed=seed, operating_cost=0.5, satisfaction=0.7),
        ]
    agg = E.aggregate(pd.DataFrame(rows)).set_index("method")
    assert agg.loc["mid-met", "cost_mean"] == pytest.approx(3.5)
    assert agg.loc["mid-met", "cost_std"] == pytest.approx(np.std([3.0, 4.0], ddof=1))
    assert agg["sla_met"].to_dict() == {"cheap-miss": False, "mid-met": True, "dear-met": True, "oracle": True}
    # the oracle is a reference bound, never the "cheapest compliant method"
    assert agg["cheapest"].to_dict() == {"cheap-miss": False, "mid-met": True, "dear-met": False, "oracle": False}
    text = E.format_table(agg.reset_index())
    assert "**mid-met**" in text and "met, cheapest" in text and "oracle (ref)" in text
    assert "| cheap-miss | 1.000 ± 0.000 | 60.0 ± 0.0 |" in text
    ov = E.overview(agg.reset_index()).set_index("method")
    assert ov.loc["mid-met", "cost_vs_oracle"] == pytest.approx(3.5 / 0.5)
    assert ov.loc["dear-met", "sla_met"] == 1 and ov.loc["cheap-miss", "sla_met"] == 0


def test_reports_written(tmp_path, rows):
    out = E.write_results(rows, tmp_path / "r.parquet")
    back = pd.read_parquet(out)
    pd.testing.assert_frame_equal(back, rows)
    E.write_results(rows, tmp_path / "r.csv")
    assert len(pd.read_csv(tmp_path / "r.csv")) == len(rows)
    text = E.write_report(rows, tmp_path / "t.md", tmp_path / "t.csv")
    assert (tmp_path / "t.md").read_text() == text
    agg = pd.read_csv(tmp_path / "t.csv")
    assert set(agg["benchmark"]) == {"alpha_bench", "beta_bench"} and "cheapest" in agg.columns
    with pytest.raises(ValueError, match="must end in"):
        E.write_results(rows, tmp_path / "r.xlsx")


def test_bad_grid_inputs(toy):
    with pytest.raises(ValueError, match="unknown method"):
        E.MethodSpec("nope")
    with pytest.raises(ValueError, match="unknown method"):
        E.parse_method("nope:x=1")
    with pytest.raises(ValueError, match="key=value"):
        E.parse_method("slarouter:V")
    assert E.parse_method("slarouter:V=0.0001,mode=paper").params == {"V": 0.0001, "mode": "paper"}
    with pytest.raises(ValueError, match="feedback rates"):
        E.GridConfig(feedback_rates=(1.5,))
    with pytest.raises(ValueError, match="alpha"):
        E.GridConfig(alpha="high")
    with pytest.raises(ValueError, match="seeds"):
        E.GridConfig(seeds=(-1,))
    with pytest.raises(ValueError, match="Unknown benchmark"):
        E.run_grid(toy, E.GridConfig(benchmarks=("nope",)))
    with pytest.raises(ValueError, match="backend"):
        E.run_grid(toy, E.GridConfig(methods=(E.PRESETS["oracle"],), seeds=(1,)), backend="spark")
    with pytest.raises(ValueError, match="bad SLARouter parameter"):
        E.run_grid(toy, E.GridConfig(methods=(E.MethodSpec("slarouter", {"Vee": 1}),), seeds=(1,)))
    with pytest.raises(ValueError, match="bad parameters for carrot"):
        E.run_grid(toy, E.GridConfig(methods=(E.MethodSpec("carrot", {"muu": 1}),), seeds=(1,)))


def test_failed_runs_raise_or_are_recorded(toy):
    cfg = E.GridConfig(methods=(E.PRESETS["oracle"], E.PRESETS["causal"]), seeds=(1,), feedback_rates=(0.0,),
                       benchmarks=("alpha_bench",))
    with pytest.raises(ValueError, match=r"Causal on toy/alpha_bench, seed 1: .*logged feedback"):
        E.run_grid(toy, cfg)
    rows = E.run_grid(toy, cfg, on_error="record")
    assert rows["error"].isna().tolist() == [True, False]
    assert "logged feedback" in rows["error"].iloc[1] and np.isnan(rows["satisfaction"].iloc[1])
    agg = E.aggregate(rows)
    assert agg["method"].tolist() == ["oracle"]
    with pytest.raises(ValueError, match="on_error"):
        E.run_grid(toy, cfg, on_error="ignore")


def test_two_datasets_in_one_grid():
    a, b = make_dataset(seed=0, name="A"), make_dataset(n=180, seed=1, name="B")
    rows = E.run_grid([a, b], E.GridConfig(methods=(E.PRESETS["oracle"],), seeds=(1,),
                                           exclude_benchmarks=("beta_bench",)))
    assert rows[["dataset", "benchmark"]].values.tolist() == [["A", "alpha_bench"], ["B", "alpha_bench"]]
    with pytest.raises(ValueError, match="unique"):
        E.run_grid([a, a], E.GridConfig(methods=(E.PRESETS["oracle"],), seeds=(1,)))


def test_cli_compare(tmp_path, capsys):
    from slarouter_core.cli import main

    path = write_parquet(make_frame(n=200, seed=3), tmp_path / "d.parquet")
    rc = main(["compare", "--data", str(path), "--encoder", "hashing", "--cache-dir", str(tmp_path / "cache"),
               "--seeds", "1", "2", "--methods", "oracle", "carrot", "slarouter:V=0.001",
               "--out", str(tmp_path / "rows.csv"), "--markdown", str(tmp_path / "t.md"),
               "--table-csv", str(tmp_path / "t.csv")])
    assert rc == 0
    rows = pd.read_csv(tmp_path / "rows.csv")
    assert len(rows) == 2 * 2 * 3 and set(rows["seed"]) == {1, 2}
    assert "alpha_bench" in (tmp_path / "t.md").read_text()
    assert "operating cost (MJ)" in capsys.readouterr().out
    rc = main(["compare", "--data", str(path), "--encoder", "hashing", "--cache-dir", str(tmp_path / "cache"),
               "--methods", "bogus"])
    assert rc == 2 and "unknown method" in capsys.readouterr().err


def test_real_data_subset(shared_data):
    from slarouter_core.encoders import embed_texts

    data = E.load_any(shared_data).select(["sciq", "winogrande"])
    ds = E.Dataset("messplus_llama3", data, embed_texts(data.texts, "hashing"))
    rows = E.run_grid(ds, E.GridConfig(methods=(E.PRESETS["single"], E.PRESETS["oracle"], E.PRESETS["carrot"],
                                                E.PRESETS["slarouter"]), seeds=(42,)))
    agg = E.aggregate(rows).set_index(["benchmark", "method"])
    # alpha: midpoint of medium (.736) and large (.791) on winogrande
    assert agg.loc[("winogrande", "oracle"), "alpha"] == pytest.approx(0.764)
    assert agg.loc[("winogrande", "oracle"), "satisfaction_mean"] >= 0.764
    for b in ("sciq", "winogrande"):
        assert agg.loc[(b, "oracle"), "cost_mean"] < agg.loc[(b, "small only"), "cost_mean"] * 2
        assert agg.loc[(b, "CARROT"), "cost_mean"] > 0


# -- feedback models as a grid axis -------------------------------------------------------
from slarouter_core.feedback import FeedbackConfig  # noqa: E402

ALL_PRESETS = tuple(E.PRESETS[k] for k in ("single", "random", "static_mixture", "oracle", "carrot", "causal",
                                            "messplus", "slarouter", "slarouter_guarded"))
METRICS = ["satisfaction", "operating_cost", "training_cost", "explored", "feedback", "final_q", "tuned"]


def test_iid_default_reproduces_rows_and_axis_is_tidy(toy, rows):
    cfg = E.GridConfig(methods=FAST, seeds=(42, 1), feedback=(FeedbackConfig(), "bursty:on_fraction=0.5,burst_length=5"))
    both = E.run_grid(toy, cfg)
    assert len(both) == 2 * len(rows)
    iid = both[both["feedback_model"] == "iid"].reset_index(drop=True)
    # the IID half is the default grid, row for row (the axis adds a loop, not a change)
    pd.testing.assert_frame_equal(iid, rows)
    assert (rows["feedback_kind"] == "iid").all() and (rows["feedback_params"] == "{}").all()
    burst = both[both["feedback_kind"] == "bursty"]
    assert set(burst["feedback_model"]) == {"bursty(burst_length=5,on_fraction=0.5)"}
    assert burst["feedback_params"].iloc[0] == '{"burst_length": 5.0, "on_fraction": 0.5}'
    # feedback-blind references are unchanged; online methods see another plan
    key = ["benchmark", "seed", "method"]
    a, b = iid.set_index(key), burst.set_index(key)
    for m in ("oracle", "static mixture", "large only"):
        assert (a.xs(m, level="method")["satisfaction"] == b.xs(m, level="method")["satisfaction"]).all()
    assert (a.xs("MESS+", level="method")["feedback"] != b.xs("MESS+", level="method")["feedback"]).any()
    # aggregation keeps the feedback models apart and the report names them
    agg = E.aggregate(both)
    assert len(agg) == 2 * len(E.aggregate(rows))
    text = E.format_table(agg)
    assert "feedback bursty(burst_length=5,on_fraction=0.5)" in text
    ov = E.overview(agg)
    assert "MESS+ [feedback iid]" in set(ov["method"]) and "MESS+ [feedback bursty(burst_length=5,on_fraction=0.5)]" in set(ov["method"])


def test_every_method_in_a_cell_runs_on_the_cells_plan(toy, monkeypatch):
    from slarouter_core import baselines as B

    seen = []
    real = B.stream_plan_full

    def spy(n, labels, rate, seed, shuffle=True, feedback=None, groups=None):
        out = real(n, labels, rate, seed, shuffle, feedback, groups)
        seen.append((seed, feedback, out[0].tobytes(), out[1].feedback.tobytes()))
        return out

    monkeypatch.setattr(B, "stream_plan_full", spy)
    import slarouter_core.simulator as S
    monkeypatch.setattr(S, "stream_plan_full", spy)
    fcfg = FeedbackConfig(kind="negative", negative_ratio=2.0)
    E.run_grid(toy, E.GridConfig(methods=ALL_PRESETS, seeds=(3,), feedback=(fcfg,), benchmarks=("alpha_bench",)))
    assert len(seen) >= len(ALL_PRESETS) + 2  # single expands per model; SLARouter plans in both layers
    assert all(s == 3 and f == fcfg for s, f, _, _ in seen)
    assert len({(o, p) for _, _, o, p in seen}) == 1  # one order, one feedback plan for everyone


def test_drift_needs_a_mixed_stream(toy):
    with pytest.raises(ValueError, match="mixed"):
        E.GridConfig(methods=(E.PRESETS["oracle"],), feedback=("drift",))
    with pytest.raises(ValueError, match="at least two benchmarks"):
        E.run_grid(toy, E.GridConfig(methods=(E.PRESETS["oracle"],), seeds=(1,), feedback=("drift",), mixed=True,
                                     benchmarks=("alpha_bench",)))
    cfg = E.GridConfig(methods=(E.PRESETS["static_mixture"], E.PRESETS["messplus"]), seeds=(1,),
                       feedback=("iid", "drift:drift_mix=0"), mixed=True)
    out = E.run_grid(toy, cfg)
    assert set(out["benchmark"]) == {"alpha_bench+beta_bench"} and (out["n_stream"] + out["n_history"] == 240).all()
    assert out["feedback_model"].tolist() == ["iid", "iid", "drift(drift_mix=0)", "drift(drift_mix=0)"]
    # MESS+ routes a reordered stream differently (its call ratio changes)
    calls = [f"calls_{m}" for m in toy.data.models]
    assert not np.allclose(out.loc[1, calls].to_numpy(float), out.loc[3, calls].to_numpy(float))


def test_bad_feedback_axis_inputs(toy):
    with pytest.raises(ValueError, match="unknown feedback model"):
        E.GridConfig(feedback=("sometimes",))
    with pytest.raises(ValueError, match="burst_length must be a number"):
        E.parse_feedback("bursty:burst_length=0")
    with pytest.raises(ValueError, match="must be a number"):
        E.parse_feedback("bursty:burst_length=long")
    with pytest.raises(ValueError, match="bad feedback parameter"):
        E.parse_feedback("delayed:lag=3")
    with pytest.raises(ValueError, match="unknown judge"):
        E.parse_feedback("iid:judge=me")
    with pytest.raises(ValueError, match="exceeds 1"):
        E.GridConfig(feedback=("bursty",), feedback_rates=(0.2, 0.5))
    with pytest.raises(ValueError, match="must differ"):
        E.GridConfig(feedback=("iid", FeedbackConfig()))
    with pytest.raises(ValueError, match="not as a method param"):
        E.run_grid(toy, E.GridConfig(methods=(E.MethodSpec("slarouter", {"feedback": {"kind": "bursty"}}),)))
    assert E.parse_feedback("judge-gpqa").judge is not None
    assert E.parse_feedback({"kind": "delayed", "delay": 3}) == FeedbackConfig(kind="delayed", delay=3)
    assert E.parse_feedback("delayed:delay=200,delay_dist=geometric") == \
        FeedbackConfig(kind="delayed", delay=200.0, delay_dist="geometric")


def test_slarouter_grid_with_feedback_models(toy):
    base = E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback_rate=0.3)
    again = E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback_rate=0.3, feedback="iid")
    pd.testing.assert_frame_equal(base, again)
    names = {"bursty:on_fraction=0.5": "bursty(on_fraction=0.5)", "negative": "negative", "delayed": "delayed",
             "judge-acpbench": "iid+judge(acpbench-gpt5.4-reasoning)"}
    for kind, name in names.items():
        out = E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback_rate=0.3, feedback=kind)
        assert out["feedback_model"].tolist() == [name, name]
        if kind in ("bursty:on_fraction=0.5", "negative"):  # other feedback steps, so other counts
            assert not np.array_equal(out["feedback"].to_numpy(), base["feedback"].to_numpy())
    assert "acpbench" in out["feedback_params"].iloc[0]
    with pytest.raises(ValueError, match="mixed"):
        E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback="drift")
    mixed = E.run_slarouter_grid(toy.data, toy.embeddings, seeds=(1,), feedback="drift", per_benchmark=False)
    assert mixed["benchmark"].tolist() == ["alpha_bench+beta_bench"] and mixed["feedback_kind"].tolist() == ["drift"]


def test_alpha_rules_and_the_seeds_met_rule():
    from slarouter_core.data import from_frame
    from tests.conftest import make_frame

    data = from_frame(make_frame(n=200))
    acc = data.solved.mean(axis=0)
    assert E.resolve_alpha("paper", data) == pytest.approx(round(acc[-2] - 0.01, 3), abs=5e-4)
    assert E.resolve_alpha("midpoint", data) == pytest.approx(round((acc[-2] + acc[-1]) / 2, 3), abs=5e-4)
    with pytest.raises(ValueError, match="'midpoint', 'paper'"):
        E.resolve_alpha("median", data)
    assert [E.seeds_needed(n) for n in (1, 3, 10, 20)] == [1, 3, 9, 18]
    base = dict(dataset="d", benchmark="b", feedback_rate=0.2, alpha=0.7, cost_unit="MJ",
                post_convergence_satisfaction=np.nan, training_cost=0.0, operating_cost=1.0,
                method_key="single")
    # 17 of 20 seeds above alpha with a mean above alpha: not met under the 18-of-20 rule
    sats = [0.75] * 17 + [0.6] * 3
    rows = [dict(base, method="m", seed=s, satisfaction=v) for s, v in enumerate(sats)]
    agg = E.aggregate(pd.DataFrame(rows)).set_index("method")
    assert agg.loc["m", "satisfaction_mean"] > 0.7 and agg.loc["m", "seeds_met"] == 17
    assert not agg.loc["m", "sla_met"]
