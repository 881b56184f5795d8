"""The machinery of issue 37's studies: the configs, the variant's options in unseen_like's runner,
the verdict of benchmarks/ets_prior.py on made-up rows, auto's candidate with the prior, real_gates' helpers."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from benchmarks import ets_prior
from benchmarks import unseen_like as ul

CONFIGS = Path(ul.ROOT, "benchmarks/configs")


def test_part_a_takes_its_panels_from_unseen_like():
    config = ul.load_config(CONFIGS / "ets_prior.toml")
    whole = ul.load_config(CONFIGS / "unseen_like.toml")
    assert list(config["datasets"]) == ["danish_data", "interest_inflation", "macrodata", "seattle_weekly",
                                        "elec_equip"]
    assert all(config["datasets"][name] == whole["datasets"][name] for name in config["datasets"])
    assert all(spec["length"] <= 260 for spec in config["datasets"].values())


def test_a_variant_runs_its_base_model_with_its_options():
    config = ul.load_config(CONFIGS / "ets_prior.toml")
    forecaster = ul.tsrec_forecaster(config["variants"]["rsa_patchtst_ets"], 4, 0, False,
                                     config["model_options"]["rsa_patchtst_ets"])
    assert forecaster.model_name == "rsa_patchtst"
    assert forecaster.settings.network.rsa.prior == "ets"


def _rows(prior: list[float], patchtst: list[float], ets: float, dataset: str = "p") -> list[dict[str, str]]:
    key = {"part": "A", "dataset": dataset, "horizon": "4", "context_length": "0", "train_fraction": "1.0"}
    runs = ((ets_prior.PRIOR, prior), (ets_prior.PATCHTST, patchtst))
    rows = [{**key, "seed": str(s), "model": model, "mse": str(mse)} for model, values in runs
            for s, mse in enumerate(values)]
    return rows + [{**key, "seed": "-1", "model": ets_prior.ETS, "mse": str(ets)}]


def test_the_pass_rule():
    close = _rows([0.9, 0.9, 0.9, 0.9], [1.0, 1.0, 1.0, 0.8], ets=0.88)  # 3 of 4 ahead, gain 4.4%: no
    label, lines = ets_prior.verdict(close, ["p"], planned_pairs=4)
    assert label == "FAIL" and lines[0].startswith("- met") and lines[1].startswith("- missed")
    label, _ = ets_prior.verdict(_rows([0.9, 0.9, 0.9, 0.9], [1.0, 1.0, 1.0, 0.95], ets=0.88), ["p"], 4)
    assert label == "PASS"  # 4 of 4, gain 9%, 0.9 / 0.88 = 1.02x AutoETS
    label, lines = ets_prior.verdict(_rows([0.9, 0.9, 0.9, 0.9], [1.0, 1.0, 1.0, 0.95], ets=0.8), ["p"], 4)
    assert label == "FAIL" and "1.12x" in lines[2]
    label, _ = ets_prior.verdict(_rows([0.9, 0.9], [1.0, 1.0], ets=0.88), ["p"], 4)
    assert label == "PASS (partial: 2 of 4 pairs)"
    assert ets_prior.verdict([], ["p"], 4)[0] == "no pairs have run yet"


def test_part_b_pairs_with_the_committed_few_shot_rows():
    config = tomllib.loads((CONFIGS / "ets_prior_few_shot.toml").read_text())
    rows = ets_prior.part_b_rows(Path("/nonexistent.csv"), Path(ul.ROOT, "benchmarks/results/few_shot.csv"), config)
    assert {(r["dataset"], r["horizon"], r["train_fraction"]) for r in rows} == {("ETTh1", "96", "0.05"),
                                                                                ("ETTh2", "96", "0.05")}
    assert sorted(r["model"] for r in rows if r["dataset"] == "ETTh1") == ["patchtst"] * 3 + ["rsa_patchtst"] * 3


def test_auto_builds_its_rsa_candidate_with_the_prior_only_inside_the_block():
    from benchmarks.ets_prior_auto import rsa_candidate_with_prior
    from tsrec.candidates import Candidates
    from tsrec.config import CovariateConfig
    from tsrec.settings import ForecasterSettings

    candidates = Candidates(ForecasterSettings.from_options("auto", prediction_length=4), None, None,
                            CovariateConfig())
    with rsa_candidate_with_prior():
        assert candidates.settings_of("rsa_patchtst").network.rsa.prior == "ets"
        assert candidates.settings_of("patchtst").network.rsa is None
    assert candidates.settings_of("rsa_patchtst").network.rsa.prior == "none"


def test_real_gates_reads_periods_against_the_known_cycles():
    from benchmarks.real_gates import _half_life, _nearest_cycle

    assert _nearest_cycle(25.0, 24, 168) == ("day", pytest.approx(1 / 24))
    assert _nearest_cycle(80.0, 24, 168)[0] == "half week"
    assert _half_life(0.5) == pytest.approx(1.0) and _half_life(1.0) == 0.0
