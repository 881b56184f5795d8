"""Forecast outputs: points, distributions and quantiles, through every trainable model."""

import numpy as np
import pytest
import torch

from tsrec import metrics
from tsrec.config import DataFacts
from tsrec.models import build_model, list_models, model_config, model_spec
from tsrec.nn.outputs import DistributionOutput, QuantileOutput, check_levels, make_output

B, LC, H, C, F = 3, 32, 8, 3, 4
DATA = DataFacts(season=4, n_channels=C, n_time_features=F)
TRAINABLE = [name for name in list_models() if model_spec(name).model_class.trainable]
SMALL = {"d_model": 16, "n_heads": 4}


def options(name, **extra):
    config = model_config(name).to_dict()
    small = {k: v for k, v in SMALL.items() if k in config}
    if "alpha_init" in config:
        small["alpha_init"] = 0.5  # zero-initialised residual scales leave the weights behind them without gradient
    if "label_length" in config:
        small.update(label_length=16, n_heads=8, d_ff=32, mix=False)
    if config.get("rsa") is not None and "label_length" in config:
        small["rsa"] = {"kinds": (1, 2, 2, 1, 1, 1), "dilation": 4}
    return dict(context_length=LC, prediction_length=H, **small, **extra)


def batch():
    g = torch.Generator().manual_seed(0)
    return {"past_target": torch.randn(B, LC, C, generator=g) * 3 + 10,
            "past_time_feat": torch.randn(B, LC, F, generator=g), "future_time_feat": torch.randn(B, H, F, generator=g)}


@pytest.mark.parametrize("name", TRAINABLE)
@pytest.mark.parametrize("output", ["normal", "studentt", "quantile"])
def test_every_trainable_model_forecasts_every_output(name, output):
    torch.manual_seed(0)
    model = build_model(name, data=DATA, **options(name, output=output, revin=True))
    params = model(batch())
    n_params = {"normal": 2, "studentt": 3, "quantile": 9}[output]
    assert params.shape == (B, H, C, n_params) and torch.isfinite(params).all()
    quantiles = model.output.quantiles(params, [0.1, 0.5, 0.9])
    assert (quantiles.diff(dim=-1) >= 0).all()
    target = torch.randn(B, H, C)
    model.output.loss(params, target, torch.ones_like(target), "mse").backward()
    silent = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())]
    assert not silent, f"no gradient reaches {silent}"


@pytest.mark.parametrize("kind", ["normal", "studentt"])
def test_distribution_parameters_keep_a_single_channel_axis(kind):
    out = make_output(kind, ())
    assert out.params(torch.randn(2, 5, 1, out.n_params)).shape == (2, 5, 1, out.n_params)


def test_seasonal_naive_refuses_a_probabilistic_output():
    with pytest.raises(ValueError, match="not trained, so it has only a point forecast"):
        build_model("seasonal_naive", data=DATA, context_length=LC, prediction_length=H, output="quantile")


def test_distribution_parameters_follow_an_affine_map_of_the_data():
    torch.manual_seed(0)
    for kind in ("normal", "studentt"):
        out = make_output(kind, ())
        params = out.params(torch.randn(5, out.n_params))
        shift, scale = torch.tensor(3.0), torch.tensor(-2.0)
        mapped = out.affine(params, shift, scale)
        levels = [0.1, 0.5, 0.9]
        # quantiles of y = a x + b with a < 0: q_y(p) = a q_x(1 - p) + b
        expected = out.quantiles(params, [1 - q for q in levels]) * scale + shift
        torch.testing.assert_close(out.quantiles(mapped, levels), expected, rtol=1e-4, atol=1e-4)


def test_zero_raw_quantile_outputs_are_the_standard_normal_quantiles():
    out = QuantileOutput((0.1, 0.5, 0.9))
    torch.testing.assert_close(out.params(torch.zeros(3)), torch.tensor([-1.2816, 0.0, 1.2816]), atol=1e-4, rtol=0)


def test_quantiles_never_cross_even_under_a_negative_scale():
    out = QuantileOutput((0.1, 0.5, 0.9))
    params = out.params(torch.randn(100, 3) * 5)
    assert (params.diff(dim=-1) >= 0).all()
    assert (out.affine(params, torch.tensor(1.0), torch.tensor(-3.0)).diff(dim=-1) >= 0).all()


def test_losses_are_the_named_ones():
    torch.manual_seed(0)
    target, observed = torch.randn(4, 6), torch.ones(4, 6)
    observed[0, :3] = 0
    out = QuantileOutput((0.1, 0.5, 0.9))
    params = out.params(torch.randn(4, 6, 3))
    expected = np.mean([metrics.quantile_loss(target.numpy(), params[..., i].numpy(), q, mask=observed.numpy())
                        for i, q in enumerate(out.levels)])
    assert out.loss(params, target, observed, "mse").item() == pytest.approx(expected, rel=1e-5)
    normal = DistributionOutput("normal")
    p = normal.params(torch.randn(4, 6, 2))
    nll = -torch.distributions.Normal(p[..., 0], p[..., 1]).log_prob(target)
    assert normal.loss(p, target, observed, "mse").item() == pytest.approx(nll[observed > 0].mean().item(), rel=1e-5)
    nan_target = target.clone()
    nan_target[0, :3] = float("nan")  # unobserved targets may be NaN: they must not poison the loss
    assert torch.isfinite(normal.loss(p, nan_target, observed, "mse"))


def test_quantile_output_answers_only_its_levels_and_levels_are_checked():
    out = QuantileOutput((0.1, 0.5, 0.9))
    with pytest.raises(ValueError, match=r"levels \[0.25\] were not trained"):
        out.quantiles(torch.zeros(2, 3), [0.25])
    assert check_levels("q", [0.9, 0.1]) == (0.1, 0.9)
    for bad in ([0.0, 0.5], [0.5, 0.5], [], "abc"):
        with pytest.raises(ValueError, match="q must be"):
            check_levels("q", bad)
    with pytest.raises(ValueError, match="point forecast has no quantiles"):
        make_output("point", ()).quantiles(torch.zeros(2, 1), [0.5])


def test_dlinear_starts_at_the_window_mean_with_its_outputs_prior():
    # without RevIN: a constant window has no spread of its own, which RevIN would scale the prior's by
    model = build_model("dlinear", data=DataFacts(season=4, n_channels=1, n_time_features=0), context_length=LC,
                        prediction_length=H, output="quantile", quantile_levels=(0.1, 0.5, 0.9), revin=False)
    window = {"past_target": torch.full((1, LC, 1), 3.0), "past_time_feat": torch.zeros(1, LC, 0),
              "future_time_feat": torch.zeros(1, H, 0)}
    torch.testing.assert_close(model(window)[0, 0, 0], torch.tensor([3 - 1.2816, 3.0, 3 + 1.2816]), atol=1e-4, rtol=0)
