"""read_parquet: long Parquet data read a chunk of series at a time give what read_frame gives for
the same data as one DataFrame; errors name the problem and the fix."""

import sys

import numpy as np
import pandas as pd
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from tsrec.config import CovariateConfig  # noqa: E402
from tsrec.data import parquet  # noqa: E402
from tsrec.data.covariates import categorical_statics, read_frame  # noqa: E402
from tsrec.data.parquet import read_parquet  # noqa: E402

COLUMNS = {"time_col": "time", "id_col": "id", "target_col": "y"}
COVARIATES = CovariateConfig(past=("temp",), future=("price",), static=("size", "region"))


def long_frame(n_series: int = 10, seed: int = 0, ids=None) -> pd.DataFrame:
    """``n_series`` hourly series of different starts and lengths, in shuffled rows: NaN and inf
    targets, grid steps without a row, past and future covariates (some NaN), a numeric and a
    categorical static covariate."""
    rng = np.random.default_rng(seed)
    ids = [f"s{i}" for i in range(n_series)] if ids is None else ids
    frames = []
    for k, item in enumerate(ids):
        length = int(rng.integers(8, 30))
        time = pd.date_range("2024-01-01", periods=length, freq="h") + pd.Timedelta(hours=int(rng.integers(0, 5)))
        y = rng.normal(size=length)
        y[rng.random(length) < 0.1] = np.nan
        y[rng.random(length) < 0.05] = np.inf
        temp = rng.normal(size=length)
        temp[rng.random(length) < 0.1] = np.nan
        frame = pd.DataFrame({"id": item, "time": time, "y": y, "temp": temp, "price": rng.normal(size=length),
                              "size": float(k % 4), "region": ["north", "south", "east"][k % 3]})
        frames.append(frame.drop(index=[2, 5]))  # two grid steps without a row
    return pd.concat(frames).sample(frac=1.0, random_state=seed)  # rows shuffled, a shuffled index


def expected(df: pd.DataFrame, config: CovariateConfig = COVARIATES, **columns):
    return read_frame(df, config, categorical_statics(df, config), freq=None, gaps="raise", **(columns or COLUMNS))


def read(source, df: pd.DataFrame, config: CovariateConfig = COVARIATES, **options):
    options = {"freq": None, "gaps": "raise", **COLUMNS, **options}
    return read_parquet(source, config, categorical_statics(df, config), **options)


def assert_same(got, want) -> None:
    (panel, values), (panel_want, values_want) = got, want
    assert (panel.freq, panel.layout, panel.columns) == (panel_want.freq, panel_want.layout, panel_want.columns)
    assert panel.item_ids == panel_want.item_ids
    for item, item_want in zip(panel.items, panel_want.items):
        pd.testing.assert_index_equal(item.index, item_want.index)
        np.testing.assert_array_equal(item.values, item_want.values)
        np.testing.assert_array_equal(item.observed, item_want.observed)
    assert len(values.dynamic) == len(values_want.dynamic)
    for dynamic, dynamic_want in zip(values.dynamic, values_want.dynamic):
        np.testing.assert_array_equal(dynamic, dynamic_want)
    np.testing.assert_array_equal(values.static_real, values_want.static_real)
    assert values.static_cat.dtype == values_want.static_cat.dtype
    np.testing.assert_array_equal(values.static_cat, values_want.static_cat)


def split_into_files(df: pd.DataFrame, folder, n_files: int = 3) -> list:
    """``df``'s rows dealt round-robin into ``n_files`` files, so that every series spans files."""
    folder.mkdir()
    paths = [folder / f"part-{k}.parquet" for k in range(n_files)]
    for k, path in enumerate(paths):
        df.iloc[k::n_files].to_parquet(path)
    return paths


@pytest.mark.parametrize("chunk_series", [3, 10, 1_000])
@pytest.mark.parametrize("freq", [None, "h"])
def test_single_file_matches_read_frame(tmp_path, chunk_series, freq):
    df = long_frame()
    df.to_parquet(tmp_path / "data.parquet")
    got = read(tmp_path / "data.parquet", df, freq=freq, chunk_series=chunk_series)
    assert_same(got, expected(df))
    assert len(got[0].items) == 10 and not got[0].items[0].observed.all()


