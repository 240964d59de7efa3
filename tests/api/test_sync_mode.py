"""``execution_mode: "sync"`` never runs task code in the API server.

The server enqueues the job and waits for a worker to finish it (answering 200 with the
finished job, or 202 when the wait ends first), so a slow task is not run twice, many
waiting clients do not stall other requests, and a task that kills its process kills a
worker, never the server.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

import durq
from durq.api import create_app
from durq.api.keys import KeyService
from durq.settings import Settings

from ..waiting import wait_until
from ..worker.support import running_worker, worker_processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(app: durq.App) -> Iterator[str]:
    """The HTTP service for ``app`` on a real uvicorn server in a thread; its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(app), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, what="the API server to start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def keys(app: durq.App) -> dict[str, str]:
    service = KeyService(app)
    return {
        "producer": service.create("acme", "producer")[1],
        "other": service.create("other", "viewer")[1],
    }


def make_app(db_url: str, **settings: object) -> durq.App:
    return durq.App(
        settings=Settings(database_url=db_url, api_rate_limit_per_second=0, **settings)  # type: ignore[arg-type]
    )


def test_sync_run_longer_than_the_lease_is_not_executed_twice(db_url: str) -> None:
    app = make_app(db_url, lease_seconds=1.0, heartbeat_seconds=0.2)
    runs: list[int] = []

    @app.task
    def slow(n: int) -> int:
        runs.append(n)
        time.sleep(2.5)  # the work itself: 2.5 lease lengths
        return n

    key = keys(app)["producer"]
    with serving(app) as url, running_worker(app, poll_interval=0.05):
        response = httpx.post(
            f"{url}/v1/jobs",
            json={"task": "slow", "args": {"n": 7}, "execution_mode": "sync"},
            headers={"X-API-Key": key},
            timeout=30,
        )
    assert response.status_code == 200, response.text
    job = response.json()["data"]
    assert (job["state"], job["result"], job["attempt"]) == ("succeeded", 7, 1)
    assert runs == [7]
    assert [a.outcome for a in app.attempts(job["id"])] == ["succeeded"]
    app.close()


def test_many_waiting_sync_submissions_leave_the_server_answering(db_url: str) -> None:
    app = make_app(db_url, api_sync_wait_seconds=4.0)

    @app.task
    async def never_returns() -> None:
        await asyncio.Event().wait()

    key = keys(app)
    with (
        serving(app) as url,
        running_worker(app, poll_interval=0.05, concurrency=10, shutdown_timeout=0.5),
    ):

        async def submit(client: httpx.AsyncClient) -> httpx.Response:
            return await client.post(
                "/v1/jobs",
                json={"task": "never_returns", "execution_mode": "sync"},
                headers={"X-API-Key": key["producer"]},
            )

        async def scenario() -> tuple[list[httpx.Response], list[float]]:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                waiting = [asyncio.create_task(submit(client)) for _ in range(45)]
                while len(app.list_jobs(limit=100)) < 45:  # every request is waiting now
                    await asyncio.sleep(0.02)
                latencies = []
                for path, headers in (
                    ("/healthz", {}),
                    ("/readyz", {}),
                    ("/v1/jobs", {"X-API-Key": key["other"]}),  # another tenant's reads
                ):
                    started = time.monotonic()
                    answer = await client.get(path, headers=headers)
                    latencies.append(time.monotonic() - started)
                    assert answer.status_code == 200, answer.text
                return await asyncio.gather(*waiting), latencies

        responses, latencies = asyncio.run(scenario())
    assert max(latencies) < 1.0, latencies
    assert [r.status_code for r in responses] == [202] * 45
    assert {r.json()["data"]["state"] for r in responses} <= {"queued", "running"}
    app.close()


def test_a_sync_task_that_kills_its_process_does_not_stop_the_server(
    db_url: str, tmp_path: Path
) -> None:
    app = make_app(db_url, api_sync_wait_seconds=3.0)
    key = keys(app)["producer"]
    with serving(app) as url, worker_processes(db_url, tmp_path) as start:
        worker = start("--poll-interval", "0.05")
        worker.wait_ready(app)
        response = httpx.post(
            f"{url}/v1/jobs",
            json={"task": "kills_its_process", "execution_mode": "sync"},
            headers={"X-API-Key": key},
            timeout=30,
        )
        assert worker.wait_exit() == 7  # the task took its worker down ...
        health = httpx.get(f"{url}/healthz", timeout=5)
        read = httpx.get(
            f"{url}/v1/jobs/{response.json()['data']['id']}",
            headers={"X-API-Key": key},
            timeout=5,
        )
    assert response.status_code == 202, response.text  # ... and the server answered
    assert health.status_code == 200
    assert read.json()["data"]["state"] == "running"  # until its lease expires
    app.close()
