"""Property-based checks of the whole API against its own /openapi.json, as an operator:
no 5xx, and every status, content type and body the schema documents."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from durq.api import create_app

from .conftest import INTERNAL_TOKEN, Api

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    positive_data_acceptance,  # a request the document calls valid is not refused
]
# Bounded so the suite stays fast; dig deeper locally with DURQ_FUZZ_EXAMPLES=200.
EXAMPLES_PER_OPERATION = int(os.environ.get("DURQ_FUZZ_EXAMPLES", "12"))


def test_api_conforms_to_its_schema(make_api: Callable[..., Api]) -> None:
    # A generated sync submit of a task no worker defines waits for the whole sync wait:
    # keep it well inside the client's read timeout (the answer is then 202, pending).
    api = make_api(api_sync_wait_seconds=1.0)
    api.submit()  # something to read, cancel and requeue
    api.submit(execution_mode="sync")  # a finished job, run by the worker this starts
    key = api.keys["operator"]  # in both headers: generated auth values must not win
    headers = {
        "Authorization": f"Bearer {key}",
        "X-API-Key": key,
        "X-Internal-Token": INTERNAL_TOKEN,
    }
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(api.app))
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 17

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],  # no shrinking, no example database
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def conforms(case: Any) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            conforms()
        except Exception as exc:
            raise AssertionError(f"{operation.label}: {exc}") from exc
