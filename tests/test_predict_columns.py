"""An extra column in a wide frame given to predict (issue #39): the error said "pass exactly these
columns in this order" though predict takes the fitted columns in any order; it now says so, and
its fix, as written, works."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster


def wide(n: int = 100) -> pd.DataFrame:
    t = np.arange(n)
    index = pd.date_range("2024-01-01", periods=n, freq="h")
    return pd.DataFrame({"a": np.sin(t / 3), "b": np.cos(t / 3)}, index=index)


@pytest.mark.parametrize("columns", [["b", "a", "c"], ["c", "a", "b"]])
def test_an_extra_column_names_it_and_the_fix_takes_any_order(columns):
    model = Forecaster("seasonal_naive", prediction_length=4).fit(wide())
    frame = wide().assign(c=1.0)[columns]
    with pytest.raises(ValueError) as info:
        model.predict(frame)
    message = str(info.value)
    assert message == ("columns differ from the fitted frame (missing [], unexpected ['c']); pass exactly the columns "
                       "the model was fitted on, in any order, e.g. df[['a', 'b']]")
    assert "this order" not in message
    fix = re.search(r"e\.g\. (df\[.*\])$", message).group(1)
    pd.testing.assert_frame_equal(model.predict(eval(fix, {"df": frame})), model.predict(wide()))
    pd.testing.assert_frame_equal(model.predict(frame[["b", "a"]]), model.predict(wide()))  # any order
