"""The pre-flight benchmark: each stream's check beside the router's runs."""

import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_preflight")


def test_a_stream_the_check_calls_uncertifiable_never_clears_alpha_in_its_runs(bench, capsys):
    assert bench.main(["--seeds", "2", "--scenarios", "unseen", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in out.splitlines()
            if line.startswith("| unseen")}
    hard = next(v for k, v in rows.items() if k.startswith("unseen 11-model zoo 0"))
    assert hard[2].startswith("**no**") and hard[4] == "0/2"  # not certifiable: no run's bound cleared alpha
    assert rows["unseen 4-model zoo 1"][2].startswith("yes")
    # the margin the check predicts is within a point of the router's own
    predicted, measured = (float(x) for x in rows["unseen 4-model zoo 1"][3].split(" / "))
    assert abs(predicted - measured) < 1.0
    assert "it would be with alpha at most" in out


def test_penalties_price_the_text_floor_of_each_certifiable_stream_without_runs(bench, capsys, monkeypatch):
    monkeypatch.setattr(bench, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("no router runs")))
    assert bench.main(["--penalties", "--scenarios", "unseen"]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| unseen")]
    assert [r[0].strip("| ") for r in rows] == ["unseen 4-model zoo 0", "unseen 4-model zoo 1",
                                               "unseen 11-model zoo 1 (priciest not best; alpha between its best two)"]
    assert all(len(r) == 1 + len(bench.PENALTIES) for r in rows)  # the uncertifiable zoo has no floor to price


def test_the_penalty_tables_first_column_is_the_routers_default(bench):
    """The table's header calls its first column the router's default: a default moved
    (as c_model was, 1 to 0.1) must move the column too."""
    from slarouter_core.policies.contextual import ContextualConfig

    cfg = ContextualConfig()
    assert bench.PENALTIES[0] == (cfg.c_shared, cfg.c_model)
    assert len(set(bench.PENALTIES)) == len(bench.PENALTIES)
