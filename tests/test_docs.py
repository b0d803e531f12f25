"""The manual (``mkdocs.yml``, ``docs/``) builds in strict mode, the README stays an entrance, and
every section the README held before the manual moved to ``docs/`` still has a home.

The strict build is what CI checks: with the ``validation`` options of ``mkdocs.yml`` every
warning is an error, so a page left out of the navigation, a link to a file that does not exist
or an anchor no heading makes fails the build. The two refusal tests build a copy of the site
with one such fault added, so a change to those options that lets a fault through fails here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

#: Every ``##``, ``###`` and ``####`` heading of README.md as it was before it became an entrance
#: (``git show bd6f28e:README.md``, 1,431 lines), with the page of ``docs/`` that holds it now.
#: A section is moved, never dropped: its heading stays word for word (at any level) on its page.
OLD_README_SECTIONS = {
    "Try it": "guide/demo.md",
    "The demo": "guide/demo.md",
    "Your first experiment": "guide/demo.md",
    "The intraday demo": "guide/demo.md",
    "Run the tests": "operations/tests.md",
    "Configuration": "reference/configuration.md",
    "Recovery from faults": "operations/recovery.md",
    "Running workers on more machines and GPUs": "operations/machines-and-gpus.md",
    "Data formats": "reference/data-formats.md",
    "Intraday data": "reference/data-formats.md",
    "Watching a run: training curves, every agent, run states": "guide/watching-a-run.md",
    "Metrics out: TensorBoard and MLflow": "guide/watching-a-run.md",
    "Task limits": "guide/tasks-and-selection.md",
    "Algorithms": "guide/algorithms.md",
    "Hyperparameter mutation": "guide/algorithms.md",
    "Metrics": "reference/metrics.md",
    "Performance": "results/performance.md",
    "On a GPU": "results/performance.md",
    "Tasks, observations and selection": "guide/tasks-and-selection.md",
    "Walk-forward studies": "guide/tasks-and-selection.md",
    "Learning quality: do agents beat the baselines on unseen years?": "results/learning-quality.md",
    "Run 3: the current figures (589,824 env steps per arm)": "results/learning-quality.md",
    "dow30-2020: 29 tickers (dow30), train 2010-01-01..2018-12-31, validation 2019-01-01..2019-12-31, "
    "test 2020-01-02..2020-12-31 (253 days)": "results/learning-quality.md",
    "dow30-2021: 29 tickers (dow30), train 2010-01-01..2019-12-31, validation 2020-01-01..2020-12-31, "
    "test 2021-01-04..2022-11-15 (472 days)": "results/learning-quality.md",
    "ndx-2021: 71 tickers (nasdaq100), train 2010-01-01..2019-12-31, validation 2020-01-01..2020-12-31, "
    "test 2021-01-04..2022-11-15 (472 days)": "results/learning-quality.md",
    "Run 2's settings study: a no-trade band chosen on validation": "results/learning-quality.md",
    "Run 3's settings study: reward and exploration noise, chosen on validation": "results/learning-quality.md",
    "Run 4: a budget chosen on validation did worse on the test windows": "results/learning-quality.md",
    "Run 1 (history)": "results/learning-quality.md",
    "Serving agents over REST": "reference/serving.md",
    "API": "reference/api.md",
    "The trainer on its own": "reference/cli.md",
}
README_MAX_LINES = 250


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site``; its output in ``stdout``."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config)]
    return subprocess.run(
        [*command, "--site-dir", str(site)], capture_output=True, text=True, timeout=120, cwd=config.parent
    )


def headings(markdown: str) -> list[str]:
    """The text of every ATX heading of ``markdown`` outside fenced code blocks."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#{1,6} (.+?)\s*$", line)):
            found.append(match.group(1))
    return found


def site_copy(tmp_path: Path) -> Path:
    """A copy of ``mkdocs.yml`` and ``docs/`` under ``tmp_path``; the copy's config path."""
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO_ROOT / "docs", tmp_path / "docs")
    return tmp_path / "mkdocs.yml"


