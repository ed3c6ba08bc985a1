"""kb.logtext: logs read the way people paste them."""

from __future__ import annotations

import io

import pytest

from kb import logtext
from kb.logline import exception_of, parse_frame, strip_prefix, unrepr_message
from kb.logtext import blocks, split_lines


def test_ansi_colours_are_stripped() -> None:
    block = split_lines("\x1b[31mValueError\x1b[0m: bad \x1b]8;;http://x\x07link\x1b]8;;\x07\n")
    assert block.lines == ["ValueError: bad link"]


def test_crlf_and_old_mac_line_endings_keep_line_numbers() -> None:
    assert split_lines("a\r\nb\r\nc\r\n").lines == ["a", "b", "c"]
    block = split_lines("a\rb\rc")
    assert block.lines == ["a", "b", "c"]
    assert [block.line_no(i) for i in range(3)] == [1, 2, 3]


def test_progress_bar_carriage_returns_keep_every_drawn_segment_on_its_line() -> None:
    block = split_lines("start\n 10%\r 50%\rValueError: boom\nend\n")
    assert "ValueError: boom" in block.lines
    i = block.lines.index("ValueError: boom")
    assert block.line_no(i) == 2
    assert block.line_no(block.lines.index("end")) == 3


def test_lines_wrapped_at_80_columns_are_joined_with_their_first_line_number() -> None:
    message = "ValueError: " + "x" * 138
    wrapped = "\n".join([message[:80], message[80:160], "next line"]) + "\n"
    block = split_lines(wrapped, base=10)
    assert block.lines[0] == message
    assert block.line_no(0) == 10 and block.end_line_no(0) == 11
    assert block.lines[1] == "next line" and block.line_no(1) == 12


def test_unwrapped_logs_are_left_alone() -> None:
    text = "short\n" + "y" * 95 + "\nz\n"
    assert split_lines(text).lines == ["short", "y" * 95, "z"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("2026-03-14T08:00:00.000Z ERROR [worker-2] job failed: X", "job failed: X"),
        ("api-1  | 2026-03-14 08:00:00,123 ERROR boom", "boom"),
        ("E   ValueError: bad", "ValueError: bad"),
        ("INFO 03-14 08:00:01 [loggers.py:123] Engine 000: ok", "Engine 000: ok"),
        ("[12:00:01] WARNING: careful", "careful"),
        ("plain message", "plain message"),
    ],
)
def test_line_prefixes_are_not_in_the_way(line: str, message: str) -> None:
    assert strip_prefix(line) == message


@pytest.mark.parametrize(
    ("line", "path", "lineno", "style"),
    [
        ('  File "/x/site-packages/pandas/core/frame.py", line 7891, in set_index',
         "/x/site-packages/pandas/core/frame.py", 7891, "python"),
        ("File ~/venv/lib/python3.11/site-packages/pandas/core/frame.py:7891, in DataFrame.f(self)",
         "~/venv/lib/python3.11/site-packages/pandas/core/frame.py", 7891, "jupyter"),
        ("    at Object.<anonymous> (/app/node_modules/axios/lib/core/settle.js:19:12)",
         "/app/node_modules/axios/lib/core/settle.js", 19, "js"),
        ("    at /app/src/index.ts:5:3", "/app/src/index.ts", 5, "js"),
        ("\tat org.apache.kafka.Foo.bar(Foo.java:42)", "Foo.java", 42, "java"),
        ("\t/usr/local/go/src/net/http/server.go:3210 +0x1d",
         "/usr/local/go/src/net/http/server.go", 3210, "go"),
        ("thread 'main' panicked at src/main.rs:2:5:", "src/main.rs", 2, "rust"),
        ("   at Foo.Bar() in /src/Foo.cs:line 12", "/src/Foo.cs", 12, "csharp"),
        ("/app/lib/x.rb:12:in `foo'", "/app/lib/x.rb", 12, "ruby"),
    ],
)  # fmt: skip
def test_stack_frames_in_the_common_formats_are_parsed(
    line: str, path: str, lineno: int, style: str
) -> None:
    frame = parse_frame(line)
    assert frame is not None
    assert (frame.path, frame.line, frame.style) == (path, lineno, style)


def test_java_frame_path_comes_from_the_class_name() -> None:
    frame = parse_frame("\tat org.apache.kafka.Foo.bar(Foo.java:42)")
    assert frame is not None
    assert "org/apache/kafka/Foo.java" in list(frame.path_suffixes())


def test_frame_path_suffixes_end_with_the_records_file_path() -> None:
    frame = parse_frame('  File "/srv/.venv/lib/python3.11/site-packages/vllm/config/a.py", line 1')
    assert frame is not None
    assert "vllm/config/a.py" in list(frame.path_suffixes())


def test_exception_class_and_message_are_split() -> None:
    assert exception_of("sqlalchemy.exc.NoSuchModuleError: Can't load plugin: x") == (
        "sqlalchemy.exc.NoSuchModuleError",
        "Can't load plugin: x",
    )
    assert exception_of("job failed: ValueError: bad") == ("ValueError", "bad")
    assert exception_of("all good here") is None


