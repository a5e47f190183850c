"""Schema-driven fuzz of the running server (schemathesis): no input makes it answer 5xx.

Bounded: a fixed number of generated requests per operation (``PORTAMEM_FUZZ_EXAMPLES``,
default 8, derandomised so a run is repeatable; one for an operation without input), each checked for a server error and for the
stable error body. Every operation is also sent a body past the server's limit and a foreign ``Host``
(413 and 421, typed), with and without a key.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from portamem_conformance.remote import ServerProcess  # noqa: E402

EXAMPLES = int(os.environ.get("PORTAMEM_FUZZ_EXAMPLES", "8"))

# an import body is JSON lines: generated strings go on the wire as text
schemathesis.serializer.alias("application/x-ndjson", "text/plain")


def test_no_input_makes_a_server_error(server: ServerProcess) -> None:
    key = server.key("fuzz")
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    failures: list[str] = []
    for operation in operations:
        # an operation that takes no input is one request however often it is generated (and /v1/reindex
        # rebuilds the whole shared store's index each time)
        takes_input = any(len(part) for part in (operation.path_parameters, operation.query, operation.body))

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES if takes_input else 1, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: Any) -> None:
            response = case.call(headers={"Authorization": f"Bearer {key}"}, timeout=120)
            if response.status_code >= 500:
                failures.append(f"{response.status_code} {case.as_curl_command()} -> {response.text[:300]}")
            elif response.status_code >= 400:
                body = response.json()
                if set(body) != {"error"} or set(body["error"]) != {"type", "message"}:
                    failures.append(f"error body {body!r} for {case.as_curl_command()}")

        check()
    assert not failures, "\n".join(failures[:10])


def test_oversized_and_foreign_host_requests_are_refused_typed(server: ServerProcess) -> None:
    """Every operation of the schema, sent a body past the server's limit and (apart) a foreign Host:
    413 and 421 with the typed error body, never a 5xx, whether a key comes with it or not."""
    import httpx

    key = server.key("fuzz-limits")
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    oversized = b"x" * (4 * 1024 * 1024 + 1)
    failures: list[str] = []
    with httpx.Client(base_url=server.url, timeout=120) as client:
        for operation in operations:
            path = re.sub(r"\{[^}]+\}", "0" * 32, operation.path)
            method = operation.method.upper()
            for headers in ({"Authorization": f"Bearer {key}"}, {}):
                checks = [(421, {**headers, "Host": "rebind.attacker.example"}, b"")]
                if method in ("POST", "PATCH", "PUT"):
                    checks.append((413, {**headers, "Content-Type": "application/json"}, oversized))
                for expected, sent, body in checks:
                    if path == "/v1/import" and expected == 413:
                        continue  # its own limit is 512 MiB: the spool, not this test
                    response = client.request(method, path, headers=sent, content=body)
                    detail = f"{method} {path} {sorted(sent)} -> {response.status_code} {response.text[:200]}"
                    if response.status_code >= 500 or response.status_code != expected:
                        failures.append(detail)
                        continue
                    error = response.json().get("error", {})
                    expected_type = "PayloadTooLargeError" if expected == 413 else "HostNotAllowedError"
                    if set(error) != {"type", "message"} or error["type"] != expected_type:
                        failures.append(detail)
    assert not failures, "\n".join(failures[:10])
