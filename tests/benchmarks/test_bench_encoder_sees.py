"""What the encoder sees: the probe and the full-information text model find the contexts an
encoder separates, and say so where it does not."""

import numpy as np
import pytest

from ._scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_encoder_sees")


def _stream(n: int = 1200, seed: int = 0):
    """Three contexts whose models differ: (0.9, 0.5), (0.2, 0.8), (0.6, 0.6)."""
    rng = np.random.default_rng(seed)
    context = rng.integers(0, 3, n)
    acc = np.array([[0.9, 0.5], [0.2, 0.8], [0.6, 0.6]])
    solved = (rng.random((n, 2)) < acc[context]).astype(np.int8)
    return context, solved, acc


def _separating(context: np.ndarray) -> np.ndarray:
    """An embedding with the context plainly in it."""
    X = 0.1 * np.random.default_rng(1).standard_normal((len(context), 8))
    X[np.arange(len(context)), context] += 1.0
    return X


def test_an_encoder_that_separates_the_contexts_is_seen_to(bench):
    context, solved, acc = _stream()
    X = _separating(context)
    # penalties loose enough that what is measured is the encoder, not the shrinkage (the
    # router's own hold the offsets tighter: the next test)
    rep = bench.context_report(X, solved, context, c_shared=10.0, c_model=1.0)
    assert rep["probe"] > 0.97 and np.all(rep["recall"] > 0.95)
    assert rep["error"] < 0.04
    assert np.allclose(rep["predicted"], acc, atol=0.08)
    assert rep["names"] == ["0", "1", "2"] and np.isclose(rep["share"].sum(), 1.0)


def test_the_routers_tight_offsets_pull_together_the_contexts_where_models_swap(bench):
    """The cost of the default c_model=0.1 (docs/RESULTS.md, "c_model=0.1, the default"):
    with every label and a separating encoder, the contexts where the two models swap
    (0.2 / 0.8) are predicted more than 8 points off at the router's penalties, under 8 at
    c_model=1."""
    context, solved, acc = _stream()
    X = _separating(context)
    worst = {cm: float(np.abs(bench.context_report(X, solved, context, c_model=cm)["predicted"] - acc).max())
             for cm in (None, 1.0)}
    assert worst[1.0] < 0.08 < worst[None]


def test_an_encoder_blind_to_the_contexts_is_seen_not_to(bench):
    context, solved, acc = _stream()
    X = np.random.default_rng(1).standard_normal((len(context), 8))  # nothing of the context
    rep = bench.context_report(X, solved, context)
    assert rep["probe"] < 0.5  # about chance (1/3)
    # every context predicted near the stream's average (0.57 and 0.63), far from 0.2 and
    # 0.9: about 0.18 expected, against under 0.04 where the encoder separates them
    assert rep["error"] > 0.12
    assert rep["confused"] and all(0 < share <= 1 for _, _, share in rep["confused"])


def test_one_context_is_refused(bench):
    context, solved, _ = _stream(200)
    with pytest.raises(ValueError, match="two contexts"):
        bench.context_report(np.zeros((200, 4)), solved, np.zeros(200, int))


def test_a_log_of_ones_own_is_read_with_the_encoder_named(bench, capsys):
    from pathlib import Path

    demo = Path(bench.ROOT) / "data" / "demo.parquet"
    assert bench.main(["--encoder", "hashing:64", "--data", str(demo)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("encoder hashing:64")
    assert "linear probe names the context of" in out
    for topic in ("arithmetic", "coding", "history", "science"):
        assert f"| {topic} |" in out


@pytest.mark.parametrize("argv, message", [(["--encoder", "zzz"], "Unknown encoder 'zzz'"),
                                           (["--encoder", "hashing:64", "--data", "/nonexistent/log.parquet"],
                                            "cannot read")])
def test_a_missing_encoder_or_log_is_refused_with_a_clear_error(bench, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        bench.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr()
    assert message in err.err and "| " not in err.out


def test_a_large_log_is_read_on_a_seeded_sample(bench, capsys, monkeypatch):
    from pathlib import Path

    embedded = []
    real = bench.embed_texts
    monkeypatch.setattr(bench, "embed_texts", lambda texts, spec: embedded.append(len(texts)) or real(texts, spec))
    demo = str(Path(bench.ROOT) / "data" / "demo.parquet")
    assert bench.main(["--encoder", "hashing:64", "--data", demo, "--max-requests", "500"]) == 0
    first = capsys.readouterr().out
    assert embedded == [500] and "a sample of 500 of its 3000 requests" in first
    assert bench.main(["--encoder", "hashing:64", "--data", demo, "--max-requests", "500"]) == 0
    assert capsys.readouterr().out.split("[")[0] == first.split("[")[0]  # same seed, same sample, same figures
