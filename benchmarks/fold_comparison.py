"""Rule 4b's check over the JSON files of ``benchmarks/default_selection.py``, one per market.

``default_selection.py`` runs one market per process (the Dow 30 and the Nasdaq-100 side by
side take about 10 and 17 minutes), so each run's own rule-4b line sees half of the folds. This
script pools the ``rows`` of several ``--json`` files (one row per market, fold, candidate and
seed: its validation Sharpe difference against cost-free 1/N and its turnover) and prints:

* every candidate's pooled validation figures, as the product default's rule reads them
  (:func:`default_selection.choose`: mean and SE over folds, worst fold, turnover, eligible);
* rule 4b's three conditions (docs/default-selection.md) for ``--candidate`` relative to
  ``--reference`` on the folds both ran (:func:`default_selection.no_harm_to_fallback`): mean
  turnover <= 3 % a day, no fold more than 0.10 below the reference, a pooled paired difference
  no lower than minus its SE;
* how often the candidate's held-out gate kept its challenger, when it has one.

Usage::

    .venv/bin/python benchmarks/fold_comparison.py dow30.json nasdaq100.json \\
        --candidate direct-gated-hold --reference direct-gated

Exit status 0 when the conditions hold, 1 when they do not, 2 on bad input (a missing or
unreadable file, a candidate or reference not in the files, no fold in common).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from default_selection import MAX_TURNOVER, WORST_FOLD, choose, no_harm_to_fallback  # noqa: E402

FIELDS = ("market", "fold", "candidate", "seed", "validation_difference", "validation_turnover")


def load_rows(paths: list[str]) -> list[SimpleNamespace]:
    """Every row of every file, as objects with :data:`FIELDS` and ``challenger``.

    Raises:
        ValueError: a file that cannot be read, is not a report of default_selection.py, or
            holds a row without one of :data:`FIELDS` (the message names the file and row).
    """
    rows = []
    for path in paths:
        try:
            report = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read it as JSON ({exc})") from exc
        if not isinstance(report, dict) or not isinstance(report.get("rows"), list):
            raise ValueError(f"{path}: no 'rows' list; write it with default_selection.py --json")
        for i, row in enumerate(report["rows"]):
            missing = [f for f in FIELDS if not isinstance(row, dict) or f not in row]
            if missing:
                raise ValueError(f"{path}: row {i} has no {missing[0]!r}")
            rows.append(SimpleNamespace(**{f: row[f] for f in FIELDS}, challenger=row.get("challenger")))
    return rows


def compare(rows: list[SimpleNamespace], candidate: str, reference: str) -> dict:
    """The pooled table and rule 4b's verdict of ``candidate`` against ``reference``.

    Returns:
        ``{"table": {name: {mean, se, worst, turnover, eligible}}, "passed": bool,
        "vs_reference": {mean, se, worst}, "folds": int, "gate_kept": (kept, asked)}``.

    Raises:
        ValueError: a name not in ``rows``, or no (market, fold) that both ran.
    """
    names = sorted({r.candidate for r in rows})
    for flag, name in (("--candidate", candidate), ("--reference", reference)):
        if name not in names:
            raise ValueError(f"{flag}: {name!r} is not in the files (they hold {', '.join(names)})")
    folds = {(r.market, r.fold) for r in rows if r.candidate == candidate} & {
        (r.market, r.fold) for r in rows if r.candidate == reference
    }
    if not folds:
        raise ValueError(f"{candidate!r} and {reference!r} ran on no fold in common")
    _, table = choose(rows, names)
    passed = no_harm_to_fallback(rows, table, successor=candidate, reference=reference)
    gates = [r.challenger for r in rows if r.candidate == candidate and isinstance(r.challenger, dict)]
    asked = [g for g in gates if "kept" in g]
    return {
        "table": table,
        "passed": passed,
        "vs_reference": table[candidate].get("vs_fallback"),
        "folds": len(folds),
        "gate_kept": (sum(bool(g["kept"]) for g in asked), len(asked)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="reports written by default_selection.py --json")
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--reference", required=True, help="what the candidate must do no harm to")
    args = parser.parse_args(argv)
    try:
        result = compare(load_rows(args.json), args.candidate, args.reference)
    except ValueError as exc:
        print(f"fold_comparison: {exc}", file=sys.stderr)
        return 2
    print(f"Validation, pooled over the folds of {len(args.json)} file(s):")
    for name, t in result["table"].items():
        print(
            f"  {name:<26} mean {t['mean']:+.3f} ± {t['se']:.3f}, worst fold {t['worst']:+.3f}, "
            f"turnover {100 * t['turnover']:.2f} %/day, {'eligible' if t['eligible'] else 'not eligible'}"
        )
    gap = result["vs_reference"] or {}
    kept, asked = result["gate_kept"]
    print(
        f"Rule 4b, {args.candidate} against {args.reference} on {result['folds']} folds: per-fold difference "
        f"{gap.get('mean', float('nan')):+.3f} ± {gap.get('se', float('nan')):.3f}, worst "
        f"{gap.get('worst', float('nan')):+.3f} (limit {WORST_FOLD:+.2f}), turnover "
        f"{100 * result['table'][args.candidate]['turnover']:.2f} %/day (limit {100 * MAX_TURNOVER:.0f} %): "
        f"{'met' if result['passed'] else 'not met'}"
    )
    if asked:
        print(f"Gate kept the challenger in {kept} of {asked} trainings")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
