"""The API against its own OpenAPI document: schemathesis generates requests from it, sends them
to a real server and checks every answer (status documented, body matching its schema, no 500).

Driven through Hypothesis directly: schemathesis' pytest plugin (`from_fixture`) does not run
under pytest 9 (it reads a private attribute pytest removed).
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.serve.conftest import LiveServer

EXAMPLES = 40  # per operation, ~3 s each; 300 a run were tried by hand, all passed


@pytest.fixture(scope="module")
def api_schema(server: LiveServer) -> Any:
    return schemathesis.openapi.from_url(server.url + "/openapi.json")


def operations() -> list[str]:
    from kb.serve.openapi import document

    return [
        f"{method.upper()} {path}"
        for path, methods in document()["paths"].items()
        for method in methods
    ]


@pytest.mark.parametrize("operation", operations())
def test_every_answer_matches_the_openapi_document(api_schema: Any, operation: str) -> None:
    method, path = operation.split(" ", 1)
    api_operation = api_schema[path][method]

    @given(case=api_operation.as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same requests every run: CI fails on a change, not on luck
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        case.call_and_validate()

    check()
