"""The README is a manual that stays true: short, its file tree real, every link alive, no stale figure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, ROOT / "bench" / "README.md", ROOT / "bench" / "gpu" / "README.md"]
DOCS += sorted((ROOT / "docs").glob("*.md"))

# Markdown links [text](target), without web links and in-page anchors.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_readme_is_short_and_links_the_rest() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, "README.md is a manual: at most 250 lines (the rest goes to docs/)"
    for target in ("docs/architecture.md", "CHANGELOG.md", "docs/cli.md", "docs/troubleshooting.md"):
        assert f"]({target})" in text, f"README.md does not link {target}"


def _tree(text: str) -> list[str]:
    """The paths of the README's "Files" block: a path starts each line, two spaces deeper a level; the lines
    of a description that runs on are indented further and name no path."""
    block = text.split("## Files", 1)[1].split("```", 2)[1]
    paths: list[str] = []
    parents: list[str] = []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent % 2 or indent // 2 > len(parents):
            continue
        parents = parents[: indent // 2]
        words = line.split()
        # "prep/  infer/  eval/ ..." lists sibling folders on one line; the first word not a folder ends it.
        names = [words[0]] + [w for w in _leading(words[1:], r"[\w.-]+/")]
        for name in names:
            paths.append("/".join([*parents, name.rstrip("/")]))
        if words[0].endswith("/"):
            parents.append(words[0].rstrip("/"))
    return paths


def _leading(words: list[str], pattern: str) -> list[str]:
    out = []
    for word in words:
        if not re.fullmatch(pattern, word):
            break
        out.append(word)
    return out


def test_readme_file_tree_is_real() -> None:
    paths = _tree(README.read_text(encoding="utf-8"))
    assert len(paths) >= 15, paths
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"README.md's file tree names paths that do not exist: {missing}"
    for top in ("cli", "reward_core", "py_rewards", "tests", "Cargo.toml", "pyproject.toml"):
        assert top in paths, f"README.md's file tree leaves out {top}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    dead = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (doc.parent / path).exists():
            dead.append(target)
    assert not dead, f"{doc.relative_to(ROOT)} links to files that do not exist: {dead}"


# Sentences that call their own figure stale: such a figure is updated or removed, never kept with a caveat.
STALE = re.compile(
    r"measured before the binding|since removed|these figures are for the code of|"
    r"(figure|number|result)s? (is|are) (stale|out of date)",
    re.IGNORECASE,
)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_calls_its_own_figure_stale(doc: Path) -> None:
    hits = [line.strip() for line in doc.read_text(encoding="utf-8").splitlines() if STALE.search(line)]
    assert not hits, f"{doc.relative_to(ROOT)}: {hits}"
