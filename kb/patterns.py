"""Turn a dataset `messagePattern` (JavaScript regex syntax) into something safe and fast to run.

`prepare()` is called for every stored record, so the common shape (escaped literals and
`(.+?)` placeholders) takes a fast path that neither compiles nor parses a regex. Anything else is
translated from JavaScript syntax and parsed once with Python's regex parser (no compilation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from kb.regex import quietly

# The parser's opcodes (re._constants, re-exported by the parser module).
ANY = sre_parse.ANY
ASSERT = sre_parse.ASSERT
ASSERT_NOT = sre_parse.ASSERT_NOT
AT = sre_parse.AT
BRANCH = sre_parse.BRANCH
CATEGORY = sre_parse.CATEGORY
GROUPREF = sre_parse.GROUPREF
GROUPREF_EXISTS = sre_parse.GROUPREF_EXISTS
IN = sre_parse.IN
LITERAL = sre_parse.LITERAL
MAX_REPEAT = sre_parse.MAX_REPEAT
MIN_REPEAT = sre_parse.MIN_REPEAT
NEGATE = sre_parse.NEGATE
NOT_LITERAL = sre_parse.NOT_LITERAL
SUBPATTERN = sre_parse.SUBPATTERN

__all__ = [
    "GENERIC_LITERAL_CHARS",
    "MIN_KEY_CHARS",
    "PreparedPattern",
    "backtracking_unbounded",
    "message_pieces",
    "never_warns",
    "placeholder_name",
    "placeholder_names",
    "prepare",
    "translate_js",
]

# Fewer literal characters than this and a pattern says too little to name an error by itself
# ("(.+?) not found", "timed out"): it may add evidence but never wins alone.
GENERIC_LITERAL_CHARS = 12
# Prefilter keys shorter than this would hit most log lines; such patterns get no key of their
# own and are only tried through their longest piece if one exists.
MIN_KEY_CHARS = 3
# RE2 refuses counted repetitions above this.
RE2_MAX_REPEAT = 1000

# A placeholder may render empty (`{argname}` of "expression {column} {argname}should be"):
# the literals around it, in order, are what identifies the message.
_LAZY_ANY = "(.*?)"
# Tokens of the common pattern shape: escapes, the placeholder group, metacharacters, text.
_FAST_TOKEN = re.compile(r"\\(.)|(\(\.\+\?\))|([.*+?^${}()|\[\]])|([^\\.*+?^${}()|\[\]]+)", re.S)
_JS_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}
_CLASS_ESCAPES = frozenset("dDwWsSbB")
_REGEX_META = frozenset(".^$*+?{}[]()|\\")
_ESCAPES: dict[int, str] = {ord(c): "\\" + c for c in _REGEX_META}
_ESCAPES.update({i: f"\\x{i:02x}" for i in range(32)})
_ESCAPES.update({ord("\n"): "\\n", ord("\t"): "\\t", ord("\r"): "\\r", 0x7F: "\\x7f"})

# The whole of a pattern in the common shape: text, escapes `_fast_path` reads as literals, and
# `(.+?)`. One C-level fullmatch, for callers that only need to know prepare() will not warn.
# Runs of text are taken whole, and possessively (nothing is given back, so a pattern that
# fails fails at once): at 150,000 records the import's check took 1.1 s a character at a
# time, 0.2 s so.
_PLAIN_SHAPE = re.compile(r"(?:[^\\.*+?^${}()|\[\]]++|\\[^dDwWsSbB1-9xuc]|\(\.\+\?\))++", re.S)

# Placeholders of an errorMessage template, in the order the pattern's groups follow them.
_PLACEHOLDER = re.compile(
    r"\$\{(?P<js>[^{}]*)\}"
    r"|\{(?P<py>[^{}]*(?:\{[^{}]*\}[^{}]*)*)\}"
    r"|%\((?P<named>\w+)\)[-#0 +]*\d*(?:\.\d+)?[sdifrxXoeEgGcj]"
    r"|%[-#0 +]*\d*(?:\.\d+)?(?P<pos>[sdifjvrxXoeEgGcqpTtw])"
)
_IDENT_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_CONVERSION = re.compile(r"(?:![rsa])?(?::[^:()\[\]{}'\"]*)?$")
_WRAPPER_CALL = re.compile(r"(?:len|type|repr|str|int|float|list|tuple|sorted|set)\((.+)\)")


@dataclass(frozen=True, slots=True)
class PreparedPattern:
    """A messagePattern made ready for the matcher.

    regex: Python/RE2 syntax (None only when even the message text gave nothing to match).
    engine: "re2" (linear time), "guarded" (needs backtracking; run bounded), "invalid".
    keys: required literal pieces, best prefilter key first.
    key_line: how many newlines of the message come before keys[0] (messages can span lines).
    newlines: how many newlines the message spans.
    """

    regex: str | None
    engine: str
    keys: tuple[str, ...]
    literal_chars: int
    generic: bool
    placeholder_names: tuple[str | None, ...]
    warning: str | None = None
    key_line: int = 0
    newlines: int = 0
    groups: int = 0
    from_message: bool = False


def _escape(text: str) -> str:
    """Escape for both Python `re` and RE2 (only metacharacters, control characters spelled out)."""
    return text.translate(_ESCAPES)


def placeholder_name(expr: str) -> str | None:
    """The name a person would give a placeholder's value: `{self.kind!r}` -> "kind"."""
    expr = _CONVERSION.sub("", expr.strip()).strip()
    wrapped = _WRAPPER_CALL.fullmatch(expr)
    if wrapped:
        expr = wrapped.group(1).strip()
    if not _IDENT_PATH.fullmatch(expr):
        return None
    parts = [p for p in expr.split(".") if p not in ("self", "cls")]
    plain = [p for p in parts if not (p.startswith("__") and p.endswith("__"))]
    if plain:
        return plain[-1]
    return parts[-1] if parts else None


