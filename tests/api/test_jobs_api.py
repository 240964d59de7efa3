"""The jobs, queues, workers and keys routes: semantics, on both backends."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import durq
from durq._maintenance import prune
from durq.api.schemas import JobOut

from .conftest import INTERNAL_TOKEN, Api

REQUEUE_FIELDS = {
    "id",
    "queue",
    "task",
    "state",
    "attempts",
    "max_attempts",
    "last_error_code",
    "updated_at",
    "finished_at",
    "idempotent",
    "enqueue_dispatched",
}
SHOW_FIELDS = {
    "id",
    "queue",
    "task",
    "args",
    "state",
    "stage",
    "attempt",
    "max_attempts",
    "claim_version",
    "worker_id",
    "priority",
    "run_at",
    "created_at",
    "updated_at",
    "finished_at",
    "last_error_code",
    "last_error",
    "result",
}


def as_json(job: durq.Job) -> dict[str, Any]:
    """The job as the API renders it (times in RFC 3339 with Z)."""
    return JobOut.model_validate(job.to_dict()).model_dump(mode="json")


# ---- submit ---------------------------------------------------------------------------


def test_submit_returns_202_with_the_job(api: Api) -> None:
    run_at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    response = api.call(
        "POST",
        "/v1/jobs",
        "producer",
        json={
            "task": "add",
            "args": {"x": 2, "y": 3},
            "queue": "math",
            "priority": -5,
            "run_at": run_at.isoformat().replace("+00:00", "Z"),
            "max_attempts": 4,
        },
    )
    assert response.status_code == 202, response.text
    job = response.json()["data"]
    assert set(job) >= SHOW_FIELDS
    assert (job["state"], job["queue"], job["priority"], job["max_attempts"]) == (
        "queued",
        "math",
        -5,
        4,
    )
    assert (job["created_by"], job["args"]) == ("acme", {"x": 2, "y": 3})
    assert datetime.fromisoformat(job["run_at"]) == run_at
    assert as_json(api.app.get_job(job["id"])) == job

    delayed = api.submit(delay_seconds=30)
    created = datetime.fromisoformat(delayed["created_at"])
    assert 29 <= (datetime.fromisoformat(delayed["run_at"]) - created).total_seconds() <= 31


def test_unknown_task_or_wrong_arguments_are_refused_and_write_nothing(api: Api) -> None:
    typo = api.call("POST", "/v1/jobs", "producer", json={"task": "ad", "args": {"x": 1}})
    assert typo.status_code == 422, typo.text
    error = typo.json()["error"]
    assert error["code"] == "E_UNKNOWN_TASK" and "did you mean 'add'" in error["message"]
    wrong = api.call(
        "POST", "/v1/jobs", "producer", json={"task": "add", "args": {"x": 1, "y": 2, "z": 3}}
    )
    assert wrong.status_code == 422, wrong.text
    assert "unexpected keyword argument 'z'" in wrong.json()["error"]["message"]
    assert "add(x: 'int', y: 'int')" in wrong.json()["error"]["message"]
    assert api.job_count() == 0


def test_sync_execution_waits_for_a_worker_and_answers_with_the_final_state(api: Api) -> None:
    api.start_worker()  # sync never runs the task in the server: a worker does
    assert api.worker is not None
    response = api.call(
        "POST",
        "/v1/jobs",
        "producer",
        json={"task": "add", "args": {"x": 20, "y": 22}, "execution_mode": "sync"},
    )
    assert response.status_code == 200, response.text
    job = response.json()["data"]
    assert (job["state"], job["result"], job["attempt"]) == ("succeeded", 42, 1)
    assert job["worker_id"] == api.worker.worker_id
    attempts = api.call("GET", f"/v1/jobs/{job['id']}/attempts", "viewer").json()["data"]
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [(1, "succeeded")]
    assert [a["worker_id"] for a in attempts] == [api.worker.worker_id]

    failed = api.submit(task="invalid", execution_mode="sync")
    assert (failed["state"], failed["last_error_code"]) == ("dead_letter", "invalid_tuple")


@pytest.mark.parametrize(
    "schedule",
    [{"delay_seconds": 5}, {"run_at": "2099-01-01T00:00:00Z"}],
    ids=["delay", "run_at"],
)
def test_sync_refusals_write_nothing(api: Api, schedule: dict[str, Any]) -> None:
    body = {"task": "add", "args": {"x": 1, "y": 2}, "execution_mode": "sync", **schedule}
    response = api.call("POST", "/v1/jobs", "producer", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "E_VALIDATION"
    assert "drop run_at and delay_seconds" in response.json()["error"]["message"]
    assert api.job_count() == 0


def test_sync_task_the_server_does_not_define_is_enqueued_for_a_worker(
    make_api: Callable[..., Api],
) -> None:
    """A server whose App defines no tasks (a producer without the code) accepts any task
    name; it never runs the task, so the job waits for a worker that defines it, and when
    the wait ends first the answer is 202 with the pending job."""
    api = make_api(api_sync_wait_seconds=0.3, tasks=False)
    response = api.call(
        "POST", "/v1/jobs", "producer", json={"task": "unknown.task", "execution_mode": "sync"}
    )
    assert response.status_code == 202, response.text
    job = response.json()["data"]
    assert (job["task"], job["state"], job["attempt"]) == ("unknown.task", "queued", 0)
    assert as_json(api.app.get_job(job["id"])) == job


def test_idempotency_key_over_http(api: Api) -> None:
    body = {"task": "add", "args": {"x": 1, "y": 2}}
    key = {"Idempotency-Key": "order-42"}
    first = api.call("POST", "/v1/jobs", "producer", json=body, headers=key)
    again = api.call("POST", "/v1/jobs", "producer", json=body, headers=key)
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json()["data"]["id"] == first.json()["data"]["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers

    changed = api.call(
        "POST", "/v1/jobs", "producer", json={**body, "args": {"x": 9, "y": 9}}, headers=key
    )
    assert changed.status_code == 409
    error = changed.json()["error"]
    assert error["code"] == "E_IDEMPOTENCY_CONFLICT" and "use a new key" in error["message"]
    stored = api.app.get_job(first.json()["data"]["id"])
    assert (stored.args, stored.state, api.job_count()) == ({"x": 1, "y": 2}, "queued", 1)

    # the scope is the key's owner: another owner's identical key is another request
    other = api.call("POST", "/v1/jobs", "other_producer", json=body, headers=key)
    assert other.status_code == 202 and other.json()["data"]["id"] != stored.id


# ---- read -----------------------------------------------------------------------------


def test_get_job_404_and_410(make_api: Callable[..., Api]) -> None:
    api = make_api(prune_succeeded_seconds=0)
    job = api.submit(execution_mode="sync")
    assert api.call("GET", f"/v1/jobs/{job['id']}", "viewer").json()["data"] == job
    missing = api.call("GET", "/v1/jobs/999999", "viewer")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "E_NOT_FOUND"
    assert prune.run_once(api.app.driver, api.app.settings)["succeeded"] == 1
    for path in ("", "/attempts", "/artifacts"):
        gone = api.call("GET", f"/v1/jobs/{job['id']}{path}", "operator")
        assert gone.status_code == 410, path
        assert gone.json()["error"]["code"] == "E_GONE"
        assert "pruned" in gone.json()["error"]["message"]


def test_list_pages_stay_stable_while_jobs_are_added(make_api: Callable[..., Api]) -> None:
    api = make_api(api_max_page_size=3)
    ids = [api.submit()["id"] for _ in range(5)]

    def page(cursor: str | None = None, limit: int = 2) -> tuple[list[int], str | None]:
        params: dict[str, Any] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        body = api.call("GET", "/v1/jobs", "viewer", params=params).json()
        return [j["id"] for j in body["data"]], body["next_cursor"]

    first, cursor = page()
    assert first == [ids[4], ids[3]] and cursor
    newer = [api.submit()["id"] for _ in range(3)]  # arrive between two page reads
    second, cursor = page(cursor)
    third, last = page(cursor)
    assert (second, third, last) == ([ids[2], ids[1]], [ids[0]], None)
    capped, cursor = page(limit=100)  # the page size is capped, the rest is a page away
    assert capped == newer[::-1] and cursor


def test_list_filters_and_tenancy(api: Api) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    done = api.submit(execution_mode="sync")  # the worker it starts works "default" only
    waiting = api.submit(queue="slow")
    theirs = api.submit("other_producer", queue="theirs")

    def ids(who: str, **params: Any) -> list[int]:
        response = api.call("GET", "/v1/jobs", who, params=params)
        assert response.status_code == 200, response.text
        return [j["id"] for j in response.json()["data"]]

    assert ids("operator") == [theirs["id"], waiting["id"], done["id"]]
    assert ids("operator", state=["succeeded", "cancelled"]) == [done["id"]]
    assert ids("operator", queue="slow") == [waiting["id"]]
    assert ids("operator", created_by="other") == [theirs["id"]]
    assert ids("operator", task="nope") == []
    after = before.isoformat().replace("+00:00", "Z")
    assert len(ids("operator", created_after=after)) == 3
    assert ids("operator", created_before=after) == []
    # tenants see their owner's jobs only, whatever they ask for
    assert ids("viewer") == [waiting["id"], done["id"]]
    assert ids("other_viewer") == [theirs["id"]]
    assert ids("other_viewer", created_by="acme") == []


# ---- cancel and requeue ---------------------------------------------------------------


def test_cancel_queued_then_terminal_is_unchanged(api: Api) -> None:
    job = api.submit()
    first = api.call("POST", f"/v1/jobs/{job['id']}/cancel", "producer")
    assert first.status_code == 200 and first.json()["data"]["state"] == "cancelled"
    again = api.call("POST", f"/v1/jobs/{job['id']}/cancel", "producer")
    assert again.status_code == 200 and again.json()["data"] == first.json()["data"]
    done = api.submit(execution_mode="sync")
    kept = api.call("POST", f"/v1/jobs/{done['id']}/cancel", "operator").json()["data"]
    assert (kept["state"], kept["result"]) == ("succeeded", 3)


def job_in_state(api: Api, state: str) -> int:
    """A job of owner acme in ``state``, made through durq's real paths: submitted over
    HTTP, then run in this thread by ``App.run_job`` (no worker runs beside the API, so
    a job stays in the state it was put in)."""
    app = api.app
    assert api.worker is None
    if state == "queued":
        return int(api.submit()["id"])
    if state == "running":
        job_id = int(api.submit()["id"])
        with app.driver.transaction() as ex:
            assert app.driver.job_claim_id(ex, job_id, worker_id="w1", lease_seconds=60)
        return job_id
    task = {"retry_wait": "flaky", "succeeded": "add", "dead_letter": "invalid"}.get(state)
    if task is not None:
        job_id = int(api.submit(task=task)["id"])
        assert app.run_job(job_id).state == state
        return job_id
    job_id = int(api.submit()["id"])
    api.call("POST", f"/v1/jobs/{job_id}/cancel", "producer")
    return job_id


STATES = ["queued", "running", "retry_wait", "succeeded", "dead_letter", "cancelled"]


def test_requeue_each_state_with_full_operator_view(api: Api) -> None:
    # enqueue_dispatched: whether idle workers were woken. No worker runs in this process,
    # so only a PostgreSQL NOTIFY (to workers anywhere) can wake one; SQLite workers poll.
    dispatched = api.app.driver.capabilities.listen_notify
    for state in STATES:
        job_id = job_in_state(api, state)
        before = api.app.get_job(job_id)
        assert before.state == state
        response = api.call("POST", f"/v1/jobs/{job_id}/requeue", "operator")
        assert response.status_code == 200, (state, response.text)
        data = response.json()["data"]
        assert set(data) == REQUEUE_FIELDS, state
        after = api.app.get_job(job_id)
        if state == "running":  # seed 000: a running job is an idempotent no-op
            assert (data["state"], data["idempotent"], data["enqueue_dispatched"]) == (
                "running",
                True,
                False,
            )
            assert after == before
        else:
            assert (data["state"], data["attempts"], data["last_error_code"]) == (
                "queued",
                0,
                None,
            ), state
            assert (data["finished_at"], data["idempotent"], data["enqueue_dispatched"]) == (
                None,
                False,
                dispatched,
            ), state
            assert after.state == "queued" and after.updated_at >= before.updated_at
        assert datetime.fromisoformat(data["updated_at"]) == after.updated_at
        assert (data["id"], data["max_attempts"]) == (job_id, before.max_attempts)


def test_internal_requeue_route(api: Api) -> None:
    token = {"X-Internal-Token": INTERNAL_TOKEN}
    job_id = job_in_state(api, "dead_letter")
    response = api.call(
        "POST", "/internal/jobs/requeue", "operator", headers=token, json={"job_id": job_id}
    )
    assert response.status_code == 200, response.text
    assert set(response.json()["data"]) == REQUEUE_FIELDS
    assert response.json()["data"]["state"] == "queued"
    missing = api.call(
        "POST", "/internal/jobs/requeue", "operator", headers=token, json={"job_id": 987654}
    )
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "E_NOT_FOUND"


# ---- queues and workers ---------------------------------------------------------------


def test_queue_health_pause_and_resume(make_api: Callable[..., Api]) -> None:
    api = make_api(degraded_ready_count=1)
    api.submit()
    stats = api.call("GET", "/v1/queues", "operator").json()["data"]  # every owner's ages
    (default,) = stats
    assert (default["name"], default["counts"]["queued"], default["ready"]) == ("default", 1, 1)
    assert default["degraded"] is False and default["paused"] is False
    assert default["oldest_age_seconds"] is not None and default["p95_age_seconds"] is not None
    api.submit()
    assert api.call("GET", "/v1/queues", "viewer").json()["data"][0]["degraded"] is True

    paused = api.call("POST", "/v1/queues/default/pause", "operator")
    assert paused.json()["data"] == {"name": "default", "paused": True}
    assert api.call("GET", "/v1/queues", "viewer").json()["data"][0]["paused"] is True
    assert api.app.work(queues=["default"]) == []  # a paused queue is not claimed
    api.call("POST", "/v1/queues/default/resume", "operator")
    assert len(api.app.work(queues=["default"])) == 2

    bad = api.call("POST", "/v1/queues/bad name!/pause", "operator")
    assert bad.status_code in (404, 422)


def test_workers_lists_registered_workers(api: Api) -> None:
    assert api.call("GET", "/v1/workers", "viewer").json() == {"data": []}
    backend = api.app.driver
    with backend.transaction() as ex:
        backend.worker_register(
            ex,
            worker_id="host:7",
            hostname="host",
            pid=7,
            queues=["default"],
            concurrency=4,
            heartbeat_seconds=10,
        )
    (worker,) = api.call("GET", "/v1/workers", "viewer").json()["data"]
    assert (worker["id"], worker["hostname"], worker["queues"]) == ("host:7", "host", ["default"])
    assert (worker["status"], worker["alive"], worker["concurrency"]) == ("alive", True, 4)


# ---- keys and identity ----------------------------------------------------------------


def test_key_lifecycle_over_http(api: Api) -> None:
    created = api.call("POST", "/v1/keys", "admin", json={"owner": "billing", "role": "producer"})
    assert created.status_code == 201, created.text
    new = created.json()["data"]
    assert {"id", "key", "owner", "role", "created_at"} <= set(new)
    headers = {"X-API-Key": new["key"]}
    whoami = api.client.get("/v1/auth/whoami", headers=headers).json()["data"]
    assert whoami == {
        "key_id": new["id"],
        "owner": "billing",
        "role": "producer",
        "roles": ["viewer", "producer", "operator", "admin"],
        "powers": ["read", "submit"],
        "tenant": "billing",
    }

    listed = {k["id"]: k for k in api.call("GET", "/v1/keys", "admin").json()["data"]}
    assert "key" not in listed[new["id"]] and "key_hash" not in listed[new["id"]]
    assert listed[new["id"]]["last_used_at"] is not None
    # only the SHA-256 hash is stored
    backend = api.app.driver
    with backend.read() as ex:
        found = backend.key_by_hash(ex, hashlib.sha256(new["key"].encode()).hexdigest())
    assert found is not None and found[0].id == new["id"] and found[1] != new["key"]

    disabled = api.call("DELETE", f"/v1/keys/{new['id']}", "admin")
    assert disabled.status_code == 200 and disabled.json()["data"]["disabled_at"]
    refused = api.client.get("/v1/auth/whoami", headers=headers)
    assert refused.status_code == 401 and "disabled" in refused.json()["error"]["message"]
    assert api.call("DELETE", "/v1/keys/key_nope", "admin").status_code == 404

    bad_role = api.call("POST", "/v1/keys", "admin", json={"owner": "x", "role": "god"})
    assert bad_role.status_code == 422 and "viewer, producer" in bad_role.json()["error"]["message"]


def test_key_list_pages(api: Api) -> None:
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 4, **({"cursor": cursor} if cursor else {})}
        body = api.call("GET", "/v1/keys", "admin", params=params).json()
        seen += [k["id"] for k in body["data"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == seen and set(seen) == set(api.key_ids.values())


def test_bootstrap_keys_only_in_dev(make_api: Callable[..., Api]) -> None:
    dev = make_api(env="dev")
    response = dev.client.get("/v1/auth/whoami", headers={"X-API-Key": "dev-admin-key"})
    assert response.status_code == 200, response.text
    assert response.json()["data"]["owner"] == "dev-admin"

    prod = make_api(env="prod", api_bootstrap_keys={"admin": "should-not-exist"})
    for key in ("dev-admin-key", "should-not-exist"):
        assert prod.client.get("/v1/auth/whoami", headers={"X-API-Key": key}).status_code == 401
