"""Saved models that cannot lie, and saves that other processes cannot break.

Every edit of ``forecaster.json`` is refused by its checksum; an edit that rewrites the checksum
too is refused where the JSON no longer fits the weights (or itself); a model saved by a newer
tsrec says so; every per-series value is in the weights, checked against the JSON; models in the
formats before (4: tsrec 0.1, weights-only checksum; 5; 6: per-series lists in the JSON, a fixture
written by the tsrec of that format) load to identical forecasts. Many processes
saving to one path while another loads it see only whole models and leave no hidden folder; the
folders of crashed saves are removed by the next save, those of live saves are kept."""

import errno
import hashlib
import json
import multiprocessing
import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import tsrec
from tsrec import Forecaster, _saving
from tsrec.config import DataFacts
from tsrec.models import model_config
from tsrec.saved_format import FORMAT_VERSION, SCALER_ROWS, ConcurrentSaveError, pack_strings, unpack_strings
from tsrec.saved_state import load_state, save_state
from tests.saved_models import (SERIES_KEYS, edit_weights, read_meta, write_checksummed, write_format_4,
                                 write_format_5, write_format_6)

QUIET = {"enable_progress_bar": False, "logger": False}
#: The last commit whose tsrec saves format 6 (tests/write_format6.py runs it).
FORMAT_6_COMMIT = "7839de7"
FORK = "fork" in multiprocessing.get_all_start_methods()


def two_channels(n=240, level=5.0):
    t = np.arange(n)
    return pd.DataFrame({"load": np.sin(2 * np.pi * t / 24) + level, "temp": np.cos(2 * np.pi * t / 24)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


def dlinear(level=5.0):
    return Forecaster("dlinear", prediction_length=6, context_length=24, max_epochs=1, batch_size=64,
                      trainer_kwargs=QUIET).fit(two_channels(level=level))


@pytest.fixture(scope="module")
def fitted():
    return dlinear()


@pytest.fixture(scope="module")
def other():
    """A second model, told apart from ``fitted`` by its scaler's level."""
    return dlinear(level=50.0)


def write_meta(path, meta, *, rehash):
    """Write ``meta`` into ``path``'s forecaster.json; ``rehash``: with the checksums recomputed, as
    a newer tsrec (or a user covering an edit) would write them."""
    if rehash:
        write_checksummed(path, meta)
    else:
        (path / "forecaster.json").write_text(json.dumps(meta, indent=2))


def hidden(folder):
    return sorted(p.name for p in Path(folder).iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------------------------------- format


def test_saved_model_records_its_versions_and_every_files_checksum(fitted, tmp_path):
    path = fitted.save(tmp_path / "m")
    meta = read_meta(path)
    assert meta["format_version"] == 10 and meta["tsrec_version"] == tsrec.__version__  # 10: its series' floor
    assert set(meta["sha256"]) == {"forecaster.json", "weights.pt"}
    # nothing per series in the JSON: ids, starts, scaler rows and static covariates are tensors
    assert set(meta["data"]) == {"freq", "layout", "targets", "tz"} and meta["scaler"] == {"robust": True}
    assert set(meta["covariates"]) == {"encoder"}
    tensors = torch.load(path / "weights.pt", weights_only=True)
    assert set(SERIES_KEYS) <= set(tensors) and tensors["scaler_loc"].shape == (1, 2)
    assert meta["sha256"]["weights.pt"] == hashlib.sha256((path / "weights.pt").read_bytes()).hexdigest()
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), fitted.predict())
    # the checksum is over what the JSON says, not its layout
    (path / "forecaster.json").write_text(json.dumps(meta, separators=(",", ":")))
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), fitted.predict())


