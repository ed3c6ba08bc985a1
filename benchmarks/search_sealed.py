"""A sealed set of search queries: made by a fixed rule from a seeded sample of real records,
never looked at while kb's search was tuned (bench_search.QUERIES were: kb's bm25 cap and its
"did you mean" were measured on them, so their figures are development figures).

Each query is typed the way a support engineer types one from a customer's email or log: a
run of a message's words, the exception class with two of its words, a quoted phrase, a
misspelt identifier, a source path with a word, an id. The records are drawn from the shared
corpus (real records: the 1M benchmark database holds them unchanged beside their variants),
one kind of query each in turn. The answer key is the record a query was made from, never
kb's output: a query "finds its record" when that record is among the first 10 results (the
corpus's variants share all but one word with it, and exact duplicates share every word, so
the first place is no fair test). The speed figures are what this set is for.

    python benchmarks/bench_search.py --db benchmarks/out/kb-1000000.sqlite3 --sealed

A set that code was changed for is a development set from then on: make a new one with
another --seed, and say which set a figure comes from.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

DEFAULT_SEED: Final = 20261202  # the set's birthday: first scored on 2026-12-02
QUERY_COUNT: Final = 42  # seven of each kind
# How far down the results a query's own record may be and still count as found.
FOUND_WITHIN: Final = 10

PLACEHOLDER_RE: Final = re.compile(r"\{[^{}]*\}")
WORD_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9']*")
IDENTIFIER_RE: Final = re.compile(
    r"\b[A-Za-z_][A-Za-z0-9_]*(?:_[A-Za-z0-9]+|\.[A-Za-z_][A-Za-z0-9_]*|[a-z][A-Z][A-Za-z0-9]*)+\b"
)
KINDS: Final = ("words", "class and words", "quoted", "misspelt identifier", "path", "id")


@dataclass(frozen=True)
class Query:
    text: str
    kind: str
    record_id: str  # the record it was made from: the answer key


def sealed_queries(corpus: Path, seed: int = DEFAULT_SEED, count: int = QUERY_COUNT) -> list[Query]:
    """`count` queries from a seeded sample of the corpus's records, the kinds in turn; a
    record that cannot give its turn's kind (no identifier, no path) is passed over."""
    records = list(_records(corpus))
    rng = random.Random(seed)
    rng.shuffle(records)
    queries: list[Query] = []
    for record in records:
        if len(queries) == count:
            break
        kind = KINDS[len(queries) % len(KINDS)]
        text = _query(kind, record, rng)
        if text:
            queries.append(Query(text=text, kind=kind, record_id=record["id"]))
    return queries


def _records(corpus: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(corpus / "records.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            value = json.loads(line)
            yield value.get("record", value)


def _message(record: dict[str, Any]) -> str:
    """The message outside its placeholders (what a person can copy from a log)."""
    return PLACEHOLDER_RE.sub(" ", record.get("errorMessage") or "")


def _run(words: list[str], size: int, rng: random.Random) -> list[str]:
    if len(words) <= size:
        return words
    start = rng.randrange(len(words) - size + 1)
    return words[start : start + size]


def _query(kind: str, record: dict[str, Any], rng: random.Random) -> str | None:
    message = _message(record)
    words = WORD_RE.findall(message)
    if kind == "id":
        return str(record["id"])
    if kind == "words":
        run = _run(words, rng.randint(3, 5), rng)
        return " ".join(run) if len(run) >= 3 else None
    if kind == "class and words":
        error_class = (record.get("errorClass") or "").rsplit(".", 1)[-1]
        plain = [w for w in words if w != error_class]
        return f"{error_class} {' '.join(_run(plain, 2, rng))}" if error_class and plain else None
    if kind == "quoted":
        run = _run(words, 3, rng)
        return f'"{" ".join(run)}"' if len(run) == 3 else None
    if kind == "misspelt identifier":
        names = [name for name in IDENTIFIER_RE.findall(message) if len(name) >= 8]
        if not names:
            return None
        name = rng.choice(names)
        letters = [i for i in range(1, len(name) - 1) if name[i].isalpha()]
        drop = rng.choice(letters)
        return name[:drop] + name[drop + 1 :]  # one letter left out, as a hurried typist does
    if kind == "path":
        path = (record.get("filePath") or "").strip("/")
        parts = path.split("/")
        if len(parts) < 2 or not words:
            return None
        return f"{'/'.join(parts[-2:])} {rng.choice(words)}"
    raise ValueError(kind)


if __name__ == "__main__":  # the set, to read (it is made the same way each time)
    import sys

    corpus = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[2] / "shared/corpus"
    for query in sealed_queries(corpus):
        print(f"{query.kind:20} {query.record_id}  {query.text}")
