"""The contenders benchmark: its write-off chances are the policy's own test summed exactly
over every sequence of thumbs."""

import itertools
import math

import numpy as np
import pytest

from slarouter_core.policies.contextual import ContextualConfig, ContextualPolicy, beta_contenders

from ._scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_contenders")


def _policy_fails(ups: int, n: int, leader: float) -> bool:
    """The policy itself: a model with ``ups`` of ``n`` request-blind thumbs against a leader
    whose level is known at ``leader``."""
    pol = ContextualPolicy(ContextualConfig(dr_levels=False), alpha=0.5, n_models=2, dim=2, seed=0)
    big = 10**6
    pol.blind_pos[:], pol.blind_cnt[:] = [ups, round(leader * big)], [n, big]
    return not pol.may_be_best()[0]


def test_the_chance_is_every_sequence_of_thumbs_run_through_the_policy(bench):
    level, leader, K = 0.8, 0.8, 6
    brute = {k: 0.0 for k in range(1, K + 1)}
    for seq in itertools.product((0, 1), repeat=K):
        p = math.prod(level if y else 1 - level for y in seq)
        for n in range(1, K + 1):
            if _policy_fails(sum(seq[:n]), n, leader):  # the first failure counts, and stays
                for k in range(n, K + 1):
                    brute[k] += p
                break
    got = bench.write_off_chance(level, leader, list(range(1, K + 1)))
    assert got == pytest.approx([brute[k] for k in range(1, K + 1)], abs=1e-12)
    assert all(a <= b for a, b in zip(got, got[1:]))  # a write-off within K is one within K + 1


def test_one_thumbs_down_writes_a_model_off_against_a_leader_above_77_6_percent(bench):
    edge = 1 - math.sqrt(0.05)
    assert bench.write_off_chance(0.9, edge + 0.001, [1]) == pytest.approx([0.1])
    assert bench.write_off_chance(0.9, edge - 0.001, [1]) == [0.0]


def test_the_table_has_a_row_per_model_and_a_column_per_count(bench, capsys):
    assert bench.main(["--scenarios", "demo", "--labels", "1", "4"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| demo (mixed) |")]
    assert len(rows) == 4 and "| K = 1 | K = 4 |" in out
    # the demo's 1B (28.9%) against its 70B (86.9%): out on its first thumbs down
    tiny = next(r for r in rows if "tiny-1b" in r)
    assert tiny.split(" | ")[5] == "71.1%"


def test_a_floor_keeps_a_model_until_its_thumbs_reach_it(bench):
    # against a leader at 85% one thumbs down writes a 90% model off; with a floor of 3 the
    # first two thumbs cannot, and the chance within 16 thumbs falls
    bare, floored = (bench.write_off_chance(0.9, 0.85, [1, 2, 16], floor) for floor in (0, 3))
    assert bare[0] == pytest.approx(0.1)
    assert floored[:2] == [0.0, 0.0]
    assert 0.0 < floored[2] < bare[2]


def test_the_99_percent_test_keeps_a_model_one_thumbs_down_behind_an_85_percent_leader(bench):
    # Beta(1, 2)'s 99% quantile is 0.9: kept on its first thumbs down, and fewer write-offs
    # within 16 thumbs for more thumbs while in (the policy's contender_q)
    assert bench.write_off_chance(0.9, 0.85, [1], q=0.99) == [0.0]
    assert bench.write_off_chance(0.9, 0.85, [16], q=0.99)[0] < bench.write_off_chance(0.9, 0.85, [16])[0]
    assert bench.thumbs_while_in(0.6, 0.76, q=0.99) > bench.thumbs_while_in(0.6, 0.76)


def test_a_count_below_one_a_negative_floor_or_a_quantile_outside_the_policys_is_refused(bench):
    for argv in (["--labels", "0"], ["--floor", "-1"], ["--q", "1.0"], ["--q", "0.4"]):
        with pytest.raises(SystemExit) as exit_:
            bench.main(argv)
        assert exit_.value.code == 2


def test_the_test_reads_the_exact_beta_quantile():
    # one up of two under the uniform prior is Beta(2, 2) (mean 1/2, size 4): its 95% quantile,
    # 0.865, is above a leader at 85%; one thumbs down of one, Beta(1, 2), reaches only 0.776
    mean, size = np.array([0.5, 0.85]), np.array([4.0, 1e6])
    assert list(beta_contenders(mean, size)) == [True, True]
    assert list(beta_contenders(np.array([1 / 3, 0.85]), np.array([3.0, 1e6]))) == [False, True]


def test_thumbs_while_in_count_the_thumbs_a_model_gets_before_it_is_out(bench):
    # two thumbs at most: the first always, the second unless the first wrote it off
    assert bench.thumbs_while_in(0.9, 0.85, horizon=2) == pytest.approx(2.0 - 0.1)
    # a model far below its leader is out within a few thumbs, one level with it seldom
    assert bench.thumbs_while_in(0.3, 0.87) < 3.0 < 50.0 < bench.thumbs_while_in(0.87, 0.3)
    # a floor lets every model keep its first thumbs
    assert bench.thumbs_while_in(0.3, 0.87, floor=3) > bench.thumbs_while_in(0.3, 0.87)
