"""Image attachments and boundary models (SPEC I1; issue #19 `image_files`, inline `images`, raw pydantic errors).

``image_files`` are read only when they are regular files of bounded size; anything else is an
``input_validation`` error naming the file, quickly, without reading. Inline ``images`` must be
real images. Building ``AgentInput`` (or the other boundary models) with bad values raises
``InputValidationError`` naming the field, never a raw pydantic error.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentcore import AgentInput, AskResume, ImageInput, PlanResume, ToolApprovalResume
from agentcore.errors import InputValidationError
from agentcore.inputs import MAX_IMAGE_BYTES, MAX_PROMPT_CHARS, AgentOptions, validate_model
from agentcore.testing.steps import Text
from agentcore.tools.images import load_image_files
from tests.helpers import collect, final

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 32


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def refused(paths: list[str], workdir: Path) -> InputValidationError:
    with pytest.raises(InputValidationError) as info:
        load_image_files(paths, workdir)
    return info.value


# --- image_files -------------------------------------------------------------------------


def test_regular_image_files_load_in_order(tmp_path: Path) -> None:
    """I1: real images load (relative to workdir or absolute), typed by content."""
    (tmp_path / "a.png").write_bytes(PNG)
    (tmp_path / "b.jpg").write_bytes(JPEG)
    images = load_image_files(["a.png", str(tmp_path / "b.jpg")], tmp_path)
    assert [i.mime_type for i in images] == ["image/png", "image/jpeg"]
    assert base64.b64decode(images[0].data) == PNG


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """I1: a FIFO is refused at once (the old code blocked forever in open, beyond any cancel)."""
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []
    worker = threading.Thread(target=lambda: outcome.append(_capture(lambda: load_image_files(["pipe.png"], tmp_path))))
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():  # unblock the stuck open so the test fails instead of hanging
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join()
        pytest.fail("load_image_files blocked on a FIFO")
    [error] = outcome
    assert isinstance(error, InputValidationError)
    assert error.field == "image_files.0" and "'pipe.png'" in error.message and "FIFO" in error.message


def _capture(fn: Any) -> BaseException | None:
    try:
        fn()
    except BaseException as exc:  # handed to the test thread
        return exc
    return None


# Runs load_image_files in a child whose address space is capped 256 MB above its size at that
# point: reading a device or a huge file into memory ends in MemoryError there, not on this machine.
CAPPED_LOAD = """
import resource, sys
from pathlib import Path
from agentcore.errors import InputValidationError
from agentcore.tools.images import load_image_files
size = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize"))
resource.setrlimit(resource.RLIMIT_AS, (size + (256 << 20), size + (256 << 20)))
try:
    load_image_files(sys.argv[1:], Path.cwd())
except InputValidationError as exc:
    print("refused", exc.field, exc.message)
except MemoryError:
    print("MemoryError")
"""


def capped_load(paths: list[str], workdir: Path) -> str:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", CAPPED_LOAD, *paths],
        cwd=workdir,
        env=dict(os.environ, PYTHONPATH=str(root)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip() or done.stderr.strip()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_endless_devices_are_refused_before_reading(tmp_path: Path, device: str) -> None:
    """I1: a device is refused by type, naming it (the old code read /dev/zero until MemoryError)."""
    (tmp_path / "ok.png").write_bytes(PNG)
    outcome = capped_load(["ok.png", device], tmp_path)
    assert outcome.startswith("refused image_files.1"), outcome
    assert repr(device) in outcome and "device" in outcome


def test_a_file_over_the_cap_is_refused_by_size_before_reading(tmp_path: Path) -> None:
    """I1: the size is checked on the file, before loading it (a sparse file costs no disk)."""
    with (tmp_path / "huge.png").open("wb") as handle:
        handle.write(PNG)
        handle.truncate(1 << 30)
    outcome = capped_load(["huge.png"], tmp_path)
    assert outcome.startswith("refused image_files.0"), outcome
    assert "'huge.png'" in outcome and "larger than" in outcome


def test_an_empty_device_is_refused_as_a_device(tmp_path: Path) -> None:
    """I1: /dev/null reads as empty; it is still refused for what it is."""
    error = refused(["/dev/null"], tmp_path)
    assert error.field == "image_files.0" and "'/dev/null'" in error.message and "device" in error.message


def test_a_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    """I1: links are followed (the paths come from the caller), but what they reach is checked."""
    (tmp_path / "zero.png").symlink_to("/dev/zero")
    outcome = capped_load(["zero.png"], tmp_path)
    assert outcome.startswith("refused image_files.0") and "'zero.png'" in outcome and "device" in outcome, outcome


def test_directories_missing_files_and_non_images_are_refused(tmp_path: Path) -> None:
    """I1: each failure names its file and index."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "notes.txt").write_text("not an image")
    assert "directory" in refused(["dir"], tmp_path).message
    missing = refused(["missing.png"], tmp_path)
    assert missing.field == "image_files.0" and "'missing.png'" in missing.message
    assert "not a PNG" in refused(["notes.txt"], tmp_path).message


