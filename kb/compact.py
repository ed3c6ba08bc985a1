"""The short forms of a match report: one line per error (`--brief`), the ids alone (`-q`), and
GitHub Actions annotations (`--format github`) placed at the innermost frame of the user's own
code. Like everything printed, dataset and log text is made safe first (kb.render.safe).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Final

from kb.logline import INNERMOST_FIRST, parse_frame, strip_ansi, strip_prefix
from kb.matcher.evidence import is_user_code
from kb.render import remainder_heading, remainder_line, safe, shown_in_full
from kb.text import clip

BRIEF_TEXT_CHARS: Final = 120  # a brief line's message, clipped: one error, one line
FIX_CHARS: Final = 160
# How far above an error its traceback's frames are looked for (a deep stack with source
# lines runs to a few hundred lines).
FRAME_LOOKBACK_LINES: Final = 400
TRACEBACK_HEADER: Final = "Traceback (most recent call last):"
# Where GitHub-hosted runners check a repository out: /home/runner/work/REPO/REPO/ (Linux),
# /Users/runner/work/REPO/REPO/ (macOS), D:/a/REPO/REPO/ (Windows).
RUNNER_CHECKOUT_RE: Final = re.compile(
    r"^(?:/home/runner/work|/Users/runner/work|[A-Za-z]:/a)/([^/]+)/\1/"
)


def matches_brief(
    report: Any,
    records: dict[str, dict[str, Any]],
    *,
    fixes: bool = False,
    limit: int | None = None,
    every: str = "kb match --all shows every one",
) -> str:
    """`LINE  SCORE  ID  REPO  the text that matched`, one error a line, in log order; with
    `fixes`, the record's first solution on the line below; past `limit` errors (None: no
    limit) the rest counted by repository (kb.render.shown_in_full)."""
    out = []
    shown, rest = shown_in_full(report.in_log_order(), records, limit)
    for match in shown:
        record = records.get(match.id, {})
        repo = safe(record.get("repo"), multiline=False) or "?"
        text = clip(safe(match.text, multiline=False), BRIEF_TEXT_CHARS)
        out.append(f"{match.line:>6}  {match.score:.2f}  {match.id}  {repo}  {text}")
        solutions = record.get("solutions") or []
        if fixes and solutions:
            out.append(f"{'':>6}  fix: {clip(safe(solutions[0], multiline=False), FIX_CHARS)}")
    if rest:
        out.append(remainder_heading(rest, every) + ":")
        out += [f"{'':>6}  {remainder_line(group)}" for group in rest]
    return "".join(line + "\n" for line in out)


def match_ids(report: Any) -> str:
    """Each matched record's id once, in log order: for `xargs kb show`."""
    ids = dict.fromkeys(match.id for match in report.in_log_order())
    return "".join(f"{record_id}\n" for record_id in ids)


def github_annotations(
    report: Any, records: dict[str, dict[str, Any]], log_lines: Sequence[str]
) -> str:
    """One `::error` workflow command per error. It is placed at the innermost frame of the
    user's own code in the error's traceback (installed libraries left out), else carries no
    place; the title names the error, the message the record and its first solution."""
    out = []
    for match in report.in_log_order():
        record = records.get(match.id, {})
        where = user_frame(log_lines, match.line)
        title = f"{record.get('errorClass') or 'Error'} (kb record {match.id})"
        message = clip(safe(match.text, multiline=False), 500)
        solutions = record.get("solutions") or []
        if solutions:
            message += f"\nFix: {safe(solutions[0], multiline=False)}"
        url = safe(record.get("githubUrl"), multiline=False)
        if url.startswith(("https://", "http://")):
            message += f"\nRaised at: {url}"
        message += f"\nMore: kb show {match.id}"
        properties = [f"title={_property(title)}"]
        if where is not None:
            properties = [f"file={_property(where[0])}", f"line={where[1]}", *properties]
        out.append(f"::error {','.join(properties)}::{_data(message)}")
    return "".join(line + "\n" for line in out)


def user_frame(log_lines: Sequence[str], line_no: int) -> tuple[str, int] | None:
    """(path, line) of the innermost frame of the user's code in the error's stack, the path
    relative to the checkout; None when the stack shows none. Python prints the stack above
    the error's 1-based line `line_no`, innermost last; Java, JavaScript, Go and others print
    it below, innermost first."""
    top = max(0, line_no - 1 - FRAME_LOOKBACK_LINES)
    for index in range(min(line_no - 1, len(log_lines)) - 1, top - 1, -1):
        text = strip_prefix(strip_ansi(log_lines[index]))
        if TRACEBACK_HEADER in text:
            break
        frame = parse_frame(text)
        if frame is not None and frame.style not in INNERMOST_FIRST and _is_users(frame.path):
            return _relative(frame.norm_path), frame.line
    seen = False
    for index in range(line_no, min(len(log_lines), line_no + FRAME_LOOKBACK_LINES)):
        frame = parse_frame(strip_prefix(strip_ansi(log_lines[index])))
        if frame is None or frame.style not in INNERMOST_FIRST:
            if seen:
                break  # the stack has ended
            continue
        seen = True
        if _is_users(frame.path):
            return _relative(frame.norm_path), frame.line
    return None


def _is_users(path: str) -> bool:
    return is_user_code(path, known_file=False)


def _relative(path: str) -> str:
    """A frame's path as the workflow's checkout names it (GitHub wants it relative): under
    $GITHUB_WORKSPACE or the current folder, else under a hosted runner's checkout folder
    (annotating a log downloaded from a run)."""
    path = path.replace("\\", "/")
    for root in (os.environ.get("GITHUB_WORKSPACE"), os.getcwd()):
        if root:
            prefix = root.replace("\\", "/").rstrip("/") + "/"
            if path.startswith(prefix):
                return path[len(prefix) :]
    return RUNNER_CHECKOUT_RE.sub("", path, count=1)


def _data(text: str) -> str:
    """A workflow command's message: % and line breaks escaped, so dataset text can neither
    end the command nor start another."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """A workflow command's property value: also `:` and `,`, which end a property."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


# ------------------------------------------------------------------------ lists, line by line

SEARCH_COLUMNS: Final = ("id", "score", "repo", "slug", "errorClass", "errorCode", "errorMessage")


def results_nl(response: Any) -> str:
    """One JSON object a line (search results in `--json`'s keys): for jq and line tools. Every
    character past ASCII is escaped: exact for a program, harmless on a terminal."""
    import json

    return "".join(json.dumps(result.as_dict()) + "\n" for result in response.results)


def results_csv(response: Any) -> str:
    """CSV with a header row: for a spreadsheet. Cells that a spreadsheet would run as a
    formula (starting =, +, - or @) are quoted with a leading apostrophe."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(SEARCH_COLUMNS)
    for result in response.results:
        row = result.as_dict()
        writer.writerow([_cell(row[column]) for column in SEARCH_COLUMNS])
    return out.getvalue()


def _cell(value: object) -> str:
    text = "" if value is None else safe(value, multiline=False)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
