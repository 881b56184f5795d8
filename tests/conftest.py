"""Fixtures and hooks shared by the test modules.

``pytest -q`` runs the fast tests (``addopts`` in pyproject.toml deselects ``slow``); ``pytest -q -m
"slow or not slow"`` runs every test, as ``.ci/run`` does. Tests marked ``shared_datasets(files)``
read benchmark CSVs from ``../shared/datasets``: they are skipped when a file is missing, and the
summary at the end of the run counts them."""

from collections import Counter

import pytest
import torch

from tests.shared_data import SHARED_DATASETS

MISSING = "missing shared datasets:"


@pytest.fixture(autouse=True, scope="session")
def _one_intra_op_thread():
    """Every test's models and arrays are small: on a 2-core machine shared with other work, a
    second intra-op thread only adds contention: at a load of 5-7, test_budget's default fit took
    153 s with torch's 2 threads and 16 s with one, test_auto's quantile ensemble 73 s and 3.7 s
    (see also tests/test_rem.py). Tests that need more set it themselves; subprocesses are unaffected."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def one_thread():
    """One intra-op thread for this test, whatever an earlier test set (the session starts with one:
    :func:`_one_intra_op_thread`), restored after it."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


MISSING_FILES = pytest.StashKey[set]()


def pytest_collection_modifyitems(config, items):
    """Skip the tests whose shared datasets are missing, naming the files."""
    missing_anywhere = config.stash.setdefault(MISSING_FILES, set())
    for item in items:
        files = [name for mark in item.iter_markers("shared_datasets") for name in mark.args]
        missing = [name for name in files if not (SHARED_DATASETS / name).is_file()]
        if missing:
            missing_anywhere.update(missing)
            item.add_marker(pytest.mark.skip(reason=f"{MISSING} {', '.join(missing)} not in {SHARED_DATASETS}"))


def pytest_terminal_summary(terminalreporter, config):
    """One line on the tests that read ../shared/datasets: how many ran, how many were skipped and why."""
    ran, missing, other = set(), 0, Counter()
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            if "shared_datasets" not in getattr(report, "keywords", {}):
                continue
            if report.skipped:
                reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
                reason = reason.removeprefix("Skipped: ")
                if reason.startswith(MISSING):
                    missing += 1
                else:
                    other[reason] += 1
            else:
                ran.add(report.nodeid)
    if not (ran or missing or other):
        return
    line = f"tests reading {SHARED_DATASETS}: {len(ran)} ran, {missing + sum(other.values())} skipped"
    if missing:
        files = ", ".join(sorted(config.stash.get(MISSING_FILES, set()), key=str.lower))
        line += f"; {missing} because {files} are not there (datasets/README.md says where they come from)"
    line += "".join(f"; {n} for {why}" for why, n in other.items())
    terminalreporter.write_line(line)
