"""`kb serve` as a real process on a free loopback port, with a knowledge base of its own.

The session's knowledge base is the bundled sample dataset (data/) plus one hostile record
derived from the seed record: markup and script in every text field a page shows.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import seed_record

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
HOSTILE_ID = "badc0de5c0ffee00"
HOSTILE_SCRIPT = "<script>window.kbPwned=1</script>"
# The line of a log that matches the hostile record.
HOSTILE_LOG_LINE = f"zzgear.errors.GearboxJam: Gearbox {HOSTILE_SCRIPT} jammed at tooth 42"
TOKEN = "test-token-" + "x" * 24


def hostile_record() -> dict[str, Any]:
    """A valid record whose every shown text tries to break out of the page."""
    record = seed_record()
    record.update(
        id=HOSTILE_ID,
        repo="zz-hostile/gearbox",
        slug="gearbox-script-jammed",
        errorClass="GearboxJam",
        errorMessage=f"Gearbox {HOSTILE_SCRIPT} jammed at {{position}}",
        messagePattern="Gearbox <script>window\\.kbPwned=1</script> jammed at (.+?)",
        documentation=(
            f'The gearbox {HOSTILE_SCRIPT} jammed.\n\n<img src=x onerror="window.kbPwned=1">'
        ),
        solutions=[f"Open the </li></ol>{HOSTILE_SCRIPT} hatch", "Turn it \x1b[31moff\x1b[0m"],
        exampleFix=f"</code></pre>{HOSTILE_SCRIPT}",
        triggerScenarios="Opening \u202egpj.exe (a bidi override) or \u009b31m (an 8-bit CSI).",
        githubUrl='https://github.com/zz/gearbox/blob/main/g.py#"><script>x</script>',
        filePath="zzgear/gearbox.py",
        lineNumber=160,
        tags=["gearbox"],
    )
    return record


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    db: Path
    env: dict[str, str]

    def client(
        self, token: str | None = None, headers: dict[str, str] | None = None, **kwargs: Any
    ) -> httpx.Client:
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
        HOME=str(home),
        NO_COLOR="1",
    )
    env.pop("KB_DATABASE_URL", None)
    env.pop("KB_SERVE_TOKEN", None)
    return env


def kb_command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kb", *args], env=env, capture_output=True, text=True, check=False
    )


def make_knowledge_base(folder: Path, env: dict[str, str]) -> Path:
    """data/ and the hostile record, imported (and the matcher index built) by `kb import`."""
    folder.mkdir(parents=True, exist_ok=True)
    hostile = folder / "hostile.jsonl"
    hostile.write_text(json.dumps({"record": hostile_record()}) + "\n")
    db = folder / "kb.sqlite3"
    done = kb_command(env, "--db", str(db), "import", str(DATA), str(hostile), "--quiet")
    assert done.returncode == 0, done.stderr
    return db


def start_server(
    db: Path | str,
    env: dict[str, str],
    *args: str,
    timeout: float = 60,
    log_dir: Path | None = None,
) -> LiveServer:
    """`kb serve` on a free port; returns once /healthz answers (or fails with its output).
    `db` is a SQLite file or a database URL (then `log_dir` says where the log goes)."""
    port = free_port()
    log = (log_dir or Path(db).parent) / f"serve-{port}.log"
    token = next((args[i + 1] for i, a in enumerate(args) if a == "--token"), None)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kb", "--db", str(db), "serve", "--port", str(port), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(f"http://127.0.0.1:{port}", process, log, Path(db), env)
    deadline = time.monotonic() + timeout
    with server.client(token) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"kb serve exited with {process.returncode}:\n{server.output()}")
            try:
                if client.get("/healthz", timeout=2).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    server.stop()
    pytest.fail(f"kb serve did not answer /healthz in {timeout} s:\n{server.output()}")


@pytest.fixture(scope="session")
def serve_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve-home")


@pytest.fixture(scope="session")
def served_db(serve_home: Path) -> Path:
    return make_knowledge_base(serve_home / "kb", server_env(serve_home))


@pytest.fixture(scope="session")
def server(served_db: Path, serve_home: Path) -> Iterator[LiveServer]:
    """The plain server: loopback, no token, default limits."""
    live = start_server(served_db, server_env(serve_home))
    yield live
    live.stop()


@pytest.fixture
def private_db(served_db: Path, tmp_path: Path) -> Path:
    """A copy of the session's knowledge base that a test may change."""
    copy = tmp_path / "kb.sqlite3"
    shutil.copy(served_db, copy)
    return copy
