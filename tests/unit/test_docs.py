"""The documentation holds together: every relative Markdown link in README.md, CHANGELOG.md and docs/*.md
points at a file that exists and, for a `#anchor`, at a heading of that file (GitHub's anchor rules); the
README stays short and starts with the two commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.paths import REPO_ROOT

ROOT = REPO_ROOT
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path.read_text()):
        if m := HEADING.match(line):
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path) -> list[str]:
    """The link targets of a Markdown file outside code (inline code spans do not count)."""
    targets = []
    for line in prose_lines(path.read_text()):
        line = re.sub(r"`[^`]*`", "", line)
        targets += LINK.findall(line)
    return targets


def broken_links(path: Path) -> list[str]:
    """The relative links of `path` that do not resolve, each with the reason."""
    broken = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    return broken


def test_slug_follows_github():
    assert slug("The device check (`benchmarks/gpu_check.py`)") == "the-device-check-benchmarksgpu_checkpy"
    assert slug("Advice on the demo's fit") == "advice-on-the-demos-fit"
    assert slug("Metrics and W&B") == "metrics-and-wb"
    assert slug("Your own configs: LOOPSCALE_CONFIG_PATH") == "your-own-configs-loopscale_config_path"


def test_the_checker_finds_a_broken_link(tmp_path):
    (tmp_path / "other.md").write_text("# A heading\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-heading) [second](other.md#twice-1) [self](#top) [web](https://example.org/x)\n"
        "# Top\n`[in code](missing.md)`\n```\n[in a block](missing.md)\n```\n"
        "[gone](missing.md) [no anchor](other.md#nowhere) ![image](fig.png)\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading #nowhere in other.md",
        "fig.png: no such file",
    ]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    assert doc.exists()
    assert broken_links(doc) == []


def test_the_docs_link_to_each_other():
    readme = links(ROOT / "README.md")
    for name in ("docs/design.md", "docs/operations.md", "docs/architecture.md", "docs/results.md", "CHANGELOG.md"):
        assert name in readme


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    commands = [line.split("#")[0].strip() for line in text.split("```bash", 1)[1].split("```", 1)[0].splitlines()]
    assert [c for c in commands if c][:2] == ["make demo", "make test"]


# a document cited by name: an upper-case one (README.md, DESIGN.md) or one under docs/ (not an output such as
# report.md that a command writes)
CITED_MD = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[A-Z][A-Z_]*\.md|docs/[\w-]+\.md)\b")


def cited_missing(root: Path) -> list[str]:
    """Every document a module of loopscale/ or a doc (not the CHANGELOG: history) cites that the repository
    lacks (looked up from the root, docs/ and the citing file's folder)."""
    sources = [*sorted((root / "loopscale").rglob("*.py")), root / "README.md", *sorted((root / "docs").glob("*.md"))]
    missing = []
    for path in sources:
        for name in sorted(set(CITED_MD.findall(path.read_text())) - {"PATH.md", "X.md"}):  # usage placeholders
            if not any((base / name).exists() for base in (root, root / "docs", path.parent)):
                missing.append(f"{path.relative_to(root)}: {name}")
    return missing


def test_no_module_or_doc_cites_a_file_the_repository_lacks():
    assert cited_missing(ROOT) == []
