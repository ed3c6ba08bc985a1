"""Bad input thrown at every command: a seeded fuzzer that must never crash kb.

Each round imports a few of tests/fixtures/records40.jsonl's real records, some of them
mutated (a field replaced by NUL, a lone surrogate, an ANSI escape, a 70,000-character text, a
number past 64 bits, NaN, a nested object, a hostile regex...), as JSON Lines, a JSON array, a
truncated file or a truncated gzip; then matches one of the real logs of
tests/fixtures/reallogs, mutated (NULs, CRs, bytes that are not UTF-8, 100,000-character
lines, line numbers past 64 bits, the records' own messages), in every format, from a file or
stdin; then searches (with filters), shows, counts, exports and, now and then, deletes. A
crash is an exception that escapes a command, an exit code outside the documented 0-3, or a
Python warning (which a user's terminal would show).
test_fuzz_cli.py runs a few rounds of a fixed seed; by hand:

    .venv/bin/python tests/reliability/fuzz_cli.py SEED SECONDS [DATABASE_URL...]
"""

from __future__ import annotations

import gzip
import json
import os
import random
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from click.testing import CliRunner

FIXTURES = Path(__file__).parent.parent / "fixtures"
# Logs larger than this make a round slow without reaching code the smaller ones do not.
MAX_LOG_BYTES = 200_000
# Values a field may be replaced by: every JSON type, text that breaks terminals, SQL,
# HTML, regex engines and UTF-8, and sizes past what a column or Hyperscan expects.
ODD_VALUES: list[Any] = [
    "", " ", "\x00", "\ud800", "\udfff", "\u202e", "\x1b[31m", "a" * 70_000, "\n" * 50,
    "é", "😀" * 100, None, True, False, 0, -1, 2**70, 1.5, float("nan"), [], {}, [None],
    ["a", 1], {"a": [1, {"b": None}]}, "(.+?)" * 200, "[", "(?<x>a)", "\\", "(?=a)",
    "a{1000000}", "((((((((((a))))))))))*", "%s %d {0} {name}", "'; DROP TABLE records; --",
    "<script>alert(1)</script>", "../../etc/passwd", "https://" + "a" * 3000,
]  # fmt: skip
ODD_TEXTS: list[str] = [value for value in ODD_VALUES if isinstance(value, str)]
LOG_INSERTS: list[bytes] = [
    b"\x00", b"\r", b"\x1b[2J", b"\xff\xfe", b"\n" * 1000,
    b"Traceback (most recent call last):\n",
    b'  File "x.py", line 99999999999999999999, in f\n', b"E" * 100_000,
    "é😀".encode(), b"\xed\xa0\x80",
]  # fmt: skip
QUERIES: list[str] = [
    "", "\x00", '"', "AND OR NOT", "a*", "NEAR(", "'", "😀", "x" * 5000, "repo:", "(", "-",
    "^", "{col}:x", "error_message:foo", "%", "_",
]  # fmt: skip


# Warnings Python does not show a user by default (its default filters): a ResourceWarning
# is one (PostgreSQL connections an in-process command leaves to the collector).
UNSHOWN_WARNINGS: Final = (
    DeprecationWarning,
    PendingDeprecationWarning,
    ImportWarning,
    ResourceWarning,
)


@dataclass
class Crash:
    """One command that crashed: its arguments, exit code and the exception's repr."""

    args: list[str]
    exit_code: int
    error: str


