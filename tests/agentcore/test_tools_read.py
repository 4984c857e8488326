"""Unit tests of the ``read`` tool through the executor, on a real temp dir, on this machine and in a remote
environment (SPEC T1, T3, X5)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from agentcore.messages import ImageContent
from agentcore.tools import ToolContext, ToolResult
from tests.agentcore.tool_helpers import Target, text
from tests.agentcore.tool_helpers import call as call_tool

pytest_plugins = ("tests.agentcore.environment_fixtures",)  # the `target` fixture: local and remote

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def call(ctx: ToolContext, **args: object) -> ToolResult:
    return await call_tool(ctx, "read", **args)


async def test_line_numbered_text_offset_and_limit(tmp_path: Path, target: Target) -> None:
    """T1: read returns 1-based numbered lines; offset/limit select a slice and say how to continue."""
    (tmp_path / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    ctx = target.ctx(tmp_path)
    whole = await call(ctx, path="f.txt")
    assert not whole.is_error
    assert text(whole).splitlines()[0] == "     1\tline 1"
    assert text(whole).splitlines()[9] == "    10\tline 10"
    part = await call(ctx, path="f.txt", offset=3, limit=2)
    lines = text(part).splitlines()
    assert lines[:2] == ["     3\tline 3", "     4\tline 4"]
    assert "Use offset=5" in text(part)


async def test_output_bounded_by_lines_with_next_offset(tmp_path: Path, target: Target) -> None:
    """T1: at most 2,000 lines come back, with the offset that continues."""
    (tmp_path / "big.txt").write_text("".join(f"{n}\n" for n in range(1, 5001)))
    result = await call(target.ctx(tmp_path), path="big.txt")
    body = text(result)
    assert "  2000\t2000" in body and "2001\t2001" not in body
    assert "of 5000" in body and "offset=2001" in body


async def test_output_bounded_by_bytes(tmp_path: Path, target: Target) -> None:
    """T1: at most 50 KB comes back even when fewer than 2,000 lines would."""
    (tmp_path / "wide.txt").write_text(("x" * 1000 + "\n") * 500)
    body = text(await call(target.ctx(tmp_path), path="wide.txt"))
    assert len(body.encode()) < 52 * 1024
    assert "Use offset=" in body


async def test_long_lines_are_cut(tmp_path: Path, target: Target) -> None:
    """T1: a very long line is cut with a note instead of flooding the context."""
    (tmp_path / "min.js").write_text("a" * 10_000 + "\nshort\n")
    body = text(await call(target.ctx(tmp_path), path="min.js"))
    assert "line cut, 10000 chars" in body
    assert "     2\tshort" in body


async def test_offset_past_end_and_empty_file(tmp_path: Path, target: Target) -> None:
    """T1: reading past the end is an error the model can act on; an empty file says so."""
    (tmp_path / "f.txt").write_text("one\n")
    (tmp_path / "empty.txt").write_text("")
    ctx = target.ctx(tmp_path)
    past = await call(ctx, path="f.txt", offset=5)
    assert past.is_error and "past the end" in text(past) and "1 lines" in text(past)
    assert "empty" in text(await call(ctx, path="empty.txt"))


async def test_binary_refused_and_directory_refused(tmp_path: Path, target: Target) -> None:
    """T1: binary files and directories are refused with a clear message."""
    (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    (tmp_path / "d").mkdir()
    ctx = target.ctx(tmp_path)
    binary = await call(ctx, path="blob.bin")
    assert binary.is_error and "binary" in text(binary)
    directory = await call(ctx, path="d")
    assert directory.is_error and "directory" in text(directory)


async def test_missing_file(tmp_path: Path, target: Target) -> None:
    """T1: a missing file names the path."""
    result = await call(target.ctx(tmp_path), path="nope/missing.txt")
    assert result.is_error and "nope/missing.txt" in text(result)


async def test_image_returned_as_image_content(tmp_path: Path, target: Target) -> None:
    """T1: PNG/JPEG/GIF/WebP come back as image content when the model accepts images."""
    (tmp_path / "pic.dat").write_bytes(PNG)  # detected by content, not by extension
    result = await call(target.ctx(tmp_path), path="pic.dat")
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert not result.is_error and len(images) == 1
    assert images[0].mime_type == "image/png"
    assert base64.b64decode(images[0].data) == PNG


async def test_image_note_when_model_has_no_vision(tmp_path: Path, target: Target) -> None:
    """T1: without image input the model gets a clear note instead of the bytes."""
    (tmp_path / "pic.png").write_bytes(PNG)
    result = await call(target.ctx(tmp_path, accepts_images=False), path="pic.png")
    assert not any(isinstance(block, ImageContent) for block in result.content)
    assert "image/png" in text(result) and "does not accept image" in text(result)


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (b"\xff\xd8\xff\xe0rest", "image/jpeg"),
        (b"GIF89a....", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
    ],
)
async def test_other_image_formats(tmp_path: Path, head: bytes, mime: str, target: Target) -> None:
    """T1: the other provider-supported formats are recognised too."""
    (tmp_path / "img").write_bytes(head + b"\x00" * 64)
    result = await call(target.ctx(tmp_path), path="img")
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert images and images[0].mime_type == mime


async def test_invalid_utf8_bytes_are_shown_as_escapes(tmp_path: Path, target: Target) -> None:
    """T1: a text file with a stray invalid byte is still readable; the byte shows as `\\xNN`."""
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    result = await call(target.ctx(tmp_path), path="latin1.txt")
    assert not result.is_error and "caf\\xe9" in text(result)
    text(result).encode("utf-8")  # valid UTF-8: no surrogates


async def test_invalid_arguments_name_the_field(tmp_path: Path, target: Target) -> None:
    """T3: schema validation failures name the field so the model can correct the call."""
    result = await call(target.ctx(tmp_path), path="f.txt", offset="three")
    assert result.is_error and "offset" in text(result)


async def test_huge_single_line_and_line_count(tmp_path: Path, target: Target) -> None:
    """T1: a multi-megabyte line is cut without being shown whole; totals count every line."""
    (tmp_path / "huge.txt").write_text("z" * 3_000_000 + "\nsecond\n" + "tail\n" * 3000)
    body = text(await call(target.ctx(tmp_path), path="huge.txt"))
    assert "line cut, 3000000 bytes" in body and "     2\tsecond" in body
    assert "of 3002" in body and "offset=2001" in body
