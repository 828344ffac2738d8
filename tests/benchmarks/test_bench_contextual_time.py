"""The contextual timing benchmark's runs: each variant runs what it says it runs."""

import pytest

from tests.core.test_contextual import zoo

from ._scripts import load_script


@pytest.fixture(scope="module")
def timing():
    return load_script("bench_contextual_time")


def test_judge_labels_give_the_text_model_the_judged_answers_too(timing):
    data, X = zoo(1500, acc_easy=(0.6, 0.9), acc_hard=(0.4, 0.85), cost=(1.0, 5.0))
    variants = {label: (judge, settings) for label, judge, settings in timing.VARIANTS}
    runs = {label: timing.time_variant(data, X, 0.8, *variants[label], seeds=[0])
            for label in ("thumbs", "judge, no labels", "judge")}
    secs, refits, labels = runs["thumbs"]
    assert secs > 0 and refits >= 1 and 0.1 * 1500 < labels < 0.3 * 1500  # a fifth of the answers
    assert runs["judge, no labels"][2] == labels  # the verdicts reach the estimate only
    assert runs["judge"][2] > 3 * labels and runs["judge"][1] > refits


def test_the_stream_names_its_data(timing, tmp_path, monkeypatch):
    monkeypatch.setattr(timing, "SHARED", tmp_path / "absent")
    with pytest.raises(SystemExit, match="--stream demo"):
        timing.load_stream("llama")
    assert timing.load_stream("demo").n_requests > 0
