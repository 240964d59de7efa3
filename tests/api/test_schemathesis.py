"""Property-based checks of the whole API against its own /openapi.json, as an operator:
no 5xx, and every status, content type and body the schema documents."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

# Imported here, while this process has one thread: schemathesis imports it lazily while the
# test's worker and server threads run, and CPython 3.11.7's AST state is shared between
# threads ("AST constructor recursion depth mismatch" when another thread parses at the
# same moment; fixed in 3.11.8).
from hypothesis.strategies._internal import random as _hypothesis_random  # noqa: F401
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


def fuzz(api: Api, only: str | None = None, examples: int = EXAMPLES_PER_OPERATION) -> int:
    """Run every operation (or the one labelled ``only``) ``examples`` times with the
    checks; the number of requests sent."""
    key = api.keys["operator"]  # in both headers: generated auth values must not win
    headers = {
        "Authorization": f"Bearer {key}",
        "X-API-Key": key,
        "X-Internal-Token": INTERNAL_TOKEN,
    }
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(api.app))
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    if only is not None:
        operations = [op for op in operations if op.label == only]
    assert operations
    sent = 0

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=examples,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],  # no shrinking, no example database
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def conforms(case: Any) -> None:
            nonlocal sent
            sent += 1
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            conforms()
        except Exception as exc:
            raise AssertionError(f"{operation.label}: {exc}") from exc
    return sent


def test_api_conforms_to_its_schema(make_api: Callable[..., Api]) -> None:
    # A generated sync submit of a task no worker defines waits for the whole sync wait:
    # keep it well inside the client's read timeout (the answer is then 202, pending).
    api = make_api(api_sync_wait_seconds=1.0)
    api.submit()  # something to read, cancel and requeue
    api.submit(execution_mode="sync")  # a finished job, run by the worker this starts
    sent = fuzz(api)
    assert sent >= 24 * EXAMPLES_PER_OPERATION // 2, sent
    print(f"fuzzed {sent} requests")  # the figure docs/reliability.md quotes


def test_submit_without_task_code_conforms(make_api: Callable[..., Api]) -> None:
    """An App without tasks takes any task name and args (producers without the code):
    its document says so, and what it calls valid is accepted."""
    api = make_api(tasks=False, api_sync_wait_seconds=0.2)
    sent = fuzz(api, only="POST /v1/jobs", examples=3 * EXAMPLES_PER_OPERATION)
    print(f"fuzzed {sent} requests")
