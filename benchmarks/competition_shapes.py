"""The default on synthetic panels shaped like two forecasting-competition panels, scored as the
competition scores: the shapes issue 46 measured the default on (a weekly panel where validation
chose the worst member, an hourly one where the default trailed MSTL), which the project may not
read (the competition's files are kept for unseen tests), drawn anew.

``python -m benchmarks.competition_shapes [--shape weekly hourly] [--seeds 0 1 2] [--out-dir DIR]``

- ``weekly`` (:func:`weekly_panel`): 359 weekly series of 80 to 2,600 weeks (log-uniform), each a
  geometric random walk with a drift of its own, two in three without a yearly cycle and one in
  three with one of 1% to 10% of the level, and noise; horizon 13.
- ``hourly`` (:func:`hourly_panel`): 414 hourly series of 700 or 960 hours, each a level times a daily
  cycle (two harmonics, an amplitude of 5% to 50%), a weekend effect of -30% to +30%, a slow random
  walk and multiplicative noise of 1% to 8%; horizon 48.

One origin: each series' last ``horizon`` steps are its test (:func:`benchmarks.common.seeded_runs`).
Scores as the competition's: sMAPE (``200 |f - y| / (|f| + |y|)``) and MASE (over each series'
in-sample seasonal naive MAE, season 52 weekly (1 for a series of at most 52 weeks), 24 hourly)
averaged per series then over the series, and OWA, the mean of the two over the last value's
(``naive``). Runs, one after the other on each seed's panel: statsforecast's ``Naive``,
``SeasonalNaive`` and the model the issue compared with (``AutoTheta`` weekly, ``MSTL`` with seasons
24 and 168 hourly), each one ``StatsForecast.forecast`` call on one process; then the default
``Forecaster(prediction_length=H, seed=seed)``, fitted and its ``predict``. ``cpu_s``: the process's
CPU seconds for the fit and forecast (imports excluded). Run with ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.common import seeded_runs, seeds_report, write_report

#: Per shape: horizon, frequency, MASE's season, and the statsforecast runs (name: model's class, its arguments).
SHAPES = {
    "weekly": {"horizon": 13, "freq": "W-SUN", "season": 52,
               "runs": {"naive": ("Naive", {}), "seasonal_naive": ("SeasonalNaive", {"season_length": 52}),
                        "auto_theta": ("AutoTheta", {"season_length": 52})}},
    "hourly": {"horizon": 48, "freq": "h", "season": 24,
               "runs": {"naive": ("Naive", {}), "seasonal_naive": ("SeasonalNaive", {"season_length": 24}),
                        "mstl": ("MSTL", {"season_length": [24, 168]})}},
}


def weekly_panel(seed: int, series: int = 359) -> pd.DataFrame:
    """A long frame (``unique_id``, ``ds``, ``y``) of ``series`` weekly series (see the module)."""
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(series):
        length = int(np.exp(rng.uniform(np.log(80), np.log(2600)))) + SHAPES["weekly"]["horizon"]
        t = np.arange(length)
        walk = np.exp(np.cumsum(rng.normal(rng.normal(0, 0.002), 0.01, length)))
        cycle = 1 + rng.choice([0.0, 0.0, rng.uniform(0.01, 0.1)]) * np.sin(2 * np.pi * t / 52.18 + rng.uniform(0, 6.28))
        y = rng.uniform(500, 20000) * walk * cycle * (1 + rng.normal(0, 0.005, length))
        frames.append(pd.DataFrame({"unique_id": f"w{i}", "ds": pd.date_range("1980-01-06", periods=length,
                                                                                freq="W-SUN"), "y": y}))
    return pd.concat(frames, ignore_index=True)


def hourly_panel(seed: int, series: int = 414) -> pd.DataFrame:
    """A long frame (``unique_id``, ``ds``, ``y``) of ``series`` hourly series (see the module)."""
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(series):
        length = int(rng.choice([700, 960])) + SHAPES["hourly"]["horizon"]
        t = np.arange(length)
        daily = np.sin(2 * np.pi * t / 24 + rng.uniform(0, 6.28)) + 0.5 * np.sin(4 * np.pi * t / 24 + rng.uniform(0, 6.28))
        weekend = ((t // 24) % 7 >= 5) * rng.uniform(-0.3, 0.3)
        walk = np.cumsum(rng.normal(0, 0.002, length))
        noise = rng.normal(0, rng.uniform(0.01, 0.08), length)
        y = rng.uniform(20, 5000) * (1 + walk) * (1 + rng.uniform(0.05, 0.5) * daily / 1.5 + weekend) * (1 + noise)
        frames.append(pd.DataFrame({"unique_id": f"h{i}", "ds": pd.date_range("2015-01-01", periods=length, freq="h"),
                                    "y": np.maximum(y, 10.0)}))
    return pd.concat(frames, ignore_index=True)


PANELS = {"weekly": weekly_panel, "hourly": hourly_panel}


def scores(forecast: pd.DataFrame, train: pd.DataFrame, test: pd.DataFrame, season: int) -> dict[str, float]:
    """sMAPE and MASE of ``forecast`` (``unique_id``, ``ds``, ``mean``) on ``test``, per series then
    averaged over the series (see the module); and how many forecasts are below zero."""
    scored = test.merge(forecast, on=["unique_id", "ds"], how="left")
    if scored["mean"].isna().any():
        raise ValueError("a forecast is missing for some test step")
    smape = (200 * (scored["mean"] - scored.y).abs() / (scored["mean"].abs() + scored.y.abs())).groupby(
        scored.unique_id).mean()

    def scale(y: pd.Series) -> float:
        values, m = y.to_numpy(), season if len(y) > season else 1
        return float(np.mean(np.abs(values[m:] - values[:-m])))

    mase = (scored["mean"] - scored.y).abs().groupby(scored.unique_id).mean() / train.groupby("unique_id").y.apply(scale)
    return {"smape": float(smape.mean()), "mase": float(mase.mean()), "below_zero": int((scored["mean"] < 0).sum())}


def make_run(shape: str, current: dict[str, int]):
    """The ``run(name, train, test)`` of :func:`benchmarks.common.seeded_runs` for ``shape`` on the
    panel of seed ``current["seed"]``: each row its scores, OWA against this seed's ``naive`` row
    (run first), CPU seconds and the default's members."""
    spec = SHAPES[shape]
    naive: dict[int, dict[str, float]] = {}

    def run(name: str, train: pd.DataFrame, test: pd.DataFrame) -> dict[str, object]:
        import statsforecast.models as sf_models
        from statsforecast import StatsForecast

        from tsrec import Forecaster

        started, members = time.process_time(), ""
        if name == "default":
            fitted = Forecaster(prediction_length=spec["horizon"], seed=current["seed"], trainer_kwargs={
                "enable_progress_bar": False, "logger": False}).fit(train)
            forecast = fitted.predict().rename(columns={"item_id": "unique_id", "timestamp": "ds"})
            network = fitted.resolved_settings.network
            members = ", ".join(f"{m} {w:.2f}" for m, w in zip(network.members, network.weights))
        else:
            cls, kwargs = spec["runs"][name]
            model = getattr(sf_models, cls)(**kwargs)
            forecast = StatsForecast(models=[model], freq=spec["freq"], n_jobs=1).forecast(
                df=train, h=spec["horizon"]).rename(columns={repr(model): "mean"})
        seconds = time.process_time() - started
        row = scores(forecast, train, test, spec["season"])
        if name == "naive":
            naive[current["seed"]] = row
        base = naive[current["seed"]]
        owa = 0.5 * (row["smape"] / base["smape"] + row["mase"] / base["mase"])
        return {**row, "owa": owa, "cpu_s": seconds, "members": members}

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.competition_shapes",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--shape", nargs="+", choices=sorted(SHAPES), default=sorted(SHAPES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    for shape in args.shape:
        spec, current = SHAPES[shape], {}

        def panel_of(seed: int, shape: str = shape, current: dict[str, int] = current) -> pd.DataFrame:
            current["seed"] = seed
            return PANELS[shape](seed)

        runs = (*spec["runs"], "default")
        table = seeded_runs(args.seeds, panel_of, runs, spec["horizon"], make_run(shape, current))
        text = seeds_report(
            f"The default on a synthetic {shape} competition-shaped panel",
            f"`benchmarks/competition_shapes.py`, shape `{shape}` (its docstring draws the panel): horizon "
            f"{spec['horizon']}, one origin, sMAPE, MASE (season {spec['season']}) and OWA against the last value, "
            "statsforecast's models and the default fitted on one thread.",
            table, ["smape", "mase", "owa", "cpu_s"], "benchmarks.competition_shapes", given)
        write_report(args.out_dir / f"competition_{shape}.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