def test_undecodable_image_file_names_are_shown_as_escapes(tmp_path: Path) -> None:
    """The error text is valid UTF-8 even for a name with bytes that are not UTF-8."""
    error = refused(["miss\udcff.png"], tmp_path)
    error.message.encode("utf-8")
    assert "miss\\xff.png" in error.message


async def test_image_file_errors_end_the_run_before_anything_is_written(make_agent, fake_server, tmp_path) -> None:
    """I1: through the runtime, an unusable image file is input_validation and the store stays unchanged."""
    agent = await make_agent(database_path=str(tmp_path / "s.sqlite"))
    with pytest.raises(InputValidationError) as info:
        await collect(agent, AgentInput(prompt="look", image_files=["/dev/null"], request_id="r1"))
    assert info.value.field == "image_files.0"
    assert not fake_server.requests and agent.read_transcript() == [] and agent.pending_request_id is None


# --- inline images -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ({"data": "!!not base64!!", "mime_type": "image/png"}, "not valid base64"),
        ({"data": b64(PNG)[:-2], "mime_type": "image/png"}, "not valid base64"),
        ({"data": b64(PNG)[:10] + "\n" + b64(PNG)[10:], "mime_type": "image/png"}, "not valid base64"),
        ({"data": "data:image/png;base64," + b64(PNG), "mime_type": "image/png"}, "data:"),
        ({"data": b64(os.urandom(64)), "mime_type": "image/png"}, "not a PNG"),
        ({"data": b64(PNG), "mime_type": "image/jpeg"}, "image/png, not the declared image/jpeg"),
        ({"data": "", "mime_type": "image/png"}, "at least 1"),
    ],
)
def test_inline_images_must_be_real_images(image: dict[str, str], why: str) -> None:
    """I1: strict base64 whose content matches the declared mime_type; the error names images.N.data."""
    good = {"data": b64(JPEG), "mime_type": "image/jpeg"}
    with pytest.raises(InputValidationError) as info:
        AgentInput(prompt="x", images=[good, image])
    assert info.value.field == "images.1.data"
    assert why in info.value.message


def test_inline_image_size_is_capped() -> None:
    """I1: the cap applies to the base64 text before anything is decoded."""
    too_big = "A" * ((MAX_IMAGE_BYTES + 2) // 3 * 4 + 4)
    with pytest.raises(InputValidationError) as info:
        ImageInput(data=too_big, mime_type="image/png")
    assert info.value.field == "data"


def test_valid_inline_images_pass() -> None:
    parsed = AgentInput(
        images=[{"data": b64(PNG), "mime_type": "image/png"}, ImageInput(data=b64(JPEG), mime_type="image/jpeg")]
    )
    assert [i.mime_type for i in parsed.images] == ["image/png", "image/jpeg"]


async def test_a_bad_inline_image_leaves_the_store_unchanged(make_agent, fake_server, tmp_path) -> None:
    """I1: given as a dict to run(), a bad image is input_validation before any write or request."""
    fake_server.enqueue([Text("unused")])
    agent = await make_agent(database_path=str(tmp_path / "s.sqlite"))
    bad = {"prompt": "look", "request_id": "r1", "images": [{"data": b64(b"random"), "mime_type": "image/png"}]}
    with pytest.raises(InputValidationError) as info:
        await collect(agent, bad)
    assert info.value.field == "images.0.data"
    assert not fake_server.requests and agent.read_transcript() == []
    ok = await collect(
        agent, {"prompt": "look", "request_id": "r1", "images": [{"data": b64(PNG), "mime_type": "image/png"}]}
    )
    assert final(ok).status == "completed"


# --- boundary models never raise raw pydantic errors ---------------------------------------


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: AgentInput(prompt="x" * (MAX_PROMPT_CHARS + 1)), "prompt"),
        (lambda: AgentInput(request_id=""), "request_id"),
        (lambda: AgentInput(effort="ultra-max"), "effort"),
        (lambda: AgentInput(bogus=1), "bogus"),
        (lambda: AgentInput(plan_resume={"approval_id": "a"}), "plan_resume.approved"),
        (lambda: AgentInput(model_attributes={"cost": {"input": -1}}), "model_attributes.cost.input"),
        (lambda: AgentInput.model_validate({"prompt": 3}), "prompt"),
        (lambda: PlanResume(approval_id="a"), "approved"),
        (lambda: AskResume(answers={"q": 3}), "answers.q.list[str]"),
        (lambda: ToolApprovalResume(approved="perhaps", approval_id="a"), "approved"),
        (lambda: ImageInput(data="x", mime_type="image/bmp"), "mime_type"),
        (lambda: validate_model(AgentOptions, {"tools": "read"}, what="options"), "tools"),
    ],
)
def test_boundary_models_raise_input_validation_naming_the_field(build: Any, field: str) -> None:
    """R1/I1: however a boundary model is built, bad data is InputValidationError with `field`."""
    with pytest.raises(InputValidationError) as info:
        build()
    assert not isinstance(info.value, ValidationError)
    assert info.value.code == "input_validation"
    assert info.value.field == field, info.value.message
