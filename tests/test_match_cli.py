"""`kb match` from the command line: formats, exit codes, stdin, and the quick cold path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kb import quick
from kb.config import cache_dir_for
from tests.conftest import SEED

LOG = (
    "2026-11-29T10:00:00Z INFO starting worker\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/app/.venv/lib/python3.11/site-packages/vllm/config/attention.py", line 169, '
    "in validate_backend_per_kind_before\n"
    "    raise ValueError(\n"
    "ValueError: Unknown KV cache group kind 'ful_attention' in backend_per_kind. Valid kinds "
    "are: chunked_local_attention, full_attention, mamba, sliding_window.\n"
    "2026-11-29T10:00:01Z INFO shutting down\n"
)
CLEAN = "2026-11-29T10:00:00Z INFO all good\n2026-11-29T10:00:01Z INFO 0 errors\n"


@pytest.fixture
def seeded(invoke: Any) -> Any:
    assert invoke("import", str(SEED)).exit_code == 0
    return invoke


def test_match_text_shows_the_error_its_fix_and_the_did_you_mean(
    seeded: Any, tmp_path: Path
) -> None:
    log = tmp_path / "app.log"
    log.write_text(LOG)
    result = seeded("match", str(log))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"1 known error in {log} (6 lines against 1 record,")
    assert "1. line 5: ValueError: Unknown KV cache group kind 'ful_attention'" in out
    assert "frame:vllm/config/attention.py:169" in out
    assert "captured: kind = 'ful_attention'" in out
    assert "did you mean 'full_attention'?" in out
    assert "What it means" in out and "Solutions\n     1. Use one of the valid kinds" in out
    assert "Example fix" in out and "More: kb show 46a1fcb95e0d367e" in out


def test_match_json_follows_the_contract(seeded: Any) -> None:
    result = seeded("match", "--json", input=LOG)
    assert result.exit_code == 0
    out = json.loads(result.stdout)
    assert set(out) == {"matches", "unmatched", "stats"}
    assert out["unmatched"] == []  # always there, empty when every error line is known
    (match,) = out["matches"]
    assert match["id"] == "46a1fcb95e0d367e" and match["method"] == "pattern"
    assert (match["line"], match["end_line"]) == (5, 5)
    assert match["captures"][0] == "ful_attention"
    assert "pattern" in match["evidence"]
    assert match["record"]["githubUrl"].startswith("https://github.com/vllm-project/vllm/")
    assert {"lines", "records", "candidates", "elapsed_ms"} <= set(out["stats"])


def test_nothing_found_exits_1_and_json_is_still_printed(seeded: Any) -> None:
    result = seeded("match", "--format", "json", input=CLEAN)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["matches"] == []
    text = seeded("match", input=CLEAN)
    assert text.exit_code == 1
    assert text.stdout.startswith("No known error in the pasted text (2 lines")


UNKNOWN = (
    "2026-11-29T10:00:00Z INFO starting worker\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/app/.venv/lib/python3.11/site-packages/vllm/engine/rotor.py", line 88, in spin\n'
    "vllm.errors.RotorError: the KV cache rotor jammed on backend_per_kind\n"
)


def test_a_traceback_no_record_explains_is_listed_with_suggestions_not_left_bare(
    seeded: Any,
) -> None:
    text = seeded("match", input=UNKNOWN)
    assert text.exit_code == 1  # still "no known error"
    out = text.stdout
    assert out.startswith("No known error in the pasted text (4 lines")
    assert "1 error line no record explains" in out.splitlines()[0]
    assert "Not recognised" in out
    assert "line 4: vllm.errors.RotorError: the KV cache rotor jammed" in out
    assert "raised at vllm/engine/rotor.py:88" in out
    assert "maybe 46a1fcb95e0d367e" in out  # kb search finds the seed record by its words
    data = json.loads(seeded("match", "--json", input=UNKNOWN).stdout)
    (entry,) = data["unmatched"]
    assert entry["line"] == 4 and entry["error_class"] == "vllm.errors.RotorError"
    assert entry["frame"] == "vllm/engine/rotor.py:88"
    assert [s["id"] for s in entry["suggestions"]] == ["46a1fcb95e0d367e"]
    markdown = seeded("match", "--format", "markdown", input=UNKNOWN).stdout
    assert "## Not recognised" in markdown and "`vllm/engine/rotor.py:88`" in markdown


def test_markdown_is_ready_for_a_ticket(seeded: Any) -> None:
    out = seeded("match", "--format", "markdown", input=LOG).stdout
    assert out.startswith("# 1 known error in the pasted text")
    assert "## 1. Line 5" in out
    assert "### ValueError: Unknown KV cache group kind" in out


def test_min_score_above_every_match_reports_nothing(seeded: Any) -> None:
    assert seeded("match", "--min-score", "0.999", input=LOG).exit_code == 1


def test_log_text_is_made_safe_before_it_is_printed(seeded: Any) -> None:
    hostile = LOG.replace("ful_attention", "ful_attention\x1b]0;pwned\x07\x1b[2J")
    out = seeded("match", input=hostile).stdout
    assert "\x1b" not in out and "\x07" not in out
    assert "pwned" not in out


def test_missing_log_file_exits_2(seeded: Any, tmp_path: Path) -> None:
    result = seeded("match", str(tmp_path / "nope.log"))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {tmp_path / 'nope.log'}: cannot read")


def test_cold_quick_path_and_full_path_give_the_same_answer(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    kb = [sys.executable, "-m", "kb"]
    subprocess.run([*kb, "import", "-q", str(SEED)], env=env, check=True)
    url = f"sqlite:///{db.resolve()}"
    reader = quick.QuickReader.open(url)
    assert reader is not None  # the database qualifies for the quick path
    reader.close()
    quick_run = subprocess.run(
        [*kb, "match", "--json"], input=LOG, text=True, env=env, capture_output=True, check=True
    )
    # Without a cache the full path (SQLAlchemy, schema checks) rebuilds it.
    for cached in cache_dir_for(url).glob("*"):
        cached.unlink()
    full_run = subprocess.run(
        [*kb, "match", "--json"], input=LOG, text=True, env=env, capture_output=True, check=True
    )
    assert json.loads(quick_run.stdout)["matches"] == json.loads(full_run.stdout)["matches"]
    assert json.loads(quick_run.stdout)["matches"][0]["id"] == "46a1fcb95e0d367e"


# Runs the CLI as `kb ARGS...` and writes the names of every module it imported to a file.
LIST_MODULES_AT_EXIT = (
    "import atexit, json, sys\n"
    "out = sys.argv[1]\n"
    "atexit.register(lambda: open(out, 'w').write(json.dumps(sorted(sys.modules))))\n"
    "sys.argv = ['kb', *sys.argv[2:]]\n"
    "from kb.cli import main\n"
    "main()\n"
)
# What a cold `kb match` has no use for: the database layer and the matcher's build; and,
# unless a near miss is tried, the near-miss search (with kb.patterns, which reads templates).
NOT_ON_THE_COLD_PATH = {"sqlalchemy", "alembic", "kb.knowledge", "kb.matcher.build"}
NEAR_MISS_SEARCH = {"rapidfuzz", "kb.matcher.fuzzy", "kb.patterns"}


@pytest.mark.parametrize("reworded", [False, True], ids=["exact", "reworded"])
def test_a_cold_match_imports_no_database_layer_no_build_and_no_near_miss_search_unless_tried(
    tmp_path: Path, reworded: bool
) -> None:
    db = tmp_path / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db))
    subprocess.run([sys.executable, "-m", "kb", "import", "-q", str(SEED)], env=env, check=True)
    log = tmp_path / "app.log"
    # a valid kind: no "did you mean" (which needs rapidfuzz)
    exact = LOG.replace("ful_attention", "full_attention")
    # the message alone, reworded: nothing but a near miss can find it
    (line,) = [line for line in exact.splitlines() if line.startswith("ValueError")]
    log.write_text(
        line.replace("Unknown KV cache group kind", "No such KV cache group type")
        if reworded
        else exact
    )
    modules_file = tmp_path / "modules.json"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            LIST_MODULES_AT_EXIT,
            str(modules_file),
            "match",
            str(log),
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    out = json.loads(run.stdout)
    modules = set(json.loads(modules_file.read_text()))
    tops = {name.split(".")[0] for name in modules} | modules
    assert "kb.matcher.index" in modules  # the quick path loaded the matcher and matched
    assert tops & NOT_ON_THE_COLD_PATH == set()
    if reworded:
        assert out["stats"]["fuzzy_queries"] >= 1
        assert tops >= NEAR_MISS_SEARCH
    else:
        assert [m["id"] for m in out["matches"]] == ["46a1fcb95e0d367e"]
        assert out["stats"]["fuzzy_queries"] == 0
        assert tops & NEAR_MISS_SEARCH == set()


def test_match_on_a_database_at_an_old_schema_exits_3(invoke: Any, db_path: Path) -> None:
    from alembic import command

    from kb import db

    engine = db.make_engine(f"sqlite:///{db_path}")
    with engine.begin() as conn:
        config = db._alembic_config(engine)
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
    result = invoke("match", input=LOG)
    assert result.exit_code == 3
    assert "Run `kb db upgrade`" in result.stderr


def test_matching_against_an_empty_knowledge_base_says_what_to_do(invoke: Any) -> None:
    result = invoke("match", input="ValueError: boom\n")
    assert result.exit_code == 1
    assert result.stdout.startswith("No known error in the pasted text (1 line against 0 records")
    assert "The knowledge base is empty: import a dataset first (kb import PATH)." in result.stderr
