"""What one `kb serve` runs with, checked once, and carried to every worker process.

Plain standard library: the CLI builds and checks a `ServeConfig` before importing the web
stack, and uvicorn's worker processes read it back from the environment.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Final

from kb.errors import KbError

ENV_TOKEN: Final = "KB_SERVE_TOKEN"
# How the parent hands the checked settings to uvicorn's worker processes (they import the app
# by name, so they cannot be given an object).
ENV_CONFIG: Final = "KB_SERVE_CONFIG"

DEFAULT_MAX_BODY: Final = 5 * 1024 * 1024  # a pasted log; CI logs of a few MB still fit
DEFAULT_MAX_IMPORT_BODY: Final = 512 * 1024 * 1024  # the full export gzipped is ~13 MB a 70k
DEFAULT_MATCH_TIMEOUT: Final = 10.0  # seconds; paste.log takes ~20 ms, a 5 MB log ~0.3 s
MIN_TOKEN_CHARS: Final = 16  # a guessable token on a network port is no protection


class ServeError(KbError):
    """`kb serve` cannot start with these settings (exit 2)."""


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach: 127.0.0.0/8, ::1, `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


@dataclass(frozen=True)
class ServeConfig:
    db_url: str
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    token: str | None = field(default=None, repr=False)  # never in a log line or a traceback
    allow_import: bool = False
    max_body: int = DEFAULT_MAX_BODY
    max_import_body: int = DEFAULT_MAX_IMPORT_BODY
    match_timeout: float = DEFAULT_MATCH_TIMEOUT

    def check(self) -> ServeConfig:
        """The config if it is safe to serve with, else ServeError saying what to change."""
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise ServeError(
                f"the token is shorter than {MIN_TOKEN_CHARS} characters",
                hint='Make one with: python3 -c "import secrets; print(secrets.token_urlsafe(32))"',
            )
        if not is_loopback(self.host) and not self.token:
            raise ServeError(
                f"serving on {self.host} needs a token (--token or {ENV_TOKEN}): "
                "every request must carry it",
                hint="Or bind to 127.0.0.1 (the default) for this machine only.",
            )
        if self.allow_import and not self.token:
            raise ServeError(
                f"--allow-import needs a token (--token or {ENV_TOKEN}): imports must carry it"
            )
        return self

    def to_environment(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_environment(cls) -> ServeConfig:
        raw = os.environ.get(ENV_CONFIG)
        if not raw:
            raise ServeError(f"{ENV_CONFIG} is not set: start the server with `kb serve`")
        return cls(**json.loads(raw)).check()
