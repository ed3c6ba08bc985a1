"""Fetching over HTTP(S) without trusting the server: redirects only within the same origin
(scheme, host and port), a body never longer than it may be, a server that trickles or stalls
cut off, and a body cut short detected. Every failure is an InputError naming the URL."""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from typing import IO, Any, Final, cast
from urllib.parse import urlsplit

from kb.errors import InputError

TIMEOUT_S: Final = 60  # one blocking connect or read: a server that says nothing this long
# A server may be slow, not endless: after a grace period, a body must keep arriving at a
# pace any real link manages (a 1-byte-every-5-s server kept an import going for ever).
GRACE_S: Final = 60.0
MIN_BYTES_PER_S: Final = 16 << 10
# The most a body with no size announced in a manifest may hold. Upstream's largest file (the
# per-repository records of pytorch, ~16k records) is about 80 MB; a whole 150k-record JSONL
# export is about 700 MB.
MAX_BODY_BYTES: Final = 2 << 30


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to the same scheme, host and port."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        old, new = urlsplit(req.full_url), urlsplit(newurl)
        if (old.scheme, old.netloc) != (new.scheme, new.netloc):
            raise InputError(
                f"{req.full_url}: redirected to another host ({new.scheme}://{new.netloc}); refused"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameOrigin)


def fetch(url: str, max_bytes: int | None = None) -> IO[bytes]:
    """An open body; InputError when it cannot be fetched."""
    try:
        response = _OPENER.open(
            urllib.request.Request(url, headers={"User-Agent": "kb"}), timeout=TIMEOUT_S
        )
    except urllib.error.HTTPError as exc:
        raise InputError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(f"{url}: cannot fetch: {reason}") from exc
    body = GuardedBody(response, url, MAX_BODY_BYTES if max_bytes is None else max_bytes)
    return cast(IO[bytes], body)  # it reads, closes and is a context manager: all callers use


class GuardedBody:
    """A response body read with its limits kept (see the module's docstring)."""

    def __init__(self, response: Any, url: str, max_bytes: int) -> None:
        self._response = response
        self._url = url
        self._max = max_bytes
        length = response.headers.get("Content-Length")
        self._length = int(length) if length and length.isdigit() else None
        if self._length is not None and self._length > max_bytes:
            response.close()
            raise InputError(
                f"{url}: announces {self._length:,} bytes, more than the {max_bytes:,} allowed"
            )
        self._count = 0
        self._started = time.monotonic()

    def read(self, size: int = -1, /) -> bytes:
        try:
            # read1: what has arrived (up to size), so the pace is checked as the body comes
            data: bytes = self._response.read1(size if size >= 0 else 1 << 20)
        except (OSError, http.client.HTTPException) as exc:
            raise InputError(f"{self._url}: the connection broke off: {exc!r:.120}") from exc
        self._count += len(data)
        if self._count > self._max:
            raise InputError(f"{self._url}: longer than the {self._max:,} bytes allowed; refused")
        elapsed = time.monotonic() - self._started
        if elapsed > GRACE_S and self._count < MIN_BYTES_PER_S * elapsed and data:
            raise InputError(
                f"{self._url}: arriving too slowly ({self._count / elapsed:,.0f} bytes/s after "
                f"{elapsed:.0f} s); gave up"
            )
        if not data and self._length is not None and self._count < self._length:
            raise InputError(
                f"{self._url}: cut short: {self._count:,} of {self._length:,} bytes arrived"
            )
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._response.close()

    def __enter__(self) -> GuardedBody:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
