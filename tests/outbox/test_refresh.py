"""Credential refresh against a real storage endpoint that answers 403 to stale tokens."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from fastapi import FastAPI, Request, Response

import durq
from durq.retry import HttpStatusError, http_classifier
from durq.webhooks import WebhookRejected, verify

from .receiver import SECRET, Receiver, serving

KEK = base64.b64encode(os.urandom(32)).decode()


class Requester:
    """The storage (403 unless the token is current) and the requester's refresh URL."""

    def __init__(self, app: durq.App, *, advance: bool) -> None:
        self.durq_app = app
        self.advance = advance
        self.current = "fresh-token"
        self.refresh_calls: list[dict[str, Any]] = []
        self.http = FastAPI()
        self.http.get("/object")(self.storage)
        self.http.post("/refresh")(self.refresh)

    async def storage(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.current}":
            return Response(status_code=403)
        return Response(b"payload", status_code=200)

    async def refresh(self, request: Request) -> Response:
        body = await request.body()
        try:
            verify(request.headers, body, [SECRET])
        except WebhookRejected:
            return Response(status_code=401)
        call = json.loads(body)
        self.refresh_calls.append(call)
        if self.advance:
            self.durq_app.update_secrets(
                call["job_id"],
                {"token": self.current},
                expected_version=call["credential_version"],
            )
        return Response(status_code=204)


@contextmanager
def requester(app: durq.App, *, advance: bool) -> Iterator[tuple[Requester, str]]:
    req = Requester(app, advance=advance)
    holder = Receiver()
    holder.app = req.http
    with serving(holder) as hook:
        yield req, hook.removesuffix("/hook")


def storage_app(make: Callable[..., durq.App]) -> durq.App:
    app = make(secret_keks={"k1": KEK}, max_refresh_attempts=2)

    @app.task(
        name="fetch",
        pass_context=True,
        max_attempts=3,
        classifier=http_classifier,
        retry=durq.Fixed([0]),
    )
    def fetch(ctx: durq.JobContext, url: str) -> dict[str, Any]:
        answer = httpx.get(url, headers={"authorization": f"Bearer {ctx.secrets['token']}"})
        if answer.status_code >= 400:
            raise HttpStatusError(answer.status_code)
        return {"bytes": len(answer.content), "version": ctx.credential_version}

    return app


def test_credential_refresh_advances_version_then_succeeds(
    outbox_app: Callable[..., durq.App],
) -> None:
    app = storage_app(outbox_app)
    with requester(app, advance=True) as (req, base):
        job = app.enqueue(
            "fetch",
            {"url": f"{base}/object"},
            secrets={"token": "expired-token"},
            refresh_url=f"{base}/refresh",
        )
        first = app.run_job(job.id)
        # 403 → signed refresh → credential_version 1 → 2 → queued again, attempt refunded.
        assert first.state == "queued" and first.attempt == 0
        assert req.refresh_calls == [
            {"type": "credentials.refresh", "job_id": job.id, "credential_version": 1}
        ]
        assert app.credential_version(job.id) == 2
        done = app.run_job(job.id)
    assert done.state == "succeeded" and done.result == {"bytes": 7, "version": 2}
    assert app.job_counters(job.id) == {
        "execution_attempts": 1,
        "refresh_attempts": 1,
        "delivery_attempts": 0,
    }


def test_refresh_that_does_not_advance_retries_then_is_bounded(
    outbox_app: Callable[..., durq.App],
) -> None:
    app = storage_app(outbox_app)
    with requester(app, advance=False) as (req, base):
        job = app.enqueue(
            "fetch",
            {"url": f"{base}/object"},
            secrets={"token": "expired-token"},
            refresh_url=f"{base}/refresh",
        )
        first = app.run_job(job.id)
        assert first.state == "retry_wait" and first.attempt == 1
        assert first.last_error_code == "credential_refresh_failed"
        second = app.run_job(job.id)
        assert second.state == "retry_wait" and second.attempt == 2
        third = app.run_job(job.id)  # a third refresh passes the bound of 2
    assert third.state == "dead_letter"
    assert third.last_error_code == "credential_refresh_exhausted"
    assert len(req.refresh_calls) == 2
    assert app.credential_version(job.id) == 1
    assert app.job_counters(job.id)["refresh_attempts"] == 3


def test_http_classifier_retry_classes() -> None:
    for status in (423, 500, 502, 503, 504):
        signal = http_classifier(HttpStatusError(status))
        assert isinstance(signal, durq.Retry) and signal.after is None
    limited = http_classifier(HttpStatusError(429, retry_after=90))
    assert isinstance(limited, durq.Retry) and limited.after == 90
    assert isinstance(http_classifier(HttpStatusError(429)), durq.Retry)
    assert http_classifier(HttpStatusError(429)).after >= 30  # type: ignore[union-attr]
    for status in (401, 403):
        assert type(http_classifier(HttpStatusError(status))).__name__ == "RefreshCredentials"
    for status in (400, 404, 409, 422):
        assert isinstance(http_classifier(HttpStatusError(status)), durq.Fail)
    assert http_classifier(ValueError("not http")) is None