def test_integer_ids_come_back_as_integers_from_predict_backtest_and_a_saved_model(tmp_path):
    """Store numbers as ids (a long frame's int64 column): the forecasts, the backtest's errors and a
    saved model's forecasts give them back as int64, so they join the user's frame on that column
    (they came back as text, and pandas refused the merge); the model is saved as format 12, which
    tsrecs before it refuse as newer, and a model with text ids keeps its older format."""
    from tsrec.evaluation import backtest

    t = np.arange(60)
    df = pd.concat([pd.DataFrame({"unique_id": i, "ds": pd.date_range("2020-01-01", periods=60, freq="D"),
                                  "y": 10.0 + i + np.sin(2 * np.pi * t / 7)}) for i in (10, 2)])
    f = Forecaster("seasonal_naive", prediction_length=7).fit(df)
    forecast = f.predict()
    assert forecast.item_id.dtype == np.int64 and set(forecast.item_id) == {2, 10}
    joined = forecast.merge(df.assign(ds=df.ds + pd.Timedelta(days=7)), left_on=["item_id", "timestamp"],
                            right_on=["unique_id", "ds"])
    np.testing.assert_allclose(joined["mean"], joined.y)  # seasonal naive: last week again
    assert backtest(f, df, n_windows=2).errors.item_id.dtype == np.int64
    path = f.save(tmp_path / "m")
    assert read_meta(path)["format_version"] == 12 and read_meta(path)["data"]["integer_ids"] is True
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), forecast)
    text = Forecaster("seasonal_naive", prediction_length=7).fit(df.astype({"unique_id": str}))
    assert text.predict().item_id.dtype == object
    assert read_meta(text.save(tmp_path / "t"))["format_version"] < 12


def edit_robust(meta):
    meta["scaler"]["robust"] = False


def edit_freq(meta):
    meta["data"]["freq"] = meta["resolved_settings"]["window"]["freq"] = "D"


def edit_tz(meta):
    meta["data"]["tz"] = "UTC"


def edit_prediction_length(meta):
    for settings in (meta["settings"], meta["resolved_settings"]):
        settings["window"]["prediction_length"] = 7
    meta["resolved_settings"]["network"]["prediction_length"] = 7


def edit_model(meta):
    meta["settings"]["model"] = meta["resolved_settings"]["model"] = "seasonal_naive"


def edit_n_channels(meta):
    meta["data_facts"]["n_channels"] = meta["resolved_settings"]["network"]["n_channels"] = 3


def edit_targets(meta):
    meta["data"]["targets"] = ["temp", "load"]


EDITS = [edit_robust, edit_freq, edit_tz, edit_prediction_length, edit_model, edit_targets]


@pytest.mark.parametrize("edit", EDITS, ids=lambda edit: edit.__name__)
def test_any_edit_of_the_json_is_refused_by_its_checksum(fitted, tmp_path, edit):
    path = fitted.save(tmp_path / "m")
    meta = read_meta(path)
    edit(meta)
    write_meta(path, meta, rehash=False)
    with pytest.raises(ValueError, match=r"forecaster\.json does not match the checksum in forecaster\.json: "
                                         "the saved model was edited or corrupted after saving. Save it again"):
        Forecaster.load(path)


@pytest.mark.parametrize(("edit", "message"), [
    (edit_prediction_length, r"weights\.pt does not fit the 'dlinear' network that forecaster\.json describes "
                             r"\(prediction_length 7, context_length 24, 2 channels\): seasonal_map\.weight is "
                             r"\[1, 6, 24\] in weights\.pt but \[1, 7, 24\] in the network"),
    (edit_freq, r"data_facts is .*'season': 24.* but what data.freq 'D' and data.targets give is .*'season': 7"),
    (lambda meta: meta["settings"]["window"].update(prediction_length=12),
     "settings.window.prediction_length is 12 but resolved_settings.window.prediction_length is 6"),
    (edit_model, r"SeasonalNaiveConfig has no setting\(s\) \['individual', 'moving_average'\]"),
    (edit_n_channels, r"revin\.weight is \[2\] in weights\.pt but \[3\] in the network"),
    (lambda meta: meta["data"].update(calendar="iso"), "forecaster.json has entries this tsrec does not know: "
                                                       "data.calendar"),
    (lambda meta: meta["scaler"].update(clip=3.0), "forecaster.json has entries this tsrec does not know: scaler.clip"),
], ids=["prediction_length", "freq", "user_prediction_length", "model", "n_channels", "unknown_entry",
        "unknown_scaler_entry"])
def test_an_edit_with_a_recomputed_checksum_is_refused_where_the_json_contradicts_the_weights(
        fitted, tmp_path, edit, message):
    path = fitted.save(tmp_path / "m")
    meta = read_meta(path)
    edit(meta)
    write_meta(path, meta, rehash=True)
    with pytest.raises(ValueError, match="is corrupted or was edited after saving") as error:
        Forecaster.load(path)
    assert error.match(message)


