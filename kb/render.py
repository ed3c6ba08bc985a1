"""Text for people and JSON for programs (markdown is kb.markdown); every dataset string made safe.

Dataset text is untrusted: escape sequences and control characters are removed before it
reaches a terminal. The helpers kb.markdown shares (safe, bounded, clipped, ...) are here.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

from kb.text import ANSI_RE, INVISIBLE_CHARS, clip, indented_json, json_safe

# Escape sequences (kb.text.ANSI_RE), then any remaining C0 control character but \n and \t,
# and every character that is shown as something else or not at all (kb.text.INVISIBLE_CHARS).
CONTROL_RE: Final = re.compile(f"[\\x00-\\x08\\x0b-\\x1f{INVISIBLE_CHARS}]")
# The 8-bit string controls (DCS, SOS, OSC, PM, APC, up to ST or BEL) that some terminals obey
# as they do the 7-bit ones: their payload (a title, a clipboard) goes with them.
C1_STRING_RE: Final = re.compile(r"[\x90\x98\x9d-\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)")
SURROGATE_RE: Final = re.compile("[\\ud800-\\udfff]")
WRAP_WIDTH: Final = 88  # readable in an 80–100 column terminal with the indent
# One field as text or markdown shows at most this much: the largest field of a real record
# is about 1 KB, and a 200 MB one (written by another tool; import refuses records past
# kb.ingest.reading.MAX_RECORD_CHARS) once made `kb show` wrap 4.5 GB of words.
SHOWN_CHARS: Final = 20_000


def safe(text: object, *, multiline: bool = True) -> str:
    """Dataset text with escape sequences and control characters removed."""
    if text is None:
        return ""
    cleaned = ANSI_RE.sub("", str(text).replace("\r\n", "\n"))
    cleaned = CONTROL_RE.sub("", C1_STRING_RE.sub("", cleaned))
    cleaned = SURROGATE_RE.sub("\ufffd", cleaned)  # no terminal can be sent one
    if not multiline:
        cleaned = " ".join(cleaned.split())
    return cleaned


def bounded(text: object) -> str:
    """A field as shown to people: cut at SHOWN_CHARS, saying how much is left."""
    value = "" if text is None else str(text)
    if len(value) <= SHOWN_CHARS:
        return value
    left = len(value) - SHOWN_CHARS
    return value[:SHOWN_CHARS] + f" … ({left:,} more characters; --format json has them all)"


class Style:
    """Terminal styling, off unless asked for (never with NO_COLOR or off a terminal)."""

    def __init__(self, color: bool, width: int = WRAP_WIDTH) -> None:
        self.color = color
        self.width = width  # prose is wrapped to this many columns

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def heading(self, text: str) -> str:
        return self._wrap("1", text)

    def title(self, text: str) -> str:
        return self._wrap("1;31", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def code(self, text: str) -> str:
        return self._wrap("36", text)

    def good(self, text: str) -> str:
        return self._wrap("32", text)


def _paragraphs(text: object, indent: str = "  ", width: int = WRAP_WIDTH) -> str:
    out = []
    for block in safe(bounded(text)).split("\n\n"):
        block = " ".join(block.split())
        if block:
            out.append(textwrap.fill(block, width, initial_indent=indent, subsequent_indent=indent))
    return "\n\n".join(out)


def _code_block(text: object, indent: str = "    ") -> str:
    return "\n".join(indent + line for line in safe(bounded(text)).rstrip().splitlines())


def _numbered(items: Iterable[object], indent: str = "  ", width: int = WRAP_WIDTH) -> str:
    lines = []
    for number, item in enumerate(items, start=1):
        prefix = f"{indent}{number}. "
        lines.append(
            textwrap.fill(
                safe(bounded(item), multiline=False),
                width,
                initial_indent=prefix,
                subsequent_indent=" " * len(prefix),
            )
        )
    return "\n".join(lines)


def _bullets(items: Iterable[object], indent: str = "  ", width: int = WRAP_WIDTH) -> str:
    return "\n".join(
        textwrap.fill(
            safe(bounded(item), multiline=False),
            width,
            initial_indent=f"{indent}- ",
            subsequent_indent=f"{indent}  ",
        )
        for item in items
    )


def where_raised(record: dict[str, Any]) -> str:
    path = safe(record.get("filePath"), multiline=False)
    line = record.get("lineNumber")
    return f"{path}:{line}" if path and line is not None else path


def record_header(record: dict[str, Any], style: Style) -> list[str]:
    """The few lines that identify a record: message, class, repo, id, where raised."""
    facts = [
        safe(record.get("errorClass"), multiline=False),
        safe(record.get("repo"), multiline=False),
        safe(record.get("errorType"), multiline=False),
        safe(record.get("severity"), multiline=False),
    ]
    if record.get("errorCode"):
        facts.append("code " + safe(record["errorCode"], multiline=False))
    if record.get("httpStatus"):
        facts.append(f"HTTP {record['httpStatus']}")
    lines = [
        style.title(safe(bounded(record.get("errorMessage")), multiline=False)),
        " · ".join(fact for fact in facts if fact),
        style.dim(f"id {record.get('id')}  slug {safe(record.get('slug'), multiline=False)}"),
    ]
    where = where_raised(record)
    if where:
        lines.append(f"Raised at {where}")
    if record.get("githubUrl"):
        lines.append("  " + style.dim(safe(record["githubUrl"], multiline=False)))
    return lines


def record_body(record: dict[str, Any], style: Style) -> list[str]:
    """What the knowledge base says: meaning, scenarios, solutions, fix, tips, tags."""
    parts: list[str] = []

    def section(title: str, body: str) -> None:
        if body.strip():
            parts.extend(["", style.heading(title), body])

    if record.get("id") and not record.get("documentation") and not record.get("solutions"):
        parts.extend(
            ["", style.dim("  (only the compact index row is known: no documentation yet)")]
        )
    w = style.width
    section("What it means", _paragraphs(record.get("documentation"), width=w))
    section("When it happens", _paragraphs(record.get("triggerScenarios"), width=w))
    section("Common situations", _paragraphs(record.get("commonSituations"), width=w))
    section("Solutions", _numbered(record.get("solutions") or [], width=w))
    if record.get("exampleFix"):
        section("Example fix", style.code(_code_block(record["exampleFix"])))
    section("Prevention tips", _bullets(record.get("preventionTips") or [], width=w))
    tags = [safe(tag, multiline=False) for tag in record.get("tags") or []]
    if tags:
        parts.extend(["", "Tags: " + ", ".join(tags)])
    return parts


def repository_line(repository: dict[str, Any] | None) -> str:
    """What the dataset says of a record's repository (repos.json), in one line."""
    if not repository:
        return ""
    facts = [safe(repository.get("repo"), multiline=False)]
    if repository.get("language"):
        facts.append(safe(repository["language"], multiline=False))
    if repository.get("stars") is not None:
        facts.append(f"{repository['stars']:,} stars")
    if repository.get("analyzedSha"):
        analysed = f"analysed at {safe(repository['analyzedSha'], multiline=False)[:12]}"
        if repository.get("analyzedAt"):
            analysed += f" on {safe(repository['analyzedAt'], multiline=False)[:10]}"
        facts.append(analysed)
    line = " · ".join(facts)
    description = safe(repository.get("description"), multiline=False)
    return f"{line}: {description}" if description else line


