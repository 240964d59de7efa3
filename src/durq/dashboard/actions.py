"""The dashboard's actions (POST): each needs a session, its CSRF token and the power the
same action needs over the API; bulk actions ask for a confirmation that says how many."""

from __future__ import annotations

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from ..errors import JobNotFound
from ..types import QUEUE_NAME_RE
from .pages import dashboard, visible_job
from .web import Form

__all__ = ["MAX_BULK", "router"]

log = structlog.get_logger("durq.dashboard")

router = APIRouter()

#: At most this many jobs in one bulk action (a page of the job list is 50).
MAX_BULK = 1000
BULK_ACTIONS = {"requeue": ("Requeue", "operate"), "cancel": ("Cancel", "submit")}


def _ids(form: Form) -> list[int]:
    raw = form.all("ids")
    if len(raw) > MAX_BULK:
        raise HTTPException(400, f"select at most {MAX_BULK} jobs at a time")
    if not all(v.isdigit() and 1 <= int(v) <= 2**63 - 1 for v in raw):
        raise HTTPException(400, "job ids must be whole numbers")
    return sorted({int(v) for v in raw}, reverse=True)


def _plural(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


@router.post("/jobs/bulk")
async def bulk(request: Request) -> Response:
    ui = dashboard(request)
    action = request.query_params.get("action", "")
    if action not in BULK_ACTIONS:
        raise HTTPException(400, "unknown bulk action; use requeue or cancel")
    verb, power = BULK_ACTIONS[action]
    user, form = await ui.action(request, "operate" if power == "operate" else "submit")
    ids = _ids(form)
    if not ids:
        return ui.redirect(request, "/jobs", done="No job was selected: tick the jobs first")
    if form.get("confirm") != "yes":
        return ui.render(
            request,
            "confirm.html",
            user,
            title=f"{verb} {_plural(len(ids))}?",
            question=f"{verb} {_plural(len(ids))}: {', '.join(map(str, ids[:20]))}"
            + (" …" if len(ids) > 20 else ""),
            action=f"jobs/bulk?action={action}",
            fields=[("ids", str(i)) for i in ids],
            verb=f"{verb} {_plural(len(ids))}",
            back="jobs",
        )
    app = ui.service.app
    changed = 0
    for job_id in ids:
        try:
            before = visible_job(user, ui, job_id)
            if action == "requeue":
                changed += 0 if app.requeue(job_id).idempotent else 1
            else:
                after = app.cancel(job_id)
                # A finished job is left as it was; a running one is asked to stop.
                changed += int(after.state != before.state or after.cancel_requested)
        except JobNotFound:
            continue  # pruned meanwhile, or another owner's: nothing to do
    log.info(
        "dashboard_bulk", action=action, selected=len(ids), changed=changed, by=user.principal.owner
    )
    past = "Requeued" if action == "requeue" else "Cancelled"
    return ui.redirect(request, "/jobs", done=f"{past} {_plural(changed)} of {len(ids)} selected")


@router.post("/jobs/{job_id}/{action}")
async def job_action(request: Request, job_id: int, action: str) -> Response:
    ui = dashboard(request)
    if action not in BULK_ACTIONS:
        raise HTTPException(404, f"no action {action!r} on a job; use requeue or cancel")
    user, _ = await ui.action(request, "operate" if action == "requeue" else "submit")
    visible_job(user, ui, job_id)
    app = ui.service.app
    if action == "requeue":
        result = app.requeue(job_id)
        done = "left alone: it is running" if result.idempotent else "requeued"
    else:
        done = f"cancel: now {app.cancel(job_id).state}"
    log.info("dashboard_job_action", job_id=job_id, action=action, by=user.principal.owner)
    return ui.redirect(request, f"/jobs/{job_id}", done=f"Job {job_id} {done}")


@router.post("/dead/requeue")
async def dead_requeue(request: Request) -> Response:
    ui = dashboard(request)
    user, form = await ui.action(request, "operate")
    task = form.get("task")
    code = form.get("error_code") or None
    app = ui.service.app
    ids = app.dead_letter_ids(task, code, created_by=user.tenant, limit=MAX_BULK)
    label = f"task {task} with error {code or '(none)'}"
    if form.get("confirm") != "yes":
        return ui.render(
            request,
            "confirm.html",
            user,
            title=f"Requeue {_plural(len(ids))}?",
            question=f"Requeue {_plural(len(ids))} dead-lettered for {label}.",
            action="dead/requeue",
            fields=[("task", task), ("error_code", code or "")],
            verb=f"Requeue {_plural(len(ids))}",
            back="dead",
        )
    changed = sum(0 if app.requeue(i).idempotent else 1 for i in ids)
    log.info("dashboard_dead_requeue", task=task, error_code=code, changed=changed)
    return ui.redirect(request, "/dead", done=f"Requeued {_plural(changed)} ({label})")


@router.post("/queues/{name}/{action}")
async def queue_action(request: Request, name: str, action: str) -> Response:
    ui = dashboard(request)
    if action not in ("pause", "resume") or not QUEUE_NAME_RE.match(name):
        raise HTTPException(404, "no such queue action; use pause or resume")
    user, _ = await ui.action(request, "operate")
    app = ui.service.app
    (app.pause_queue if action == "pause" else app.resume_queue)(name)
    log.info("dashboard_queue_" + action, queue=name, by=user.principal.owner)
    return ui.redirect(request, "/")


@router.post("/breakers/{key}/reset")
async def breaker_reset(request: Request, key: str) -> Response:
    ui = dashboard(request)
    user, _ = await ui.action(request, "operate")
    ui.service.app.reset_breaker(key)
    log.info("dashboard_breaker_reset", key=key, by=user.principal.owner)
    return ui.redirect(request, "/breakers", done=f"Breaker {key} reset")


@router.post("/alerts/{alert_id}/ack")
async def alert_ack(request: Request, alert_id: int) -> Response:
    ui = dashboard(request)
    user, _ = await ui.action(request, "operate")
    ui.service.app.ack_alert(alert_id)
    log.info("dashboard_alert_ack", alert_id=alert_id, by=user.principal.owner)
    return ui.redirect(request, "/breakers", done=f"Alert {alert_id} acknowledged")
