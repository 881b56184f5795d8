"""A saved model whose model name was edited to another of the same network class (issue #39).

``patchtst`` and ``rsa_patchtst`` (or ``naive`` and ``seasonal_naive``) build one network class,
and a user may give either name's network the other's options, so the JSON alone cannot tell an
edited name from a fitted one: the old code loaded the edited file (checksums rewritten) and ran
the first model's network under the second's name. The name the network was built as is saved
with its weights, and ``load`` refuses a ``forecaster.json`` that names another.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tests.saved_models import edit_weights, read_meta, write_checksummed

TINY = dict(d_model=16, n_heads=4, d_ff=16, e_layers=1, patch_len=8, stride=4, max_epochs=1, batch_size=64,
            trainer_kwargs={"enable_progress_bar": False, "logger": False})


def series(n: int = 200) -> pd.DataFrame:
    t = np.arange(n)
    return pd.DataFrame({"y": np.sin(2 * np.pi * t / 24) + 5}, index=pd.date_range("2024-01-01", periods=n, freq="h"))


def renamed(path, name: str) -> None:
    meta = read_meta(path)
    meta["settings"]["model"] = meta["resolved_settings"]["model"] = name
    write_checksummed(path, meta)


@pytest.mark.parametrize("fitted_as, edited_to, options", [
    ("patchtst", "rsa_patchtst", TINY),
    ("rsa_patchtst", "patchtst", TINY),
    ("seasonal_naive", "naive", {}),
    ("naive", "seasonal_naive", {}),
])
def test_a_model_name_edited_to_another_of_the_same_network_is_refused(tmp_path, one_thread, fitted_as, edited_to,
                                                                        options):
    fitted = Forecaster(fitted_as, prediction_length=6, context_length=48, **options).fit(series())
    path = fitted.save(tmp_path / "m")
    renamed(path, edited_to)
    with pytest.raises(ValueError, match=rf"is corrupted or was edited after saving \(forecaster\.json names the model "
                                         rf"'{edited_to}', but weights\.pt holds the network of '{fitted_as}'\); save "
                                         "the model again"):
        Forecaster.load(path)
    renamed(path, fitted_as)  # the name it was saved with: loads, and forecasts as before
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), fitted.predict())


def test_files_saved_before_the_name_was_kept_with_the_weights_still_load(tmp_path):
    fitted = Forecaster("seasonal_naive", prediction_length=6).fit(series())
    path = fitted.save(tmp_path / "m")
    edit_weights(path, lambda tensors: tensors.pop("model_name"), rehash=True)
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), fitted.predict())