def test_strings_packed_as_bytes_and_ends_read_back_as_they_were():
    texts = ["a", "", "köln", "日本", "x" * 300, "bad \udc80 byte", ""]
    data, ends = pack_strings(texts)
    assert (data.dtype, ends.dtype) == (torch.uint8, torch.int64) and ends.tolist()[-1] == len(data)
    assert unpack_strings(data, ends) == texts
    assert unpack_strings(*pack_strings([])) == []


def add_scaler_row(tensors):
    for name in SCALER_ROWS:
        row = torch.zeros(1, 2, dtype=torch.float64) if name == "floor" else torch.ones(1, 2, dtype=torch.float64)
        tensors[f"scaler_{name}"] = torch.cat([tensors[f"scaler_{name}"], row])


def shift_scaler(tensors):
    tensors["scaler_loc"][0, 0] += 1.0


def move_start(tensors):
    tensors["starts"] += 3_600 * 10**9


def rename_item(tensors):
    tensors["item_ids"][0] = ord("x")


@pytest.mark.parametrize("edit", [shift_scaler, move_start, rename_item], ids=lambda edit: edit.__name__)
def test_any_edit_of_the_per_series_tensors_is_refused_by_the_checksum(fitted, tmp_path, edit):
    path = fitted.save(tmp_path / "m")
    edit_weights(path, edit, rehash=False)
    with pytest.raises(ValueError, match=r"weights\.pt does not match the checksum in forecaster\.json: the saved "
                                         "model was edited or corrupted after saving"):
        Forecaster.load(path)


@pytest.mark.parametrize(("edit", "message"), [
    (add_scaler_row,
     r"the scaler's shape is \[\[2, 2\], \[2, 2\]\] but \[series, channels\] .* is \[\[1, 2\], \[1, 2\]\]"),
    (lambda tensors: tensors.update(starts=torch.zeros(2, dtype=torch.int64)),
     r"holds 1 item ids, 2 starts and 1 series' histories; one of each per series"),
    (lambda tensors: tensors.update(item_id_ends=tensors["item_id_ends"] + 1),
     r"weights\.pt's item_id_ends are not where the strings of its item_ids \(1 bytes\) end"),
    (lambda tensors: tensors.update(starts=tensors["starts"].double()),
     r"weights\.pt's starts is float64 \[1\], not int64 with 1 dimension"),
    (lambda tensors: tensors.pop("static_cat"), r"weights\.pt's static_cat is missing, not uint8 with 1 dimension"),
    (lambda tensors: tensors.update(history_values=torch.cat([tensors["history_values"]] * 2)),
     r"history_lengths \(1 series of 24 steps in all\) do not cut its history: history_values has 48 rows, "
     "history_observed has 24 rows"),
    (lambda tensors: tensors.update(static_real=torch.ones(1, 1, dtype=torch.float64)),
     r"the static covariates' shapes is \[\[1, 1\], \[1, 0\]\] but \[series, numeric\], \[series, categorical\] "
     r"of the item ids and covariates\.encoder is \[\[1, 0\], \[1, 0\]\]"),
    (lambda tensors: tensors.update(static_cat_ends=torch.tensor([0, 0])),
     r"weights\.pt holds 2 categorical static covariates \(static_cat_ends\) but 1 series of 0 each"),
], ids=["scaler_rows", "starts_count", "id_ends", "starts_dtype", "missing", "history_rows", "static_real",
        "static_cat"])
def test_per_series_tensors_that_contradict_the_json_or_each_other_are_refused(fitted, tmp_path, edit, message):
    path = fitted.save(tmp_path / "m")
    edit_weights(path, edit, rehash=True)
    with pytest.raises(ValueError, match="is corrupted or was edited after saving") as error:
        Forecaster.load(path)
    assert error.match(message)


