"""Importing the tensor and model layers stays light (no Lightning, pandas or matplotlib), and the
imports of tsrec/ and benchmarks/ form no circle and never point from a lower layer to a higher one."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("lightning", "pandas", "matplotlib")
LIGHT = ("tsrec", "tsrec.config", "tsrec.settings", "tsrec.nn.rem", "tsrec.nn.attention", "tsrec.models")


def test_import_loads_no_heavy_package():
    """One fresh interpreter imports them all: what their union leaves out, each one leaves out."""
    code = f"import sys, {', '.join(LIGHT)}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "", f"importing {LIGHT} loaded {out.stdout.strip()}"


def test_a_model_that_does_not_train_fits_and_forecasts_without_lightning_or_dynamo():
    """Lightning (with scipy, matplotlib and torchmetrics it imports) and torch._dynamo (with sympy)
    cost about 2.5 CPU-s to import: a fit of a statistical model, the ridge, or a forecast of any
    fitted model in float32, never needs them, and neither does importing the estimator."""
    code = """import sys, warnings
import numpy as np, pandas as pd
from tsrec import Forecaster
warnings.simplefilter("ignore")
df = pd.DataFrame({"load": 10 + np.sin(np.arange(96) / 3.8)}, index=pd.date_range("2024", periods=96, freq="h"))
loaded = [m for m in ("lightning", "torch._dynamo") if m in sys.modules]
for name in ("seasonal_naive", "ridge"):
    Forecaster(name, prediction_length=6, conformal_windows=5).fit(df).predict(levels=[80])
print(loaded, [m for m in ("lightning", "torch._dynamo") if m in sys.modules])"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split("\n")[0] == "[] []", out.stdout + out.stderr


@pytest.mark.slow  # 5-6 s: a fresh interpreter importing torch
def test_the_estimator_is_still_one_attribute_away():
    code = "import tsrec; print(tsrec.Forecaster.__name__, tsrec.list_models()[0])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split()[0] == "Forecaster"


# ----------------------------------------------------------------------------- the import graph
# Every import of one module of tsrec/ or benchmarks/ by another, read from the source (ast), at
# module level or inside a function, under TYPE_CHECKING or not: a lazy import of a tsrec module is
# still an arrow. Imports of optional third-party packages are no arrows of this graph.

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tsrec", "benchmarks")

#: The layers, bottom first: a module may import modules of its own layer or of layers below it,
#: never one above (docs/architecture.md draws the same table). ``name.*`` is a package and
#: everything in it; a bare name is that module alone (a package's face, its ``__init__``). A
#: module takes the layer of its exact name, else of its longest package pattern.
LAYERS = (
    ("foundation", ("tsrec._checks", "tsrec._version", "tsrec._hashing", "tsrec._optional", "tsrec._saving",
                    "tsrec.batch", "tsrec.metrics", "tsrec.datasets.*")),
    ("settings leaves", ("tsrec.config",)),
    ("tensors", ("tsrec.nn.*",)),
    ("networks and data", ("tsrec.models.*", "tsrec.data.*", "tsrec.smoothing_prior", "tsrec.conformal",
                           "tsrec.conformal_update", "tsrec.scoring", "tsrec.saved_format")),
    ("process group", ("tsrec.collective",)),
    ("training", ("tsrec.training.*", "tsrec.settings", "tsrec.inspection")),
    ("fitted value", ("tsrec.fitted",)),
    ("fitting, forecasting, saving", ("tsrec.fitting", "tsrec.forecasting", "tsrec.calibrating",
                                      "tsrec.saved_state")),
    ("model selection", ("tsrec.validation", "tsrec.candidates", "tsrec.halving", "tsrec.auto")),
    ("estimator", ("tsrec.forecaster",)),
    ("clients of the estimator", ("tsrec.evaluation", "tsrec.interop.*", "tsrec.distributed.partitions")),
    ("plots, clusters", ("tsrec.plotting", "tsrec.distributed.ray", "tsrec.distributed.spark")),
    ("entry points", ("tsrec.cli", "tsrec", "tsrec.distributed")),
    ("benchmark helpers", ("benchmarks.common", "benchmarks.frames", "benchmarks.paper", "benchmarks.sign_test")),
    ("benchmark runners", ("benchmarks.run", "benchmarks.speed", "benchmarks.scale")),
    ("benchmark scripts", ("benchmarks.*",)),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def import_graph() -> dict[str, dict[str, int]]:
    """``{module: {imported module: line}}`` over tsrec/ and benchmarks/ (``from a.b import c`` is
    an arrow to ``a.b.c`` when that is a module, else to ``a.b``)."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        arrows: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else known(base)
                           for alias in node.names]
            else:
                continue
            for target in targets:
                if target is not None and target != name:
                    arrows.setdefault(target, node.lineno)
        graph[name] = arrows
    return graph


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module``'s layer (exact name, else longest package pattern)."""
    exact = [i for i, (_, names) in enumerate(LAYERS) if module in names]
    if exact:
        return exact[0]
    packages = [(len(p), i) for i, (_, names) in enumerate(LAYERS) for p in names
                if p.endswith(".*") and (module == p[:-2] or module.startswith(p[:-1]))]
    assert packages, f"{module} has no layer: add it to LAYERS in tests/test_imports.py and docs/architecture.md"
    return max(packages)[1]


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_reads_the_known_arrows():
    """The reader sees module-level, lazy, relative and TYPE_CHECKING imports alike."""
    graph = import_graph()
    assert "tsrec.forecaster" in graph["tsrec"]  # under TYPE_CHECKING
    assert "tsrec.collective" in graph["tsrec.evaluation"]  # inside a function
    assert "tsrec.data.frame" in graph["tsrec.data"]
    assert "benchmarks.common" in graph["benchmarks.run"]


def test_no_import_circle():
    found = circles(import_graph())
    assert not found, f"import circles: {found}; move what they share into a module below them"


def test_every_module_has_a_layer_and_no_arrow_points_up():
    graph = import_graph()
    up = [f"{module}:{line} imports {target} ({LAYERS[layer_of(target)][0]} above {LAYERS[layer_of(module)][0]})"
          for module, arrows in sorted(graph.items()) for target, line in sorted(arrows.items())
          if layer_of(target) > layer_of(module)]
    assert not up, "imports from a lower layer to a higher one:\n" + "\n".join(up)


def test_circles_and_upward_arrows_are_caught():
    """The checks themselves: a made-up circle is found, and an arrow into a higher layer is one."""
    assert circles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert layer_of("tsrec.nn.outputs") < layer_of("tsrec.interop.gluonts")
    assert layer_of("tsrec.models.registry") < layer_of("tsrec.auto") < layer_of("tsrec.forecaster")