def placeholder_names(error_message: str) -> tuple[str | None, ...]:
    """One name (or None) per placeholder of an errorMessage template, in order."""
    names: list[str | None] = []
    for m in _PLACEHOLDER.finditer(error_message):
        if m.group("js") is not None:
            names.append(placeholder_name(m.group("js")))
        elif m.group("py") is not None:
            names.append(placeholder_name(m.group("py")) if m.group("py") else None)
        elif m.group("named") is not None:
            names.append(m.group("named"))
        else:
            names.append(None)
    return tuple(names)


def _js_escape_char(esc: str) -> str | None:
    """The literal character a one-character JavaScript escape stands for, or None if the escape
    is a class (\\d), an assertion (\\b) or a backreference (\\1)."""
    if esc in _JS_SIMPLE_ESCAPES:
        return _JS_SIMPLE_ESCAPES[esc]
    if esc in _CLASS_ESCAPES or esc.isdigit():
        return None
    # JavaScript (without the u flag) reads any other escaped character as itself: `\/`, `\e`.
    return esc


def _fast_path(pattern: str) -> tuple[list[str | None], bool] | None:
    """Split a pattern made only of literals and `(.+?)` groups into pieces (None = a group).

    Returns None when the pattern has any other regex syntax."""
    pieces: list[str | None] = []
    buf: list[str] = []
    pos = 0
    for m in _FAST_TOKEN.finditer(pattern):
        if m.start() != pos:
            return None
        pos = m.end()
        esc, group, meta, text = m.groups()
        if text is not None:
            buf.append(text)
        elif esc is not None:
            ch = _js_escape_char(esc)
            if ch is None or esc in "xuc":
                return None
            buf.append(ch)
        elif group is not None:
            if buf:
                pieces.append("".join(buf))
                buf = []
            pieces.append(None)
        else:
            del meta
            return None
    if pos != len(pattern):
        return None
    if buf:
        pieces.append("".join(buf))
    return pieces, True


