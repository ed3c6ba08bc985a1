"""Is kb still right at this size? The (id, line) pairs of a `kb match --json` against the
corpus logs' answer keys (`logs/*.expected.json`), by the rules of the test suite's full-corpus
test (tests/test_matcher.py): each planted error must be the best record of a match at its line
(top-1), or tie with it on an identical messagePattern (nothing in the log tells such records
apart); any match off the planted lines is an extra. A count of matches would hide a wrong
record at the right line, or a right count made of misses and extras.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.answer_keys import KEY_ALTERNATIVE, TIE, TOP_1, answers  # noqa: E402


@dataclass
class Check:
    """One log at one size: planted errors expected, found right at their line, extras."""

    log: str
    expected: int
    right: int
    extra: int
    missed: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.right == self.expected and self.extra == 0

    def summary(self) -> str:
        text = f"expected {self.expected}, found at the right line {self.right}, extra {self.extra}"
        for label, which in (("missed", self.missed), ("extra", self.extras)):
            if which:
                text += f"; {label} " + ", ".join(which[:5]) + (" …" if len(which) > 5 else "")
        return text


def answer_key(log: Path) -> dict[str, Any]:
    """The sidecar beside a corpus log: `paste.log` -> `paste.expected.json`."""
    key: dict[str, Any] = json.loads(log.with_suffix(".expected.json").read_text())
    return key


def patterns_of(db: Path, ids: set[str]) -> dict[str, str]:
    """messagePattern by record id, read from the benchmark's own kb database."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out: dict[str, str] = {}
        wanted = sorted(ids)
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            out.update(
                con.execute(
                    f"SELECT id, message_pattern FROM records WHERE id IN ({marks})", chunk
                ).fetchall()
            )
        return out
    finally:
        con.close()


def check(log: Path, match_json: str, db: Path) -> Check:
    """Hold one `kb match --json LOG` output against LOG's answer key."""
    key = answer_key(log)
    matches = [SimpleNamespace(**m) for m in json.loads(match_json)["matches"]]
    planted = key["planted"]
    ids = {p["id"] for p in planted}
    for m in matches:
        ids.add(m.id)
        ids.update(m.duplicates)
    patterns = patterns_of(db, ids)
    right, missed = 0, []
    for entry in planted:
        found = answers(matches, entry)
        if any(how in (TOP_1, KEY_ALTERNATIVE) for _, how in found) or any(
            how == TIE and patterns.get(m.id) == patterns.get(entry["id"]) for m, how in found
        ):
            right += 1
        else:
            missed.append(f"{entry['id']}@{entry['line']}")
    planted_lines = {p["line"] for p in planted}
    extras = [f"{m.id}@{m.line}" for m in matches if m.line not in planted_lines]
    return Check(log.name, len(planted), right, len(extras), missed, extras)
