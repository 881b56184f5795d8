"""benchmarks/backtest_baselines.py at a toy size: it runs, times every side and checks tsrec's
forecasts against statsforecast's cross_validation(refit=False)."""

import pytest

pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")


@pytest.mark.slow  # about 30 s on a shared 2-core machine: every side warmed up, then timed twice
def test_the_benchmark_writes_its_tables(tmp_path):
    from benchmarks import backtest_baselines

    backtest_baselines.main(["--panels", "panel", "--series", "3", "--windows", "2", "--repeats", "2", "--scale",
                             "0.3", "--out-dir", str(tmp_path)])
    text = (tmp_path / "backtest_baselines.md").read_text()
    assert "- command: `python -m benchmarks.backtest_baselines --panels panel --series 3" in text
    difference = float(text.split("largest relative difference ")[1].split("\n")[0])
    assert difference < 1e-6  # the same forecasts as statsforecast's
    assert '"fitted once on the history before the first origin"' in text
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| panel (3 x")]
    assert [row[1] for row in rows] == ["ets", "theta", "default backtest's baselines (ets, theta)"]
    assert all(" ± " in row[5] for row in rows)  # the ratio's mean and spread over the 2 rounds
    costs = [line.split(" | ") for line in text.splitlines() if line.startswith("| panel | ") and not line.startswith("| panel | model |")]
    assert [row[1] for row in costs] == ["ets", "theta"] and all(" ± " in row[4] for row in costs)
