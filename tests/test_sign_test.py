"""The paired sign test and mean relative MSE change of benchmarks.sign_test."""

import math

import pytest

from benchmarks import run
from benchmarks.sign_test import compare, main, paired_mse, sign_test_p


def test_sign_test_p_is_the_exact_two_sided_binomial_one():
    scipy_stats = pytest.importorskip("scipy.stats")
    for n in range(0, 25):
        for wins in range(n + 1):
            expected = scipy_stats.binomtest(wins, n, 0.5).pvalue if n else 1.0
            assert sign_test_p(wins, n) == pytest.approx(expected, rel=1e-12), (wins, n)
    assert sign_test_p(10, 20) == 1.0 and sign_test_p(14, 16) == pytest.approx(274 / 65536)
    with pytest.raises(ValueError, match="wins must be between 0 and n = 3, got 4"):
        sign_test_p(4, 3)


def row(model, mse, seed=0, horizon=96, fraction="", dataset="ETTh1", context=96):
    return {"dataset": dataset, "horizon": str(horizon), "context_length": str(context), "train_fraction": fraction,
            "seed": str(seed), "model": model, "mse": str(mse)}


def test_runs_pair_by_dataset_horizon_input_fraction_and_seed():
    rows = [row("base", 1.0), row("rsa", 0.9),  # a pair
            row("base", 2.0, seed=1), row("rsa", 2.0, seed=1),  # a tie
            row("base", 1.0, horizon=336), row("rsa", 1.2, horizon=336),  # RSA behind
            row("base", 1.0, fraction="1.0", context=336), row("rsa", 0.5, context=336),  # "" reads as 1.0
            row("base", 1.0, fraction="0.05"),  # no RSA run at that fraction: unpaired
            row("rsa", 0.1, seed=2), row("other", 0.1)]  # no base run for that seed; another model
    pairs = paired_mse(rows, "rsa", "base")
    assert pairs == {("ETTh1", 96, 96, 1.0, 0): (1.0, 0.9), ("ETTh1", 96, 96, 1.0, 1): (2.0, 2.0),
                     ("ETTh1", 336, 96, 1.0, 0): (1.0, 1.2), ("ETTh1", 96, 336, 1.0, 0): (1.0, 0.5)}
    result = compare(rows, "rsa", "base")
    assert (result.wins, result.losses, result.ties, result.n) == (2, 1, 1, 4)
    assert result.p_value == 1.0 and result.win_share == 0.5  # 2 of 3 untied pairs
    changes = [-0.1, 0.0, 0.2, -0.5]
    assert result.mean_change == pytest.approx(sum(changes) / 4)
    mean = sum(changes) / 4
    assert result.std_change == pytest.approx(math.sqrt(sum((c - mean) ** 2 for c in changes) / 3))
    assert result.describe() == ("rsa ahead of base in 2 of 4 pairs (1 ties) (sign test p = 1.000), "
                                 "mean relative MSE change -10.0% ± 29.4%")


def test_no_pairs_and_duplicate_runs():
    empty = compare([row("base", 1.0)], "rsa", "base")
    assert empty.n == 0 and empty.p_value == 1.0 and math.isnan(empty.mean_change) and math.isnan(empty.win_share)
    assert empty.describe() == "rsa and base: no paired runs"
    with pytest.raises(ValueError, match=r"two rows of rsa for \('ETTh1', 96, 96, 1.0, 0\).*one config at one"):
        compare([row("rsa", 1.0), row("rsa", 1.1), row("base", 1.0)], "rsa", "base")


def test_the_command_compares_all_pairs_and_within_each_value_of_a_column(tmp_path, capsys):
    path = tmp_path / "few.csv"
    for fraction, seed, base, rsa in (("0.05", 0, 1.0, 0.9), ("0.05", 1, 1.0, 0.8), ("0.1", 0, 1.0, 1.1)):
        for model, mse in (("patchtst", base), ("rsa_patchtst", rsa)):
            run.append_row(path, {**dict.fromkeys(run.RESULT_COLUMNS, ""),
                                  **row(model, mse, seed=seed, fraction=fraction)})
    assert main([str(path), "rsa_patchtst", "patchtst", "--by", "train_fraction"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "all: rsa_patchtst ahead of patchtst in 2 of 3 pairs (sign test p = 1.000), "
        "mean relative MSE change -6.7% ± 15.3%",
        "train_fraction = 0.05: rsa_patchtst ahead of patchtst in 2 of 2 pairs (sign test p = 0.500), "
        "mean relative MSE change -15.0% ± 7.1%",
        "train_fraction = 0.1: rsa_patchtst ahead of patchtst in 0 of 1 pairs (sign test p = 1.000), "
        "mean relative MSE change +10.0%"]


def test_the_command_pairs_runs_across_csvs(tmp_path, capsys):
    """A variant's runs in one CSV, the runs it is compared with in another (two configs)."""
    paths = {model: tmp_path / f"{model}.csv" for model in ("rsa_patchtst", "rsa_patchtst_bias")}
    for seed, base, variant in ((0, 1.0, 1.1), (1, 1.0, 0.9), (2, 1.0, 1.2)):
        for model, mse in (("rsa_patchtst", base), ("rsa_patchtst_bias", variant)):
            run.append_row(paths[model], {**dict.fromkeys(run.RESULT_COLUMNS, ""), **row(model, mse, seed=seed)})
    assert main([str(paths["rsa_patchtst_bias"]), str(paths["rsa_patchtst"]), "rsa_patchtst_bias", "rsa_patchtst"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "all: rsa_patchtst_bias ahead of rsa_patchtst in 1 of 3 pairs (sign test p = 1.000), "
        "mean relative MSE change +6.7% ± 15.3%"]