def record_text(
    record: dict[str, Any], style: Style, repository: dict[str, Any] | None = None
) -> str:
    header = record_header(record, style)
    if repository:
        header.append("Repository " + repository_line(repository))
    return "\n".join(header + record_body(record, style)) + "\n"


def to_json(value: Any) -> str:
    """JSON for programs: the data exact, every control, bidi or invisible character escaped
    (C0 by json itself, the rest by kb.text.json_safe), so a terminal showing it is not fooled."""
    return json_safe(indented_json(value))


# --------------------------------------------------------------------------- matches

MATCH_TEXT_CHARS: Final = 300  # a matched line is shown up to this; some messages run to 20 KB


def clipped(text: object, limit: int = MATCH_TEXT_CHARS) -> str:
    """Dataset or log text as one safe line, clipped."""
    return clip(safe(text, multiline=False), limit)


def captured(match: Any) -> str:
    parts = []
    names = list(match.capture_names) + [None] * len(match.captures)
    for value, name in zip(match.captures, names, strict=False):
        shown = clipped(value, 80)
        parts.append(f"{safe(name, multiline=False)} = {shown!r}" if name else repr(shown))
    return ", ".join(parts)


def _confidence(match: Any) -> str:
    evidence = ", ".join(safe(e, multiline=False) for e in match.evidence)
    return f"confidence {match.score:.2f} by {match.method}" + (
        f" ({evidence})" if evidence else ""
    )