def test_a_model_edited_into_another_architecture_is_refused(fitted, tmp_path):
    path = fitted.save(tmp_path / "m")
    meta = read_meta(path)
    for settings in (meta["settings"], meta["resolved_settings"]):
        settings["model"] = "patchtst"
    window = meta["resolved_settings"]["window"]
    network = model_config("patchtst", context_length=window["context_length"],
                           prediction_length=window["prediction_length"])
    meta["resolved_settings"]["network"] = network.resolved(DataFacts(**meta["data_facts"])).to_dict()
    meta["settings"]["network"] = model_config("patchtst").to_dict()
    write_meta(path, meta, rehash=True)
    with pytest.raises(ValueError, match=r"weights\.pt does not fit the 'patchtst' network that forecaster\.json "
                                         r"describes \(prediction_length 6, context_length 24, 2 channels\): the "
                                         r"network has .* missing from weights\.pt; weights\.pt has seasonal_map"):
        Forecaster.load(path)


def test_a_newer_tsrec_model_says_so(fitted, tmp_path):
    path = fitted.save(tmp_path / "m")
    meta = read_meta(path)
    meta["tsrec_version"] = "99.0"
    meta["resolved_settings"]["window"]["horizon_weights"] = "linear"  # a setting this tsrec does not have
    write_meta(path, meta, rehash=True)
    with pytest.raises(ValueError, match=r"saved by a newer tsrec \(version 99\.0\); upgrade tsrec to load it "
                                         rf"\(tsrec {re.escape(tsrec.__version__)} cannot read it: .*horizon_weights"):
        Forecaster.load(path)
    del meta["resolved_settings"]["window"]["horizon_weights"]
    meta["calibration"] = {"method": "conformal"}  # a new section
    write_meta(path, meta, rehash=True)
    with pytest.raises(ValueError, match=r"saved by a newer tsrec \(version 99\.0\).*does not know: calibration"):
        Forecaster.load(path)
    meta = {**meta, "format_version": FORMAT_VERSION + 1}
    write_meta(path, meta, rehash=True)
    newer = FORMAT_VERSION + 1
    with pytest.raises(ValueError, match=rf"saved by a newer tsrec \(version 99\.0, model format {newer}\); upgrade "
                                         "tsrec to load it"):
        Forecaster.load(path)


def assert_same_state(read, saved):
    """Two states hold the same per-series values: ids, grids, history, scaler rows, covariates."""
    for a, b in zip(read.history.items, saved.history.items, strict=True):
        assert a.item_id == b.item_id
        pd.testing.assert_index_equal(a.index, b.index)
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.observed, b.observed)
    for name in ("loc", "scale", "low", "high"):
        np.testing.assert_array_equal(getattr(read.scaler, name), getattr(saved.scaler, name))
    assert read.scaler.robust == saved.scaler.robust
    ours, theirs = read.covariate_history, saved.covariate_history
    for a, b in zip(ours.dynamic, theirs.dynamic, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours.static_real, theirs.static_real)
    assert ours.static_cat.tolist() == theirs.static_cat.tolist()


@pytest.fixture(scope="module")
def format_6(tmp_path_factory):
    """A model saved in format 6 by commit 7839de7's tsrec, and that tsrec's forecasts from it: the folder
    holding ``model/`` and ``forecast.parquet`` (tests/write_format6.py, run with that commit's code)."""
    root = Path(__file__).resolve().parents[1]
    old_code, out = tmp_path_factory.mktemp("tsrec-7839de7"), tmp_path_factory.mktemp("format6")
    archive = subprocess.run(["git", "archive", FORMAT_6_COMMIT, "tsrec"], cwd=root, capture_output=True, check=False)
    if archive.returncode != 0:
        pytest.skip(f"needs commit {FORMAT_6_COMMIT} in the git history to write a format-6 model "
                    f"(a full clone): {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(old_code)], input=archive.stdout, check=True)
    env = {**os.environ, "PYTHONPATH": str(old_code), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(root / "tests" / "write_format6.py"), str(out)], cwd=old_code, env=env,
                   check=True)
    return out


