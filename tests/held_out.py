"""A long frame's held-out tail and the error of a forecast of it: what the tests of the models
fitted on windows (tests/test_ridge.py, tests/test_gbm.py) score with."""

import numpy as np


def split(df, horizon):
    """``df`` (columns ``id``, ``ds``, ``y``) without each series' last ``horizon`` rows, and those rows."""
    return df.groupby("id").head(df.groupby("id").size().min() - horizon), df.groupby("id").tail(horizon)


def mae(forecast, test):
    """The mean absolute error of ``forecast`` (``predict``'s frame) over every row of ``test``."""
    merged = forecast.merge(test, left_on=["item_id", "timestamp"], right_on=["id", "ds"])
    assert len(merged) == len(test)
    return float(np.abs(merged["mean"] - merged["y"]).mean())
