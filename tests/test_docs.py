"""Every page in docs/ runs as written: its Python blocks, in order, in one namespace (blocks that need
Spark are fenced ```python spark and run in tests/test_spark.py)."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(page for page in DOCS.glob("*.md") if "```python" in page.read_text())
#: Pages whose blocks take a quarter of a minute or more (gluonts.md: 19 s, its estimators trained and
#: evaluated as written), and the seed zoo's pages (relevancy_rnn.md 8 s, srupp.md and starsaber.md 4 s
#: each; their models have tests of their own, tests/test_relevancy.py, test_srupp.py and
#: test_starsaber.py): run by ``-m slow`` (.ci/run), kept out of the default ``pytest -q``.
SLOW_PAGES = {"gluonts.md", "relevancy_rnn.md", "srupp.md", "starsaber.md"}


@pytest.mark.parametrize("page", [pytest.param(page, marks=pytest.mark.slow) if page.name in SLOW_PAGES else page
                                  for page in PAGES], ids=[page.name for page in PAGES])
def test_doc_page_runs(page, tmp_path, monkeypatch, one_thread):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"__{page.stem}__"}
    for index, snippet in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)):
        exec(compile(snippet, f"{page.name}[python #{index}]", "exec"), namespace)