def match_summary(report: Any, source: str) -> str:
    stats = report.stats
    found = len(report.matches)
    noun = "error" if found == 1 else "errors"
    head = f"{found} known {noun}" if found else "No known error"
    lines, records = stats.get("lines", 0), stats.get("records", 0)
    unknown = len(getattr(report, "unmatched", []))
    tail = f"; {unknown} error line{'s' * (unknown != 1)} no record explains" if unknown else ""
    # the true time: matching, and getting the index when the caller says it waited for it
    took = f"{stats.get('elapsed_ms', 0) + stats.get('index_ms', 0):.0f} ms"
    if stats.get("index_step"):
        took += f", {stats['index_ms']:.0f} of them {stats['index_step']} the matcher index"
    return (
        f"{head} in {safe(source, multiline=False)} ({lines:,} line{'s' * (lines != 1)} "
        f"against {records:,} record{'s' * (records != 1)}, {took})" + tail
    )


UNMATCHED_HEADING: Final = "Not recognised (no record explains these lines)"


def unmatched_where(entry: Any) -> str:
    where = f"line {entry.line}"
    if entry.occurrences > 1:
        where += f" (and {entry.occurrences - 1} more)"
    return where


def unmatched_text(report: Any, style: Style) -> list[str]:
    """The error-looking lines no record explains, each with what `kb search` suggests."""
    entries = list(getattr(report, "unmatched", []))
    if not entries:
        return []
    out = ["", style.heading(UNMATCHED_HEADING)]
    for entry in entries:
        out += ["", f"  {unmatched_where(entry)}: {clipped(entry.text)}"]
        if entry.frame:
            out.append("     " + style.dim(f"raised at {safe(entry.frame, multiline=False)}"))
        for hit in entry.suggestions:
            out.append(
                f"     maybe {safe(hit['id'], multiline=False)} ({hit['score']:.2f}): "
                + clipped(hit["errorMessage"], 100)
            )
        if entry.suggestions:
            out.append("     " + style.dim(f"kb search {clipped(entry.query(), 80)!r}"))
    return out


