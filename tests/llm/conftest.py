"""A real local model for these tests: llama.cpp's OpenAI-compatible server with Qwen2.5-0.5B-Instruct
(``portamem_conformance.local_model``), started once per session and stopped after it.

Where it comes from, in order: ``PORTAMEM_TEST_LLM_URL`` (+ ``PORTAMEM_TEST_LLM_MODEL``), an endpoint
already running; else a server this session starts with the interpreter ``PORTAMEM_LLAMA_PYTHON`` names,
or this one when it has ``llama_cpp`` (``tox -e llm`` installs the cached wheel), over the model assembled
into ``PORTAMEM_MODEL_CACHE`` (downloaded and checked by sha256 the first time, ~490 MB).

When any of it cannot be had the tests skip and say why, unless ``PORTAMEM_LLM_REQUIRE=1`` (``.ci/run``
sets it): then a missing model fails the run, because a CI where the model quietly never runs is how
the model path went untested before. Set ``PORTAMEM_LLM_REQUIRE=0`` where the packages are known gone.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator

import pytest

from portamem_conformance.local_model import QWEN_05B, Endpoint, Unavailable, assemble_model, start_server


def _required() -> bool:
    return os.environ.get("PORTAMEM_LLM_REQUIRE", "").strip().lower() in {"1", "true", "yes"}


def _python() -> str:
    named = os.environ.get("PORTAMEM_LLAMA_PYTHON")
    if named:
        return named
    if importlib.util.find_spec("llama_cpp") is None:
        raise Unavailable("llama-cpp-python is not installed here: run `tox -e llm` (it installs the wheel cached "
                          "by `.ci/run`), or point PORTAMEM_LLAMA_PYTHON at an interpreter that has "
                          "'llama-cpp-python[server]'")
    return sys.executable


@pytest.fixture(scope="session")
def local_llm() -> Iterator[Endpoint]:
    url = os.environ.get("PORTAMEM_TEST_LLM_URL")
    if url:
        yield Endpoint(url.rstrip("/"), os.environ.get("PORTAMEM_TEST_LLM_MODEL", QWEN_05B.name))
        return
    try:
        server = start_server(assemble_model(), python=_python())
    except Unavailable as exc:
        reason = f"no local model: {exc}"
        print(f"\n{reason}", file=sys.stderr)
        if _required():
            pytest.fail(f"{reason} (PORTAMEM_LLM_REQUIRE=1; set it to 0 to skip)", pytrace=False)
        pytest.skip(reason)
    try:
        yield Endpoint(server.url, server.model, server)
    finally:
        server.stop()
