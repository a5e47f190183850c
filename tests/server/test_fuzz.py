"""Schema-driven fuzz of the running server (schemathesis): no input makes it answer 5xx.

Bounded: a fixed number of generated requests per operation (``PORTAMEM_FUZZ_EXAMPLES``,
default 8, derandomised so a run is repeatable; one for an operation without input), each checked for a server error and for the
stable error body.
"""

from __future__ import annotations

import os
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
