"""Credential refresh, in band with the job's retries (no state of its own).

When an attempt's error classifies as :class:`~durq.retry.RefreshCredentials` (401/403
from the storage), the worker:

1. counts one refresh (``refresh_attempts``, fenced by the job's claim; bounded);
2. calls the requester's ``refresh_url`` with a signed request naming the job and the
   ``credential_version`` that was refused;
3. re-reads the job's secrets, and runs the job again at once, without spending an
   execution attempt, only if ``credential_version`` advanced. Otherwise the attempt
   fails by the retry policy; past the bound the job is dead-lettered.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .._drivers import Driver
from ..errors import LeaseLost
from ..retry import Fail, RefreshCredentials, Retry, Snooze, TaskSignal
from ..states import Outcome
from ..task import JobContext, Task
from ..types import Job
from .http import httpx_module
from .signing import Signer

__all__ = ["refresh", "refresh_signal"]

log = logging.getLogger("durq.worker")


def refresh_signal(task: Task[Any, Any] | None, outcome: Outcome) -> RefreshCredentials | None:
    """The refresh an outcome asks for, if any (cheap for every other outcome)."""
    if not isinstance(outcome, Exception) or isinstance(outcome, LeaseLost):
        return None
    if isinstance(outcome, RefreshCredentials):
        return outcome
    if isinstance(outcome, TaskSignal) or task is None or task.classifier is None:
        return None
    try:
        signal = task.classifier(outcome)
    except Exception:
        return None  # the pipeline's own rule reports a classifier that raises
    return signal if isinstance(signal, RefreshCredentials) else None


def refresh(
    driver: Driver,
    signer: Signer,
    job: Job,
    ctx: JobContext | None,
    signal: RefreshCredentials,
    *,
    timeout: float = 10.0,
) -> Outcome:
    """Run the refresh protocol; the outcome that replaces the refused attempt's."""
    with driver.read() as ex:
        sealed = driver.secret_get(ex, job.id)
    if sealed is None or not sealed.refresh_url:
        return Retry(
            code="credentials_refused",
            message=f"{signal.message}; the job has no refresh_url to ask for new credentials",
        )
    seen = ctx.credential_version if ctx and ctx.credential_version else sealed.credential_version
    with driver.transaction() as ex:
        count = driver.secret_refresh_attempt(ex, job.id, job.claim_version)
    if count is None:
        return LeaseLost(job.id, job.claim_version)
    if count > sealed.max_refresh_attempts:
        return Fail(
            "credential_refresh_exhausted",
            f"{signal.message}; {sealed.max_refresh_attempts} credential refreshes did not help",
        )
    body = json.dumps(
        {"type": "credentials.refresh", "job_id": job.id, "credential_version": seen},
        sort_keys=True,
    ).encode()
    headers = signer.headers(sealed.owner, body, f"refresh-{job.id}-{count}")
    httpx = httpx_module()
    try:
        answer = httpx.post(sealed.refresh_url, content=body, headers=headers, timeout=timeout)
        status: int | None = answer.status_code
    except httpx.HTTPError as exc:
        status = None
        log.warning("job %s: the refresh call failed (%s)", job.id, type(exc).__name__)
    with driver.read() as ex:
        after = driver.secret_get(ex, job.id)
    if after is not None and after.credential_version > seen:
        log.info(
            "job %s: credentials refreshed (version %s → %s); running it again",
            job.id,
            seen,
            after.credential_version,
        )
        return Snooze(0)
    return Retry(
        code="credential_refresh_failed",
        message=f"{signal.message}; refresh {count} (HTTP {status}) left credential_version "
        f"at {seen}",
    )