@pytest.mark.slow
def test_a_format_6_model_written_by_its_tsrec_forecasts_as_it_did_and_as_its_format_7_copy(tmp_path, format_6):
    old = Forecaster.load(format_6 / "model")
    assert read_meta(format_6 / "model")["format_version"] == 6
    assert old.fitted.history.item_ids == ("b", "c", "köln")
    assert old.fitted.covariate_history.static_cat.tolist() == [["north"], ["south"], ["south"]]
    expected = pd.read_parquet(format_6 / "forecast.parquet")
    pd.testing.assert_frame_equal(old.predict(), expected, check_exact=True)
    new = Forecaster.load(old.save(tmp_path / "m"))
    assert read_meta(tmp_path / "m")["format_version"] == 7
    assert_same_state(new.fitted, old.fitted)
    pd.testing.assert_frame_equal(new.predict(), expected, check_exact=True)


def test_a_format_6_model_with_the_per_series_values_in_its_json_still_loads(tmp_path):
    frame = pd.concat([pd.DataFrame({"id": name, "ds": pd.date_range("2024-01-01", periods=80, freq="h"),
                                     "y": np.cos(np.arange(80) / 5) * (k + 1), "size": 2.0 * k,
                                     "region": "é" if k else "ü"}) for k, name in enumerate(["β", "a", "日本"])])
    fitted = Forecaster("dlinear", prediction_length=6, context_length=24, max_epochs=1, trainer_kwargs=QUIET).fit(
        frame, id_col="id", time_col="ds", target_col="y", static_covariates=["size", "region"])
    path = write_format_6(fitted.save(tmp_path / "m"))
    meta = read_meta(path)
    assert meta["format_version"] == 6 and meta["data"]["item_ids"] == ["a", "β", "日本"]
    assert not set(SERIES_KEYS) & set(torch.load(path / "weights.pt", weights_only=True))
    loaded = Forecaster.load(path)
    assert_same_state(loaded.fitted, fitted.fitted)
    pd.testing.assert_frame_equal(loaded.predict(), fitted.predict(), check_exact=True)


def test_a_format_5_model_with_one_history_tensor_per_series_still_loads(tmp_path):
    starts = {"a": "2024-03-30 20:00", "b": "2024-03-29 07:00", "c": "2024-03-31 00:00"}  # over a DST change
    frame = pd.concat([pd.DataFrame({"id": name, "y": np.sin(np.arange(60 + 10 * k) / 4) + k,
                                     "ts": pd.date_range(start, periods=60 + 10 * k, freq="h", tz="Europe/Berlin")})
                       for k, (name, start) in enumerate(starts.items())])
    fitted = Forecaster("dlinear", prediction_length=6, context_length=24, max_epochs=1, trainer_kwargs=QUIET).fit(
        frame, id_col="id", time_col="ts", target_col="y")
    path = write_format_5(fitted.save(tmp_path / "m"))
    loaded = Forecaster.load(path)
    for saved, read in zip(fitted.fitted.history.items, loaded.fitted.history.items, strict=True):
        pd.testing.assert_index_equal(read.index, saved.index)
        np.testing.assert_array_equal(read.values, saved.values)
    pd.testing.assert_frame_equal(loaded.predict(), fitted.predict())


