"""Synthetic series with a known recurrence: a damped linear recurrence, cycles and noise.

Used by the tests, the sample-efficiency benchmark and the quickstart, where a real data set
would need a download. Every series is the sum of four parts::

    x_t = r_t + sum_k amplitude_k * sin(2 pi t / cycle_k + phase) + trend * t + noise * e_t

- ``r_t = ar[0] r_{t-1} + ... + ar[p-1] r_{t-p} + innovation * u_t``: a stationary AR(p)
  recurrence (``ar=0.9`` is a damped AR(1); two coefficients with complex roots give a damped
  oscillation). It is started in its stationary regime (a burn-in that is thrown away).
- the cycles: deterministic sines, ``cycle`` steps long (24 for a daily cycle in hourly data);
- ``e_t, u_t``: independent standard normal draws.

These are exactly the structures a Recurrence Encoding Matrix encodes (regular heads for
``lambda^l``, cyclical heads for ``gamma^l cos(l theta)``), which makes the generator a
controlled test bed for RSA. :func:`oracle_mse` gives the best achievable mean squared error of
an ``h``-step forecast of such a series, a floor to compare trained models with.

>>> df = recurrent_series(24 * 7, n_series=2, seed=0)
>>> df.shape, df.index.freqstr, list(df.columns)
((168, 2), 'h', ['series_0', 'series_1'])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tsrec._checks import check_int

__all__ = ["recurrent_series", "ar_roots_inside_unit_circle", "ar_variance", "oracle_mse"]


def _as_floats(name: str, value: float | Sequence[float] | None) -> tuple[float, ...]:
    if value is None:
        return ()
    values = (float(value),) if np.isscalar(value) else tuple(float(v) for v in value)
    if not all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return values


def ar_roots_inside_unit_circle(ar: float | Sequence[float]) -> bool:
    """Whether the AR recurrence ``r_t = sum_k ar[k] r_{t-1-k}`` is stationary (damped).

    True when every root of ``z^p - ar[0] z^(p-1) - ... - ar[p-1]`` has modulus < 1.
    """
    coefs = _as_floats("ar", ar)
    if not coefs:
        return True
    roots = np.roots([1.0, *(-c for c in coefs)])
    return bool(np.all(np.abs(roots) < 1.0))


def _simulate_ar(coefs: tuple[float, ...], shocks: np.ndarray, burn_in: int) -> np.ndarray:
    """AR(p) driven by ``shocks [burn_in + T, N]``; returns the last ``T`` rows."""
    out = np.zeros_like(shocks)
    p = len(coefs)
    for t in range(shocks.shape[0]):
        value = shocks[t].copy()
        for k in range(min(p, t)):
            value += coefs[k] * out[t - 1 - k]
        out[t] = value
    return out[burn_in:]


def recurrent_series(
    n_steps: int,
    *,
    freq: str = "h",
    start: str | pd.Timestamp = "2020-01-01",
    n_series: int = 1,
    ar: float | Sequence[float] = 0.9,
    innovation: float = 1.0,
    cycle: float | Sequence[float] | None = 24,
    amplitude: float | Sequence[float] = 1.0,
    random_phase: bool = False,
    trend: float = 0.0,
    noise: float = 0.1,
    seed: int | None = 0,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """A wide frame of ``n_series`` independent series with a damped recurrence, cycles and noise.

    Args:
        n_steps: rows (time steps).
        freq: pandas offset alias of the ``DatetimeIndex`` (``"h"``, ``"15min"``, ``"D"``, ...).
        start: first timestamp.
        n_series: columns, each with its own independent draws (same structure).
        ar: AR coefficients ``(a_1, ..., a_p)`` of the recurrence (a float for AR(1)); must be
            stationary (see :func:`ar_roots_inside_unit_circle`). ``()`` or ``0`` turns it off.
        innovation: standard deviation of the recurrence's shocks ``u_t``.
        cycle: period(s) in steps of the deterministic sines (None or ``()``: no cycle).
        amplitude: amplitude of each cycle (one value for all, or one per cycle).
        random_phase: draw each series' phase uniformly (else every cycle starts at phase 0 at
            ``start``, so the cycle is aligned with the calendar).
        trend: linear trend, added per step.
        noise: standard deviation of the independent observation noise ``e_t``.
        seed: seed of a ``numpy.random.default_rng``; None for fresh entropy. With the same seed
            and arguments, a longer series extends a shorter one (same first rows).
        columns: column names (default ``series_0, series_1, ...``).

    Returns:
        ``pd.DataFrame`` of shape ``[n_steps, n_series]``, float64, indexed by a regular
        ``DatetimeIndex`` named ``"date"`` with ``freq`` set.
    """
    n_steps, n_series = check_int("n_steps", n_steps), check_int("n_series", n_series)
    for name, value in (("innovation", innovation), ("noise", noise)):
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite standard deviation >= 0, got {value!r}")
    coefs = tuple(c for c in _as_floats("ar", ar))
    if coefs and all(c == 0 for c in coefs):
        coefs = ()
    if not ar_roots_inside_unit_circle(coefs):
        raise ValueError(f"ar={ar!r} is not a damped (stationary) recurrence: some root has modulus >= 1")
    cycles = _as_floats("cycle", cycle)
    if any(c <= 0 for c in cycles):
        raise ValueError(f"cycle lengths must be positive, got {cycle!r}")
    amplitudes = _as_floats("amplitude", amplitude)
    if len(amplitudes) == 1:
        amplitudes = amplitudes * len(cycles)
    if cycles and len(amplitudes) != len(cycles):
        raise ValueError(f"give one amplitude or one per cycle ({len(cycles)}), got {amplitude!r}")
    if columns is None:
        columns = [f"series_{i}" for i in range(n_series)]
    elif len(columns) != n_series:
        raise ValueError(f"columns has {len(columns)} names for {n_series} series")

    rng = np.random.default_rng(seed)
    # Draw order (phases, then one [burn_in + n_steps, 2, n_series] block of shocks and noise) makes
    # a longer series an extension of a shorter one with the same arguments.
    phases = rng.uniform(0, 2 * np.pi, size=(len(cycles), n_series)) if random_phase \
        else np.zeros((len(cycles), n_series))
    burn_in = 0
    if coefs:
        # Long enough for the slowest root to forget the zero start (|root|^burn_in < 1e-6).
        slowest = float(np.max(np.abs(np.roots([1.0, *(-c for c in coefs)]))))
        burn_in = int(np.ceil(np.log(1e-6) / np.log(slowest))) if slowest > 0 else 0
        burn_in = min(max(burn_in, len(coefs)), 100_000)
    draws = rng.standard_normal((burn_in + n_steps, 2, n_series))
    t = np.arange(n_steps, dtype=np.float64)[:, None]  # [T, 1]
    values = np.zeros((n_steps, n_series))
    if coefs and innovation > 0:
        values += _simulate_ar(coefs, innovation * draws[:, 0], burn_in)
    for k, (period, amp) in enumerate(zip(cycles, amplitudes)):
        values += amp * np.sin(2 * np.pi * t / period + phases[k])
    if trend:
        values += trend * t
    if noise > 0:
        values += noise * draws[burn_in:, 1]
    index = pd.date_range(start=start, periods=n_steps, freq=freq, name="date")
    return pd.DataFrame(values, index=index, columns=list(columns))


def oracle_mse(horizon: int, *, ar: float | Sequence[float] = 0.9, innovation: float = 1.0,
               noise: float = 0.1) -> np.ndarray:
    """Best achievable MSE at each lead ``1..horizon`` for a :func:`recurrent_series`, raw units.

    The forecaster that knows the structure (cycles, trend and AR coefficients) and has seen an
    unbounded past: a steady-state Kalman filter on the AR state observed through the noise.
    Its error at lead ``h`` is the AR state's ``h``-step predictive variance plus ``noise^2``.
    A model that reads a finite context can only do worse; divide by the series' variance to
    compare with MSE on z-scored data.

    Returns:
        ``[horizon]`` array of MSEs, lead 1 first.
    """
    coefs = _as_floats("ar", ar)
    if not ar_roots_inside_unit_circle(coefs):
        raise ValueError(f"ar={ar!r} is not stationary")
    if not coefs or innovation == 0:
        return np.full(horizon, noise**2)
    p = len(coefs)
    A = np.zeros((p, p))  # companion matrix of the AR state (r_t, r_{t-1}, ...)
    A[0] = coefs
    A[1:, :-1] = np.eye(p - 1)
    Q = np.zeros((p, p))
    Q[0, 0] = innovation**2
    H = np.zeros((1, p))
    H[0, 0] = 1.0
    R = noise**2
    P = Q.copy()  # prior covariance, iterate the Riccati recursion to its fixed point
    for _ in range(10_000):
        S = float((H @ P @ H.T)[0, 0]) + R
        K = P @ H.T / S if S > 0 else np.zeros((p, 1))
        filtered = P - K @ H @ P
        new = A @ filtered @ A.T + Q
        if np.allclose(new, P, rtol=1e-12, atol=1e-14):
            P = new
            break
        P = new
    S = float((H @ P @ H.T)[0, 0]) + R
    K = P @ H.T / S if S > 0 else np.zeros((p, 1))
    cov = P - K @ H @ P  # filtered covariance of the state at the forecast origin
    out = np.empty(horizon)
    for h in range(horizon):
        cov = A @ cov @ A.T + Q
        out[h] = cov[0, 0] + R
    return out


def ar_variance(ar: float | Sequence[float] = 0.9, innovation: float = 1.0) -> float:
    """Stationary variance of the AR(p) recurrence ``r_t`` of :func:`recurrent_series`."""
    coefs = _as_floats("ar", ar)
    if not coefs:
        return 0.0
    if not ar_roots_inside_unit_circle(coefs):
        raise ValueError(f"ar={ar!r} is not stationary")
    p = len(coefs)
    A = np.zeros((p, p))
    A[0] = coefs
    A[1:, :-1] = np.eye(p - 1)
    Q = np.zeros((p, p))
    Q[0, 0] = innovation**2
    # Solve the discrete Lyapunov equation S = A S A^T + Q by vectorisation.
    n = p * p
    S = np.linalg.solve(np.eye(n) - np.kron(A, A), Q.reshape(n)).reshape(p, p)
    return float(S[0, 0])