class Fuzzer:
    """Rounds of mutated imports, matches and look-ups: on `databases` (URLs) in turn, else on
    three SQLite files in `folder`, one of them removed every third round."""

    def __init__(self, seed: int, folder: Path, databases: list[str] | None = None) -> None:
        from kb.cli import cli

        self.cli = cli
        self.rng = random.Random(seed)
        self.folder = folder
        self.databases = databases
        self.runner = CliRunner()
        lines = (FIXTURES / "records40.jsonl").read_text(encoding="utf-8").splitlines()
        self.records: list[dict[str, Any]] = [json.loads(line) for line in lines if line]
        self.logs = [
            path.read_bytes()
            for path in sorted((FIXTURES / "reallogs").glob("*.log"))
            if path.stat().st_size < MAX_LOG_BYTES
        ]
        self.crashes: list[Crash] = []
        self.invocations = 0
        self.rounds = 0

    def round(self) -> None:
        rng = self.rng
        self.rounds += 1
        if self.databases:
            db = self.databases[self.rounds % len(self.databases)]
        else:
            path = self.folder / f"db{self.rounds % 3}.sqlite3"
            if self.rounds % 3 == 0:
                path.unlink(missing_ok=True)  # a first import as often as a later one
            db = str(path)
        source = self._source()
        self._run(["--db", db, "import", str(source), "--quiet"])
        if rng.random() < 0.2:
            self._run(["--db", db, "import", str(source), "--json"])
        if not self.databases and not Path(db).exists():
            return  # nothing imported into a new file: nothing to look up
        log = self.folder / "log.txt"
        log.write_bytes(self._log())
        options = rng.choice([[], ["--brief"], ["--top", "3"], ["--min-score", "0.5"]])
        form = rng.choice(["text", "json", "markdown", "github"])
        self._run(["--db", db, "match", str(log), "--format", form, "--no-pager", *options])
        if rng.random() < 0.3:  # a paste on stdin instead of a file
            self._run(["--db", db, "match", "-", "--json"], stdin=self._log())
        record = rng.choice(self.records)["record"]
        message = str(record.get("errorMessage"))[:40]
        query = rng.choice([*QUERIES, message])
        where = rng.choice([[], ["--repo", query], ["--tag", query], ["--code", query]])
        self._run(["--db", db, "search", query, "--json", *where])
        name = rng.choice([query or "x", str(record.get("id")), str(record.get("slug"))])
        self._run(["--db", db, "show", name, "--format", rng.choice(["text", "json"])])
        self._run(["--db", db, "stats", "--json"])
        self._run(["--db", db, "export", "-"])
        if rng.random() < 0.2:  # the next match rebuilds, reloads or fetches the index
            self._run(["--db", db, "delete", name, *rng.choice([[], ["--dry-run"]])])

    def _run(self, args: list[str], stdin: bytes | None = None) -> None:
        self.invocations += 1
        # Every warning recorded, each time: Python would print one (once per place in the
        # source) on the user's terminal, and a test runner's capture would hide it.
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            result = self.runner.invoke(self.cli, args, input=stdin, catch_exceptions=True)
        escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
        if escaped or result.exit_code not in (0, 1, 2, 3):
            self.crashes.append(Crash(args, result.exit_code, repr(result.exception)[:500]))
        elif shown := [w for w in warned if not issubclass(w.category, UNSHOWN_WARNINGS)]:
            first = shown[0]
            text = f"{first.category.__name__}: {first.message} ({first.filename})"
            self.crashes.append(Crash(args, result.exit_code, text[:500]))

    def _source(self) -> Path:
        """A dataset file of a few records, some mutated, in one of the forms import reads."""
        rng = self.rng
        lines = [
            self._encoded(self._mutated(record) if rng.random() < 0.5 else record)
            for record in rng.choices(self.records, k=rng.randint(1, 25))
        ]
        form = rng.random()
        if form < 0.6:
            text = "\n".join(lines)
        elif form < 0.8:
            text = "[" + ",".join(lines) + "]"
        else:
            text = "\n".join(lines)[: rng.randint(0, 3000)]  # cut anywhere
        data = text.encode("utf-8", "surrogatepass")
        path = self.folder / "records.jsonl"
        if rng.random() < 0.15:
            path = self.folder / "records.jsonl.gz"
            data = gzip.compress(data)
            if rng.random() < 0.3:
                data = data[: rng.randint(0, 200)]
        path.write_bytes(data)
        return path

    def _mutated(self, wrapped: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        copy: dict[str, Any] = json.loads(json.dumps(wrapped))
        record: dict[str, Any] = copy["record"]
        for _ in range(rng.randint(1, 4)):
            key = rng.choice([*record, "newField", "__proto__", ""])
            roll = rng.random()
            if roll < 0.6:
                record[key] = rng.choice(ODD_VALUES)
            elif roll < 0.75:
                record.pop(key, None)
            elif roll < 0.9 and isinstance(record.get(key), str):
                text = record[key]
                at = rng.randint(0, len(text))
                record[key] = text[:at] + rng.choice(ODD_TEXTS) + text[at:]
            else:
                record[key] = rng.choices(ODD_VALUES, k=3)
        return record if rng.random() < 0.3 else copy

    def _encoded(self, value: Any) -> str:
        return json.dumps(value, ensure_ascii=self.rng.random() < 0.5)

    def _log(self) -> bytes:
        rng = self.rng
        log = bytearray(rng.choice(self.logs))
        for _ in range(rng.randint(1, 20)):
            at = rng.randint(0, len(log))
            roll = rng.random()
            if roll < 0.3:
                log[at:at] = rng.choice(LOG_INSERTS)
            elif roll < 0.5:
                del log[at : at + rng.randint(1, 200)]
            elif roll < 0.7:
                log[at:at] = rng.randbytes(rng.randint(1, 50))
            else:
                record = rng.choice(self.records)["record"]
                message = f"{record.get('errorMessage')}\n"
                log[at:at] = message.encode("utf-8", "surrogatepass")
        return bytes(log)


def fuzz(
    seed: int,
    folder: Path,
    *,
    rounds: int = 0,
    seconds: float = 0.0,
    databases: list[str] | None = None,
) -> Fuzzer:
    """Run `rounds` rounds, or as many as fit in `seconds`; the fuzzer, with its crashes."""
    fuzzer = Fuzzer(seed, folder, databases)
    started = time.monotonic()
    while (rounds and fuzzer.rounds < rounds) or (seconds and time.monotonic() - started < seconds):
        fuzzer.round()
    return fuzzer


def main(argv: list[str]) -> int:
    seed, seconds, databases = int(argv[0]), float(argv[1]), argv[2:] or None
    folder = Path(tempfile.mkdtemp(prefix="kb-fuzz-"))
    os.environ["XDG_CACHE_HOME"] = str(folder / "cache")  # no test touches $HOME
    os.environ["XDG_DATA_HOME"] = str(folder / "data")
    fuzzer = fuzz(seed, folder, seconds=seconds, databases=databases)
    for crash in fuzzer.crashes:
        print(f"crash: kb {' '.join(crash.args)[:200]}: exit {crash.exit_code}: {crash.error}")
    print(
        f"seed {seed}: {fuzzer.rounds} rounds, {fuzzer.invocations} commands, "
        f"{len(fuzzer.crashes)} crashes (files in {folder})"
    )
    return 1 if fuzzer.crashes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