def test_a_format_4_model_still_loads_with_its_weights_checked(fitted, tmp_path):
    path = fitted.save(tmp_path / "m")
    write_format_4(path)
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), fitted.predict())
    meta = read_meta(path)
    edit_prediction_length(meta)  # format 4 has no JSON checksum: the weights' shapes still refuse this
    (path / "forecaster.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"seasonal_map\.weight is \[1, 6, 24\] in weights\.pt but \[1, 7, 24\]"):
        Forecaster.load(path)
    fitted.save(path)
    write_format_4(path)
    weights = bytearray((path / "weights.pt").read_bytes())
    weights[len(weights) // 2] ^= 0x01
    (path / "weights.pt").write_bytes(bytes(weights))
    with pytest.raises(ValueError, match=r"weights\.pt does not match the checksum in forecaster\.json"):
        Forecaster.load(path)


def test_a_missing_or_foreign_listed_file_is_refused(fitted, tmp_path):
    path = fitted.save(tmp_path / "m")
    meta = read_meta(path)
    meta["sha256"]["calibration.pt"] = "0" * 64
    write_meta(path, meta, rehash=True)
    with pytest.raises(ValueError, match=r"calibration\.pt is missing, but forecaster\.json lists it"):
        Forecaster.load(path)
    meta = read_meta(fitted.save(path))
    meta["sha256"]["../outside.pt"] = "0" * 64
    write_meta(path, meta, rehash=True)
    with pytest.raises(ValueError, match="lists files outside the model's folder"):
        Forecaster.load(path)


# ------------------------------------------------------------------------------- concurrent saves


def save_many(source, target, saves, errors, start):
    """Save the models in ``source`` (a list of folders) in turn into ``target``, ``saves`` times,
    from when every saver is ready (``start``)."""
    states = [load_state(s) for s in source]
    start.wait()
    for k in range(saves):
        try:
            save_state(states[k % len(states)], target)
        except ConcurrentSaveError:
            pass  # the documented refusal
        except Exception as err:  # noqa: BLE001 - any other error fails the test, with its text
            errors.put(f"save: {type(err).__name__}: {err}")


def load_until(target, stop, levels, errors, loads):
    """Load ``target`` until ``stop`` is set; each load must be one of the saved models, whole."""
    count = 0
    while not stop.is_set():
        try:
            level = float(load_state(target).scaler.loc[0, 0])
            if level not in levels:
                errors.put(f"load: a model with level {level}, none of {levels}")
            count += 1
        except ConcurrentSaveError:
            pass
        except Exception as err:  # noqa: BLE001
            errors.put(f"load: {type(err).__name__}: {err}")
    loads.put(count)


@pytest.mark.slow  # the concurrency stress: nine processes
@pytest.mark.skipif(not FORK, reason="needs the fork start method (the savers share the fitted models)")
def test_many_processes_saving_to_one_path_while_another_loads_it(fitted, other, tmp_path):
    sources = [str(fitted.save(tmp_path / "a")), str(other.save(tmp_path / "b"))]
    levels = [float(f.scaler.loc[0, 0]) for f in (fitted, other)]
    target = tmp_path / "shared" / "m"
    fitted.save(target)
    context = multiprocessing.get_context("fork")
    errors, loads, stop, start = context.Queue(), context.Queue(), context.Event(), context.Barrier(8)
    reader = context.Process(target=load_until, args=(target, stop, levels, errors, loads))
    reader.start()
    savers = [context.Process(target=save_many, args=(sources[k % 2:] + sources[:k % 2], target, 10, errors, start))
              for k in range(8)]
    for saver in savers:
        saver.start()
    for saver in savers:
        saver.join(120)
    stop.set()
    reader.join(60)
    assert [p.exitcode for p in [*savers, reader]] == [0] * 9
    found = []
    while True:
        try:
            found.append(errors.get(timeout=0.1))
        except queue.Empty:
            break
    assert found == []
    assert loads.get(timeout=5) > 0
    assert float(load_state(target).scaler.loc[0, 0]) in levels
    assert hidden(target.parent) == []  # no staging, old or lock file left


def test_a_save_or_load_waiting_too_long_for_another_save_says_so(fitted, tmp_path, monkeypatch):
    path = fitted.save(tmp_path / "m")
    monkeypatch.setattr(_saving, "LOCK_TIMEOUT", 0.2)
    with _saving.folder_lock(path, exclusive=True):  # another save, swapping its folder in
        with pytest.raises(ConcurrentSaveError, match=f"another process is saving to {path}"):
            fitted.save(path)  # its first look at what is there waits for the swap
        with pytest.raises(ConcurrentSaveError, match=f"another process is saving to {path}"):
            Forecaster.load(path)
    with _saving.folder_lock(path, exclusive=False):  # a load in progress: the save's swap waits for it
        with pytest.raises(ConcurrentSaveError, match=f"another process is saving to or loading {path}"):
            fitted.save(path)
    assert hidden(tmp_path) == []
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), fitted.predict())


