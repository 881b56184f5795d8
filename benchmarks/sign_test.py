"""Paired comparison of two models in a results CSV: sign test and mean relative MSE change.

Rows of ``benchmarks.run`` results CSVs are paired by (dataset, horizon, input, training fraction,
seed), at one precision: a pair is the same run of two models. For each pair the relative change
``(mse_model - mse_baseline) / mse_baseline`` is negative where ``model`` is ahead. The sign test
counts the pairs where ``model`` is ahead (``wins``) against those where it is behind; ties (equal
MSE) are left out of it, as the sign test does. Its two-sided p-value is the exact binomial one at
probability 1/2: twice the smaller tail, at most 1.

    >>> from benchmarks.sign_test import sign_test_p
    >>> round(sign_test_p(wins=10, n=20), 2), round(sign_test_p(wins=14, n=16), 4)
    (1.0, 0.0042)

From the command line, over all the paired runs of a results CSV and per value of a column::

    python -m benchmarks.sign_test benchmarks/results/few_shot.csv rsa_patchtst patchtst --by train_fraction horizon
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from dataclasses import dataclass

#: What pairs two rows: one run of two models.
PAIR_COLUMNS = ("dataset", "horizon", "context_length", "train_fraction", "seed")


@dataclass(frozen=True)
class PairedComparison:
    """``model`` against ``baseline`` over their paired runs.

    Attributes:
        model, baseline: the two models' names.
        wins: pairs where ``model``'s MSE is lower; ``losses``: higher; ``ties``: equal.
        p_value: two-sided exact sign test over the ``wins + losses`` pairs that are not ties
            (1.0 when there are none).
        mean_change: mean over all pairs of ``(mse_model - mse_baseline) / mse_baseline``
            (negative: ``model`` is ahead; -0.05 is a 5% gain); NaN without pairs.
        std_change: the sample standard deviation of those changes (NaN with fewer than two pairs).
    """

    model: str
    baseline: str
    wins: int
    losses: int
    ties: int
    p_value: float
    mean_change: float
    std_change: float

    @property
    def n(self) -> int:
        """Pairs compared, ties included."""
        return self.wins + self.losses + self.ties

    @property
    def win_share(self) -> float:
        """Share of the pairs (ties included) where ``model`` is ahead; NaN without pairs."""
        return self.wins / self.n if self.n else math.nan

    def describe(self) -> str:
        """One line: ``rsa_patchtst ahead of patchtst in 7 of 12 pairs (sign test p = 0.774), mean relative MSE
        change -1.2% ± 3.4%`` (no spread with one pair)."""
        if not self.n:
            return f"{self.model} and {self.baseline}: no paired runs"
        return (f"{self.model} ahead of {self.baseline} in {self.wins} of {self.n} pairs"
                f"{f' ({self.ties} ties)' if self.ties else ''} (sign test p = {self.p_value:.3f}), "
                f"mean relative MSE change {100 * self.mean_change:+.1f}%"
                + ("" if math.isnan(self.std_change) else f" ± {100 * self.std_change:.1f}%"))


def sign_test_p(wins: int, n: int) -> float:
    """Two-sided exact binomial p-value of ``wins`` successes in ``n`` trials at probability 1/2."""
    if not 0 <= wins <= n:
        raise ValueError(f"wins must be between 0 and n = {n}, got {wins}")
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(wins, n - wins) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def pair_key(row: Mapping[str, str]) -> tuple[str, int, int, float, int]:
    """(dataset, horizon, input, training fraction, seed) of a results row; a row from before the
    ``train_fraction`` column trained on the whole training part (1.0)."""
    return (row["dataset"], int(row["horizon"]), int(row["context_length"]),
            float(row.get("train_fraction") or 1.0), int(row["seed"]))


def paired_mse(rows: Iterable[Mapping[str, str]], model: str,
               baseline: str) -> dict[tuple[str, int, int, float, int], tuple[float, float]]:
    """``{pair key: (baseline MSE, model MSE)}`` for the runs that both models have in ``rows``.

    Raises:
        ValueError: a model has two rows for one key (runs at several precisions or of several
            configs mixed in ``rows``: select one first).
    """
    mse: dict[str, dict[tuple, float]] = {model: {}, baseline: {}}
    for row in rows:
        if row["model"] in mse:
            key = pair_key(row)
            if key in mse[row["model"]]:
                raise ValueError(f"two rows of {row['model']} for {key} (dataset, horizon, input, fraction, seed); "
                                 "compare the rows of one config at one precision")
            mse[row["model"]][key] = float(row["mse"])
    return {key: (mse[baseline][key], mse[model][key]) for key in mse[model] if key in mse[baseline]}


def compare(rows: Iterable[Mapping[str, str]], model: str, baseline: str) -> PairedComparison:
    """Sign test and mean relative MSE change of ``model`` against ``baseline`` over their paired runs."""
    pairs = paired_mse(rows, model, baseline).values()
    changes = [(ours - base) / base for base, ours in pairs]
    wins = sum(ours < base for base, ours in pairs)
    losses = sum(ours > base for base, ours in pairs)
    return PairedComparison(
        model=model, baseline=baseline, wins=wins, losses=losses, ties=len(changes) - wins - losses,
        p_value=sign_test_p(wins, wins + losses),
        mean_change=statistics.fmean(changes) if changes else math.nan,
        std_change=statistics.stdev(changes) if len(changes) > 1 else math.nan)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sign_test", description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, nargs="+", help="benchmarks.run results CSVs, read as one (e.g. a "
                        "variant's runs and the runs of the model it is compared with, from another config)")
    parser.add_argument("model", help="the model compared, e.g. rsa_patchtst")
    parser.add_argument("baseline", help="the model it is compared with, e.g. patchtst")
    parser.add_argument("--by", nargs="*", default=[], choices=PAIR_COLUMNS[:-1],
                        help="also compare within each value of these columns, one at a time")
    args = parser.parse_args(argv)
    from benchmarks.common import read_rows

    rows = [row for path in args.csv for row in read_rows(path)]
    if not rows:
        parser.error(f"{', '.join(map(str, args.csv))} hold no rows")
    print(f"all: {compare(rows, args.model, args.baseline).describe()}")
    for column in args.by:
        index = PAIR_COLUMNS.index(column)
        for value in sorted({pair_key(row)[index] for row in rows}):
            chosen = [row for row in rows if pair_key(row)[index] == value]
            print(f"{column} = {value:g}: {compare(chosen, args.model, args.baseline).describe()}"
                  if isinstance(value, float) else
                  f"{column} = {value}: {compare(chosen, args.model, args.baseline).describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