@pytest.mark.parametrize("as_list", [False, True])
def test_folder_with_series_split_across_files(tmp_path, as_list):
    df = long_frame(seed=1)
    paths = split_into_files(df, tmp_path / "data")
    (tmp_path / "data" / "notes.txt").write_text("not Parquet: ignored in a folder")
    source = paths if as_list else str(tmp_path / "data")
    assert_same(read(source, df, chunk_series=3), expected(df))


def test_ids_ordered_as_text_and_integer_ids(tmp_path):
    """Integer ids sort as text ("10" before "2"), as read_frame orders them; each chunk's filter
    compares the integers themselves."""
    df = long_frame(n_series=12, seed=2, ids=list(range(12)))
    df.to_parquet(tmp_path / "data.parquet")
    got = read(tmp_path / "data.parquet", df, chunk_series=5)
    assert got[0].item_ids[:4] == ("0", "1", "10", "11")
    assert_same(got, expected(df))


def test_categorical_ids_and_covariates(tmp_path):
    """A ``category`` id column comes back dictionary-encoded, in several files with different
    dictionaries; the categorical static covariate too."""
    df = long_frame(seed=3).astype({"id": "category", "region": "category"})
    first = df["id"].isin(["s0", "s1", "s2", "s3", "s4"]) | (np.arange(len(df)) % 2 == 0)  # s5 .. s9 in both files
    paths = [tmp_path / "first.parquet", tmp_path / "second.parquet"]
    for path, part in zip(paths, (df[first], df[~first])):
        part.assign(id=part["id"].cat.remove_unused_categories()).to_parquet(path)
    assert pq.read_schema(paths[1]).field("id").type == pa.dictionary(pa.int8(), pa.string())
    assert_same(read(paths, df, chunk_series=4), expected(df))


def test_saved_datetime_index_read_with_time_col_none(tmp_path):
    """A frame indexed by its timestamps (time zone included) saved with df.to_parquet: time_col=None
    reads that index, as read_frame reads the index of the frame."""
    df = long_frame(seed=4)
    df["time"] = df["time"].dt.tz_localize("Europe/Berlin")
    df = df.set_index("time")
    df.to_parquet(tmp_path / "data.parquet")
    got = read(tmp_path / "data.parquet", df, time_col=None, chunk_series=3)
    assert str(got[0].items[0].index.tz) == "Europe/Berlin"
    assert_same(got, expected(df, time_col=None, id_col="id", target_col="y"))


def test_target_col_none_is_the_only_column_left(tmp_path):
    """The shuffled index that df.to_parquet saves as a column is not taken for a target."""
    df = long_frame(seed=5)
    df.to_parquet(tmp_path / "data.parquet")
    got = read(tmp_path / "data.parquet", df, target_col=None, chunk_series=4)
    assert got[0].columns == ("y",)
    assert_same(got, expected(df))


def test_data_written_without_pandas(tmp_path):
    """A file without pandas metadata (written by another tool): every column is a column."""
    df = long_frame(seed=16)[["id", "time", "y", "temp"]]
    table = pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(None)
    pq.write_table(table, tmp_path / "data.parquet", row_group_size=50)
    config = CovariateConfig(past=("temp",))
    assert_same(read(tmp_path / "data.parquet", df, config, target_col=None, chunk_series=4), expected(df, config))


def test_no_covariates(tmp_path):
    df = long_frame(seed=6)[["id", "time", "y"]]
    df.to_parquet(tmp_path / "data.parquet")
    got = read(tmp_path / "data.parquet", df, CovariateConfig(), chunk_series=3)
    assert_same(got, expected(df, CovariateConfig()))
    assert got[1].static_real.shape == (10, 0) and got[1].static_cat.shape == (10, 0)


def test_chunks_hold_at_most_chunk_series_series(tmp_path, monkeypatch):
    """The memory bound: read_frame sees one chunk's rows at a time, never more than chunk_series
    series, and every row once; every chunk infers its frequency (checked against the first's)."""
    df = long_frame(seed=7)
    split_into_files(df, tmp_path / "data")
    seen = []

    def recording(frame, *args, **kwargs):
        seen.append((frame["id"].nunique(), len(frame), kwargs["freq"]))
        return read_frame(frame, *args, **kwargs)

    monkeypatch.setattr(parquet, "read_frame", recording)
    got = read(tmp_path / "data", df, chunk_series=3)
    assert [series for series, _, _ in seen] == [3, 3, 3, 1]
    assert sum(rows for _, rows, _ in seen) == len(df)
    assert [freq for _, _, freq in seen] == [None, None, None, None]
    assert_same(got, expected(df))


