"""The ``simulate`` and ``compare`` sub-commands with feedback models (hashing encoder, toy data)."""

from __future__ import annotations

import pandas as pd
import pytest

from slarouter_core.cli import build_parser, feedback_from_args, main
from slarouter_core.data import write_parquet
from tests.conftest import make_frame


@pytest.fixture(scope="module")
def data_path(tmp_path_factory):
    return write_parquet(make_frame(n=160, seed=5), tmp_path_factory.mktemp("cli") / "d.parquet")


def _common(path, tmp_path):
    return ["--data", str(path), "--encoder", "hashing", "--cache-dir", str(tmp_path / "cache"), "--seeds", "1"]


@pytest.mark.parametrize("kind", ["bursty", "delayed"])
def test_simulate_with_feedback_model(data_path, tmp_path, capsys, kind):
    out = tmp_path / "rows.csv"
    rc = main(["simulate", *_common(data_path, tmp_path), "--alpha", "midpoint", "--feedback", kind,
               "--on-fraction", "0.5", "--delay", "7", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    rows = pd.read_csv(out)
    assert rows["feedback_kind"].tolist() == [kind, kind]  # one row per benchmark
    assert rows["feedback_model"].iloc[0] == {"bursty": "bursty(on_fraction=0.5)", "delayed": "delayed(delay=7)"}[kind]
    assert f"feedback {rows['feedback_model'].iloc[0]}" in capsys.readouterr().out


def test_simulate_drift_needs_mixed(data_path, tmp_path, capsys):
    rc = main(["simulate", *_common(data_path, tmp_path), "--alpha", "0.6", "--feedback", "drift"])
    assert rc == 2 and "--mixed" in capsys.readouterr().err
    out = tmp_path / "drift.json"
    rc = main(["simulate", *_common(data_path, tmp_path), "--alpha", "0.6", "--feedback", "drift", "--mixed",
               "--mode", "guarded", "--out", str(out)])
    assert rc == 0
    rows = pd.read_json(out)
    assert rows["benchmark"].tolist() == ["alpha_bench+beta_bench"] and rows["feedback_kind"].tolist() == ["drift"]


def test_compare_with_two_feedback_models(data_path, tmp_path, capsys):
    out = tmp_path / "rows.csv"
    rc = main(["compare", *_common(data_path, tmp_path), "--methods", "oracle", "messplus", "slarouter_guarded",
               "--feedback", "bursty", "delayed", "--on-fraction", "0.4", "--delay-dist", "geometric",
               "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    rows = pd.read_csv(out)
    assert len(rows) == 2 * 2 * 3  # benchmarks x feedback models x methods
    assert set(rows["feedback_model"]) == {"bursty(on_fraction=0.4)", "delayed(delay_dist=geometric)"}
    assert set(rows["method"]) == {"oracle", "MESS+", "SLARouter (guarded)"}
    text = capsys.readouterr().out
    assert "feedback bursty(on_fraction=0.4)" in text and "feedback delayed(delay_dist=geometric)" in text


def test_compare_drift_and_bad_feedback_options(data_path, tmp_path, capsys):
    common = [*_common(data_path, tmp_path), "--methods", "static_mixture"]
    rc = main(["compare", *common, "--feedback", "drift"])
    assert rc == 2 and "--mixed" in capsys.readouterr().err
    rc = main(["compare", *common, "--feedback", "drift", "--mixed", "--out", str(tmp_path / "m.csv")])
    assert rc == 0 and pd.read_csv(tmp_path / "m.csv")["benchmark"].tolist() == ["alpha_bench+beta_bench"]
    capsys.readouterr()
    for extra, message in ((["--feedback", "bursty", "--feedback-rate", "0.5"], "exceeds 1"),
                           (["--feedback", "bursty", "--on-fraction", "0"], "on_fraction"),
                           (["--feedback", "delayed", "--delay", "-3"], "delay must be")):
        assert main(["compare", *common, *extra]) == 2
        assert message in capsys.readouterr().err
        assert main(["simulate", *_common(data_path, tmp_path), "--alpha", "0.6", *extra]) == 2
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", *common, "--feedback", "sometimes"])
    assert "invalid choice" in capsys.readouterr().err


def test_feedback_options_are_built_in_one_place():
    p = build_parser()
    sim = p.parse_args(["simulate", "--data", "x", "--alpha", "0.5", "--feedback", "negative", "--negative-ratio", "2"])
    cmp_ = p.parse_args(["compare", "--data", "x", "--feedback", "negative", "iid", "--negative-ratio", "2"])
    (fs,) = feedback_from_args(sim)
    fc = feedback_from_args(cmp_)
    assert fs == fc[0] and fs.negative_ratio == 2.0 and fc[1].kind == "iid"
