"""The synthetic long frames the pipeline and scale benchmarks time tsrec on."""

from __future__ import annotations

import numpy as np
import pandas as pd


def make_frame(n_series: int, length: int, seed: int = 0) -> pd.DataFrame:
    """``n_series`` hourly series of ``length`` steps in a long frame (``unique_id``, ``ds``, ``y``)."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    y = np.sin(2 * np.pi * t / 24)[None] + rng.normal(size=(n_series, 1)) + 0.3 * rng.normal(size=(n_series, length))
    return pd.DataFrame({
        "unique_id": np.repeat(np.array([f"s{i}" for i in range(n_series)], dtype=object), length),
        "ds": np.tile(pd.date_range("2020-01-01", periods=length, freq="h").values, n_series),
        "y": y.ravel(),
    })
