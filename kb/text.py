"""Text as terminals see it: the escape sequences they obey, and the one way kb shortens text.

Logs arrive full of colour codes (kb.logtext strips them before reading), and dataset text must
lose any before it reaches a terminal (kb.render.safe): both use ANSI_RE.
"""

from __future__ import annotations

import re
from typing import Final

ANSI_RE: Final = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS/SOS/PM/APC strings
    r"|\x1b[@-Z\\-_]"  # two-byte sequences
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
ELLIPSIS: Final = "…"


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS
