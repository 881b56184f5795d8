"""Every Python snippet in README.md runs as written, and .ci/run runs README.md's test command."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_snippets():
    assert SNIPPETS


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(SNIPPETS[index], f"README.md[python #{index}]", "exec"), {"__name__": "__readme__"})


def test_ci_runs_the_readme_test_command():
    """README.md's second command (install, then test) is the line .ci/run runs, and it runs every test."""
    commands = re.findall(r"```bash\n(.*?)\n```", README.read_text(), flags=re.S)
    install_and_test = [command for command in commands if "pytest" in command]
    assert len(install_and_test) == 1, install_and_test
    ci = (README.parent / ".ci" / "run").read_text().splitlines()
    assert install_and_test[0] in ci
    assert '-m "slow or not slow"' in install_and_test[0]