def indented(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


# A log with thousands of known errors (a service's whole day) would print tens of thousands
# of lines no one reads: text, markdown and the web page show this many in full, in log order,
# and count the rest by repository. `kb match --all` shows every one; JSON, --brief and --ids
# always list them all. A CI log or a paste has a handful (the real-log sets: at most 14).
SHOWN_IN_FULL: Final = 20
# The count of the rest names this many repositories, the largest first, then the others together.
COUNTED_REPOSITORIES: Final = 8
NO_REPOSITORY: Final = "(no repository)"


class Remainder(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """Known errors not shown in full, of one repository (or of the others together)."""

    repo: str
    errors: int
    first_line: int
    last_line: int

    def where(self) -> str:
        if self.first_line == self.last_line:
            return f"line {self.first_line:,}"
        return f"lines {self.first_line:,}-{self.last_line:,}"


def shown_in_full(
    in_log_order: Sequence[Any], records: dict[str, dict[str, Any]], limit: int | None
) -> tuple[list[Any], list[Remainder]]:
    """The matches shown in full (the first `limit` in log order; every one when `limit` is
    None) and the rest counted by repository, the largest group first, at most
    COUNTED_REPOSITORIES of them and then one group of the others."""
    if limit is None or len(in_log_order) <= limit:
        return list(in_log_order), []
    groups: dict[str, list[int]] = {}
    for match in in_log_order[limit:]:
        repo = str(records.get(match.id, {}).get("repo") or NO_REPOSITORY)
        groups.setdefault(repo, []).append(match.line)
    ranked = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    rest = [Remainder(repo, len(lines), min(lines), max(lines)) for repo, lines in ranked]
    if len(rest) > COUNTED_REPOSITORIES + 1:
        others = rest[COUNTED_REPOSITORIES:]
        together = Remainder(
            f"{len(others)} other repositories",
            sum(group.errors for group in others),
            min(group.first_line for group in others),
            max(group.last_line for group in others),
        )
        rest = [*rest[:COUNTED_REPOSITORIES], together]
    return list(in_log_order[:limit]), rest


def remainder_heading(
    rest: Sequence[Remainder], every: str = "kb match --all shows every one"
) -> str:
    """`every` says where to see them all."""
    total = sum(group.errors for group in rest)
    noun = "error" if total == 1 else "errors"
    return f"{total:,} more known {noun}, not shown in full ({every})"


def remainder_line(group: Remainder) -> str:
    return f"{group.errors:,} in {safe(group.repo, multiline=False)}, {group.where()}"


def matches_text(
    report: Any,
    records: dict[str, dict[str, Any]],
    style: Style,
    source: str,
    limit: int | None = SHOWN_IN_FULL,
) -> str:
    """Each error in log order: where, what matched, the record, confidence, then the fix; past
    `limit` errors (None: no limit) the rest are counted by repository."""
    out = [style.heading(match_summary(report, source))]
    full, rest = shown_in_full(report.in_log_order(), records, limit)
    for number, match in enumerate(full, start=1):
        record = records.get(match.id, {"id": match.id})
        where = (
            f"line {match.line}"
            if match.end_line == match.line
            else (f"lines {match.line}-{match.end_line}")
        )
        if match.occurrences > 1:
            where += f" (and {match.occurrences - 1} more)"
        out += ["", style.title(f"{number}. {where}: {clipped(match.text)}")]
        facts = [
            safe(record.get("errorClass"), multiline=False),
            safe(record.get("repo"), multiline=False),
        ]
        out.append("   " + " · ".join(f for f in facts if f) + " · " + _confidence(match))
        out.append(
            "   " + style.dim(f"record {match.id}: " + clipped(record.get("errorMessage"), 160))
        )
        if match.captures:
            out.append("   captured: " + captured(match))
        if match.suggestion:
            out.append("   " + style.good(safe(match.suggestion, multiline=False)))
        out += _essentials(record, style, indent="   ")
        where_raised_line = where_raised(record)
        if where_raised_line:
            out += ["", f"   Raised at {where_raised_line}"]
            if record.get("githubUrl"):
                out.append("   " + style.dim(safe(record["githubUrl"], multiline=False)))
        alternatives = [*match.alternatives]
        if alternatives:
            listed = ", ".join(
                f"{alt_id} ({safe(records.get(alt_id, {}).get('repo'), multiline=False) or '?'}, "
                f"{score:.2f})"
                for alt_id, score in alternatives
            )
            out.append("   Also possible: " + listed)
        if match.duplicates:
            out.append(f"   Same message elsewhere: {len(match.duplicates)} more record(s)")
        out.append("   " + style.dim(f"More: kb show {match.id}"))
    if rest:
        out += ["", style.heading(remainder_heading(rest))]
        out += [f"  {remainder_line(group)}" for group in rest]
    out += unmatched_text(report, style)
    return "\n".join(out) + "\n"


def _essentials(record: dict[str, Any], style: Style, indent: str) -> list[str]:
    """What to do about a matched error: its meaning, the solutions, the example fix."""
    out: list[str] = []
    sections = [
        ("What it means", _paragraphs(record.get("documentation"), width=style.width)),
        ("Solutions", _numbered(record.get("solutions") or [], width=style.width)),
    ]
    if record.get("exampleFix"):
        sections.append(("Example fix", style.code(_code_block(record["exampleFix"]))))
    for title, body in sections:
        if body.strip():
            out += ["", indent + style.heading(title)]
            out += [indent + line if line else line for line in body.splitlines()]
    return out


def matches_json(report: Any, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The `kb match --json` contract: matches best first, each with its whole record, and the
    error-looking lines no record explains (always present, possibly empty)."""
    return {
        "matches": [
            {**match.to_dict(), "record": records.get(match.id)} for match in report.matches
        ],
        "unmatched": [entry.to_dict() for entry in getattr(report, "unmatched", [])],
        "stats": report.stats,
    }


# --------------------------------------------------------------------------- search results


# How the search output names a filter (kb.search.Resolved.name is the dataset's key).
FILTER_NAMES: Final = {
    "repo": "repo",
    "tags": "tag",
    "errorClass": "error class",
    "errorCode": "code",
    "errorType": "type",
    "severity": "severity",
}


def search_text(response: Any, style: Style) -> str:
    """One block a result: id, repo, class, the message as a template, a summary, the command."""
    out: list[str] = []
    if response.corrected:
        out.append(
            style.dim(
                f"No results for {safe(response.query, multiline=False)!r}; "
                f"showing results for {safe(response.corrected, multiline=False)!r}."
            )
        )
    for item in getattr(response, "resolved", []):
        if list(item.values) != [item.typed]:  # a filter meant other stored values: say which
            meant = ", ".join(safe(value, multiline=False) for value in item.values)
            name = FILTER_NAMES.get(item.name, item.name)
            out.append(style.dim(f"{name} {safe(item.typed, multiline=False)!r} means {meant}."))
    shown = len(response.results)
    if response.query:
        head = (
            f"{shown} of {response.total:,} results for {safe(response.query, multiline=False)!r}"
        )
    else:
        head = f"{shown} of {response.total:,} records"
    out.append(style.heading(head + (f" ({response.method})" if response.method else "")))
    for number, result in enumerate(response.results, start=1):
        facts = [safe(result.repo, multiline=False), safe(result.error_class, multiline=False)]
        if result.error_code:
            facts.append("code " + safe(result.error_code, multiline=False))
        out += [
            "",
            f"{number}. {result.id}  " + " · ".join(f for f in facts if f),
            "   " + style.title(clipped(result.error_message, 200)),
        ]
        if result.summary:
            out.append("   " + safe(result.summary, multiline=False))
        out.append("   " + style.dim(f"kb show {result.id}"))
    return "\n".join(out) + "\n"


def import_summary(report: Any) -> str:
    """The last line of `kb import`: what was read and what became of it."""
    lines = [f"{item}. Use --force to import it again." for item in report.up_to_date]
    if report.up_to_date and not (report.stored or report.rejected or report.repositories):
        return "\n".join(lines)
    records = report.stored + report.rejected
    line = (
        f"{records:,} records read from {report.read:,} file(s): {report.inserted:,} inserted, "
        f"{report.updated:,} updated, {report.unchanged:,} unchanged, "
        f"{report.rejected:,} rejected."
    )
    if report.repositories:
        line += f" {report.repositories:,} repositories described."
    if report.repeated:
        line += f" {report.repeated:,} ids were read more than once (the later copy kept)."
    if report.covered:
        line += f" {report.covered:,} compact index rows were covered by the full records."
    if report.failed:
        line += f" {len(report.failed):,} repository file(s) could not be read (listed above)."
    return "\n".join([*lines, line])


def stats_text(figures: dict[str, Any], style: Style) -> str:
    """`kb stats` for people."""
    out = [
        f"{style.heading('Records')}  {figures['records']:,} in {figures['repos']:,} repositories"
        + (f" ({figures['stubs']:,} from the compact index only)" if figures["stubs"] else ""),
        f"{style.heading('Database')} {safe(figures['database'])}",
    ]
    for dataset in figures.get("datasets", []):
        out.append(
            f"{style.heading('Dataset')}  {safe(dataset['dataset_version'])} from "
            f"{safe(dataset['source'])}, fetched {_when(dataset['fetched_at'])}, "
            f"last checked {_when(dataset['checked_at'])}"
        )
    out += [
        "",
        style.heading("By type"),
        *(f"  {safe(k):<14} {v:>9,}" for k, v in figures["by_type"].items()),
        "",
        style.heading("By severity"),
        *(f"  {safe(k):<14} {v:>9,}" for k, v in figures["by_severity"].items()),
        "",
        style.heading("By repository") + (" (top 20)" if len(figures["by_repo"]) > 20 else ""),
    ]
    described = {r["repo"]: r for r in figures.get("repositories", [])}
    for repo, count in list(figures["by_repo"].items())[:20]:
        meta = described.get(repo)
        extra = ""
        if meta:
            facts = [safe(meta.get("language"), multiline=False)]
            if meta.get("stars") is not None:
                facts.append(f"{meta['stars']:,} stars")
            extra = "  " + style.dim(" · ".join(f for f in facts if f))
        out.append(f"  {safe(repo):<40} {count:>9,}{extra}")
    out += ["", style.heading("Imports") + f"  {figures['imports']:,} in all"]
    for run in figures["last_imports"]:
        out.append(
            f"  #{run['id']} {_when(run['started_at'])}  {run['inserted']:,} inserted, "
            f"{run['updated']:,} updated, {run['unchanged']:,} unchanged, "
            f"{run['rejected']:,} rejected  {safe(', '.join(run['sources']))[:60]}"
        )
    return "\n".join(out) + "\n"


def _when(timestamp: str | None) -> str:
    return (timestamp or "")[:16].replace("T", " ") + (" UTC" if timestamp else "")
