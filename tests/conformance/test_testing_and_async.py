"""`durq.testing` helpers and the async surface, on both backends."""

from __future__ import annotations

import asyncio

import pytest

import durq
from durq import testing


def test_assert_and_refute_enqueued(app: durq.App) -> None:
    @app.task(queue="mail")
    def send(to: str, subject: str) -> str:
        return to

    send.enqueue(to="a@example.com", subject="hi")
    (job,) = testing.assert_enqueued(app, send, args={"to": "a@example.com"})
    assert job.queue == "mail"
    testing.assert_enqueued(app, "send", count=1, queue="mail")
    with pytest.raises(AssertionError, match=r"expected a job of task .send.*found 0"):
        testing.assert_enqueued(app, send, args={"to": "b@example.com"})
    testing.refute_enqueued(app, send, args={"to": "b@example.com"})
    with pytest.raises(AssertionError):
        testing.refute_enqueued(app, send)


def test_drain_runs_everything_ready(app: durq.App) -> None:
    seen: list[int] = []

    @app.task
    def record(n: int) -> None:
        seen.append(n)

    for n in range(5):
        record.enqueue(n=n)
    record.enqueue_with({"n": 99}, delay=3600)  # not ready: drain leaves it
    done = testing.drain(app)
    assert sorted(seen) == [0, 1, 2, 3, 4]
    assert all(j.state == "succeeded" for j in done)
    assert [j.args["n"] for j in testing.enqueued_jobs(app, record)] == [99]


def test_async_app_mirrors_the_sync_operations(app: durq.App) -> None:
    @app.task
    async def shout(word: str) -> str:
        return word.upper()

    async def scenario() -> None:
        aapp = durq.AsyncApp(app)
        job = await aapp.enqueue("shout", {"word": "hi"}, idempotency_key="k")
        again = await shout.aenqueue(word="hi")
        assert again.id != job.id  # no key on the second: a new job
        assert (await aapp.get_job(job.id)).state == "queued"
        finished = await aapp.run_job(job.id)
        assert finished.result == "HI"
        assert [a.outcome for a in await aapp.attempts(job.id)] == ["succeeded"]
        assert (await aapp.cancel(again.id)).state == "cancelled"
        assert (await aapp.requeue(again.id)).job.state == "queued"
        assert len(await aapp.list_jobs(state="queued")) == 1

    asyncio.run(scenario())
