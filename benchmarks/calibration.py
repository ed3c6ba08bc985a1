"""How often `kb match` is right at each score: the table behind the default --min-score.

    .venv/bin/python benchmarks/calibration.py                 # prints the tables (markdown)
    .venv/bin/python benchmarks/calibration.py --db /tmp/drift-kb.sqlite3 --floor 0.3

Every error kb reports on the development sets, at any score from --floor up (below the
default --min-score too), is labelled
right or wrong from the sets' own answer keys (never from kb's output), and counted in score
bands:

- the version-drift set's development data (tests/fixtures/drift/dev/ and sealed/, which was
  scored once and is development data since): the first answer on an error's
  lines is right when it is the expected record or one with the identical messagePattern;
  anything reported elsewhere in a drift log, and anything at all in a negative or clean log,
  is wrong;
- the two real-log sets (tests/fixtures/reallogs/, tests/fixtures/heldout/), each against its
  own records: a match is right when it answers an expected entry at its line (the rules of
  tests/answer_keys.py), ignored on a line the key tolerates, wrong otherwise;
- paste.log and big.log of the shared corpus: right at a planted line when it names the planted
  record (or ties with it), wrong elsewhere.

The held-out drift set (sealed2/) is never read. The full corpus is imported into --db once
(kept when it exists, as tests/fixtures/drift/evaluate.py does); each real-log set gets its own
database in a temporary folder. Takes about two minutes on two cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"
BANDS = [0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.01]


def _evaluate_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "drift_evaluate", FIXTURES / "drift" / "evaluate.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def drift_labels(kb: Any, floor: float) -> list[tuple[float, bool]]:
    """(score, right) of every report on the drift set's development data."""
    ev = _evaluate_module()
    out: list[tuple[float, bool]] = []
    for key, raw in ev.load_cases("dev+sealed"):
        report = kb.match(raw, top=3, min_score=floor, suggest=False)
        if key["kind"] != "drift":
            out += [(m.score, False) for m in report.matches]
            continue
        where = set(key["lines"]) | {key["line"]}
        right = {key["expected"]["id"], *key["expected"]["alternatives"]}
        here = [m for m in report.matches if ev.lines_of(m) & where]
        if here:
            out.append((here[0].score, here[0].id in right))
        out += [(m.score, False) for m in report.matches if not ev.lines_of(m) & where]
    return out


def reallog_labels(folder: str, floor: float, scratch: Path) -> list[tuple[float, bool]]:
    """(score, right) of every match on one real-log set, against its own records."""
    from kb import KnowledgeBase
    from tests.answer_keys import accepts, lines_of

    out: list[tuple[float, bool]] = []
    with KnowledgeBase(str(scratch / f"{folder}.sqlite3")) as kb:
        kb.import_sources([str(FIXTURES / folder / "records.jsonl.gz")])
        for expected in sorted((FIXTURES / folder).glob("*.expected.json")):
            key = json.loads(expected.read_text())
            log = FIXTURES / folder / expected.name.replace(".expected.json", ".log")
            report = kb.match(log.read_bytes(), min_score=floor, suggest=False)
            tolerated = {entry["line"] for entry in key.get("tolerated", [])}
            for m in report.matches:
                entries = [
                    e
                    for e in key["expected"]
                    if lines_of(m) & {e["line"], *e.get("also_lines", [])}
                ]
                if any(accepts(m, e) for e in entries):
                    out.append((m.score, True))
                elif not entries and lines_of(m) & tolerated:
                    continue
                else:
                    out.append((m.score, False))
    return out


def corpus_log_labels(kb: Any, floor: float) -> list[tuple[float, bool]]:
    """(score, right) of every match on paste.log and big.log."""
    out: list[tuple[float, bool]] = []
    for name in ("paste", "big"):
        expected = json.loads((CORPUS / "logs" / f"{name}.expected.json").read_text())
        planted = {p["line"]: p["id"] for p in expected["planted"]}
        report = kb.match(CORPUS / "logs" / f"{name}.log", min_score=floor, suggest=False)
        for m in report.matches:
            lines = {m.line, *m.other_lines}
            ids = {planted[line] for line in lines if line in planted}
            out.append((m.score, bool(ids & {m.id, *m.duplicates})))
    return out


def table(rows: list[tuple[float, bool]]) -> list[str]:
    """Markdown rows: each score band, its reports, the share right, and the share right of
    everything reported at or above the band's lower bound."""
    lines = [
        "| score | reports | right | share right | right at or above |",
        "|---|---:|---:|---:|---:|",
    ]
    for low, high in itertools.pairwise(BANDS):
        band = [right for score, right in rows if low <= score < high]
        above = [right for score, right in rows if score >= low]
        share = f"{100 * sum(band) / len(band):.0f} %" if band else "-"
        cumulative = f"{100 * sum(above) / len(above):.0f} %" if above else "-"
        label = f"{low:.2f}-{min(high, 1.0):.2f}"
        lines.append(f"| {label} | {len(band)} | {sum(band)} | {share} | {cumulative} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--db",
        type=Path,
        default=Path("/tmp/drift-kb.sqlite3"),
        help="the full corpus's database (imported when missing or empty)",
    )
    parser.add_argument("--floor", type=float, default=0.01, help="lowest (reported) score counted")
    parser.add_argument(
        "--raw",
        action="store_true",
        help="band the raw scores (before ScoringConfig.calibration), as the knots were fitted",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from kb import KnowledgeBase
    from kb.matcher import DEFAULT_SCORING
    from kb.matcher.evidence import uncalibrated

    sets: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    with KnowledgeBase(str(args.db)) as kb:
        if kb.count() == 0:
            kb.import_sources([str(CORPUS / "records.jsonl.gz")])
        sets["version-drift set, dev and sealed (development)"] = drift_labels(kb, args.floor)
        sets["paste.log and big.log"] = corpus_log_labels(kb, args.floor)
    with tempfile.TemporaryDirectory() as scratch:
        for folder, name in (
            ("reallogs", "first real-log set"),
            ("heldout", "second real-log set"),
        ):
            sets[name] = reallog_labels(folder, args.floor, Path(scratch))
    if args.raw:
        knots = DEFAULT_SCORING.calibration
        for name, rows in sets.items():
            sets[name] = [(uncalibrated(score, knots), right) for score, right in rows]
    everything = [row for rows in sets.values() for row in rows]
    print(f"## All development sets ({len(everything)} reports)\n")
    print("\n".join(table(everything)))
    for name, rows in sets.items():
        print(f"\n## {name} ({len(rows)} reports)\n")
        print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