def test_the_manual_builds_in_strict_mode_with_every_page_in_its_navigation(tmp_path):
    result = build(REPO_ROOT / "mkdocs.yml", tmp_path / "site")

    assert result.returncode == 0, result.stdout + result.stderr
    pages = sorted(p.relative_to(REPO_ROOT / "docs") for p in (REPO_ROOT / "docs").rglob("*.md"))
    built = [
        tmp_path / "site" / (p.with_suffix("") if p.name != "index.md" else p.parent) / "index.html" for p in pages
    ]
    assert [str(p) for p in built if not p.is_file()] == []
    # Python-Markdown needs a blank line before a list: without it the items stay one paragraph.
    swallowed = [
        f"{page.parent.relative_to(tmp_path / 'site')}: {paragraph[:80]!r}"
        for page, html in ((p, p.read_text()) for p in built)
        for paragraph in re.findall(r"<p>(.*?)</p>", html, flags=re.DOTALL)
        if re.search(r"\n\s*(?:[-*]|\d+\.) \S", paragraph)
    ]
    assert swallowed == [], "add a blank line before these lists"


def test_the_strict_build_refuses_a_page_missing_from_the_navigation(tmp_path):
    config = site_copy(tmp_path)
    (tmp_path / "docs" / "guide" / "unlisted.md").write_text("# A page nobody linked from the nav\n")

    result = build(config, tmp_path / "site")

    assert result.returncode != 0
    assert "guide/unlisted.md" in result.stderr and "not included in the" in result.stderr, result.stderr


def test_the_strict_build_refuses_a_broken_link_and_a_missing_anchor(tmp_path):
    config = site_copy(tmp_path)
    page = tmp_path / "docs" / "guide" / "demo.md"
    page.write_text(
        page.read_text()
        + "\nSee [the moon](../reference/moon.md) and [no heading](../reference/metrics.md#no-such-heading).\n"
    )

    result = build(config, tmp_path / "site")

    assert result.returncode != 0
    assert "reference/moon.md" in result.stderr and "#no-such-heading" in result.stderr, result.stderr


def test_every_section_of_the_old_readme_has_a_home_in_the_manual():
    missing = []
    for heading, page in OLD_README_SECTIONS.items():
        if heading not in headings((REPO_ROOT / "docs" / page).read_text()):
            missing.append(f"{heading!r} is not a heading of docs/{page}")

    assert missing == []


def test_the_readme_is_an_entrance_with_the_two_commands_and_links_that_resolve():
    readme = (REPO_ROOT / "README.md").read_text()

    assert len(readme.splitlines()) <= README_MAX_LINES
    assert "```sh\n./paddock demo\n```" in readme
    assert "```sh\n./paddock test\n```" in readme  # .ci/run runs exactly this command
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", readme)
    assert {"docs/img/run-live.png", "docs/img/report.png", "docs/index.md"} <= set(targets)
    assert [t for t in targets if not (REPO_ROOT / t).exists()] == []


def test_every_page_of_the_manual_that_code_names_exists():
    named = {}
    sources = [REPO_ROOT / "paddock", REPO_ROOT / "docker-compose.yml"]
    for folder in ("trainer", "webapp", "templates", "tests", "deploy", "benchmarks", ".ci"):
        sources += [p for p in sorted((REPO_ROOT / folder).rglob("*")) if p.is_file() and p.suffix != ".pyc"]
    for path in sources:
        for page in re.findall(r"\bdocs/[A-Za-z0-9_./-]+\.md\b", path.read_text(errors="replace")):
            named.setdefault(page, str(path.relative_to(REPO_ROOT)))

    assert len(named) >= 10, "the scan found too few references to mean anything"
    assert {page: source for page, source in named.items() if not (REPO_ROOT / page).is_file()} == {}


def test_the_manual_uses_the_markdown_that_mkdocs_renders_as_github_does():
    # Python-Markdown nests a list only under 4 spaces and reads no fence inside a list item:
    # both render on GitHub, and in the built site they become flat items and inline code.
    faults = []
    for path in sorted((REPO_ROOT / "docs").rglob("*.md")):
        fenced = False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"^ +```", line):
                faults.append(f"{path.relative_to(REPO_ROOT)}:{number}: an indented fence")
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and re.match(r"^ {1,3}(?:[-*]|\d+\.) \S", line):
                faults.append(f"{path.relative_to(REPO_ROOT)}:{number}: a nested list item indented less than 4")

    assert faults == []
