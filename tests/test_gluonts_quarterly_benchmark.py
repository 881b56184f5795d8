"""benchmarks/gluonts_quarterly.py: its windows, and the targets its report judges."""

import math

import numpy as np
import pandas as pd
import pytest

from benchmarks.gluonts_quarterly import HORIZON, METRICS, coverage_judged, load, render


def test_windows_end_at_every_series_end_and_train_stops_at_the_first_origin():
    pytest.importorskip("statsmodels")
    data = load("macrodata")  # 12 series of 203 quarters, 8 windows a year apart
    assert (data.series, data.length, data.windows, data.stride) == (12, 203, 8, 4)
    first = 203 - HORIZON - 4 * 7
    assert all(len(entry["target"]) == first for entry in data.train)
    assert len(data.inputs) == len(data.truth) == 12 * 8
    for entry, truth in zip(data.inputs, data.truth):
        assert len(truth) == len(entry["target"]) + HORIZON
        np.testing.assert_array_equal(truth.to_numpy()[:-HORIZON], entry["target"])
        assert truth.index.freqstr.startswith("Q") and truth.index[0] == entry["start"]
    assert len(data.truth[7]) == 203 and len(data.truth[0]) == first + HORIZON  # the last window ends at the end


def test_coverage_is_judged_only_where_the_windows_can_tell_five_points():
    assert coverage_judged(96, 0.05) and not coverage_judged(15, 0.05)
    assert 2 * math.sqrt(0.05 * 0.95 / 80) < 0.05 < 2 * math.sqrt(0.05 * 0.95 / 70)
    assert coverage_judged(80, 0.95) and not coverage_judged(70, 0.95)


def _row(dataset, model, seed, **metrics):
    return {"dataset": dataset, "model": model, "seed": seed, "series": 12, "length": 203, "windows": 8, "stride": 4,
            "horizon": HORIZON, "status": "ok", "note": "", **{m: metrics.get(m, 1.0) for m in METRICS},
            "train_cpu_s": 1.0, "cpu_s": 2.0, "command": "cmd", "commit": "abc", "machine": "m", "date": "d"}


def test_the_report_judges_each_target_on_the_mean_and_counts_the_seeds():
    rows = pd.DataFrame([
        _row("q", "tsrec default", 0, MASE=1.0, mean_wQuantileLoss=0.010, **{"Coverage[0.05]": 0.06,
                                                                           "Coverage[0.95]": 0.85}),
        _row("q", "tsrec default", 1, MASE=1.4, mean_wQuantileLoss=0.013, **{"Coverage[0.05]": 0.05,
                                                                           "Coverage[0.95]": 0.87}),
        _row("q", "GluonTS SeasonalNaive", np.nan, MASE=1.3, mean_wQuantileLoss=0.04),
        _row("q", "GluonTS AutoETS", np.nan, MASE=1.1, mean_wQuantileLoss=0.012),
        {**_row("short", "tsrec default", 0), "status": "failed", "note": "ValueError: too short",
         **{m: np.nan for m in METRICS}},
        _row("short", "GluonTS SeasonalNaive", np.nan),
        _row("short", "GluonTS AutoETS", np.nan),
    ])
    text = render(rows)
    assert "MASE 1.200 vs SeasonalNaive's 1.300 (met on the mean; 1 of 2 seeds)" in text
    assert "mean_wQuantileLoss 0.0115 vs AutoETS's 0.0120 (met on the mean; 1 of 2 seeds)" in text
    assert "Coverage[0.05] 5.5% (met)" in text and "Coverage[0.95] 86.0% (**not met**)" in text
    assert "- **short**: **not met**, the default failed (ValueError: too short)" in text
    assert "| short | tsrec default | 0 | failed |" in text and "| q | GluonTS AutoETS | - | 1.100 |" in text
