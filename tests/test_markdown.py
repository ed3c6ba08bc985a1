"""`--format markdown` renders right: what a ticket shows is the dataset's literal text.

The output of `kb show` and `kb match` for a record full of markdown's traps (dunder names,
underscores in identifiers, `*`, backticks inside code spans, raw HTML, `javascript:` links)
goes through a real CommonMark renderer (markdown-it-py, with GitHub's tables and
strikethrough), and the HTML is checked for what a reader would see.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tests.conftest import seed_record
from tests.test_import import write_jsonl

HOSTILE_ID = "00000000000000f1"
# The message as raised: every trap a message can hold, and one placeholder.
MESSAGE = (
    "Cannot import pkg/__init__.py: my_var_name is a*b*c, not `tick` or ``two``; "
    "<script>alert(1)</script> [x](javascript:alert(1)) &lt;b&gt; ~~gone~~ {name}"
)
LOG_LINE = MESSAGE.replace("{name}", "__dunder__")


def hostile_record() -> dict[str, Any]:
    literal = re.sub(r"([.^$*+?()\[\]{}|\\/])", r"\\\1", MESSAGE.replace("{name}", "\0"))
    return dict(
        seed_record(),
        id=HOSTILE_ID,
        slug="hostile-markdown",
        repo="acme/__init__",
        errorClass="Weird_Error__Name__",
        errorCode="E`1_x`",
        errorMessage=MESSAGE,
        messagePattern=literal.replace("\0", "(.+?)"),
        filePath="pkg/__init__.py",
        githubUrl="javascript:alert(5)",
        documentation=(
            "Raised by __init__.py when my_var_name holds *args or **kwargs. "
            "Use `a_b` or ``x ` y``; see [docs](javascript:alert(2)) and "
            "<script>alert(3)</script>."
        ),
        triggerScenarios="Importing __main__ with snake_case_names and 2*3*4.",
        commonSituations="<img src=x onerror=alert(4)> in a __dunder__ name.",
        solutions=[
            "Rename __init__.py to `__main__.py`.",
            "Never call [run](javascript:alert(6)) on my_var_name.",
        ],
        preventionTips=["Keep **kwargs and *args apart: a_b_c."],
        exampleFix="```\nbreak_out = True\n```\n<script>alert(7)</script>",
    )


def render(markdown: str) -> str:
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    return str(parser.render(markdown))


def visible(rendered: str) -> str:
    """The text a reader sees: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", rendered))


LABELS = {"Repository:", "Raised at:", "Code:", "Record:"}


def assert_renders_literally(markdown: str) -> None:
    rendered = render(markdown)
    assert "<script" not in rendered.lower() and "<img" not in rendered.lower(), rendered
    assert not re.search(r"""(href|src)\s*=\s*["']?\s*javascript:""", rendered, re.I), rendered
    assert "<del>" not in rendered and "<s>" not in rendered
    # Emphasis comes from kb's own labels only, never from the dataset's underscores or stars.
    emphasised = re.findall(r"<(strong|em)>(.*?)</\1>", rendered, re.S)
    assert {text for _tag, text in emphasised} <= LABELS | {"Error"}, emphasised
    text = visible(rendered)
    for literal in (
        "pkg/__init__.py",
        "my_var_name is a*b*c",
        "<script>alert(1)</script>",
        "[x](javascript:alert(1))",
        "&lt;b&gt;",
        "~~gone~~",
        "Weird_Error__Name__",
        "__init__.py when my_var_name holds *args or **kwargs",
        "<script>alert(3)</script>",
        "[docs](javascript:alert(2))",
        "snake_case_names and 2*3*4",
        "<img src=x onerror=alert(4)> in a __dunder__ name",
        "Rename __init__.py to __main__.py.",
        "[run](javascript:alert(6)) on my_var_name",
        "**kwargs and *args apart: a_b_c",
        "break_out = True",
        "<script>alert(7)</script>",
    ):
        assert literal in text, (literal, text)
    codes = [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", rendered, re.S)]
    assert "E`1_x`" in codes, codes  # a code span holding backticks keeps them
    assert "a_b" in codes and "x ` y" in codes  # the prose's own code spans stay code


@pytest.fixture
def hostile(invoke: Any, tmp_path: Path) -> Any:
    write_jsonl(tmp_path / "in.jsonl", [hostile_record(), seed_record()])
    assert invoke("import", str(tmp_path / "in.jsonl")).exit_code == 0
    return invoke


def test_show_markdown_renders_the_records_text_literally(hostile: Any) -> None:
    result = hostile("show", HOSTILE_ID, "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert_renders_literally(result.stdout)


def test_match_markdown_renders_the_log_and_the_record_literally(
    hostile: Any, tmp_path: Path
) -> None:
    log = tmp_path / "hostile.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/zz_lib/__init__.py", line 7, in <module>\n'
        "zz_lib.errors.Rotor_Error: rotor `x` jammed in __main__ <script>alert(8)</script>\n"
        "INFO retrying\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/app/pkg/__init__.py", line 169, in <module>\n'
        f"Weird_Error__Name__: {LOG_LINE}\n"
    )
    result = hostile("match", str(log), "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert HOSTILE_ID in result.stdout
    assert_renders_literally(result.stdout)
    text = visible(render(result.stdout))
    assert "rotor `x` jammed in __main__ <script>alert(8)</script>" in text
    assert "__dunder__" in text
    assert "(raised at zz_lib/__init__.py:7)" in text  # a frame in a code span, unescaped
