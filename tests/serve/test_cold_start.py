"""The CLI's cold start does not pay for the web stack: only `kb serve` imports it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.conftest import DATA, server_env

WEB_STACK = ("starlette", "uvicorn", "jinja2", "anyio", "httpx")

PROBE = """
import json, sys
from kb.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="kb")
except SystemExit:
    pass
loaded = sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(STACK)))
print("LOADED=" + json.dumps(loaded), file=sys.stderr)
"""


def loaded_after(env: dict[str, str], *args: str) -> list[str]:
    probe = PROBE.replace("STACK", repr(json.dumps(WEB_STACK)))
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], env=env, capture_output=True, text=True, check=False
    )
    line = next(line for line in done.stderr.splitlines() if line.startswith("LOADED="))
    return list(json.loads(line.removeprefix("LOADED=")))


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"], ["match", "--help"]])
def test_help_does_not_import_the_web_stack(tmp_path: Path, args: list[str]) -> None:
    assert loaded_after(server_env(tmp_path), *args) == []


def test_match_does_not_import_the_web_stack(served_db: Path, serve_home: Path) -> None:
    log = DATA / "logs" / "pytest_long_report.log"
    assert loaded_after(server_env(serve_home), "--db", str(served_db), "match", str(log)) == []


def test_the_probe_sees_the_web_stack_when_it_is_imported(tmp_path: Path) -> None:
    # The probe itself works: a command that does import Starlette is caught.
    env = server_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", "import kb.serve.app, sys; print('starlette' in sys.modules)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "True"