def _keys_from_runs(runs: list[str]) -> tuple[tuple[str, ...], int, int]:
    """Required literal runs -> (keys best first, newlines before the best key, total newlines).

    Keys never span a newline: a message split over lines may arrive with prefixes between.
    Nor do they hold a NUL: Hyperscan's Python bindings read a literal up to its first NUL, so a
    key that began with one stopped the whole index from compiling (a single record's message
    did, found by tests/reliability/fuzz_cli.py); the pieces around it are required all the same."""
    lines_before = 0
    found: list[tuple[str, int]] = []
    for run in runs:
        parts = run.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines_before += 1
            for bit in part.split("\0") if "\0" in part else (part,):
                piece = bit.strip(" \t\r")
                if piece:
                    found.append((bit if len(piece) == len(bit) else piece, lines_before))
    if not found:
        return (), 0, lines_before
    order = sorted(range(len(found)), key=lambda i: (-len(found[i][0]), i))
    keys = tuple(dict.fromkeys(found[i][0] for i in order))
    return keys, found[order[0]][1], lines_before


def _from_pieces(
    pieces: list[str | None], error_message: str, warning: str | None, from_message: bool
) -> PreparedPattern:
    groups = sum(1 for p in pieces if p is None)
    out: list[str] = []
    last = len(pieces) - 1
    for i, piece in enumerate(pieces):
        if piece is not None:
            out.append(_escape(piece))
        elif i == 0 and last > 0:
            # An unanchored leading lazy group only ever captures the subject's start, and
            # backtracking engines retry it at every offset (quadratic): anchor it. Values at
            # either end may render empty (`f"...merge{detail}"`) or continue on the next line.
            out.append("^(.*?)")
        elif i == last and last > 0:
            # A trailing lazy group takes one character; a person reads the whole value.
            out.append("(.*)")
        else:
            out.append(_LAZY_ANY)
    runs = [p for p in pieces if p is not None]
    keys, key_line, newlines = _keys_from_runs(runs)
    literal = sum(len(r.strip()) for r in runs)
    regex = "".join(out) if runs or groups else None
    names = _names_for(error_message, groups)
    return PreparedPattern(
        regex=regex,
        engine="re2" if regex is not None else "invalid",
        keys=tuple(k for k in keys if len(k.strip()) >= MIN_KEY_CHARS) or keys[:1],
        literal_chars=literal,
        generic=literal < GENERIC_LITERAL_CHARS,
        placeholder_names=names,
        warning=warning,
        key_line=key_line,
        newlines=newlines,
        groups=groups,
        from_message=from_message,
    )


def _names_for(
    error_message: str, groups: int, named: dict[int, str] | None = None
) -> tuple[str | None, ...]:
    names = placeholder_names(error_message)
    result: list[str | None] = list(names) if len(names) == groups else [None] * groups
    for index, name in (named or {}).items():
        if 0 < index <= groups:
            result[index - 1] = name
    return tuple(result)


