"""The one batch contract between the data layer, the models and training.

:class:`~tsrec.data.windows.WindowDataset` gathers these fields for a batch of windows at once
(``__getitems__``; its ``collate`` passes the batch through), and every model's ``forward`` takes it
whole.
Shapes per batch (``B`` windows, ``Lc = context_length``, ``H = prediction_length``, ``C``
channels, ``F`` time features: the calendar's, then the covariates' (:mod:`tsrec.data.covariates`),
``Kc`` categorical static covariates), all float32 unless noted; targets are scaled and 0 where
unobserved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from torch import Tensor


class ForecastBatch(TypedDict, total=False):
    past_target: Tensor  # [B, Lc, C]
    past_observed: Tensor  # [B, Lc, C], 1 observed / 0 missing
    past_time_feat: Tensor  # [B, Lc, F]
    future_time_feat: Tensor  # [B, H, F], 0 in the columns of past-only covariates
    static_cat: Tensor  # [B, Kc] int64 category codes (only with categorical static covariates)
    future_target: Tensor  # [B, H, C] (training and validation windows only)
    future_observed: Tensor  # [B, H, C] (training and validation windows only)
    target_loc: Tensor  # [B, C] float64, the scaler's loc of each window's item (original = scaled * scale + loc)
    target_scale: Tensor  # [B, C] float64, its scale
    target_floor: Tensor  # [B, C] float64, the lowest value forecast for it, in the data's units (0 or -inf)
    item: Tensor  # [B] int64, position of the window's item
    series: Tensor  # [B] int64, the window's scaler row: which fitted series it is (the statistical models' parameters)
    origin: Tensor  # [B] int64, grid position of the first forecast step
