"""Markdown for tickets and the web page: records, matches and search results.

Dataset text is untrusted: it is escaped so it cannot become markup, links or HTML, and code
and logs are fenced so they cannot break out (the helpers it shares with text output are in
kb.render).
"""

from __future__ import annotations

import re
from typing import Any, Final

from kb.render import (
    SHOWN_IN_FULL,
    UNMATCHED_HEADING,
    bounded,
    captured,
    clipped,
    indented,
    match_summary,
    remainder_heading,
    remainder_line,
    repository_line,
    safe,
    shown_in_full,
    unmatched_where,
    where_raised,
)


def _md_inline(text: object) -> str:
    """Inline markdown: one line, with characters that would start markup (or an entity such as
    `&#x202e;`) escaped."""
    value = safe(bounded(text), multiline=False)
    return re.sub(r"([\\`*_{}\[\]<>#|&~])", r"\\\1", value)


def _md_code(text: object) -> str:
    """A code span that holds `text` whole: its fence is longer than any run of backticks in
    it, and a space pads text that starts or ends with a backtick (CommonMark strips it)."""
    value = safe(text, multiline=False)
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value[:1] in ("`", " ") or value[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


# Markdown that dataset prose may keep, and what in it could reach beyond the ticket.
_MD_FENCE_RE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_BACKTICKS_RE: Final = re.compile(r"`+")
# Raw HTML and autolinks start with "<"; an entity (&#x6a; or &lt;) can spell either.
_MD_HTML_RE: Final = re.compile(r"<|&(?=#?\w+;)")
# An inline link or image's "](", or a reference definition's "[label]:", and its target.
_MD_LINK_RE: Final = re.compile(
    r"\]\(\s*<?([^\s)>]*)|^( {0,3})\[(?=[^\]]*\]:\s*<?([^\s>]*))", re.MULTILINE
)
_MD_SAFE_TARGET_RE: Final = re.compile(r"(?i)https?://|mailto:|#")
_MD_EMPHASIS_RE: Final = re.compile(r"[*_~]")


def _md_prose(text: object) -> str:
    """Dataset prose (documentation, scenarios) kept as the markdown it is written in, made
    harmless in a ticket: raw HTML and entities shown as text, links only to http(s), mailto
    and anchors, code spans and fenced blocks left as they are, a fence left open closed."""
    out: list[str] = []
    fence: str | None = None
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append(_md_paragraph("\n".join(paragraph)))
            paragraph.clear()

    for line in safe(bounded(text)).strip().split("\n"):
        opened = _MD_FENCE_RE.match(line)
        if fence is not None:
            out.append(line)
            bare = line.strip()
            if bare.startswith(fence) and not bare.strip(fence[0]):
                fence = None
        elif opened:
            flush()
            fence = opened.group(1)
            out.append(line)
        elif not line.strip():
            flush()
            out.append("")
        else:
            paragraph.append(line)
    flush()
    if fence is not None:
        out.append(fence)
    return "\n".join(out).strip("\n")


def _md_prose_line(text: object) -> str:
    """One list item of prose (a solution, a tip): as the prose sections, on one line, and
    nothing at its start read as a heading, a list or a quote."""
    line = _md_paragraph(safe(bounded(text), multiline=False).strip())
    return re.sub(r"^([#>+-]|\d+[.)])", r"\\\1", line)


def _md_paragraph(text: str) -> str:
    """One paragraph of prose: code spans kept whole, the rest through _md_plain; a run of
    backticks that closes nothing escaped, so it cannot pair with one in a later section."""
    out: list[str] = []
    at = 0
    while (run := _MD_BACKTICKS_RE.search(text, at)) is not None:
        closing = re.compile(rf"(?<!`){run.group()}(?!`)").search(text, run.end())
        out.append(_md_plain(text[at : run.start()]))
        if closing is None:
            out.append("\\`" * len(run.group()))
            at = run.end()
        else:
            out.append(text[run.start() : closing.end()])
            at = closing.end()
    out.append(_md_plain(text[at:]))
    return "".join(out)


def _md_plain(text: str) -> str:
    """Prose outside code spans: HTML, entities and unsafe links made text; `*`, `_` and `~`
    escaped, since in error prose they are identifiers (__init__.py, my_var, *args, **kwargs)
    far more often than emphasis."""
    text = _MD_HTML_RE.sub(lambda m: "\\" + m.group(), text)
    text = _MD_EMPHASIS_RE.sub(r"\\\g<0>", text)

    def link(found: re.Match[str]) -> str:
        target = found.group(1) if found.group(1) is not None else found.group(3)
        if _MD_SAFE_TARGET_RE.match(target or ""):
            return found.group()
        if found.group(1) is not None:
            return "\\" + found.group()  # "\](": no longer a link
        return found.group(2) + "\\["

    return _MD_LINK_RE.sub(link, text)


def _md_fence(text: object, language: str = "") -> str:
    body = safe(bounded(text)).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{body}\n{fence}"


def record_markdown(
    record: dict[str, Any], heading_level: int = 2, repository: dict[str, Any] | None = None
) -> str:
    """A record ready to paste into a ticket."""
    h = "#" * heading_level
    lines = [
        f"{h} {_md_inline(record.get('errorClass') or 'Error')}: "
        f"{_md_inline(record.get('errorMessage'))}",
        "",
    ]
    facts = [f"**Repository:** {_md_inline(record.get('repo'))}"]
    where = where_raised(record)
    if where:
        url = safe(record.get("githubUrl"), multiline=False)
        if url.startswith(("https://", "http://")):
            facts.append(f"**Raised at:** [{_md_inline(where)}](<{url.replace('>', '%3E')}>)")
        else:
            facts.append(f"**Raised at:** {_md_inline(where)}")
    if record.get("errorCode"):
        facts.append(f"**Code:** {_md_code(record['errorCode'])}")
    facts.append(f"**Record:** {_md_code(record.get('id'))}")
    lines.append(" · ".join(facts))
    if repository:
        lines.extend(["", f"*{_md_inline(repository_line(repository))}*"])

    def section(title: str, body: str) -> None:
        if body.strip():
            lines.extend(["", f"{h}# {title}", "", body])

    section("What it means", _md_prose(record.get("documentation")))
    section("When it happens", _md_prose(record.get("triggerScenarios")))
    section("Common situations", _md_prose(record.get("commonSituations")))
    section(
        "Solutions",
        "\n".join(
            f"{n}. {_md_prose_line(item)}"
            for n, item in enumerate(record.get("solutions") or [], 1)
        ),
    )
    if record.get("exampleFix"):
        section("Example fix", _md_fence(record["exampleFix"]))
    section(
        "Prevention tips",
        "\n".join(f"- {_md_prose_line(item)}" for item in record.get("preventionTips") or []),
    )
    return "\n".join(lines) + "\n"


def unmatched_markdown(report: Any) -> list[str]:
    entries = list(getattr(report, "unmatched", []))
    if not entries:
        return []
    out = [f"## {UNMATCHED_HEADING}", ""]
    for entry in entries:
        frame = f" (raised at {_md_code(entry.frame)})" if entry.frame else ""
        out.append(f"- {unmatched_where(entry).capitalize()}{frame}:")
        out += ["", indented(_md_fence(clipped(entry.text, 2000)), "  "), ""]
        for hit in entry.suggestions:
            out.append(
                f"  - maybe {_md_code(hit['id'])} ({hit['score']:.2f}): "
                + _md_inline(clipped(hit["errorMessage"], 160))
            )
        if entry.suggestions:
            out.append("")
    return out


def matches_markdown(
    report: Any,
    records: dict[str, dict[str, Any]],
    source: str,
    limit: int | None = SHOWN_IN_FULL,
) -> str:
    """The errors of a log for a ticket; past `limit` (None: no limit) counted by repository."""
    lines = [f"# {_md_inline(match_summary(report, source))}", ""]
    full, rest = shown_in_full(report.in_log_order(), records, limit)
    for number, match in enumerate(full, start=1):
        lines += [match_markdown(number, match, records.get(match.id, {"id": match.id})), ""]
    if rest:
        lines += [f"## {_md_inline(remainder_heading(rest))}", ""]
        lines += [f"- {_md_inline(remainder_line(group))}" for group in rest]
        lines.append("")
    lines += unmatched_markdown(report)
    return "\n".join(lines).rstrip() + "\n"


def match_markdown(number: int, match: Any, record: dict[str, Any]) -> str:
    """One error found in a log, with its record, for a ticket (kb serve copies it alone)."""
    lines = [
        f"## {number}. Line {match.line}",
        "",
        _md_fence(clipped(match.text, 2000)),
        "",
        f"Confidence {match.score:.2f} by {match.method}"
        + (f" ({_md_inline(', '.join(match.evidence))})" if match.evidence else "")
        + (f" · captured: {_md_inline(captured(match))}" if match.captures else ""),
    ]
    if match.suggestion:
        lines += ["", f"**{_md_inline(match.suggestion)}**"]
    lines += ["", record_markdown(record, heading_level=3).rstrip()]
    return "\n".join(lines)


def search_markdown(response: Any) -> str:
    head = f"Results for {response.query!r}" if response.query else "Records"
    lines = [f"### {_md_inline(head)} ({len(response.results)} of {response.total:,})", ""]
    for result in response.results:
        lines.append(
            f"- `{result.id}` **{_md_inline(result.error_class or 'Error')}** "
            f"({_md_inline(result.repo)}): {_md_inline(clipped(result.error_message, 200))}"
            + (f" — {_md_inline(result.summary)}" if result.summary else "")
        )
    return "\n".join(lines) + "\n"