def translate_js(pattern: str) -> str:
    """Translate JavaScript regex syntax to Python `re` / RE2 syntax where the two differ."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n:
                out.append("\\\\")
                break
            nxt = pattern[i + 1]
            if nxt == "u" and i + 2 < n and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                digits = pattern[i + 3 : end] if end > 0 else ""
                if digits and all(c in "0123456789abcdefABCDEF" for c in digits):
                    out.append(_escape(chr(int(digits, 16))))
                    i = end + 1
                    continue
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", pattern[i + 2 : i + 6]):
                out.append(_escape(chr(int(pattern[i + 2 : i + 6], 16))))
                i += 6
                continue
            if nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", pattern[i + 2 : i + 4]):
                out.append(_escape(chr(int(pattern[i + 2 : i + 4], 16))))
                i += 4
                continue
            if nxt == "c" and i + 2 < n and pattern[i + 2].isalpha():
                out.append(_escape(chr(ord(pattern[i + 2]) % 32)))
                i += 3
                continue
            if nxt == "k" and not in_class and i + 2 < n and pattern[i + 2] == "<":
                end = pattern.find(">", i + 3)
                if end > 0:
                    out.append(f"(?P={pattern[i + 3 : end]})")
                    i = end + 1
                    continue
            if nxt.isdigit() and nxt != "0":
                out.append("\\" + nxt)  # backreference: RE2 cannot run it (guarded)
            elif nxt in _CLASS_ESCAPES and not (in_class and nxt in "bB"):
                out.append("\\" + nxt)
            elif in_class and nxt == "b":
                out.append("\\x08")
            elif nxt == "-" and in_class:
                out.append("\\-")
            else:
                literal = _js_escape_char(nxt)
                out.append(_escape(literal if literal is not None else nxt))
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
                out.append("]")
            elif ch == "[":
                out.append("\\[")  # literal in JS; Python warns of nested sets
            elif ch in "&~|" and i + 1 < n and pattern[i + 1] == ch:
                out.append("\\" + ch)  # Python reserves doubled set operators
            else:
                out.append(ch)
            i += 1
            continue
        if ch == "[":
            if pattern.startswith("[^]", i):
                out.append("[\\s\\S]")
                i += 3
                continue
            if pattern.startswith("[]", i):
                out.append("[^\\s\\S]")
                i += 2
                continue
            in_class = True
            out.append("[")
            if pattern.startswith("[^", i):
                out.append("^")
                i += 1
            i += 1
            if i < n and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        if (
            ch == "("
            and pattern.startswith("(?<", i)
            and not pattern.startswith(("(?<=", "(?<!"), i)
        ):
            out.append("(?P<")
            i += 3
            continue
        if ch == "{" and not re.match(r"\{\d+(?:,\d*)?\}", pattern[i:]):
            out.append("\\{")  # JavaScript reads a brace that is no quantifier as a literal
            i += 1
            continue
        if ch == "}" and not (out and re.search(r"\{\d+(?:,\d*)?$", "".join(out[-8:]))):
            out.append("\\}")
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


class _Walk:
    """Collects what the matcher needs from a parsed pattern: required literal runs and what
    keeps it out of RE2."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.buf: list[str] = []
        self.needs_backtracking = False
        self.nested_repeat = False  # a repeat or an alternation inside a repeat
        self.big_repeat = False
        self.repeats = 0  # repeats that may take more than one item

    def cut(self) -> None:
        if self.buf:
            self.runs.append("".join(self.buf))
            self.buf = []

    def seq(self, items: Any, required: bool, depth: int) -> None:
        for op, av in items:
            if op is LITERAL:
                if required:
                    self.buf.append(chr(av))
            elif op is SUBPATTERN:
                self.seq(av[-1], required, depth)
            elif op in (MAX_REPEAT, MIN_REPEAT) or str(op) == "POSSESSIVE_REPEAT":
                lo, hi, body = av
                if str(op) == "POSSESSIVE_REPEAT":
                    self.needs_backtracking = True
                if lo > RE2_MAX_REPEAT or (hi != sre_parse.MAXREPEAT and hi > RE2_MAX_REPEAT):
                    self.big_repeat = True
                if depth > 0:
                    self.nested_repeat = True
                if hi > 1:
                    self.repeats += 1
                self.cut()
                if lo == 1 and hi == 1:
                    self.seq(body, required, depth)
                else:
                    self.seq(body, required and lo >= 1, depth + 1)
                self.cut()
            elif op is BRANCH:
                if depth > 0:  # (a|a)* is as exponential as (a+)+
                    self.nested_repeat = True
                self.cut()
                for alt in av[1]:
                    self.seq(alt, False, depth)
                self.cut()
            elif op in (GROUPREF, GROUPREF_EXISTS, ASSERT, ASSERT_NOT) or str(op) == "ATOMIC_GROUP":
                self.needs_backtracking = True
                self.cut()
                if op in (ASSERT, ASSERT_NOT):
                    self.seq(av[1], False, depth)
                    self.cut()
            elif op is AT:
                continue
            elif op in (IN, ANY, NOT_LITERAL, CATEGORY, NEGATE):
                self.cut()
            else:
                self.cut()