def test_keyerror_repr_quoting_is_undone() -> None:
    assert (
        unrepr_message("\"None of ['a'] are in the columns\"") == "None of ['a'] are in the columns"
    )
    assert unrepr_message("'can\\'t \"x\"'") == 'can\'t "x"'
    assert unrepr_message("'line1\\nline2'") == "line1\nline2"
    assert unrepr_message("not quoted") is None


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    (block,) = list(blocks(b"caf\xe9 ValueError: x\n"))
    assert block.lines == ["caf\ufffd ValueError: x"]


def test_streamed_blocks_keep_original_line_numbers_across_block_boundaries() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 1001))
    got: list[tuple[int, str]] = []
    for block in blocks(io.BytesIO(text.encode()), block_bytes=1000):
        got.extend((block.line_no(i), line) for i, line in enumerate(block.lines))
    assert len(got) == 1000
    assert all(line == f"line {n}" for n, line in got)


def test_text_streams_and_strings_read_the_same() -> None:
    text = "a\nb\nc"
    from_str = [line for b in blocks(text, block_bytes=2) for line in b.lines]
    from_io = [line for b in blocks(io.StringIO(text), block_bytes=2) for line in b.lines]
    assert from_str == from_io == ["a", "b", "c"]


def test_hostile_line_is_read_in_linear_time() -> None:
    import time

    line = "a" * 50_000 + "\x1b[" * 10_000 + "\n"
    started = time.perf_counter()
    block = split_lines(line)
    strip_prefix(block.lines[0])
    parse_frame(block.lines[0])
    exception_of(block.lines[0])
    assert time.perf_counter() - started < 1.0


def test_repeated_log_lines_of_one_length_are_not_taken_for_wrapping() -> None:
    noise = "2026-03-14T08:00:00.000Z INFO  [http] GET /metrics 200 in 5ms, all fine today!!!\n"
    assert len(noise) - 1 == 80
    block = split_lines(noise * 30)
    assert len(block.lines) == 30


def test_bare_error_class_of_javascript_and_rust_is_an_exception_line() -> None:
    assert exception_of("Error: connect ECONNREFUSED 127.0.0.1:5432") == (
        "Error",
        "connect ECONNREFUSED 127.0.0.1:5432",
    )
    assert exception_of("error: lowercase is a log word") is None


def test_utf16_logs_with_a_byte_order_mark_are_decoded() -> None:
    text = "start\r\nValueError: caf\u00e9 broke\r\n"
    data = text.encode("utf-16")  # with BOM, as PowerShell's `>` writes
    for source in (data, io.BytesIO(data)):
        lines = [line for b in blocks(source, block_bytes=7) for line in b.lines]
        assert lines == ["start", "ValueError: caf\u00e9 broke"]


def test_json_lines_of_similar_lengths_are_not_taken_for_wrapping() -> None:
    info = '{{"time": "2026-11-29T12:53:07.{:03d}Z", "level": "INFO", "message": "{}"}}'
    rows = [info.format(i, "x" * 60) for i in range(5)]
    rows.append('{"time": "2026-11-29T12:53:08Z", "level": "ERROR", "message": "' + "y" * 90 + '"}')
    assert split_lines("\n".join(rows) + "\n").lines == rows


def test_ansi_sequences_escaped_inside_json_strings_are_stripped() -> None:
    line = '"\\u001b[91mValueError\\u001b[39m: bad \\x1b[1mthing\\x1b[0m",'
    assert split_lines(line).lines == ['"ValueError: bad thing",']


@pytest.mark.parametrize(
    ("raw", "scanned_as_is"),
    [
        (b"INFO start\nValueError: bad\n  more\n", True),
        (b"no newline at the end", True),
        (b"caf\xc3\xa9 \xff broken byte\nValueError: x\n", True),
        (b"\x1b[31mValueError\x1b[0m: bad\nnext\n", False),  # colours stripped
        (b"a\r\nb\r\n", False),  # line endings unified
        (b'log:\n    Traceback (most recent call last):\n      File "a.py", line 1\n', False),
    ],
)
def test_blocks_hand_their_own_bytes_to_the_scanner_only_when_nothing_was_changed(
    raw: bytes, scanned_as_is: bool
) -> None:
    """The matcher scans block.data instead of re-encoding the lines: every hit's line is found
    by counting newlines, so the bytes must hold exactly the lines, line for line."""
    (block,) = list(blocks(raw, block_bytes=1 << 16))
    assert (block.data is not None) is scanned_as_is
    if block.data is not None:
        assert block.data.split(b"\n") == [line.encode() for line in block.lines] or (
            block.data.decode("utf-8", "replace").split("\n") == block.lines
        )
    assert block.consumed == raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)


def test_line_numbers_run_on_across_blocks() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 5001))
    numbered = [
        (b.line_no(i), line) for b in blocks(text.encode(), 4096) for i, line in enumerate(b.lines)
    ]
    assert len(numbered) == 5000
    assert all(line == f"line {n}" for n, line in numbered)


