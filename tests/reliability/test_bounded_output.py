"""Output stays bounded for a log with hundreds or thousands of known errors: text, markdown,
`kb run` and the web page show the first SHOWN_IN_FULL in full and count the rest by
repository; `--all` shows every one; `--json`, `--brief` and `--ids` always list them all.
(Issue 13: "output for a log with thousands of errors is bounded by default".)"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kb.cli import cli
from kb.render import COUNTED_REPOSITORIES, SHOWN_IN_FULL, Remainder, shown_in_full
from tests.conftest import seed_record

ERRORS = 300
# Twelve repositories, so that the count names COUNTED_REPOSITORIES and groups the others.
REPOS = [f"acme/tool{n:02d}" for n in range(12)]


def gadget_records(n: int) -> list[dict[str, Any]]:
    """`n` records with distinct messages, spread over REPOS (the first gets the most)."""
    seed = seed_record()
    out = []
    for i in range(n):
        # tool00 holds every third record, the others share the rest in turn
        repo = REPOS[0] if i % 3 == 0 else REPOS[1 + i % (len(REPOS) - 1)]
        out.append(
            {
                **seed,
                "id": f"{i + 1:016x}",
                "slug": f"gadget-{i}",
                "repo": repo,
                "errorClass": "ZebraError",
                "errorMessage": f"gadget g{i:04d} failed to frobnicate {{what}}",
                "messagePattern": f"gadget g{i:04d} failed to frobnicate (.+?)",
                "filePath": f"zebra/gadget{i}.py",
            }
        )
    return out


@pytest.fixture
def crowded(tmp_path: Path) -> tuple[str, Path]:
    """A knowledge base of ERRORS gadget records and a log that raises every one of them."""
    db = str(tmp_path / "kb.sqlite3")
    source = tmp_path / "gadgets.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in gadget_records(ERRORS)))
    result = CliRunner().invoke(cli, ["--db", db, "import", str(source), "--quiet"])
    assert result.exit_code == 0, result.output
    log = tmp_path / "service.log"
    log.write_text(
        "".join(
            f"2026-11-30T10:{i // 60:02d}:{i % 60:02d}Z worker ERROR "
            f"ZebraError: gadget g{i:04d} failed to frobnicate part-{i}\n"
            for i in range(ERRORS)
        )
    )
    return db, log


def kb(db: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--db", db, *args, "--no-pager"])


def numbered(text: str) -> list[int]:
    """The numbers of the errors shown in full (`N. line L: ...` headings)."""
    return [int(n) for n in re.findall(r"^(\d+)\. line", text, flags=re.M)]


def test_text_shows_the_first_errors_in_full_and_counts_the_rest(crowded: tuple[str, Path]) -> None:
    db, log = crowded
    result = kb(db, "match", str(log), "--color", "never")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{ERRORS} known errors in")
    assert numbered(result.output) == list(range(1, SHOWN_IN_FULL + 1))
    rest = ERRORS - SHOWN_IN_FULL
    assert f"{rest} more known errors, not shown in full (kb match --all shows every one)" in (
        result.output
    )
    # the largest repository first, with where its errors are; the others together at the end
    counts = re.findall(r"^  ([\d,]+) in (\S+.*?), lines? ([\d,]+)", result.output, flags=re.M)
    assert len(counts) == COUNTED_REPOSITORIES + 1
    assert counts[0][1] == REPOS[0]
    assert counts[-1][1] == f"{len(REPOS) - COUNTED_REPOSITORIES} other repositories"
    assert sum(int(n.replace(",", "")) for n, _repo, _line in counts) == rest
    # bounded: a few screens, not one block per error
    assert len(result.output.splitlines()) < 40 * SHOWN_IN_FULL


def test_all_shows_every_error_in_full(crowded: tuple[str, Path]) -> None:
    db, log = crowded
    result = kb(db, "match", str(log), "--all", "--color", "never")
    assert result.exit_code == 0, result.output
    assert numbered(result.output) == list(range(1, ERRORS + 1))
    assert "not shown in full" not in result.output


def test_json_brief_and_ids_always_list_every_error(crowded: tuple[str, Path]) -> None:
    db, log = crowded
    report = json.loads(kb(db, "match", str(log), "--json").output)
    assert len(report["matches"]) == ERRORS
    assert all(m["record"] for m in report["matches"])
    assert len(kb(db, "match", str(log), "--brief").output.splitlines()) == ERRORS
    assert len(kb(db, "match", str(log), "--ids").output.splitlines()) == ERRORS


def test_markdown_is_bounded_too_and_complete_with_all(crowded: tuple[str, Path]) -> None:
    db, log = crowded
    short = kb(db, "match", str(log), "--format", "markdown").output
    assert len(re.findall(r"^## \d+\. Line", short, flags=re.M)) == SHOWN_IN_FULL
    assert f"## {ERRORS - SHOWN_IN_FULL} more known errors, not shown in full" in short
    full = kb(db, "match", str(log), "--format", "markdown", "--all").output
    assert len(re.findall(r"^## \d+\. Line", full, flags=re.M)) == ERRORS


def test_kb_run_counts_the_rest_of_a_command_s_errors(crowded: tuple[str, Path]) -> None:
    db, log = crowded
    script = f"import sys; sys.stdout.write(open({str(log)!r}).read()); sys.exit(3)"
    result = CliRunner().invoke(cli, ["--db", db, "run", "--", sys.executable, "-c", script])
    assert result.exit_code == 3
    fixes = [line for line in result.stderr.splitlines() if line.strip().startswith("fix:")]
    assert len(fixes) == SHOWN_IN_FULL
    assert f"{ERRORS - SHOWN_IN_FULL} more known errors, not shown in full" in result.stderr


class _Match:
    def __init__(self, record_id: str, line: int) -> None:
        self.id, self.line = record_id, line


def test_counting_names_the_largest_repositories_first_then_the_others() -> None:
    matches = [_Match(f"r{i}", i + 1) for i in range(10)]
    records = {f"r{i}": {"repo": "big/one" if i < 6 else f"small/r{i}"} for i in range(10)}
    records["r9"] = {}  # a record without a repository is counted too
    shown, rest = shown_in_full(matches, records, 2)
    assert [m.id for m in shown] == ["r0", "r1"]
    assert rest[0] == Remainder("big/one", 4, 3, 6)
    assert sum(group.errors for group in rest) == 8
    assert ("(no repository)", 1) in [(group.repo, group.errors) for group in rest]
    assert shown_in_full(matches, records, None) == (matches, [])
    assert shown_in_full(matches, records, 10) == (matches, [])


def test_the_web_page_is_bounded_and_the_api_lists_every_error(
    crowded: tuple[str, Path], tmp_path: Path
) -> None:
    from tests.serve.conftest import server_env, start_server

    db, log = crowded
    server = start_server(db, server_env(tmp_path))
    try:
        with server.client() as client:
            html = client.post("/match", data={"log": log.read_text()}).text
            api = client.post("/api/match", json={"log": log.read_text()}).json()
    finally:
        server.stop()
    assert html.count('<article class="error"') == SHOWN_IN_FULL
    assert (
        f"{ERRORS - SHOWN_IN_FULL} more known errors, not shown in full "
        "(POST /api/match lists every one)"
    ) in html
    first_repos_rest = sum(1 for i in range(SHOWN_IN_FULL, ERRORS) if i % 3 == 0)
    assert f"<li>{first_repos_rest:,} in {REPOS[0]}, lines " in html
    assert len(api["matches"]) == ERRORS