@pytest.mark.parametrize("step", ["30min", "2h"])
def test_a_later_chunk_at_another_frequency_is_named(tmp_path, step):
    """Each chunk's frequency is inferred and must be the first chunk's (hourly): a half-hourly or a
    2-hourly series in a later chunk is an error naming a series of each and the fix."""
    df = long_frame(n_series=4, seed=8)
    late = df[df["id"] == "s3"].sort_values("time")
    late["time"] = pd.date_range("2024-01-01", periods=len(late), freq=step)
    df = pd.concat([df[df["id"] != "s3"], late])
    df.to_parquet(tmp_path / "data.parquet")
    with pytest.raises(ValueError, match=rf"different frequencies \('h' in item 's0', '{step}' in item 's3'\).*freq="):
        read(tmp_path / "data.parquet", df, chunk_series=3)


@pytest.mark.parametrize("change", ["duplicate", "static", "target dtype"])
def test_read_frame_errors_pass_through_and_name_the_files_they_come_from(tmp_path, change):
    """read_frame's error for the same data as one frame, unchanged where no file explains it (a
    static covariate that changes between files, a target column of text in every file); a
    series' row repeated in another file also names the two files (issue #39)."""
    df = long_frame(seed=9)
    if change == "duplicate":  # a series' row repeated in another file
        df = pd.concat([df, df[df["id"] == "s7"].iloc[:1]])
    elif change == "static":  # a static covariate that changes after a series' third row
        rows = df["id"] == "s8"
        df.loc[rows, "size"] = np.where(df.loc[rows, "time"].rank() > 3, 99.0, df.loc[rows, "size"])
    else:
        df["y"] = df["y"].astype(str)
    paths = split_into_files(df, tmp_path / "data")
    with pytest.raises((TypeError, ValueError)) as want:
        expected(df)
    with pytest.raises(want.type) as got:
        read(tmp_path / "data", df, chunk_series=3)
    message = str(want.value)
    if change == "duplicate":
        stamp = df.iloc[-1]["time"]
        files = [str(path) for path in paths
                 if ((pd.read_parquet(path)["id"] == "s7") & (pd.read_parquet(path)["time"] == stamp)).any()]
        assert len(files) == 2
        message += (f". Series 's7' has rows at the same timestamps (e.g. {stamp}) in the Parquet files {files}: "
                    "keep each series' timestamp in one file")
    assert str(got.value) == message


def test_missing_id_names_the_file_and_row(tmp_path):
    df = long_frame(seed=10)
    df.iloc[[4, 9], 0] = None
    df.to_parquet(tmp_path / "data.parquet")
    with pytest.raises(ValueError, match=r"id_col 'id' is missing \(null/NaN\) in 2 rows, e.g. row 4 of .*data"
                                         r"\.parquet; every row needs the id of its series"):
        read(tmp_path / "data.parquet", df)


@pytest.mark.parametrize(("columns", "message"), [
    ({"target_col": "sales"}, r"target_col='sales' is not a column of the frame; available columns: \['id', "),
    ({"time_col": "date"}, r"time_col='date' is not a column of the frame; available columns"),
    ({"id_col": "store"}, r"id_col='store' is not a column of the frame; available columns"),
    ({"time_col": None}, r"time_col=None .* pass time_col=<the timestamp column> \(its columns: \['id', "),
    ({"target_col": None}, r"cannot tell the target column of the long frame among \['y', 'extra'\]; pass target_col"),
])
def test_missing_column_lists_the_columns(tmp_path, columns, message):
    df = long_frame(seed=11)[["id", "time", "y"]].assign(extra=1.0)
    df.to_parquet(tmp_path / "data.parquet", index=False)
    with pytest.raises(ValueError, match=message):
        read(tmp_path / "data.parquet", df, CovariateConfig(), **columns)


def test_missing_covariate_lists_the_columns(tmp_path):
    df = long_frame(seed=12).drop(columns="price")
    df.to_parquet(tmp_path / "data.parquet")
    with pytest.raises(ValueError, match=r"covariate 'price' is not a column of the frame \(its columns: \['id', "):
        read(tmp_path / "data.parquet", df.assign(price=0.0))


