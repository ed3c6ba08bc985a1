"""kb.patterns: JavaScript messagePatterns made safe and fast to run, with their prefilter keys."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from kb.patterns import prepare, translate_js
from kb.relax import relax

FIXTURES = Path(__file__).parent / "fixtures" / "matcher"


def fixture_records() -> list[dict[str, object]]:
    with open(FIXTURES / "records.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_plain_pattern_keeps_its_longest_literal_as_the_first_key() -> None:
    prep = prepare(
        "Unrecognized model identifier: (.+?)\\. Should contain one of (.+?)",
        "Unrecognized model identifier: {model_type}. Should contain one of {', '.join(x)}",
    )
    assert prep.engine == "re2"
    assert prep.keys[0] == "Unrecognized model identifier:"
    assert ". Should contain one of" in prep.keys or "Should contain one of" in prep.keys
    assert prep.placeholder_names == ("model_type", None)
    assert not prep.generic
    assert prep.warning is None


@pytest.mark.parametrize(
    ("pattern", "keys", "line"),
    [
        (
            "\x00boom: the widget exploded",
            ("boom: the widget exploded",),
            "\x00boom: the widget exploded",
        ),
        (
            "the gadget\x00 melted into a (.+?) puddle",
            ("melted into a", "the gadget", "puddle"),
            "the gadget\x00 melted into a warm puddle",
        ),
        (  # the JavaScript escape is a NUL too
            "Unknown \\x00 byte in (.+?) stream",
            ("Unknown", "byte in", "stream"),
            "Unknown \x00 byte in the stream",
        ),
    ],
)
def test_keys_hold_no_nul_but_the_pieces_around_it(
    pattern: str, keys: tuple[str, ...], line: str
) -> None:
    # Hyperscan's bindings read a literal up to its first NUL: a key starting with one made
    # the whole index fail to compile (tests/fuzz_cli.py found it).
    prep = prepare(pattern, pattern)
    assert prep.keys == keys
    assert prep.regex is not None and re2.search(prep.regex, line)


def test_trailing_lazy_group_takes_the_whole_value_a_person_reads() -> None:
    prep = prepare("status code (.+?)", "status code {code}")
    assert prep.regex is not None
    m = re2.search(prep.regex, "HTTPError: status code 404 for url x")
    assert m is not None and m.group(1) == "404 for url x"


def test_leading_lazy_group_is_anchored_so_backtracking_cannot_go_quadratic() -> None:
    prep = prepare("(.+?) must be an int, but is of type (.+?)", "{name} must be an int, ...")
    assert prep.regex is not None and prep.regex.startswith("^(.*?)")
    m = re2.search(prep.regex, "batch_size must be an int, but is of type str")
    assert m is not None and m.group(1) == "batch_size" and m.group(2) == "str"


def test_javascript_named_groups_and_backreferences_translate_and_need_the_guard() -> None:
    prep = prepare(r"duplicate (?<name>\w+) and \k<name> again", "duplicate {name}")
    assert prep.regex == r"duplicate (?P<name>\w+) and (?P=name) again"
    assert prep.engine == "guarded"
    assert prep.placeholder_names == ("name",)
    relaxed = relax(prep.regex)
    assert relaxed is not None
    assert re2.search(relaxed, "duplicate foo and foo again")


def test_javascript_only_escapes_and_classes_translate_to_python_syntax() -> None:
    assert translate_js(r"a\/b") == "a/b"
    assert translate_js(r"\e") == "e"  # identity escape of a letter in JS
    assert translate_js(r"[^]") == r"[\s\S]"
    assert translate_js(r"\u0041\x42\u{43}") == "ABC"
    assert translate_js(r"a{b}") == r"a\{b\}"
    assert translate_js(r"x{2,3}") == "x{2,3}"


def test_lookaround_and_huge_repeat_are_guarded_not_invalid() -> None:
    assert prepare("(?=ab)abc literal text", "abc literal text").engine == "guarded"
    assert prepare("a{2000} and more text", "").engine == "guarded"


def test_invalid_pattern_warns_and_still_matches_through_its_message() -> None:
    prep = prepare("unclosed (group here", "Bad value {value} for option {option!r}")
    assert prep.engine == "invalid"
    assert prep.warning is not None and "not a valid regex" in prep.warning
    assert prep.from_message
    assert prep.regex is not None
    m = re2.search(prep.regex, "Bad value 3 for option 'x'")
    assert m is not None
    assert prep.placeholder_names == ("value", "option")


def test_empty_and_match_anything_patterns_never_stand_alone() -> None:
    anything = prepare("(.+?)", "{msg}")
    assert anything.generic and anything.literal_chars == 0 and not anything.keys
    assert prepare("(.+?) not found", "{x} not found").generic
    empty = prepare("", "")
    assert empty.engine == "invalid" and empty.regex is None


def test_multiline_message_records_which_line_holds_the_key() -> None:
    prep = prepare("first part (.+?)\\nsecond much longer part (.+?)", "first part {a}\n...")
    assert prep.newlines == 1
    assert prep.keys[0] == "second much longer part"
    assert prep.key_line == 1


def test_placeholder_names_read_like_the_template() -> None:
    prep = prepare(
        "(.+?) and (.+?) and (.+?) and (.+?)", "{self.kind!r} and {len(x)} and %s and %(k)s"
    )
    assert prep.placeholder_names == ("kind", "x", None, "k")


def test_every_fixture_pattern_runs_in_re2_and_matches_its_own_template() -> None:
    for rec in fixture_records():
        prep = prepare(str(rec["messagePattern"]), str(rec["errorMessage"]))
        assert prep.engine == "re2", rec["id"]
        assert prep.regex is not None and prep.keys
        compiled = re2.compile(prep.regex)
        # the template itself, placeholders as written, is one rendering of the message
        assert compiled.search(str(rec["errorMessage"])), rec["id"]


def test_prepare_is_cheap_enough_for_every_imported_record() -> None:
    records = fixture_records() * 40
    started = time.perf_counter()
    for rec in records:
        prepare(str(rec["messagePattern"]), str(rec["errorMessage"]))
    per_record = (time.perf_counter() - started) / len(records)
    assert per_record < 300e-6  # measured about 30 µs; generous for a loaded CI machine


@pytest.mark.parametrize(
    "pattern",
    ["(", "[", "a**", "\\", "(?<", "x{99999999999}", "(?P<1>x)", "[z-a]"],
)
def test_broken_patterns_never_raise(pattern: str) -> None:
    prep = prepare(pattern, "fallback message text {x}")
    assert prep.engine in ("invalid", "guarded", "re2")


@pytest.mark.parametrize(
    ("regex", "unbounded"),
    [
        (r"token (\w+) repeated as \1 here", False),  # one repeat: n steps a start
        (r"(\w+) vs (\w+) and \1", False),  # two: n^2 on a short span
        (r"(\w+)(\w+)(\w+)\1", True),  # three: n^3
        (r"(a+)+b", True),  # a repeat in a repeat: exponential
        (r"ValueError: (\w|\w)*(?=zzz)", True),  # an alternation in a repeat: exponential
        (r"((unclosed", True),  # not a regex at all
    ],
)
def test_only_patterns_a_backtracking_engine_runs_in_bounded_time_are_confirmed_by_it(
    regex: str, unbounded: bool
) -> None:
    from kb.patterns import backtracking_unbounded

    assert backtracking_unbounded(regex) is unbounded


# The characters that decide a pattern's shape: text, metacharacters, the escapes _fast_path
# reads as literals and those it does not (classes, backreferences, \x \u \c), and the pieces
# of the `(.+?)` group.
SHAPE_ALPHABET = "ab 09.*+?^${}()|[]\\dDwWbsxuc0n/"


@settings(max_examples=3000, deadline=None)
@given(
    st.text(alphabet=SHAPE_ALPHABET, max_size=24)
    | st.builds(
        "".join,
        st.lists(
            st.sampled_from(["(.+?)", "\\.", "\\d", "text ", "\\", "(", ".+?", "\\x41"]), max_size=8
        ),
    )
)
def test_never_warns_says_exactly_when_prepare_takes_its_fast_path(pattern: str) -> None:
    """The import skips prepare()'s warning check for patterns never_warns() passes: it must
    pass those _fast_path reads (prepare() reads no empty pattern so), and no other."""
    from kb.patterns import _fast_path, never_warns

    assert never_warns(pattern) == (pattern != "" and _fast_path(pattern) is not None)


def test_never_warns_fails_a_long_pattern_at_once() -> None:
    """No backtracking through a run of text before the part that is not plain: a regex that
    gave characters back would take seconds for 26 of them (twice as long for each more)."""
    from kb.patterns import never_warns

    for run in ("a" * 26, "a" * 200_000):  # the short run first: a bad regex ends the test
        for tail in ("\\d", "(", "[a]", "\\"):
            started = time.perf_counter()
            assert not never_warns(run + tail)
            assert time.perf_counter() - started < 0.5, (len(run), tail)
        assert never_warns(run + "(.+?)")
