"""The docs a user reads hold together: every relative link in README.md and docs/*.md names a file
that exists (and a heading that exists, when it names one), and every page in docs/ can be reached
from README.md by following links. (Their Python blocks run in tests/test_readme.py and
tests/test_docs.py.)"""

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", flags=re.M | re.S)
CODE_SPAN = re.compile(r"(`+)[^`].*?\1", flags=re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", flags=re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def prose(text: str) -> str:
    """``text`` without fenced code blocks and code spans, where brackets are code, not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (a link's label, no URL) lower-cased, every
    character but letters, digits, ``_``, ``-`` and spaces dropped, spaces turned into ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (a repeated one gets ``-1``, ``-2``, ... as on GitHub) and
    its ``<a name=...>``/``<a id=...>`` tags."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for heading in HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    """The targets of ``page``'s Markdown links and images that are not URLs (``http:``,
    ``mailto:``, ...)."""
    return [target for target in LINK.findall(prose(page.read_text(encoding="utf-8")))
            if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target)]


def shown(file: Path) -> Path:
    """``file`` relative to the checkout, where it lies inside it."""
    return file.relative_to(ROOT) if file.is_relative_to(ROOT) else file


def broken(page: Path, target: str) -> str | None:
    """Why ``target``, a link on ``page``, does not resolve; None when it does."""
    path, _, anchor = target.partition("#")
    file = (page.parent / unquote(path)).resolve() if path else page
    if not file.exists():
        return f"{target}: no file {shown(file)}"
    if anchor and (file.is_dir() or file.suffix != ".md"):
        return f"{target}: an anchor into a file that is not a Markdown page"
    if anchor and unquote(anchor).lower() not in anchors(file):
        return f"{target}: no heading with the anchor #{anchor} in {shown(file)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_relative_link_resolves(page):
    links = relative_links(page)
    problems = [problem for problem in (broken(page, target) for target in links) if problem]
    assert problems == [], f"{page.relative_to(ROOT)} has broken links:\n" + "\n".join(problems)


def test_every_docs_page_is_reached_from_the_readme():
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        for target in relative_links(page):
            path = target.partition("#")[0]
            file = (page.parent / unquote(path)).resolve() if path else page
            if file.suffix == ".md" and file.is_file() and file.parent == ROOT / "docs":
                todo.append(file)
    assert sorted(p.name for p in PAGES[1:] if p not in reached) == []


@pytest.mark.parametrize(("heading", "anchor"), [
    ("Missing values (NaN, ±inf)", "missing-values-nan-inf"),
    ("`Forecaster(\"auto\")`", "forecasterauto"),
    ("RSA-PatchTST's gate start, REM heads (issue 11)", "rsa-patchtsts-gate-start-rem-heads-issue-11"),
    ("The other recurrence/attention hybrids (issue 13)", "the-other-recurrenceattention-hybrids-issue-13"),
    ("See [the page](docs/x.md) first", "see-the-page-first"),
    ("snake_case and  two spaces", "snake_case-and--two-spaces"),
])
def test_anchors_are_githubs(heading, anchor):
    assert slug(heading) == anchor


def test_the_checker_finds_what_is_broken(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A part\n\n## A part\n")
    page.write_text("# Page\n\n[ok](other.md#a-part-1) [same page](#page) [web](https://example.org/x)\n"
                    "[gone](missing.md) [no heading](other.md#nowhere) ![image](nothing.png)\n"
                    "`[code](missing-too.md)`\n\n```\n[in a block](missing-three.md)\n```\n")
    problems = [broken(page, target) for target in relative_links(page)]
    assert [p.split(":")[0] for p in problems if p] == ["missing.md", "other.md#nowhere", "nothing.png"]