def test_wide_data_need_pandas(tmp_path):
    df = long_frame(seed=13)
    df.to_parquet(tmp_path / "data.parquet")
    with pytest.raises(ValueError, match=r"pass id_col=.*load wide data .* pd.read_parquet\(path\)"):
        read(tmp_path / "data.parquet", df, id_col=None)


def test_paths_that_do_not_hold_parquet_data(tmp_path):
    df = long_frame(seed=14)
    with pytest.raises(FileNotFoundError, match=r"Parquet file '.*nowhere.parquet' does not exist"):
        read(tmp_path / "nowhere.parquet", df)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "data.csv").write_text("id,time,y\n")
    with pytest.raises(ValueError, match=r"the folder '.*empty' holds no \*.parquet files"):
        read(tmp_path / "empty", df)
    with pytest.raises(FileNotFoundError, match=r"'.*empty' is a folder; pass it alone"):
        read([tmp_path / "empty"], df)
    with pytest.raises(ValueError, match="source is an empty list"):
        read([], df)
    with pytest.raises(TypeError, match="source must be a Parquet file, a folder of them or a list of files"):
        read(df, df)


def test_data_without_rows(tmp_path):
    df = long_frame(seed=15)
    df.iloc[:0].to_parquet(tmp_path / "data.parquet")
    with pytest.raises(ValueError, match=r"have no rows; pass at least one row per series"):
        read(tmp_path / "data.parquet", df)


def test_chunk_series_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="chunk_series must be an integer >= 1"):
        read(tmp_path / "data.parquet", long_frame(), chunk_series=0)


def test_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow.dataset", None)
    with pytest.raises(ModuleNotFoundError, match=r'pip install "tsrec\[parquet\]"'):
        read(tmp_path / "data.parquet", long_frame())


def _hourly(n_series: int = 6, length: int = 120) -> pd.DataFrame:
    """``n_series`` complete hourly series with a daily cycle, in a long frame."""
    rng = np.random.default_rng(5)
    t = np.arange(length)
    return pd.DataFrame({
        "id": np.repeat([f"s{i}" for i in range(n_series)], length),
        "time": np.tile(pd.date_range("2024-01-01", periods=length, freq="h").values, n_series),
        "y": (np.sin(2 * np.pi * t / 24)[None] + rng.normal(size=(n_series, length))).ravel(),
    })


def test_forecaster_fits_predicts_and_backtests_parquet_as_the_frame(tmp_path):
    from tsrec import Forecaster
    from tsrec.evaluation import backtest

    df = _hourly()
    folder = tmp_path / "data"
    split_into_files(df, folder)
    options = dict(prediction_length=6, context_length=24, max_steps=3, seed=0, val_windows=2)
    from_frame = Forecaster("dlinear", **options).fit(df, **COLUMNS)
    from_files = Forecaster("dlinear", **options).fit(folder, **COLUMNS)
    pd.testing.assert_frame_equal(from_files.predict(), from_frame.predict())
    pd.testing.assert_frame_equal(from_files.predict(folder), from_frame.predict(df))
    scored = [backtest(f, source, n_windows=3, baselines=(), **COLUMNS).summary
              for f, source in ((from_frame, df), (from_files, folder))]
    pd.testing.assert_frame_equal(scored[1], scored[0])


def test_the_history_before_an_origin_is_cut_from_parquet_as_from_the_frame(tmp_path, monkeypatch):
    """Forecaster("auto") validates on, and backtest(refit_every=...) refits on, the rows before
    each series' origin: from Parquet files (every series split over them) as from the frame, a
    slice of the one read (the files are never read whole into a frame for it)."""
    import tsrec.data.source
    from tsrec import Forecaster
    from tsrec.evaluation import backtest

    df = _hourly()
    folder = tmp_path / "data"
    split_into_files(df, folder)
    monkeypatch.setattr(tsrec.data.source, "rows_of", lambda *a: pytest.fail("the files were read into a frame"))
    refits = [backtest(Forecaster("seasonal_naive", prediction_length=6), source, n_windows=4, refit_every=2,
                       baselines=("naive",), **COLUMNS) for source in (df, folder)]
    pd.testing.assert_frame_equal(refits[1].errors, refits[0].errors)
    assert len(refits[0].errors) == 6 * 4 * 6
    options = dict(prediction_length=6, candidates=("naive", "seasonal_naive"))
    autos = [Forecaster("auto", **options).fit(source, **COLUMNS) for source in (df, folder)]
    timings = ["fit_seconds", "cpu_seconds"]
    pd.testing.assert_frame_equal(autos[1].leaderboard.drop(columns=timings), autos[0].leaderboard.drop(columns=timings))
    pd.testing.assert_frame_equal(autos[1].predict(folder), autos[0].predict(df))
    with pytest.raises(TypeError, match="expected a pandas DataFrame, or long Parquet data"):
        Forecaster("naive", prediction_length=6).fit(np.zeros(3), **COLUMNS)


