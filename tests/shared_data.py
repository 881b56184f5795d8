"""Where the benchmark CSVs some tests read lie: ``../shared/datasets`` beside the checkout (never
committed). A test that reads them is marked ``@pytest.mark.shared_datasets("ETTh1.csv", ...)``:
tests/conftest.py skips it, naming the missing files, when one is absent, and the run's summary
says how many such tests ran and how many were skipped."""

from pathlib import Path

SHARED_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
