"""kb's pytest plugin: after a run with failures, a "known errors" section in the terminal
summary names each failing test's known errors with the first solution and the record, and
`--kb-report PATH` writes the same as JSON for CI.

Installed with kb (entry point `kb` in the `pytest11` group) and off unless asked for:
`pytest --kb`, or `pytest -p kb`. The knowledge base is `--kb-db URL`, else kb's usual one
($KB_DATABASE_URL, then the user data folder). It never changes a test's outcome: a knowledge
base that cannot be read is one line in the summary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

# What of a failure is matched: the end of its report and captured output (the error is at
# the end of a traceback; a test that logs megabytes costs no more than this).
FAILURE_TEXT_CHARS: Final = 1 << 20
SOLUTION_CHARS: Final = 200
SECTION: Final = "known errors (kb)"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kb", "known errors from kb's knowledge base")
    group.addoption(
        "--kb",
        action="store_true",
        default=False,
        help="After failures, show the known errors in them, with their fixes.",
    )
    group.addoption("--kb-db", metavar="URL", help="kb's database (default: kb's own).")
    group.addoption(
        "--kb-report", metavar="PATH", help="Also write the known errors as JSON (for CI)."
    )


def pytest_configure(config: pytest.Config) -> None:
    asked = config.getoption("kb") or "kb" in (config.known_args_namespace.plugins or [])
    if asked or config.getoption("kb_report"):
        config.pluginmanager.register(KnownErrors(config), "kb-known-errors")


@dataclass
class Failure:
    nodeid: str
    when: str  # setup, call or teardown
    text: str


class KnownErrors:
    """Collects failing tests' reports, then matches them once the run is over."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.failures: list[Failure] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        parts = [report.longreprtext, *(content for _name, content in report.sections)]
        text = "\n".join(part for part in parts if part)[-FAILURE_TEXT_CHARS:]
        self.failures.append(Failure(report.nodeid, report.when, text))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.failures:
            return
        terminalreporter.write_sep("=", SECTION)
        try:
            found = self._match()
        except Exception as exc:  # the knowledge base is a help, never a reason to fail
            terminalreporter.write_line(f"kb: cannot read the knowledge base: {exc}")
            return
        for failure, matches in found:
            if not matches:
                continue
            terminalreporter.write_line(f"{failure.nodeid}")
            for item in matches:
                terminalreporter.write_line(_line(item))
        known = sum(1 for _failure, matches in found if matches)
        terminalreporter.write_line(
            f"{known} of {len(found)} failing test(s) hit a known error; more: kb show ID"
        )
        path = self.config.getoption("kb_report")
        if path:
            tests = [
                {"nodeid": f.nodeid, "when": f.when, "known_errors": matches}
                for f, matches in found
            ]
            Path(path).write_text(json.dumps({"tests": tests}, indent=2) + "\n")

    def _match(self) -> list[tuple[Failure, list[dict[str, Any]]]]:
        from kb import KnowledgeBase
        from kb.config import resolve_database_url, sqlite_file

        url = resolve_database_url(self.config.getoption("kb_db"))
        path = sqlite_file(url)
        if path is not None and not path.is_file():  # never create one as a side effect
            raise FileNotFoundError(f"no knowledge base at {path} (kb import a dataset first)")
        out = []
        with KnowledgeBase(url) as kb:
            for failure in self.failures:
                report = kb.match(failure.text)
                out.append((failure, [_known(m) for m in report.in_log_order()]))
        return out


def _known(match: Any) -> dict[str, Any]:
    record = match.record or {}
    solutions = record.get("solutions") or []
    return {
        "id": match.id,
        "score": round(match.score, 3),
        "text": match.text,
        "errorClass": record.get("errorClass"),
        "repo": record.get("repo"),
        "errorMessage": record.get("errorMessage"),
        "solution": solutions[0] if solutions else None,
        "githubUrl": record.get("githubUrl"),
    }


def _line(known: dict[str, Any]) -> str:
    from kb.render import safe
    from kb.text import clip

    text = clip(safe(known["text"], multiline=False), 160)
    out = f"  {text}\n    record {known['id']} ({safe(known['repo'])}, {known['score']:.2f})"
    if known["solution"]:
        out += f"\n    fix: {clip(safe(known['solution'], multiline=False), SOLUTION_CHARS)}"
    url = safe(known["githubUrl"] or "", multiline=False)
    if url.startswith(("https://", "http://")):
        out += f"\n    raised at {url}"
    return out
