"""Where one import's time goes: the library import (no matcher build) of one file into a new
SQLite database, with the seconds spent in each SQL statement kb sends (by its first words),
in the garbage collector, and in all. For a before/after, run it once per checkout, in turns,
with PYTHONPATH naming the checkout and the working folder outside the repository:

    cd /tmp && PYTHONPATH=CHECKOUT python /path/to/benchmarks/import_phases.py FILE [--db DB]

The statements are timed by wrapping SQLAlchemy's `Connection.exec_driver_sql`, which every
bulk statement of kb's SQLite writer goes through; what is not listed is Python (reading,
parsing, validating, hashing, encoding) and the commit.
"""

from __future__ import annotations

import argparse
import gc
import resource
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection

SHOWN = 0.005  # seconds: statements below this in all are left out of the table
WORDS = 3  # a statement is named by its first words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--db", type=Path, help="a new database (default: a temporary one)")
    args = parser.parse_args()
    spent: dict[str, float] = defaultdict(float)
    collecting = {"s": 0.0, "since": 0.0, "count": [0, 0, 0]}

    def on_collect(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collecting["since"] = time.perf_counter()
        else:
            collecting["s"] += time.perf_counter() - collecting["since"]
            collecting["count"][info["generation"]] += 1

    plain = Connection.exec_driver_sql

    def timed(self: Connection, statement: str, *rest: Any, **options: Any) -> Any:
        started = time.perf_counter()
        try:
            return plain(self, statement, *rest, **options)
        finally:
            spent[" ".join(statement.split()[:WORDS])] += time.perf_counter() - started

    Connection.exec_driver_sql = timed  # type: ignore[method-assign]
    gc.callbacks.append(on_collect)
    from kb.knowledge import KnowledgeBase

    with tempfile.TemporaryDirectory(prefix="kb-phases-") as folder:
        db = args.db or Path(folder) / "kb.sqlite3"
        if db.exists():
            raise SystemExit(f"{db}: exists; the import must go into a new database")
        started = time.perf_counter()
        with KnowledgeBase(str(db)) as kb:
            report = kb.import_sources([str(args.file)])
        elapsed = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{args.file.name}: {report.inserted:,} inserted in {elapsed:.2f} s")
    print(f"CPU {usage.ru_utime + usage.ru_stime:.2f} s, peak RSS {usage.ru_maxrss / 1024:.0f} MB")
    print(
        f"garbage collector {collecting['s']:.2f} s "
        f"(collections young/middle/full {collecting['count']})"
    )
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        if seconds >= SHOWN:
            print(f"{seconds:8.2f} s  {name}")


if __name__ == "__main__":
    main()
