"""Whether a text is a link as upstream's schema takes one: what a WHATWG URL parser
(JavaScript's `new URL`, which upstream's zod `url()` calls) accepts. Records keep such links
as they are (kb.records, a record's githubUrl); only http(s) ones are shown as links.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

URL_SCHEME_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# WHATWG "special" schemes need a host (file: excepted); any other scheme takes anything.
HOST_SCHEMES: Final = frozenset({"http", "https", "ws", "wss", "ftp"})
URL_AUTHORITY_END_RE: Final = re.compile(r"[/\\?#]")
# The WHATWG URL standard's forbidden domain code points (C0 controls are checked apart).
FORBIDDEN_HOST_CHARS: Final = frozenset(" #%/:<>?@[\\]^|\x7f")
PORT_RE: Final = re.compile(r"[0-9]{0,5}")


def is_url(text: str) -> bool:
    """Whether a WHATWG URL parser (JavaScript's `new URL`, which upstream's zod `url()` calls)
    accepts `text`. kb keeps such links as they are; only http(s) ones are shown as links."""
    text = text.strip(_C0_AND_SPACE).translate(_TAB_NEWLINE)
    scheme = URL_SCHEME_RE.match(text)
    if scheme is None:
        return False
    if scheme.group()[:-1].lower() not in HOST_SCHEMES:
        return True
    rest = text[scheme.end() :].lstrip("/\\")
    authority = URL_AUTHORITY_END_RE.split(rest, maxsplit=1)[0]
    host_port = authority.rpartition("@")[2]
    if host_port.startswith("["):  # an IPv6 literal
        inside, bracket, port = host_port[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            return False
        try:
            ipaddress.IPv6Address(inside)
        except ValueError:
            return False
        return bool(PORT_RE.fullmatch(port[1:])) and int(port[1:] or 0) <= 0xFFFF
    host, _, port = host_port.partition(":")
    if not host or any(c in FORBIDDEN_HOST_CHARS or c < " " for c in host):
        return False
    return bool(PORT_RE.fullmatch(port)) and int(port or 0) <= 0xFFFF


_TAB_NEWLINE: Final = str.maketrans("", "", "\t\n\r")
_C0_AND_SPACE: Final = "".join(map(chr, range(0x21)))
