"""A keyed JSON body is judged by its shape before it is parsed: too many values, too deep, or a string
too long is answered 413 at once, and what a body costs parsed is charged to the bytes-in-flight budget;
``shape.measure`` agrees with the parsed JSON on every body, chunk boundaries and escapes included."""

from __future__ import annotations

import json
import random
from typing import Any

import httpx
import pytest

from portamem.server import shape
from portamem_conformance.remote import ServerProcess


def _truth(value: Any, ensure_ascii: bool, depth: int = 0) -> tuple[int, int, int]:
    """(values as commas and openings count them, depth, longest string as sent) from the parsed JSON."""
    def sent(text: str) -> int:
        return len(json.dumps(text, ensure_ascii=ensure_ascii).encode()) - 2

    if isinstance(value, (dict, list)):
        items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
        values, deepest = max(len(items) - 1, 0) + 1, depth + 1
        longest = max((sent(k) for k, _ in items if k is not None), default=0)
        for _, item in items:
            n, d, s = _truth(item, ensure_ascii, depth + 1)
            values, deepest, longest = values + n, max(deepest, d), max(longest, s)
        return values, deepest, longest
    return 0, depth, sent(value) if isinstance(value, str) else 0


def _random(rng: random.Random, depth: int = 0) -> Any:
    letters = 'ab"\\,:[]{}é中\n'
    r = rng.random()
    if depth < 6 and r < 0.3:
        return {"".join(rng.choice(letters) for _ in range(rng.randint(0, 5))): _random(rng, depth + 1)
                for _ in range(rng.randint(0, 4))}
    if depth < 6 and r < 0.5:
        return [_random(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if r < 0.8:
        return "".join(rng.choice(letters + "\\\\") for _ in range(rng.randint(0, 12)))
    return rng.choice([1, 2.5, None, True])


@pytest.mark.parametrize("chunk", [1, 3, 64, 1 << 19])
def test_measure_agrees_with_the_parsed_json(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(shape, "_CHUNK", chunk)
    rng = random.Random(chunk)
    for _ in range(300):
        value, ascii_only = _random(rng), rng.random() < 0.5
        body = json.dumps(value, ensure_ascii=ascii_only).encode()
        found = shape.measure(body)
        assert (found.values, found.depth, found.longest_string) == _truth(value, ascii_only), body


def _save(server: ServerProcess, key: str, body: bytes) -> httpx.Response:
    return httpx.post(server.url + "/v1/memories", content=body, timeout=120,
                      headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})


@pytest.mark.parametrize("metadata", [
    b"{" + b",".join(b'"k%d":0' % i for i in range(shape.MAX_VALUES + 10)) + b"}",  # many keys
    b'{"l": [' + b",".join([b'"ab"'] * (shape.MAX_VALUES + 10)) + b"]}",  # many items
    b'{"l": ' + b"[" * 40 + b"]" * 40 + b"}",  # deep
    b'{"note": "' + b"x" * (shape.MAX_STRING_BYTES + 10) + b'"}',  # long
])
def test_a_costly_body_is_refused_before_it_is_parsed(server: ServerProcess, tenant_key: str, user: str,
                                                      metadata: bytes) -> None:
    r = _save(server, tenant_key, b'{"user_id": "%s", "content": "A fact.", "metadata": ' % user.encode()
              + metadata + b"}")
    assert r.status_code == 413, r.text[:300]
    assert r.json()["error"]["type"] == "PayloadTooLargeError"


def test_a_body_within_the_bounds_is_served(server: ServerProcess, tenant_key: str, user: str) -> None:
    memories = [{"content": f"Fact {i} about the garden.", "entities": [f"plant {j}" for j in range(64)],
                 "metadata": {f"field{j}": j for j in range(12)}} for i in range(256)]
    body = json.dumps({"user_id": user, "memories": memories}, ensure_ascii=False).encode()
    assert 10_000 < shape.measure(body).values < shape.MAX_VALUES
    r = httpx.post(server.url + "/v1/memories/batch", content=body, timeout=300,
                   headers={"Authorization": f"Bearer {tenant_key}", "Content-Type": "application/json"})
    assert r.status_code == 201, r.text[:300]
    assert len(r.json()["records"]) == 256
    deep = {"a": {"b": {"c": {"d": ["e", {"f": "中文 text, with \"quotes\" and \\ escapes"}]}}}}
    r = _save(server, tenant_key, json.dumps({"user_id": user, "content": "Nested.", "metadata": deep}).encode())
    assert r.status_code == 201 and r.json()["metadata"] == deep
