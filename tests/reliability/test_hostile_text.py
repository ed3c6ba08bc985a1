"""Dataset and log text is untrusted: escape sequences (screen clears, window titles, OSC 52
clipboard writes, BEL), bidi overrides, zero-width and tag characters, NUL and other controls
are shown harmlessly by `show`, `match` and `search` in text and markdown; JSON keeps the data
exact (escaped, never altered); markdown for tickets carries no HTML, no `javascript:` link and
no code span an errorCode can break out of; RE2 never echoes a pattern to the terminal; the
web page escapes it all. (Issue 13, defect 12.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import seed_record

HOSTILE_ID = "badc0de5c0ffee01"
# Everything a terminal obeys or shows as something else, one of each.
HOSTILE = (
    "\x1b[2J\x1b[H"  # clear the screen, cursor home
    "\x1b]0;pwned-title\x07"  # window title (OSC ended by BEL)
    "\x1b]52;c;cHduZWQ=\x1b\\"  # write the clipboard (OSC 52 ended by ST)
    "\x07"  # BEL
    "\u202e\u2066\u200f"  # right-to-left override, isolate, mark
    "\x00\x08\x7f"  # NUL, backspace, DEL
    "\x9b31m\x9d0;t\x9c"  # 8-bit CSI and OSC
    "\u061c\u200b\ufeff"  # Arabic letter mark, zero width space, BOM
    "\U000e0041\U000e007f"  # tag characters
)
# What must never reach a terminal or a ticket, written apart from kb's own list.
FORBIDDEN_RE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064"
    "\u2066-\u2069\ufeff\U000e0000-\U000e007f]"
)
LOG_LINE = f"zzgear.errors.GearboxJam: Gearbox jammed at tooth {HOSTILE}42"


def hostile_record() -> dict[str, Any]:
    record = seed_record()
    record.update(
        id=HOSTILE_ID,
        repo="zz-hostile/gearbox",
        slug="gearbox-jammed",
        errorClass=f"GearboxJam{HOSTILE}",
        errorCode=f"E`{HOSTILE}`GEAR",
        errorMessage=f"Gearbox jammed at tooth {{position}}{HOSTILE}",
        messagePattern="Gearbox jammed at tooth (.+)",
        documentation=(
            f"The gearbox jammed{HOSTILE}.\n\n"
            "See <img src=x onerror=alert(1)> and [the manual](javascript:alert(1)) or "
            "[help](jav&#x61;script:alert(1)), &#x202e; and `keep <this>` as code."
        ),
        triggerScenarios=f"When{HOSTILE} turned.\n\n[x]: javascript:alert(2)\n\n```\nopen fence",
        commonSituations=f"Always{HOSTILE}.",
        solutions=[f"Oil it{HOSTILE}", "Turn it \x1b[31moff\x1b[0m"],
        preventionTips=[f"Check{HOSTILE}"],
        exampleFix=f"gear.oil(){HOSTILE}\n\x1b[2J",
        filePath=f"zzgear/gearbox{HOSTILE}.py",
        lineNumber=160,
        tags=["gearbox"],
    )
    return record


@pytest.fixture
def hostile(invoke: Any, tmp_path: Path) -> dict[str, Any]:
    record = hostile_record()
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    result = invoke("import", str(path))
    assert result.exit_code == 0, result.stderr
    return record


def assert_harmless(text: str) -> None:
    found = FORBIDDEN_RE.search(text)
    assert found is None, f"{found.group()!r} at {found.start()}: {text[found.start() - 40 :]!r}"


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_show_strips_escapes_bidi_and_controls(invoke: Any, hostile: Any, fmt: str) -> None:
    result = invoke("show", HOSTILE_ID, "--format", fmt)
    assert result.exit_code == 0
    assert_harmless(result.stdout)
    assert "The gearbox jammed" in result.stdout and "Oil it" in result.stdout
    assert "pwned" not in result.stdout  # the title and clipboard payloads went with them


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_match_strips_escapes_from_the_log_and_the_record(
    invoke: Any, hostile: Any, fmt: str
) -> None:
    result = invoke("match", "--format", fmt, input=LOG_LINE + "\n")
    assert result.exit_code == 0, result.output
    assert_harmless(result.stdout)
    assert_harmless(result.stderr)
    assert "Gearbox jammed at tooth" in result.stdout and "Oil it" in result.stdout


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_search_strips_escapes(invoke: Any, hostile: Any, fmt: str) -> None:
    result = invoke("search", "gearbox", "--format", fmt)
    assert result.exit_code == 0, result.output
    assert_harmless(result.stdout)
    assert HOSTILE_ID in result.stdout


def test_a_query_full_of_escapes_is_not_echoed_raw(invoke: Any, hostile: Any) -> None:
    result = invoke("search", f"zzzz{HOSTILE}qqqq")
    assert result.exit_code in (0, 1)
    assert_harmless(result.stdout + result.stderr)


@pytest.mark.parametrize(
    "command",
    [
        ["show", HOSTILE_ID, "--format", "json"],
        ["match", "--json"],
        ["search", "gearbox", "--json"],
        ["export"],
    ],
    ids=["show", "match", "search", "export"],
)
def test_json_keeps_the_data_exact_with_every_control_escaped(
    invoke: Any, hostile: dict[str, Any], command: list[str]
) -> None:
    result = invoke(*command, input=LOG_LINE + "\n")
    assert result.exit_code == 0, result.output
    if command[0] == "export":
        # JSONL: exact, and one record a line whichever way a reader splits lines.
        assert json.loads(result.stdout) == hostile
        assert len(result.stdout.splitlines()) == 1
    assert_harmless(result.stdout)
    value = json.loads(result.stdout)
    if command[0] in ("show", "export"):
        assert value == hostile
    elif command[0] == "match":
        [found] = value["matches"]
        assert found["record"] == hostile
        # The log reader drops escape sequences (kb.logtext); what is left is kept exactly.
        assert found["text"].startswith("zzgear.errors.GearboxJam: Gearbox jammed at tooth \x07")
    else:
        [found] = value["results"]
        assert found["errorMessage"] == hostile["errorMessage"]


def test_markdown_code_spans_hold_an_error_code_with_backticks(invoke: Any, hostile: Any) -> None:
    markdown = invoke("show", HOSTILE_ID, "--format", "markdown").stdout
    # E`...`GEAR less its controls is E``GEAR: a fence of three backticks holds it whole.
    assert "**Code:** ```E``GEAR```" in markdown


def test_markdown_carries_no_html_and_no_script_links(invoke: Any, hostile: Any) -> None:
    for markdown in (
        invoke("show", HOSTILE_ID, "--format", "markdown").stdout,
        invoke("match", "--format", "markdown", input=LOG_LINE + "\n").stdout,
    ):
        plain = markdown.replace("\\<", "").replace("\\&", "").replace("\\]", "")
        assert "<img" not in plain
        assert "](javascript:" not in plain and "](jav&" not in plain
        assert not re.search(r"^\s*\[x\]:\s*javascript", plain, re.M)
        assert "&#x202e;" not in plain  # an entity that would become a bidi override
        assert "`keep <this>`" in markdown  # code spans are left as written
        # The open fence in triggerScenarios is closed before the next section starts.
        section = markdown.split("When it happens", 1)[1].split("#", 1)[0]
        assert section.count("```") == 2


def test_re2_never_writes_a_pattern_to_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """RE2's C++ logger writes a pattern it cannot compile to stderr, raw (file descriptor 2,
    below Python): a pattern Python's re accepts and RE2 refuses (a backreference) must not
    get there."""
    from kb import KnowledgeBase

    record = hostile_record()
    record["messagePattern"] = "Gearbox (a)\\1 \x1b]0;pwned\x07jammed(?=x)[ (.+)"
    path = tmp_path / "bad-pattern.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with KnowledgeBase(str(tmp_path / "kb.sqlite3")) as kb:
        kb.import_sources([str(path)])
        kb.match("Gearbox aa \x1b]0;pwned\x07jammed[ here\n")
    from kb.relax import relax

    relax(record["messagePattern"])
    captured = capfd.readouterr()
    assert "pwned" not in captured.err and "\x1b" not in captured.err


@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_the_web_page_escapes_and_strips_hostile_text(db_path: Path, hostile: Any) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from kb.serve.app import create_app
    from kb.serve.config import ServeConfig

    config = ServeConfig(db_url=f"sqlite:///{db_path}")
    with TestClient(create_app(config), base_url="http://127.0.0.1") as client:
        pages = [
            client.get(f"/records/{HOSTILE_ID}").text,
            client.post("/match", data={"log": LOG_LINE}).text,
            client.get("/search", params={"q": "gearbox"}).text,
        ]
    for html in pages:
        assert "Gearbox jammed" in html
        assert_harmless(html.replace("\n", " "))
        assert "<img" not in html