def _slow_path(pattern: str, error_message: str) -> PreparedPattern | None:
    """Translate and parse a pattern with real regex syntax. None if it does not parse."""
    translated = translate_js(pattern)
    try:
        parsed = _parse(translated)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return None
    walk = _Walk()
    walk.seq(parsed, True, 0)
    walk.cut()
    keys, key_line, newlines = _keys_from_runs(walk.runs)
    literal = sum(len(r.strip()) for r in walk.runs)
    groups = parsed.state.groups - 1
    named = {index: name for name, index in parsed.state.groupdict.items()}
    engine = "guarded" if walk.needs_backtracking or walk.big_repeat else "re2"
    return PreparedPattern(
        regex=translated,
        engine=engine,
        keys=tuple(k for k in keys if len(k.strip()) >= MIN_KEY_CHARS) or keys[:1],
        literal_chars=literal,
        generic=literal < GENERIC_LITERAL_CHARS,
        placeholder_names=_names_for(error_message, groups, named),
        warning=None,
        key_line=key_line,
        newlines=newlines,
        groups=groups,
        from_message=False,
    )


def message_pieces(error_message: str) -> list[str | None]:
    """An errorMessage template as literal pieces and placeholders (None)."""
    pieces: list[str | None] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(error_message):
        if m.start() > pos:
            pieces.append(error_message[pos : m.start()])
        if not pieces or pieces[-1] is not None:
            pieces.append(None)
        pos = m.end()
    if pos < len(error_message):
        pieces.append(error_message[pos:])
    return pieces


def never_warns(message_pattern: str) -> bool:
    """True when `prepare()` takes its fast path for this pattern, so it has no warning."""
    return _PLAIN_SHAPE.fullmatch(message_pattern) is not None


def prepare(message_pattern: str, error_message: str) -> PreparedPattern:
    """Prepare one record's pattern; never raises. An invalid pattern falls back to a pattern
    derived from the message text and carries a warning."""
    fast = _fast_path(message_pattern) if message_pattern else None
    if fast is not None:
        return _from_pieces(fast[0], error_message, None, False)
    if message_pattern:
        slow = _slow_path(message_pattern, error_message)
        if slow is not None:
            return slow
        reason = _parse_error(message_pattern)
        warning = f"messagePattern is not a valid regex ({reason}); matching by the message text"
    else:
        warning = "messagePattern is empty; matching by the message text"
    fallback = _from_pieces(message_pieces(error_message), error_message, warning, True)
    if fallback.regex is not None and fallback.keys:
        # Still runnable (in RE2, through the message text); "invalid" tells the importer to warn.
        return replace(fallback, engine="invalid")
    return PreparedPattern(
        regex=None,
        engine="invalid",
        keys=(),
        literal_chars=0,
        generic=True,
        placeholder_names=(),
        warning=warning,
    )


def _parse(regex: str) -> Any:
    """Python's parse of a regex from a dataset, without the warnings it gives about the
    pattern ("Possible set difference" for `[a-z--]`, "Possible nested set" for `[[`): they
    reached the terminal of whoever imported such a record, as Python's own warning lines
    naming kb's source. None of the shared corpus's patterns gets here (the fast path takes
    them all), so the cost (1.5 us a parse) is paid only by unusual ones."""
    return quietly(lambda: sre_parse.parse(regex))


def _parse_error(pattern: str) -> str:
    try:
        _parse(translate_js(pattern))
    except Exception as exc:  # the reason is all we want here
        return str(exc)
    return "unsupported syntax"


# A backtracking engine may retry each repeat at every position: with k of them, n^k steps on
# an n-character span. Two on the 256 characters verify.py allows are 65k steps: bounded.
MAX_BACKTRACKING_REPEATS = 2


def backtracking_unbounded(regex: str) -> bool:
    """Whether a backtracking engine may take unbounded time on `regex`: a repeat holding a
    repeat or an alternation (exponential: `(a+)+`, `(\\w|\\w)*`), or more repeats than
    MAX_BACKTRACKING_REPEATS (polynomial of a high degree), or a pattern that does not parse."""
    try:
        walk = _Walk()
        walk.seq(_parse(regex), True, 0)
    except Exception:
        return True
    return walk.nested_repeat or walk.repeats > MAX_BACKTRACKING_REPEATS
