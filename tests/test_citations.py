"""The ElegantRL-Podracer paper (arXiv 2112.05923) is cited the same way everywhere: its first
author is Xiao-Yang Liu ("Liu et al. 2021")."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

SOURCES = ("trainer", "webapp", "tests", "benchmarks", "docs", "templates", "static")


def _files():
    yield REPO_ROOT / "README.md"
    for folder in SOURCES:
        for path in sorted((REPO_ROOT / folder).rglob("*")):
            if path.suffix in {".py", ".md", ".html", ".js", ".txt"} and path.is_file():
                yield path


def test_every_citation_of_the_podracer_paper_names_liu_et_al():
    offenders = []
    cited = 0
    for path in _files():
        if path == REPO_ROOT / "tests" / "test_citations.py":
            continue
        text = path.read_text(errors="replace")
        for match in re.finditer(r"2112\.05923", text):
            cited += 1
            around = text[max(0, match.start() - 80) : match.end() + 10]
            if "Liu et al. 2021" not in " ".join(around.split()):
                offenders.append(f"{path.relative_to(REPO_ROOT)}: ...{' '.join(around.split())}...")
        if re.search(r"\bLi et al\.?,? 2021", text):
            offenders.append(f"{path.relative_to(REPO_ROOT)}: 'Li et al. 2021' (the first author is Liu)")
    assert cited >= 5, "the check found too few citations to mean anything"
    assert offenders == [], "\n".join(offenders)
