"""kb where the failure happens: `kb run -- COMMAND`, the pytest plugin, and GitHub Actions
annotations. Each is driven as a user would: a failing command, a real pytest run in a
subprocess, a CI log."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import SEED

KB = [sys.executable, "-m", "kb"]
MESSAGE = (
    "Unknown KV cache group kind 'ful_attention' in backend_per_kind. Valid kinds are: "
    "chunked_local_attention, full_attention, mamba, sliding_window."
)
RAISES = f"raise ValueError({MESSAGE!r})"


def fake_vllm(root: Path) -> Path:
    """An installed-looking `vllm` whose config/attention.py raises the seed record's error at
    the record's own line (169), so a failure goes through "library" code as in real life."""
    package = root / "site-packages" / "vllm" / "config"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    body = ["# placeholder line"] * 166 + [
        "def validate_backend_per_kind_before(kind):",
        "    if kind != 'full_attention':",
        f"        {RAISES}",
    ]
    (package / "attention.py").write_text("\n".join(body) + "\n")
    return package.parent.parent


CALL = "from vllm.config.attention import validate_backend_per_kind_before as v; v('ful')"


@pytest.fixture
def seeded_db(tmp_path: Path) -> Path:
    db = tmp_path / "kb.sqlite3"
    done = subprocess.run([*KB, "--db", str(db), "import", "-q", str(SEED)], capture_output=True)
    assert done.returncode == 0, done.stderr
    return db


def kb_run(db: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*KB, "--db", str(db), "run", "--", *command], capture_output=True, text=True
    )


def test_kb_run_passes_output_through_and_shows_the_known_error_when_the_command_fails(
    seeded_db: Path, tmp_path: Path
) -> None:
    site = fake_vllm(tmp_path)
    script = f"import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n{CALL}\n"
    done = kb_run(seeded_db, "env", f"PYTHONPATH={site}", sys.executable, "-c", script)
    assert done.returncode == 1  # the command's own status
    assert done.stdout == "to stdout\n"  # stdout untouched: kb writes only to stderr
    assert done.stderr.startswith("to stderr\nTraceback (most recent call last):\n")
    assert f"ValueError: {MESSAGE}" in done.stderr
    tail = done.stderr.split("\nkb: ", 1)[1]
    assert "1 known error in its output" in tail
    assert "46a1fcb95e0d367e  vllm-project/vllm  ValueError: Unknown KV cache group" in tail
    assert "fix: Use one of the valid kinds listed in the error message" in tail


@pytest.mark.parametrize(
    ("command", "status", "said"),
    [
        (["sh", "-c", "echo fine"], 0, None),
        (["sh", "-c", "echo broken >&2; exit 3"], 3, "exited with status 3; no known error"),
        (["sh", "-c", "kill -TERM $$"], 128 + 15, "exited with status 143"),
        (["no-such-command-kb-test"], 127, "kb run: no-such-command-kb-test: command not found"),
    ],
)
def test_kb_run_exits_with_the_commands_status(
    seeded_db: Path, command: list[str], status: int, said: str | None
) -> None:
    done = kb_run(seeded_db, *command)
    assert done.returncode == status
    if said is None:
        assert "kb" not in done.stderr
    else:
        assert said in done.stderr


# ------------------------------------------------------------------------------ pytest plugin

FAILING_TESTS = f"""
def test_passes():
    assert True

def test_known_error():
    {CALL}

def test_unknown_error():
    raise RuntimeError("nothing kb knows")
"""


def run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_app.py").write_text(textwrap.dedent(FAILING_TESTS))
    site = fake_vllm(tmp_path / "lib") if not (tmp_path / "lib").exists() else tmp_path / "lib"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_app.py", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("enable", [["--kb"], ["-p", "kb"]])
def test_the_pytest_plugin_names_each_failing_tests_known_error(
    seeded_db: Path, tmp_path: Path, enable: list[str]
) -> None:
    report = tmp_path / "known.json"
    done = run_pytest(tmp_path, *enable, "--kb-db", str(seeded_db), "--kb-report", str(report))
    assert done.returncode == 1  # the plugin never changes the outcome
    section = done.stdout.split("known errors (kb)", 1)[1].split("\n", 1)[1].split("\n===")[0]
    assert "test_app.py::test_known_error\n" in section
    assert "record 46a1fcb95e0d367e (vllm-project/vllm, 0." in section
    assert "fix: Use one of the valid kinds listed in the error message" in section
    assert "test_unknown_error" not in section
    assert "1 of 2 failing test(s) hit a known error" in section
    written = json.loads(report.read_text())
    by_test = {t["nodeid"]: t["known_errors"] for t in written["tests"]}
    assert by_test["test_app.py::test_unknown_error"] == []
    [known] = by_test["test_app.py::test_known_error"]
    assert (known["id"], known["repo"], known["errorClass"]) == (
        "46a1fcb95e0d367e",
        "vllm-project/vllm",
        "ValueError",
    )
    assert known["solution"].startswith("Use one of the valid kinds")


