"""Derive larger corpora from the shared one, deterministic from a seed: 150k and 1M records.

The first pass writes every real record unchanged (so the planted errors of paste.log and
big.log still have their records); each further pass writes a variant of every record, in a
seeded order, until the wanted count. A variant has a new id and one word of its message
replaced by a made-up word of the same length, everywhere the word occurs in the message, the
pattern, the slug and the prose. Because the replacement is chosen per (pass, pattern), records
that shared a pattern still share it (same share of duplicates), and literal lengths do not
change (same share of generic patterns). Records are written flat, one JSON object a line,
gzipped, so kb and `sqlite-utils insert --nl` read the same file. A count below the real
corpus's (a quick check of the harness) takes first the records planted in the corpus's logs
(the ids of `logs/*.expected.json` beside the source) and those sharing their patterns (2,155),
so every planted error can still be found, among the same ties as in the real corpus.

    python benchmarks/scale_corpus.py 150000 [--seed 20261129] [--out benchmarks/out]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "corpus" / "records.jsonl.gz"
DEFAULT_SEED = 20261129
# Words of at least this many letters, outside placeholders, are candidates for replacement:
# shorter ones ("a", "to", "is") would make near-identical variants.
MIN_WORD = 4
_WORD = re.compile(r"(?<![\\A-Za-z0-9_])[A-Za-z]{" + str(MIN_WORD) + r",}(?![A-Za-z0-9_])")
_GROUP = re.compile(r"\((?:[^()\\]|\\.)*\)")  # a pattern's groups: not literal text
_CONSONANTS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"


def corpus_path(out: Path, count: int, seed: int = DEFAULT_SEED) -> Path:
    return out / f"corpus-{count}-s{seed}.jsonl.gz"


def _read(source: Path) -> list[dict[str, Any]]:
    records = []
    with gzip.open(source, "rt", encoding="utf-8") as f:
        for line in f:
            value = json.loads(line)
            records.append(value.get("record", value))
    return records


def _made_up(rng: random.Random, like: str) -> str:
    """A pronounceable word as long as `like`, keeping its capitalisation."""
    letters = [rng.choice(_VOWELS if i % 2 else _CONSONANTS) for i in range(len(like))]
    word = "".join(letters)
    if like.isupper():
        return word.upper()
    if like[0].isupper():
        return word.capitalize()
    return word


def _swap(text: str, word: str, new: str) -> str:
    return re.sub(r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])", new, text)


def _variant(rec: dict[str, Any], k: int, seed: int) -> dict[str, Any]:
    pattern = rec["messagePattern"]
    out = dict(rec)
    out["id"] = hashlib.sha1(f"{seed}:{k}:{rec['id']}".encode()).hexdigest()[:16]
    literal = _GROUP.sub(" ", pattern)
    words = sorted(set(_WORD.findall(literal)))
    if not words:
        return out  # no word to vary (rare): the variant duplicates the pattern
    rng = random.Random(f"{seed}:{k}:{pattern}")  # per (pass, pattern): duplicates stay shared
    word = rng.choice(words)
    new = _made_up(rng, word)
    for key in ("messagePattern", "errorMessage", "documentation", "triggerScenarios"):
        if isinstance(out.get(key), str):
            out[key] = _swap(out[key], word, new)
    out["slug"] = _swap(rec["slug"], word.lower(), new.lower())
    return out


def generate(
    records: list[dict[str, Any]], count: int, seed: int, keep: Collection[str] = ()
) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    if count < len(records) and keep:
        # The planted records and every record raising the same message: a planted error then
        # meets the same ties (and the same best of them) as in the whole corpus.
        patterns = {r["messagePattern"] for r in records if r["id"] in keep}
        first = [r for r in records if r["messagePattern"] in patterns]
        rest = [r for r in records if r["messagePattern"] not in patterns]
        records = first + rest
    yield from records[:count]
    written = min(count, len(records))
    k = 0
    while written < count:
        k += 1
        order = list(range(len(records)))
        rng.shuffle(order)
        for i in order[: count - written]:
            yield _variant(records[i], k, seed)
        written += min(len(order), count - written)


def planted_ids(source: Path) -> set[str]:
    """The ids the answer keys beside the source (`logs/*.expected.json`) expect to be found."""
    ids: set[str] = set()
    for key in sorted((source.parent / "logs").glob("*.expected.json")):
        ids.update(p["id"] for p in json.loads(key.read_text())["planted"])
    return ids


def write(source: Path, count: int, seed: int, out: Path) -> Path:
    """Write (or reuse) the corpus of `count` records; returns its path."""
    path = corpus_path(out, count, seed)
    if path.exists():
        return path
    out.mkdir(parents=True, exist_ok=True)
    records = _read(source)
    keep = planted_ids(source)
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=3) as f:
        for rec in generate(records, count, seed, keep):
            f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
            f.write("\n")
    tmp.replace(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("count", type=int, nargs="+")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    args = parser.parse_args()
    for count in args.count:
        print(write(args.source, count, args.seed, args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
