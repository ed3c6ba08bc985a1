"""Docs that cannot drift: every command has help with an example and is in the README."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import pytest

from kb.cli import cli

README = (Path(__file__).parent.parent / "README.md").read_text()


def all_commands() -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = []
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            out.extend((f"{name} {sub}", c) for sub, c in command.commands.items())
        else:
            out.append((name, command))
    return out


@pytest.mark.parametrize(("name", "command"), all_commands())
def test_every_command_has_help_with_an_example(name: str, command: click.Command) -> None:
    assert command.help and "Example:" in command.help, name


@pytest.mark.parametrize(("name", "command"), all_commands())
def test_every_command_is_documented_in_the_readme(name: str, command: click.Command) -> None:
    assert re.search(rf"`kb {name}\b", README), f"kb {name} is missing from README.md"


def test_readme_opens_with_the_two_commands() -> None:
    head = README[:1500]
    assert ("kb match" in head and ".ci/run" in head) or "pytest" in head


def test_ci_runs_the_readme_test_command() -> None:
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    readme_commands = [line for line in README.splitlines() if line.startswith("python3 -m venv")]
    assert len(readme_commands) >= 2
    assert readme_commands[1] in ci.splitlines()


def test_readme_names_every_key_that_kb_match_json_emits(invoke: Any) -> None:
    from tests.conftest import SEED
    from tests.test_match_cli import LOG

    assert invoke("import", str(SEED)).exit_code == 0
    out = json.loads(invoke("match", "--json", input=LOG).stdout)
    keys = {*out, *out["stats"], *(key for match in out["matches"] for key in match)}
    # a line no record explains, with its traceback's frame and its search suggestions
    unknown = (
        'Traceback (most recent call last):\n  File "/venv/site-packages/vllm/x.py", line 3\n'
        "zzlib.errors.RotorError: the KV cache rotor jammed\n"
    )
    other = json.loads(invoke("match", "--json", input=unknown).stdout)
    assert other["unmatched"]
    for entry in other["unmatched"]:
        keys |= {*entry, *(key for hit in entry["suggestions"] for key in hit)}
    section = README[README.index("### `kb match") : README.index("### `kb search")]
    assert [k for k in sorted(keys) if f"`{k}`" not in section and f'"{k}"' not in section] == []


def test_readme_layout_gives_every_module_its_line() -> None:
    root = Path(__file__).parent.parent
    modules = sorted(str(path.relative_to(root)) for path in (root / "kb").rglob("*.py"))
    assert [m for m in modules if f"| `{m}` |" not in README] == []


def test_kb_help_lists_every_command_whole_and_names_example_files_that_exist() -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, ["--help"], terminal_width=80)
    commands = result.output.split("Commands:\n", 1)[1].splitlines()
    assert commands and not [line for line in commands if line.rstrip().endswith("...")]
    root = Path(__file__).parent.parent
    examples = result.output.split("Example:\n", 1)[1].split("\n\n", 1)[0]
    for line in examples.splitlines():
        for word in line.split()[2:]:
            assert (root / word).exists(), word
