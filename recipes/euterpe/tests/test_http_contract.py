"""Seed 003 §6, line by line, and §9's idempotency rules, over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from tests.waiting import wait_until

from durq._maintenance import prune
from recipes.euterpe.store import Store

from .conftest import Stand, key_of
from .world import gated_ffmpeg


def test_submit_is_202_and_idempotent_per_requester_and_key(
    make_stand: Callable[..., Stand],
) -> None:
    stand = make_stand()
    body = stand.body(key="same")
    first = stand.client.post("/transcode", json=body, headers=key_of("acme"))
    assert first.status_code == 202
    job_id = first.json()["job_id"]
    assert first.json() == {
        "job_id": job_id,
        "status": "queued",
        "status_url": f"/transcode/status?job_id={job_id}",
    }
    # same key, same request (even with refreshed credentials): the stored response
    again = body | {"storage_credentials": stand.body()["storage_credentials"]}
    repeat = stand.client.post("/transcode", json=again, headers=key_of("acme"))
    assert repeat.status_code == 202 and repeat.json() == first.json()
    with stand.euterpe.store.engine.begin() as conn:
        snapshot = Store.find(conn, "acme", "same")
    assert snapshot is not None and snapshot.response == first.json()
    # same key, another request: conflict, nothing enqueued
    changed = body | {"renditions": [{"name": "hi", "format": "ogg"}]}
    conflict = stand.client.post("/transcode", json=changed, headers=key_of("acme"))
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "idempotency_conflict"
    # the scope is the requester: another requester's same key is its own job
    other = stand.client.post("/transcode", json=body, headers=key_of("globex"))
    assert other.status_code == 202 and other.json()["job_id"] != job_id
    assert stand.euterpe.app.count_jobs() == 2


def test_submit_needs_a_valid_key_and_a_valid_body(make_stand: Callable[..., Stand]) -> None:
    stand = make_stand()
    body = stand.body()
    for headers in ({}, {"X-API-Key": "not-a-key"}, {"X-API-Key": ""}):
        refused = stand.client.post("/transcode", json=body, headers=headers)
        assert refused.status_code == 401, headers
        assert refused.json()["error"]["code"] == "unauthorized"
    for bad in (
        body | {"unknown": 1},
        body | {"renditions": []},
        body | {"renditions": [{"name": "a", "format": "avi"}]},
        body | {"status_webhook_url": "ftp://example.com/x"},
    ):
        invalid = stand.client.post("/transcode", json=bad, headers=key_of("acme"))
        assert invalid.status_code == 422, bad
    assert stand.euterpe.app.count_jobs() == 0


def test_status_reads_every_state_and_refuses_others_jobs(
    make_stand: Callable[..., Stand], tmp_path: Path
) -> None:
    wrapper, gate = gated_ffmpeg(tmp_path)
    stand = make_stand(ffmpeg_binary=str(wrapper))
    job_id = stand.submit().json()["job_id"]
    assert stand.status(job_id).json()["status"] == "queued"
    # a worker runs it; ffmpeg waits at the gate, so the job is held in `processing`
    runner = threading.Thread(target=stand.euterpe.app.run_job, args=(job_id,))
    runner.start()
    try:
        wait_until(
            lambda: stand.status(job_id).json()["status"] == "processing",
            timeout=30,
            what="the job to reach its processing stage",
        )
        held = stand.status(job_id)
        assert held.status_code == 200
        assert held.json()["worker_id"] and held.json()["lease_expires_at"]
        assert held.json()["claim_version"] == 1
    finally:
        gate.touch()
        runner.join(30)
    done = stand.status(job_id)
    assert done.status_code == 200 and done.json()["status"] == "succeeded"
    assert [o["name"] for o in done.json()["outputs"]] == ["low"]
    assert done.json()["worker_id"] is None

    # auth: no key 401; another requester's job 403; unknown 404
    assert stand.client.get("/transcode/status", params={"job_id": job_id}).status_code == 401
    assert stand.status(job_id, requester="globex").status_code == 403
    assert stand.status(999_999).status_code == 404

    # a failed attempt with attempts left reads as queued, with its error and retry time
    broken = make_stand(s3_endpoint_url="http://127.0.0.1:9")
    retry_id = broken.submit(key="retry").json()["job_id"]
    broken.euterpe.app.run_job(retry_id)
    retrying = broken.status(retry_id).json()
    assert retrying["status"] == "queued" and retrying["attempt_count"] == 1
    assert retrying["error"]["attempt"] == 1 and retrying["retry_at"]

    # pruned after its retention: 410
    settings = stand.euterpe.app.settings.model_copy(update={"prune_succeeded_seconds": 0})
    assert prune.run_once(stand.euterpe.app.driver, settings)["succeeded"] == 1
    gone = stand.status(job_id)
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "gone"


def test_credentials_push_advances_the_version_once(make_stand: Callable[..., Stand]) -> None:
    stand = make_stand()
    job_id = stand.submit().json()["job_id"]
    fresh = stand.body()["storage_credentials"]
    push = {"job_id": job_id, "credential_version": 1, "storage_credentials": fresh}
    pushed = stand.client.post("/transcode/credentials", json=push, headers=key_of("acme"))
    assert pushed.status_code == 200 and pushed.json()["credential_version"] == 2
    # a second push naming the old version changes nothing (the worker's refresh is answered)
    stale = stand.client.post("/transcode/credentials", json=push, headers=key_of("acme"))
    assert stale.json()["credential_version"] == 2
    assert stand.euterpe.app.credential_version(job_id) == 2
    other = stand.client.post("/transcode/credentials", json=push, headers=key_of("globex"))
    assert other.status_code == 403


def test_a_cancelled_job_reads_as_failed(make_stand: Callable[..., Stand]) -> None:
    stand = make_stand()
    job_id = stand.submit().json()["job_id"]
    stand.euterpe.app.cancel(job_id)  # an operator stops it before any worker runs it
    read = stand.status(job_id)
    assert read.status_code == 200 and read.json()["status"] == "failed"
    assert read.json()["attempt_count"] == 0