def test_some_series_of_parquet_data_read_as_those_series_of_the_frame(tmp_path):
    from tsrec.data.schema import Schema
    from tsrec.data.source import ParquetSeries, read as read_source

    df = long_frame(n_series=12)
    paths = split_into_files(df, tmp_path / "parts")
    some = ("s3", "s10", "s7")
    assert_same(read(paths, df, ids=some, chunk_series=2), expected(df[df.id.isin(some)]))
    schema = Schema(**COLUMNS, covariates=COVARIATES)
    got = read_source(ParquetSeries(paths, some), schema, categorical=categorical_statics(df, COVARIATES), freq=None,
                      gaps="raise", last=5)
    want = read_source(df[df.id.isin(some)], schema, categorical=categorical_statics(df, COVARIATES), freq=None,
                       gaps="raise", last=5)
    assert_same((got.panel, got.covariates), (want.panel, want.covariates))
    # categorical=None (what fit reads): the categorical statics from the files' dtypes, as from the frame's
    inferred = read_source(ParquetSeries(paths, some), schema, freq=None, gaps="raise")
    assert inferred.categorical == read_source(df, schema, freq=None, gaps="raise").categorical == ("region",)
    assert_same((inferred.panel, inferred.covariates), expected(df[df.id.isin(some)]))
    # a subset of a subset reads the files, not a ParquetSeries nested in another
    from tsrec.data.source import rows_of, subset

    fewer = subset(ParquetSeries(paths, some), "id", ("s10",))
    assert fewer == ParquetSeries(paths, ("s10",))
    got_rows = rows_of(fewer, "id", fewer.ids)[list(df.columns)].sort_values("time", ignore_index=True)
    pd.testing.assert_frame_equal(got_rows, df[df.id == "s10"].sort_values("time", ignore_index=True),
                                  check_dtype=False)


def test_series_ids_of_shares_of_the_files_together_are_all_the_ids(tmp_path):
    """Each of n workers reads the ids of its run of the files; together they hold every id, one
    whose rows span two files in both parts, and a part without files or rows is empty, not an error."""
    df = long_frame(n_series=6, seed=4).sort_values(["id", "time"], ignore_index=True)
    cut = np.flatnonzero(df.id == df.id.unique()[2])[3]  # the third series in the first two files
    for k, rows in enumerate(np.split(np.arange(len(df)), [cut, len(df) - 5])):
        df.iloc[rows].to_parquet(tmp_path / f"part-{k}.parquet")
    assert sorted(parquet.series_ids(tmp_path, "id")) == sorted(df.id.unique())
    for n in (1, 2, 3, 5):
        parts = [parquet.series_ids(tmp_path, "id", part=(k, n)) for k in range(n)]
        assert sorted(set().union(*parts)) == sorted(df.id.unique()), n
    assert len(parquet.series_ids(tmp_path, "id", part=(0, 5))) == 0  # 3 files among 5 workers: none for the first
    df.iloc[:0].to_parquet(tmp_path / "empty.parquet")
    assert len(parquet.series_ids([tmp_path / "empty.parquet"], "id", part=(0, 2))) == 0
    with pytest.raises(ValueError, match="have no rows; pass at least one row per series"):
        parquet.series_ids([tmp_path / "empty.parquet"], "id")