def test_the_pytest_plugin_is_off_unless_asked_for(seeded_db: Path, tmp_path: Path) -> None:
    done = run_pytest(tmp_path, "--kb-db", str(seeded_db))
    assert done.returncode == 1
    assert "known errors (kb)" not in done.stdout


def test_the_pytest_plugin_says_so_when_there_is_no_knowledge_base(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite3"
    done = run_pytest(tmp_path, "--kb", "--kb-db", str(missing))
    assert done.returncode == 1
    assert f"kb: cannot read the knowledge base: no knowledge base at {missing}" in done.stdout
    assert not missing.exists()


# ------------------------------------------------------------------ GitHub Actions annotations

SITE = "/opt/hostedtoolcache/Python/3.11.7/x64/lib/python3.11/site-packages"
CI_LOG = f"""\
2026-11-29T10:00:00.1234567Z ##[group]Run python -m app.train
2026-11-29T10:00:01.1234567Z Traceback (most recent call last):
2026-11-29T10:00:01.1234567Z   File "/home/runner/work/app/app/app/train.py", line 12, in <module>
2026-11-29T10:00:01.1234567Z     main()
2026-11-29T10:00:01.1234567Z   File "/home/runner/work/app/app/app/config.py", line 40, in main
2026-11-29T10:00:01.1234567Z     cfg.validate()
2026-11-29T10:00:01.1234567Z   File "{SITE}/vllm/config/attention.py", line 169, in validate
2026-11-29T10:00:01.1234567Z     raise ValueError(
2026-11-29T10:00:01.1234567Z ValueError: {MESSAGE}
2026-11-29T10:00:01.1234567Z ##[error]Process completed with exit code 1.
"""


def test_github_annotations_point_at_the_users_innermost_frame(
    seeded_db: Path, tmp_path: Path
) -> None:
    log = tmp_path / "ci.log"
    log.write_text(CI_LOG)
    env = {**os.environ, "GITHUB_WORKSPACE": "/home/runner/work/app/app"}
    done = subprocess.run(
        [*KB, "--db", str(seeded_db), "match", str(log), "--format", "github"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith(
        "::error file=app/config.py,line=40,title=ValueError (kb record 46a1fcb95e0d367e)::"
    )
    message = line.split("::", 2)[2]
    assert "%0AFix: Use one of the valid kinds" in message
    assert "%0AMore: kb show 46a1fcb95e0d367e" in message
    assert "\n" not in message and "\r" not in message
    # The same from stdin.
    piped = subprocess.run(
        [*KB, "--db", str(seeded_db), "match", "-", "--format", "github"],
        input=CI_LOG,
        capture_output=True,
        text=True,
        env=env,
    )
    assert piped.stdout == done.stdout


def test_dataset_text_cannot_start_a_workflow_command_of_its_own() -> None:
    from kb.compact import _data, _property

    hostile = "ok\n::add-mask::secret\r\n::set-output name=x::1 100%"
    assert _data(hostile) == "ok%0A::add-mask::secret%0D%0A::set-output name=x::1 100%25"
    assert _property("a:b,c") == "a%3Ab%2Cc"


def test_brief_and_ids_forms_print_one_line_per_error(seeded_db: Path, tmp_path: Path) -> None:
    log = tmp_path / "ci.log"
    log.write_text(CI_LOG)
    base = [*KB, "--db", str(seeded_db), "match", str(log)]
    brief = subprocess.run([*base, "--brief"], capture_output=True, text=True).stdout
    assert brief.splitlines() == [
        f"     9  {brief.split()[1]}  46a1fcb95e0d367e  vllm-project/vllm  ValueError: "
        + brief.split("ValueError: ", 1)[1].rstrip("\n")
    ]
    ids = subprocess.run([*base, "-q"], capture_output=True, text=True).stdout
    assert ids == "46a1fcb95e0d367e\n"


# ------------------------------------------------------------------------------ the terminal


def test_one_ctrl_d_ends_a_paste_in_a_terminal(seeded_db: Path) -> None:
    """In a terminal, the end of input (Ctrl-D) is not sticky: kb must not read again after
    it, or the user has to press Ctrl-D twice."""
    import pty
    import select
    import time

    parent, child = pty.openpty()
    process = subprocess.Popen(
        [*KB, "--db", str(seeded_db), "match", "--brief"],
        stdin=child,
        stdout=subprocess.PIPE,
        stderr=child,
        close_fds=True,
    )
    os.close(child)
    prompt = b""
    deadline = time.monotonic() + 30
    while b"Ctrl-D" not in prompt and time.monotonic() < deadline:
        if select.select([parent], [], [], 0.5)[0]:
            prompt += os.read(parent, 1024)
    assert b"Paste the log, then press Ctrl-D." in prompt
    os.write(parent, CI_LOG.encode() + b"\x04")  # one Ctrl-D, after the last line
    try:
        out, _ = process.communicate(timeout=30)
    finally:
        process.kill()
        os.close(parent)
    assert process.returncode == 0
    assert b"46a1fcb95e0d367e" in out


def in_terminal(argv: list[str], *, rows: int, cols: int, env: dict[str, str]) -> bytes:
    """Run argv with a pseudo-terminal of rows x cols as its stdout; what it wrote there."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=child, stderr=child, env=env, close_fds=True
    )
    os.close(child)
    out = b""
    while True:
        ready = select.select([parent], [], [], 30)[0]
        if not ready:
            break
        try:
            data = os.read(parent, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    process.wait(timeout=30)
    os.close(parent)
    return out


def test_long_output_on_a_terminal_goes_through_the_pager_wrapped_to_its_width(
    seeded_db: Path, tmp_path: Path
) -> None:
    paged = tmp_path / "paged.txt"
    pager = tmp_path / "fake-pager"
    pager.write_text(f"#!/bin/sh\ncat > {paged}\n")
    pager.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["PAGER"] = str(pager)
    show = [*KB, "--db", str(seeded_db), "show", "46a1fcb95e0d367e"]
    shown = in_terminal(show, rows=10, cols=70, env=env)
    coloured = paged.read_text()
    assert "\x1b[" in coloured  # a terminal gets colour, through the pager too (less -R)
    text = re.sub(r"\x1b\[[0-9;]*m", "", coloured)
    assert "What it means" in text and "Solutions" in text
    assert b"What it means" not in shown  # it went to the pager, not around it
    meaning = text.split("What it means\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(meaning) > 2 and max(len(line) for line in meaning) <= 68  # 70 columns, less 2
    # --no-pager, or a screen tall enough, prints directly; off a terminal nothing is paged.
    paged.unlink()
    direct = in_terminal([*show, "--no-pager"], rows=10, cols=70, env=env)
    assert b"What it means" in direct and not paged.exists()
    tall = in_terminal(show, rows=500, cols=70, env=env)
    assert b"What it means" in tall and not paged.exists()


@pytest.mark.parametrize(
    ("flags", "env", "coloured"),
    [
        ([], {}, False),  # not a terminal
        (["--color", "always"], {}, True),
        (["--color", "always"], {"NO_COLOR": "1"}, True),  # an explicit flag wins
        ([], {"FORCE_COLOR": "1"}, True),
        ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        (["--color", "never"], {"FORCE_COLOR": "1"}, False),
    ],
)
def test_colour_follows_the_flag_then_no_color_then_force_color(
    seeded_db: Path, flags: list[str], env: dict[str, str], coloured: bool
) -> None:
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    done = subprocess.run(
        [*KB, "--db", str(seeded_db), "show", "46a1fcb95e0d367e", *flags],
        capture_output=True,
        text=True,
        env={**base, **env},
    )
    assert ("\x1b[" in done.stdout) is coloured


def test_match_reads_the_clipboard_through_the_platforms_tool(
    seeded_db: Path, tmp_path: Path
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "ci.log"
    log.write_text(CI_LOG)
    xclip = tools / "xclip"
    xclip.write_text(f"#!/bin/sh\ncat {log}\n")
    xclip.chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:/usr/bin:/bin"}
    done = subprocess.run(
        [*KB, "--db", str(seeded_db), "match", "--clipboard", "--brief"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "46a1fcb95e0d367e" in done.stdout
    xclip.unlink()
    none = subprocess.run(
        [*KB, "--db", str(seeded_db), "match", "--clipboard"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert none.returncode == 2
    assert "cannot read the clipboard: none of pbpaste, wl-paste, xclip" in none.stderr


def test_shell_completion_offers_ids_repositories_and_tags_from_the_knowledge_base(
    seeded_db: Path,
) -> None:
    def complete(words: str) -> list[str]:
        env = {
            **os.environ,
            "_KB_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - 1),
        }
        done = subprocess.run([*KB], capture_output=True, text=True, env=env)
        return [line.split(",", 1)[1] for line in done.stdout.splitlines() if line]

    db = f"kb --db {seeded_db}"
    assert complete(f"{db} show 46a1") == ["46a1fcb95e0d367e"]
    assert complete(f"{db} show unknown-kv") == [seed_slug()]
    assert complete(f"{db} search --repo vllm") == ["vllm-project/vllm"]
    assert complete(f"{db} search --tag kv") == ["kv-cache"]
    assert complete(f"{db} show zzz") == []


def test_shell_completion_reads_a_knowledge_base_whose_path_reads_as_a_uri_escape(
    seeded_db: Path, tmp_path: Path
) -> None:
    """The file is opened by a quoted file: URI: "#" and "%41" in its folder's name are part of
    the path, not a fragment or an escape for "A" (which named another file, or none)."""
    import shutil

    from kb.complete import candidates

    odd = tmp_path / "odd #x %41 name"
    odd.mkdir()
    copy = odd / "kb.sqlite3"
    shutil.copyfile(seeded_db, copy)
    assert candidates("record", "46a1", str(copy)) == ["46a1fcb95e0d367e"]


def seed_slug() -> str:
    from tests.conftest import seed_record

    return str(seed_record()["slug"])


def test_search_lists_as_json_lines_and_csv(seeded_db: Path) -> None:
    base = [*KB, "--db", str(seeded_db), "search", "kv cache group"]
    nl = subprocess.run([*base, "--nl"], capture_output=True, text=True).stdout.splitlines()
    assert [json.loads(line)["id"] for line in nl] == ["46a1fcb95e0d367e"]
    csv_text = subprocess.run([*base, "--csv"], capture_output=True, text=True).stdout
    header, row = csv_text.splitlines()[:2]
    assert header == "id,score,repo,slug,errorClass,errorCode,errorMessage"
    assert row.startswith("46a1fcb95e0d367e,")


def test_a_csv_cell_never_starts_a_spreadsheet_formula() -> None:
    from kb.compact import _cell

    assert _cell("=HYPERLINK(1)") == "'=HYPERLINK(1)"
    assert _cell("-1+1") == "'-1+1"
    assert _cell("ValueError") == "ValueError"


# A `kb` whose fetch from the database and whose build of the matcher index each take 1.5 s
# more than they would: the first match on a machine without the index, made slow enough to
# need saying, as it is at 70k records.
SLOW_INDEX_KB = """\
import sys, time
import kb.matcher.build as build
import kb.shared_index as shared
from kb.cli import cli

def slowly(step):
    def slow(*args, **kwargs):
        time.sleep(1.5)
        return step(*args, **kwargs)
    return slow

shared._fetch_into = slowly(shared._fetch_into)
build.write_index = slowly(build.write_index)
cli(prog_name="kb")
"""


@pytest.mark.parametrize(("opening", "closing"), [("Fetching", "Fetched"), ("Building", "Built")])
def test_the_first_match_without_an_index_says_so_and_reports_its_true_time(
    seeded_db: Path, tmp_path: Path, opening: str, closing: str
) -> None:
    """A machine without the matcher index (another user imported): fetching it from the
    database, or building it when none is stored there, is said on the terminal while it
    happens, and the summary's time includes that wait."""
    import sqlite3

    if opening == "Building":  # nothing stored in the database either: this machine builds it
        with sqlite3.connect(seeded_db) as conn:
            conn.execute("DELETE FROM matcher_index")
    log = tmp_path / "ci.log"
    log.write_text(CI_LOG)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "a-new-machine"), "NO_COLOR": "1"}
    argv = [sys.executable, "-c", SLOW_INDEX_KB, "--db", str(seeded_db), "match", str(log)]
    started = time.perf_counter()
    shown = in_terminal([*argv, "--no-pager"], rows=50, cols=120, env=env).decode()
    took_ms = (time.perf_counter() - started) * 1000
    lines = shown.replace("\r\n", "\n").splitlines()
    said = [n for n, line in enumerate(lines) if line.startswith(f"{opening} the matcher")]
    done = [n for n, line in enumerate(lines) if line.startswith(f"{closing} the matcher")]
    assert said and done and said[0] < done[0], shown
    waited = re.search(r"in (\d+\.\d) s\.", lines[done[0]])
    assert waited is not None and float(waited[1]) >= 1.5
    summary = re.search(r"1 known error in .*ci\.log \(.*?, (\d+) ms, \d+ of them (\w+) ", shown)
    assert summary is not None, shown
    assert float(waited[1]) * 1000 - 50 <= int(summary[1]) <= took_ms
    assert summary[2] == opening.lower()
    # not on a terminal: no status lines, the same true time
    if opening == "Building":
        with sqlite3.connect(seeded_db) as conn:
            conn.execute("DELETE FROM matcher_index")
    env["XDG_CACHE_HOME"] = str(tmp_path / "yet-another-machine")
    piped = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert piped.returncode == 0, piped.stderr
    assert "the matcher index" not in piped.stderr
    quiet = re.search(r"\(.*?, (\d+) ms", piped.stdout)
    assert quiet is not None and int(quiet[1]) >= 1500
