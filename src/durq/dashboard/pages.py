"""The dashboard's pages (GET): overview, jobs, job detail, dead letters, workers,
breakers and alerts. Each reads through ``App``'s public operations."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException

from ..errors import JobNotFound
from ..types import Job, JobState
from .charts import latency_chart, throughput_chart
from .web import Dashboard, User, redact_args

__all__ = ["PAGE_SIZE", "router"]

router = APIRouter()

PAGE_SIZE = 50
#: Each of a job's lists is shown up to this many rows (the newest attempts, the first events).
DETAIL_ROWS = 200


def dashboard(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found


def visible_job(user: User, ui: Dashboard, job_id: int) -> Job:
    """The job if this user may see it: another owner's job is 'not found', as in the API."""
    job = ui.service.app.get_job(job_id)
    if user.tenant is not None and job.created_by != user.tenant:
        raise JobNotFound(job_id)
    return job


# ---- overview ------------------------------------------------------------------------------


def _overview(request: Request, template: str) -> HTMLResponse:
    ui = dashboard(request)
    user = ui.user(request)
    queues = ui.service.app.overview()
    charts = {
        q.name: (throughput_chart(q.name, q.history), latency_chart(q.name, q.history))
        for q in queues
    }
    return ui.render(
        request,
        template,
        user,
        queues=queues,
        charts=charts,
        states=["queued", "retry_wait", "running"],
    )


@router.get("/", response_class=HTMLResponse)
def overview(request: Request) -> HTMLResponse:
    return _overview(request, "overview.html")


@router.get("/overview/panel", response_class=HTMLResponse)
def overview_panel(request: Request) -> HTMLResponse:
    """The overview's queues alone, for the page to refresh itself without a reload."""
    return _overview(request, "overview_panel.html")


# ---- jobs ----------------------------------------------------------------------------------


def _when(value: str | None, name: str) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise HTTPException(400, f"{name}: {value!r} is not a date and time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@router.get("/jobs", response_class=HTMLResponse)
def jobs(
    request: Request,
    state: Annotated[str | None, Query(max_length=20)] = None,
    queue: Annotated[str | None, Query(max_length=64)] = None,
    task: Annotated[str | None, Query(max_length=200)] = None,
    owner: Annotated[str | None, Query(max_length=128)] = None,
    created_after: Annotated[str | None, Query(max_length=40)] = None,
    created_before: Annotated[str | None, Query(max_length=40)] = None,
    before: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
    id: Annotated[str | None, Query(max_length=20)] = None,
    done: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    ui = dashboard(request)
    user = ui.user(request)
    if id:
        if not id.strip().isdigit():
            raise HTTPException(400, f"job id {id!r} is not a number")
        return ui.redirect(request, f"/jobs/{int(id)}")
    if user.tenant is not None:
        owner = user.tenant
    filters = {
        "state": state or "",
        "queue": queue or "",
        "task": task or "",
        "owner": owner or "",
        "created_after": created_after or "",
        "created_before": created_before or "",
    }
    found = ui.service.app.list_jobs(
        state=state or None,
        queue=queue or None,
        task=task or None,
        created_by=owner or None,
        created_after=_when(created_after, "created from"),
        created_before=_when(created_before, "created before"),
        before_id=before,
        limit=PAGE_SIZE + 1,
    )
    page = found[:PAGE_SIZE]
    next_before = page[-1].id if len(found) > PAGE_SIZE else None
    template = "jobs_rows.html" if request.headers.get("HX-Request") else "jobs.html"
    return ui.render(
        request,
        template,
        user,
        jobs=page,
        filters=filters,
        before=before,
        next_before=next_before,
        states=[str(s) for s in JobState],
        done=done,
    )


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_detail(request: Request, job_id: int) -> HTMLResponse:
    ui = dashboard(request)
    user = ui.user(request)
    app = ui.service.app
    job = visible_job(user, ui, job_id)
    attempts = app.attempts(job_id)[-DETAIL_ROWS:]
    artifacts = app.artifacts(job_id)[:DETAIL_ROWS]
    events = app.list_events(job_id=job_id, limit=DETAIL_ROWS)
    return ui.render(
        request,
        "job.html",
        user,
        job=job,
        args=_pretty(redact_args(job.args)),
        result=_pretty(redact_args(job.result)) if job.result is not None else None,
        attempts=attempts,
        artifacts=[(a, _pretty(redact_args(a.payload))) for a in artifacts],
        events=events,
        done=request.query_params.get("done"),
    )


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


# ---- dead letters, workers, breakers -----------------------------------------------------


@router.get("/dead", response_class=HTMLResponse)
def dead_letters(request: Request) -> HTMLResponse:
    ui = dashboard(request)
    user = ui.user(request)
    groups = ui.service.app.dead_letter_groups(created_by=user.tenant)
    return ui.render(
        request, "dead.html", user, groups=groups, done=request.query_params.get("done")
    )


@router.get("/workers", response_class=HTMLResponse)
def workers(request: Request) -> HTMLResponse:
    ui = dashboard(request)
    user = ui.user(request)
    app = ui.service.app
    listed = app.list_workers(include_stopped=True, limit=200)
    running = app.list_jobs(state="running", limit=500)
    by_worker: dict[str, list[Job]] = {}
    for job in running:
        if user.tenant is None or job.created_by == user.tenant:
            by_worker.setdefault(job.worker_id or "", []).append(job)
    return ui.render(request, "workers.html", user, workers=listed, running=by_worker)


@router.get("/breakers", response_class=HTMLResponse)
def breakers(request: Request) -> HTMLResponse:
    ui = dashboard(request)
    user = ui.user(request)
    app = ui.service.app
    return ui.render(
        request,
        "breakers.html",
        user,
        breakers=app.list_breakers(limit=200),
        alerts=app.list_alerts(state="all", limit=200),
        done=request.query_params.get("done"),
    )
