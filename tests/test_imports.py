"""Importing the tensor and model layers stays light: no Lightning, pandas or matplotlib."""

import subprocess
import sys

HEAVY = ("lightning", "pandas", "matplotlib")
LIGHT = ("tsrec", "tsrec.config", "tsrec.settings", "tsrec.nn.rem", "tsrec.nn.attention", "tsrec.models")


def test_import_loads_no_heavy_package():
    """One fresh interpreter imports them all: what their union leaves out, each one leaves out."""
    code = f"import sys, {', '.join(LIGHT)}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "", f"importing {LIGHT} loaded {out.stdout.strip()}"


def test_the_estimator_is_still_one_attribute_away():
    code = "import tsrec; print(tsrec.Forecaster.__name__, tsrec.list_models()[0])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split()[0] == "Forecaster"
