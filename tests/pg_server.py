"""A throw-away PostgreSQL server for the tests: `initdb` into a temporary folder, started with
`pg_ctl` on a free loopback port, stopped and removed at the end. Runs as the unprivileged
`postgres` user when the tests run as root (PostgreSQL refuses to run as root).

Password authentication over TCP (scram-sha-256), so tests can try wrong credentials; the
server is tuned for throw-away data (no fsync), never for anything that must last.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

USER = "kb"
PASSWORD = "kb-test-pw"  # a throw-away cluster on loopback, removed after the run


class Unavailable(RuntimeError):
    """No PostgreSQL server could be started here; the message says why."""


@dataclass
class PgServer:
    port: int
    folder: Path
    bindir: Path
    run_as: str | None
    _admin: Any = None  # one autocommit connection for CREATE / DROP DATABASE

    def url(self, database: str = "postgres", *, password: str = PASSWORD) -> str:
        return (
            f"postgresql+psycopg://{USER}:{quote(password, safe='')}@127.0.0.1:{self.port}/"
            f"{database}"
        )

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """A new database (a copy of `template` when given: a template with kb's schema
        makes a test's database in a fraction of the time the schema takes to create)."""
        copy = f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""
        self._sql(f'CREATE DATABASE "{name}"{copy}')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self._sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _sql(self, statement: str) -> None:
        import psycopg

        if self._admin is None or self._admin.closed:
            dsn = f"host=127.0.0.1 port={self.port} user={USER} password={PASSWORD} dbname=postgres"
            self._admin = psycopg.connect(dsn, autocommit=True)
        self._admin.execute(statement.encode())

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
        _run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "stop"],
            self.run_as,
            check=False,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def find_bindir() -> Path | None:
    """Debian's versioned folder first (its pg_ctl is not on PATH), then PATH."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def start() -> PgServer:
    bindir = find_bindir()
    if bindir is None:
        raise Unavailable("PostgreSQL is not installed (no pg_ctl; apt-get install postgresql)")
    run_as = None
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            raise Unavailable("running as root and there is no 'postgres' user") from None
        run_as = "postgres"
    folder = Path(tempfile.mkdtemp(prefix="kb-pg-"))
    os.chmod(folder, 0o755)
    if run_as:
        shutil.chown(folder, run_as)
    password_file = folder / "pw"
    password_file.write_text(PASSWORD + "\n")
    if run_as:
        shutil.chown(password_file, run_as)
    port = _free_port()
    try:
        _run(
            [
                str(bindir / "initdb"),
                "-D",
                str(folder / "data"),
                "-U",
                USER,
                f"--pwfile={password_file}",
                "--auth-host=scram-sha-256",
                "--auth-local=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            run_as,
        )
        options = (
            f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        _run(
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(folder / "data"),
                "-o",
                options,
                "-l",
                str(folder / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            ],
            run_as,
        )
    except (subprocess.CalledProcessError, OSError) as exc:
        log = folder / "server.log"
        detail = log.read_text()[-2000:] if log.exists() else str(exc)
        shutil.rmtree(folder, ignore_errors=True)
        raise Unavailable(f"PostgreSQL did not start: {detail}") from exc
    return PgServer(port=port, folder=folder, bindir=bindir, run_as=run_as)


def _run(command: list[str], run_as: str | None, *, check: bool = True) -> None:
    if run_as:
        command = ["runuser", "-u", run_as, "--", *command]
    subprocess.run(command, check=check, capture_output=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