@pytest.mark.parametrize(
    ("line", "exception"),
    [
        (
            "Task shop.tasks.nightly[3ec5] raised unexpected: "
            "ValueError(\"'labels' should contains at least one label.\")",
            ("ValueError", "'labels' should contains at least one label."),
        ),
        (
            "job_failed exc=CommandError('Unable to find a locale path for file config.json')",
            ("CommandError", "Unable to find a locale path for file config.json"),
        ),
        (
            "errors=[ImportError('pyglet is required.\\n visit http://www.pyglet.org/')]",
            ("ImportError", "pyglet is required.\n visit http://www.pyglet.org/"),
        ),
        # cut off inside the repr by a clipped log line: the message is marked as cut
        ('errors=[ValueError("Model sets swiglu_limit=8, but the explicitly', None),
        ("saved to Path('/tmp/report.csv')", None),  # a value, not an error
        ("started at Timestamp('2026-03-14 08:00:00')", None),
    ],
)
def test_an_exception_shown_as_its_repr_is_read_as_class_and_message(
    line: str, exception: tuple[str, str] | None
) -> None:
    from kb.logline import repr_exception

    found = repr_exception(line)
    if exception is None and "swiglu" in line:
        assert found == ("ValueError", "Model sets swiglu_limit=8, but the explicitly…")
    else:
        assert found == exception


@pytest.mark.parametrize(
    ("message", "cut"),
    [
        ("dropna must be unspecified with future_stack=True as the new…", True),
        ("settings.DATABASES is improperly con...", True),
        ("strict was provided as metric. Ward c [truncated]", True),
        ("the build finished (truncated)", True),
        ("Loading checkpoint shards: 100%", False),
        ("...", False),  # nothing before the mark
    ],
)
def test_a_mark_where_a_logger_or_a_paste_cut_a_message_is_taken_off(
    message: str, cut: bool
) -> None:
    from kb.logline import cut_message

    stem, was_cut = cut_message(message)
    assert was_cut is cut
    assert stem == message if not cut else message.startswith(stem) and len(stem) < len(message)


def test_the_line_under_a_traceback_is_its_exception_whatever_the_class_is_called() -> None:
    from kb.logline import raised_line

    assert raised_line("sympy.polys.polyerrors.NotAlgebraic: 1 + x doesn't seem algebraic") == (
        "sympy.polys.polyerrors.NotAlgebraic",
        "1 + x doesn't seem algebraic",
    )
    assert raised_line("SkipTest") == ("SkipTest", "")
    assert raised_line("job failed, retrying") is None


@pytest.mark.parametrize("kind", [str, bytes])
def test_a_whole_logs_pieces_end_at_line_ends_and_give_back_the_log(kind: type) -> None:
    """A log given whole (text or bytes) is cut in pieces at most a block long, each after its
    last line end where it has one (a line longer than a block is cut inside)."""
    text = "".join(f"{n} " + "v" * (n * 13 % 70) + "\n" for n in range(400)) + "q" * 900 + "\nend"
    data = text if kind is str else text.encode()
    newline = "\n" if kind is str else b"\n"
    pieces = list(logtext._pieces(data, 256))
    assert data[:0].join(pieces) == data
    assert all(0 < len(piece) <= 256 for piece in pieces)
    for piece in pieces[:-1]:
        assert piece.endswith(newline) or newline not in piece
    assert any(newline not in piece for piece in pieces)  # the 900-character line's


def test_a_blocks_offset_says_where_its_bytes_start_in_what_was_read() -> None:
    """The offset of each block read as it is: its bytes found there in the source, a file or
    bytes; none for a block rewritten (colours stripped), for text read as str, or for the rest
    of a line too long to wait for (it starts mid-line: a key found across that edge in the
    whole file would not be the block's own)."""
    lines = [f"2026-03-14T08:00:{n % 60:02d}Z INFO tick {n} {'x' * (n % 50)}\n" for n in range(900)]
    data = "".join(lines).encode()
    for source in (data, io.BytesIO(data)):
        read = list(blocks(source, block_bytes=1024))
        assert len(read) > 20
        for block in read:
            assert block.data is not None and block.offset is not None
            assert data[block.offset : block.offset + len(block.data)] == block.data
            assert block.offset == 0 or data[block.offset - 1 : block.offset] == b"\n"
    coloured = data[:2000] + b"\x1b[31mValueError\x1b[0m: bad\n" + data[2000:4000]
    offsets = [b.offset for b in blocks(coloured, block_bytes=1024)]
    assert None in offsets and 0 in offsets
    assert all(b.offset is None for b in blocks(data.decode(), block_bytes=1024))
    long_line = b"y" * 5000 + b"\n" + data[:3000]
    first, rest, *_ = blocks(long_line, block_bytes=1024)
    assert first.offset == 0 and not first.data.endswith(b"\n") and rest.offset is None
