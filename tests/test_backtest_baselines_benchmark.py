"""benchmarks/backtest_baselines.py at a toy size: it runs, times every side and checks tsrec's ets
and theta against statsforecast's cross_validation(refit=False)."""

import pytest

pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")


@pytest.mark.slow  # about 30 s on a shared 2-core machine: every side warmed up, then timed twice
def test_the_benchmark_writes_its_table(tmp_path):
    from benchmarks import backtest_baselines

    backtest_baselines.main(["--series", "3", "--steps", "100", "--windows", "2", "--repeats", "2",
                             "--out-dir", str(tmp_path)])
    text = (tmp_path / "backtest_baselines.md").read_text()
    assert "- command: `python -m benchmarks.backtest_baselines --series 3 --steps 100" in text
    assert "largest absolute difference 0\n" in text  # the same forecasts as statsforecast's, exactly
    assert '"fitted once on the history before the first origin", season 7' in text
    rows = [line for line in text.splitlines() if line.startswith("| 3 |")]
    assert [row.split(" | ")[1] for row in rows] == ["tsrec", "statsforecast", "tsrec, naive baselines only"]
    assert " ± " in rows[0].split(" | ")[-1]  # the ratio's mean and spread over the 2 rounds
