"""How a match is held against an answer key: one set of rules for every test on real logs.

An expected entry names a record and the line of its exception. A match answers it when it is
on that line and names the record as its best (top-1), or names a record the answer key calls
equally right, or lists the record among the ties of its best (nothing in the log tells them
apart); a reworded message (`"method": "fuzzy"`) may also be answered by a lower-scored
alternative. Nothing else: a right record ranked below a wrong one is a miss.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

TOP_1 = "top-1"
KEY_ALTERNATIVE = "answer-key alternative"
TIE = "tie"
NEAR_MISS_ALTERNATIVE = "near-miss alternative"


def lines_of(match: Any) -> set[int]:
    """Every original line a match stands for: its span and the lines it occurred again."""
    return {match.line, *range(match.line, match.end_line + 1), *match.other_lines}


def answered_by(match: Any, entry: dict[str, Any]) -> str | None:
    """How `match` answers the expected `entry` (ignoring where), or None if it does not."""
    if match.id == entry["id"]:
        return TOP_1
    if match.id in entry.get("alternatives", []):
        return KEY_ALTERNATIVE
    if entry["id"] in match.duplicates:
        return TIE
    if entry.get("method") == "fuzzy" and entry["id"] in {a for a, _ in match.alternatives}:
        return NEAR_MISS_ALTERNATIVE
    return None


def accepts(match: Any, entry: dict[str, Any]) -> bool:
    return answered_by(match, entry) is not None


def answers(matches: Iterable[Any], entry: dict[str, Any]) -> list[tuple[Any, str]]:
    """The matches on the entry's lines that answer it, each with how."""
    where = {entry["line"], *entry.get("also_lines", [])}
    out = []
    for match in matches:
        how = answered_by(match, entry) if lines_of(match) & where else None
        if how is not None:
            out.append((match, how))
    return out


def best_answer(matches: Iterable[Any], entry: dict[str, Any]) -> str:
    """The best way the matches answer the entry ("missed" when none does)."""
    ranked = [TOP_1, KEY_ALTERNATIVE, TIE, NEAR_MISS_ALTERNATIVE]
    found = {how for _, how in answers(matches, entry)}
    return next((how for how in ranked if how in found), "missed")