def test_a_save_waits_for_a_load_in_progress(fitted, other, tmp_path, monkeypatch):
    path = fitted.save(tmp_path / "m")
    saver = threading.Thread(target=other.save, args=(path,))
    refused = threading.Event()  # set when the saver's swap asks for the folder's lock and finds it held
    flock = _saving.fcntl.flock

    def watched_flock(fd, operation):
        try:
            return flock(fd, operation)
        except BlockingIOError:
            if threading.current_thread() is saver and operation & _saving.fcntl.LOCK_EX:
                refused.set()
            raise

    monkeypatch.setattr(_saving.fcntl, "flock", watched_flock)
    with _saving.folder_lock(path, exclusive=False):  # a load reading the files
        saver.start()
        assert refused.wait(30), "the save never asked for the folder's lock"
        assert saver.is_alive()  # the swap waits for the reader
        assert float(load_state(path).scaler.loc[0, 0]) == float(fitted.scaler.loc[0, 0])
    saver.join(30)
    assert not saver.is_alive()
    assert float(load_state(path).scaler.loc[0, 0]) == float(other.scaler.loc[0, 0])
    assert hidden(tmp_path) == []


def crash_while_saving(state, path):
    """Die (as if killed) halfway through writing the weights."""
    def die(obj, file, *args, **kwargs):
        Path(file).write_bytes(b"half a file")
        os._exit(9)

    torch.save = die
    save_state(state, path)


@pytest.mark.skipif(not FORK, reason="needs the fork start method (the crashing saver shares the fitted model)")
def test_the_folders_of_crashed_saves_are_removed_by_the_next_save_and_live_ones_kept(fitted, other, tmp_path):
    path = fitted.save(tmp_path / "m")
    crashed = multiprocessing.get_context("fork").Process(target=crash_while_saving, args=(fitted.fitted, path))
    crashed.start()
    crashed.join(60)
    assert crashed.exitcode == 9
    [staging] = hidden(tmp_path)
    assert staging.startswith(".m.saving-") and (tmp_path / staging / "weights.pt").read_bytes() == b"half a file"
    # a crash between the two renames of the swap: the previous model is left aside
    aside = tmp_path / ".m.old-0123456789ab"
    aside.mkdir()
    (aside / "m").mkdir()
    with _saving.staging_folder(path) as live:  # another process's save, still writing
        other.save(path)
        assert hidden(tmp_path) == [live.name]
    assert hidden(tmp_path) == []
    assert float(load_state(path).scaler.loc[0, 0]) == float(other.scaler.loc[0, 0])


def test_a_model_in_a_read_only_folder_loads_without_a_lock(fitted, tmp_path, monkeypatch):
    path = fitted.save(tmp_path / "m")
    real_open = os.open

    def read_only(file, flags, *args):  # the folder refuses new files (nobody can save there either)
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system", str(file))
        return real_open(file, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), fitted.predict())
    monkeypatch.undo()
    assert hidden(tmp_path) == []


def test_a_file_system_without_flock_still_saves_and_loads_whole_models(fitted, other, tmp_path, monkeypatch):
    def unsupported(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(_saving.fcntl, "flock", unsupported)
    path = fitted.save(tmp_path / "m")
    other.save(path)
    assert float(load_state(path).scaler.loc[0, 0]) == float(other.scaler.loc[0, 0])
    assert hidden(tmp_path) == []


def test_a_save_whose_last_rename_fails_puts_the_previous_model_back(fitted, other, tmp_path, monkeypatch):
    path = fitted.save(tmp_path / "m")
    real_replace = os.replace

    def refuse_the_new_folder(source, destination):
        if ".m.saving-" in str(source):
            raise OSError(errno.EIO, "Input/output error")
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", refuse_the_new_folder)
    with pytest.raises(OSError, match="Input/output error"):
        other.save(path)
    monkeypatch.undo()
    assert hidden(tmp_path) == []
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), fitted.predict())


def test_load_takes_trainer_arguments_over_the_saved_ones(fitted, tmp_path):
    """A loaded model gets another accelerator, or the callbacks a save does not keep, through load;
    the saved folder and the other saved arguments are unchanged."""
    path = fitted.save(tmp_path / "m")
    saved = Forecaster.load(path).trainer_kwargs
    loaded = Forecaster.load(path, trainer_kwargs={"accelerator": "cpu", "enable_model_summary": False})
    assert loaded.trainer_kwargs == {**saved, "accelerator": "cpu", "enable_model_summary": False}
    assert loaded.fitted.settings.trainer.trainer_kwargs is loaded.trainer_kwargs
    assert Forecaster.load(path).trainer_kwargs == saved
    pd.testing.assert_frame_equal(loaded.predict(), fitted.predict())