def two_files(folder, change) -> tuple[str, str]:
    """A folder of two files of one hourly series each, 's0' and 's1'; ``change`` edits the
    second's frame before it is written. Returns the two paths."""
    folder.mkdir()
    paths = []
    for key in ("s0", "s1"):
        frame = pd.DataFrame({"id": key, "time": pd.date_range("2024-01-01", periods=80, freq="h"),
                              "y": np.sin(np.arange(80) / 3) + 5.0})
        path = folder / f"{key}.parquet"
        (change(frame) if key == "s1" else frame).to_parquet(path)
        paths.append(str(path))
    return paths[0], paths[1]


def fit_folder(folder) -> None:
    from tsrec import Forecaster

    Forecaster("seasonal_naive", prediction_length=4).fit(folder, **COLUMNS)


@pytest.mark.parametrize("change, column", [
    (lambda f: f.drop(columns="y"), "y"),
    (lambda f: f.rename(columns={"y": "value"}), "y"),
    (lambda f: f.rename(columns={"time": "timestamp"}), "time"),
])
def test_a_file_without_a_column_the_others_have_is_named(tmp_path, change, column):
    """Issue #39: the old error was "item 's1' (column 'y') has no observed value in the training
    part" at fit, naming no file."""
    first, second = two_files(tmp_path / "data", change)
    role = {"y": "target_col", "time": "time_col"}[column]
    with pytest.raises(ValueError, match=rf"^Parquet file '{second}' has no column '{column}' \({role}\), which "
                                         rf"'{first}' has \(its columns: .*\); write that file with the column"):
        fit_folder(tmp_path / "data")


@pytest.mark.parametrize("change, column, got, want", [
    (lambda f: f.assign(time=f["time"].astype("int64") // 10**9), "time", "int64", "timestamp\\[ns\\]"),
    (lambda f: f.assign(id=1), "id", "int64", "string"),
    (lambda f: f.assign(y=f["time"]), "y", "timestamp\\[ns\\]", "double"),
])
def test_a_file_whose_column_holds_another_kind_of_value_is_named(tmp_path, change, column, got, want):
    """Epoch seconds in one file's time column used to become timestamps in 1970 (named as
    series of different frequencies); integer ids in one file, pyarrow's "Failed to parse"."""
    first, second = two_files(tmp_path / "data", change)
    with pytest.raises(ValueError, match=rf"^Parquet file '{second}': column '{column}' \(\w+\) is {got}, where "
                                         rf"'{first}' has {want}.*; write every file with one type per column"):
        fit_folder(tmp_path / "data")
    if column == "time":
        with pytest.raises(ValueError, match=r"pd.to_datetime\(df\['time'\], unit='s'\)"):
            fit_folder(tmp_path / "data")


def test_a_value_one_file_holds_that_cannot_be_read_as_the_others_is_named(tmp_path):
    def corrupt(frame):
        frame["y"] = frame["y"].astype(str)
        frame.loc[7, "y"] = "n/a"
        return frame

    first, second = two_files(tmp_path / "data", corrupt)
    with pytest.raises(ValueError, match=rf"^Parquet file '{second}' cannot be read with the other files: .*'n/a'"
                                         r".*'y': 'string'.*'y': 'double'.*pd.to_numeric"):
        fit_folder(tmp_path / "data")


def test_text_that_reads_as_the_others_type_is_read(tmp_path):
    two_files(tmp_path / "data", lambda f: f.assign(y=f["y"].astype(str), time=f["time"].astype(str)))
    fit_folder(tmp_path / "data")


def test_timestamps_collapsed_to_1970_name_the_file_and_the_likely_corruption(tmp_path):
    """Issue #39: "duplicate timestamps in item 's1', e.g. 1970-01-01 00:00:00 appears 62 times;
    aggregate them first" named no file, and its fix did not apply."""
    def corrupt(frame):
        frame.loc[:61, "time"] = pd.Timestamp(0)
        return frame

    _, second = two_files(tmp_path / "data", corrupt)
    with pytest.raises(ValueError) as caught:
        fit_folder(tmp_path / "data")
    assert str(caught.value).startswith(f"in Parquet file '{second}': duplicate timestamps in item 's1', e.g. "
                                        "1970-01-01 00:00:00 appears 62 times")
    assert str(caught.value).endswith(". 62 of the file's timestamps fall in 1970, which is what zeros, or epoch "
                                      "numbers read in the wrong unit, become: they are likely corrupted; fix the "
                                      "file's column 'time' rather than aggregating")
