"""The outbox, job secrets and webhook nonces: each operation over both backends.

Events are written by the database itself (a job with a ``webhook_url`` gets one per state
change), so these tests insert jobs and read the events the triggers wrote."""

from __future__ import annotations

from dataclasses import replace

from durq import states
from durq._drivers import Driver
from durq._drivers.outbox import DeliveryWrite
from durq.errors import LeaseLost
from durq.types import Job, OutboxEvent, SealedSecrets

from .helpers import JobFactory, PlainSql, ago, claim_one, finish, insert, near, set_time

HOOK = "http://127.0.0.1:9/hook"


def _hooked(driver: Driver, new_job: JobFactory, task: str = "t") -> Job:
    return insert(driver, new_job(task, webhook_url=HOOK, created_by="acme"))


def _events(
    driver: Driver, job_id: int | None = None, state: str | None = None
) -> list[OutboxEvent]:
    with driver.read() as ex:
        return driver.outbox_list(ex, job_id=job_id, state=state, after_id=None, limit=100)


def _claim(
    driver: Driver, *, worker: str = "d1", limit: int = 10, lease: float = 30.0
) -> list[OutboxEvent]:
    with driver.transaction() as ex:
        return driver.outbox_claim(ex, worker_id=worker, limit=limit, lease_seconds=lease)


def _finish(driver: Driver, write: DeliveryWrite) -> OutboxEvent | None:
    with driver.transaction() as ex:
        return driver.outbox_finish(ex, write)


def _delivered(event: OutboxEvent) -> DeliveryWrite:
    return DeliveryWrite(event.id, event.claim_version, "delivered", status=200)


def _sealed(job: Job, **changes: object) -> SealedSecrets:
    sealed = SealedSecrets(
        job_id=job.id,
        owner="acme",
        credential_version=1,
        encrypted="c1",
        dek_wrapped="w1",
        kek_id="k1",
        encryption_version=1,
        refresh_url="http://127.0.0.1:9/refresh",
        max_refresh_attempts=2,
    )
    return replace(sealed, **changes)  # type: ignore[arg-type]


def _store(driver: Driver, sealed: SealedSecrets) -> None:
    with driver.transaction() as ex:
        driver.secret_insert(ex, sealed)


# ---- events and their lease ---------------------------------------------------------


def test_outbox_list_reads_the_events_a_hooked_job_wrote_in_order(
    driver: Driver, new_job: JobFactory
) -> None:
    job = _hooked(driver, new_job)
    insert(driver, new_job("plain"))  # no webhook: no event
    claimed = claim_one(driver)
    assert claimed.id == job.id
    finish(driver, claimed, states.complete({"out": 1}))
    events = _events(driver)
    assert [e.event_type for e in events] == ["job.queued", "job.running", "job.succeeded"]
    assert {e.job_id for e in events} == {job.id} and {e.url for e in events} == {HOOK}
    assert [e.id for e in events] == sorted(e.id for e in events)
    assert _events(driver, state="delivered") == []
    assert [e.id for e in _events(driver, job_id=job.id + 1000)] == []
    with driver.read() as ex:
        page = driver.outbox_list(ex, job_id=job.id, state=None, after_id=events[0].id, limit=1)
    assert [e.id for e in page] == [events[1].id]


def test_outbox_claim_takes_only_the_head_event_of_each_job(
    driver: Driver, new_job: JobFactory
) -> None:
    first = _hooked(driver, new_job)
    second = _hooked(driver, new_job)
    finish(driver, claim_one(driver), states.complete(None))  # first job: 3 events
    claimed = _claim(driver)
    assert [(e.job_id, e.event_type) for e in claimed] == [
        (first.id, "job.queued"),
        (second.id, "job.queued"),
    ]
    assert all(e.state == "delivering" and e.worker_id == "d1" for e in claimed)
    assert all(e.attempt == 1 and e.claim_version == 1 for e in claimed)
    assert all(near(e.lease_expires_at, ago(-30)) for e in claimed)
    assert _claim(driver, worker="d2") == []  # the rest wait behind their job's head


def test_outbox_heartbeat_many_extends_only_leases_still_held(
    driver: Driver, new_job: JobFactory
) -> None:
    _hooked(driver, new_job)
    _hooked(driver, new_job)
    a, b = _claim(driver, lease=5)
    with driver.transaction() as ex:
        alive = driver.outbox_heartbeat_many(
            ex, [(a.id, a.claim_version), (b.id, b.claim_version + 1)], 60
        )
    assert alive == {a.id}
    (after,) = _events(driver, job_id=a.job_id)
    assert near(after.lease_expires_at, ago(-60))


def test_outbox_finish_is_fenced_by_claim_version(driver: Driver, new_job: JobFactory) -> None:
    _hooked(driver, new_job)
    (event,) = _claim(driver)
    stale = DeliveryWrite(event.id, event.claim_version + 1, "delivered", status=200)
    assert _finish(driver, stale) is None
    retry = DeliveryWrite(event.id, event.claim_version, "pending", delay=60, status=503, error="x")
    written = _finish(driver, retry)
    assert written is not None
    assert (written.state, written.last_status, written.last_error) == ("pending", 503, "x")
    assert near(written.next_attempt_at, ago(-60)) and written.lease_expires_at is None
    assert _finish(driver, _delivered(event)) is None  # no longer delivering


def test_finish_deliveries_reports_lost_leases_per_event(
    driver: Driver, new_job: JobFactory
) -> None:
    _hooked(driver, new_job)
    _hooked(driver, new_job)
    a, b = _claim(driver)
    out = driver.finish_deliveries(
        [_delivered(a), DeliveryWrite(b.id, b.claim_version + 5, "delivered")]
    )
    assert isinstance(out[0], OutboxEvent) and out[0].state == "delivered"
    assert out[0].delivered_at is not None
    assert isinstance(out[1], LeaseLost) and out[1].job_id == b.id
    assert [e.state for e in _events(driver, job_id=b.job_id)] == ["delivering"]


def test_outbox_expired_finds_lapsed_leases_for_reclaim(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    _hooked(driver, new_job)
    _hooked(driver, new_job)
    a, _ = _claim(driver)
    set_time(sql, driver, "durq_outbox", "lease_expires_at", ago(5), where="id", key=a.id)
    with driver.read() as ex:
        expired = driver.outbox_expired(ex, 10)
    assert [e.id for e in expired] == [a.id]
    reclaim = DeliveryWrite(a.id, a.claim_version, "pending", delay=0, bump=True)
    back = _finish(driver, reclaim)
    assert back is not None and back.claim_version == a.claim_version + 1
    assert _finish(driver, _delivered(a)) is None  # the old holder is fenced out


def test_outbox_get_reads_one_event_by_its_event_id(driver: Driver, new_job: JobFactory) -> None:
    job = _hooked(driver, new_job)
    (event,) = _events(driver, job_id=job.id)
    with driver.read() as ex:
        assert driver.outbox_get(ex, event.event_id) == event
        assert driver.outbox_get(ex, "00000000-0000-0000-0000-000000000000") is None


def test_outbox_redeliver_requeues_only_finished_events(
    driver: Driver, new_job: JobFactory
) -> None:
    _hooked(driver, new_job)
    (event,) = _claim(driver)
    with driver.transaction() as ex:
        assert driver.outbox_redeliver(ex, event.event_id) is None  # still delivering
    dead = DeliveryWrite(event.id, event.claim_version, "dead_letter", status=500, error="e")
    assert _finish(driver, dead) is not None
    with driver.transaction() as ex:
        again = driver.outbox_redeliver(ex, event.event_id)
    assert again is not None
    assert (again.state, again.attempt, again.delivered_at) == ("pending", 0, None)
    assert [e.id for e in _claim(driver)] == [event.id]


def test_outbox_notify_wakes_listeners_at_commit(driver: Driver) -> None:
    if not driver.capabilities.listen_notify:
        with driver.transaction() as ex:  # delivery workers poll: a no-op that still runs
            driver.outbox_notify(ex)
        return
    listener = driver.listen()
    try:
        with driver.transaction() as ex:
            driver.outbox_notify(ex)
        assert next(iter(listener.notifications(timeout=10))) == "__outbox__"
    finally:
        listener.close()


def test_outbox_counts_counts_events_and_attempts_by_state(
    driver: Driver, new_job: JobFactory
) -> None:
    with driver.read() as ex:
        assert driver.outbox_counts(ex) == {}
    _hooked(driver, new_job)
    _hooked(driver, new_job)
    a, _ = _claim(driver)
    _finish(driver, _delivered(a))
    with driver.read() as ex:
        assert driver.outbox_counts(ex) == {"delivered": (1, 1), "delivering": (1, 1)}


def test_outbox_latencies_measures_creation_to_delivery(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    _hooked(driver, new_job)
    (event,) = _claim(driver)
    set_time(sql, driver, "durq_outbox", "created_at", ago(10), where="id", key=event.id)
    _finish(driver, _delivered(event))
    with driver.read() as ex:
        (seconds,) = driver.outbox_latencies(ex)
    assert 9 <= seconds <= 12


def test_outbox_forget_job_deletes_its_events_only(driver: Driver, new_job: JobFactory) -> None:
    gone = _hooked(driver, new_job)
    kept = _hooked(driver, new_job)
    with driver.transaction() as ex:
        driver.outbox_forget_job(ex, gone.id)
    assert _events(driver, job_id=gone.id) == []
    assert len(_events(driver, job_id=kept.id)) == 1


def test_event_from_row_decodes_a_row_read_by_plain_sql(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    job = _hooked(driver, new_job)
    (event,) = _events(driver, job_id=job.id)
    row = sql.one("SELECT * FROM durq_outbox WHERE id = :id", id=event.id)
    decoded = driver.event_from_row(row)
    assert decoded == event
    assert decoded.payload["state"] == "queued" and decoded.created_at.tzinfo is not None


# ---- sealed secrets -----------------------------------------------------------------


def test_secret_insert_and_secret_get_round_trip(driver: Driver, new_job: JobFactory) -> None:
    job = insert(driver, new_job())
    with driver.read() as ex:
        assert driver.secret_get(ex, job.id) is None
    sealed = _sealed(job)
    _store(driver, sealed)
    with driver.read() as ex:
        assert driver.secret_get(ex, job.id) == sealed


def test_secret_replace_needs_the_expected_version(driver: Driver, new_job: JobFactory) -> None:
    job = insert(driver, new_job())
    _store(driver, _sealed(job))
    newer = _sealed(job, credential_version=2, encrypted="c2", dek_wrapped="w2")
    with driver.transaction() as ex:
        assert not driver.secret_replace(ex, newer, expected_version=7)
        assert driver.secret_replace(ex, newer, expected_version=1)
    with driver.read() as ex:
        stored = driver.secret_get(ex, job.id)
    assert stored is not None and (stored.credential_version, stored.encrypted) == (2, "c2")


def test_secret_rewrap_changes_the_wrapped_key_under_the_old_kek_only(
    driver: Driver, new_job: JobFactory
) -> None:
    job = insert(driver, new_job())
    _store(driver, _sealed(job))
    with driver.transaction() as ex:
        assert not driver.secret_rewrap(
            ex, job.id, old_kek_id="other", kek_id="k2", dek_wrapped="x"
        )
        assert driver.secret_rewrap(ex, job.id, old_kek_id="k1", kek_id="k2", dek_wrapped="w9")
    with driver.read() as ex:
        stored = driver.secret_get(ex, job.id)
    assert stored is not None
    assert (stored.kek_id, stored.dek_wrapped, stored.encrypted) == ("k2", "w9", "c1")


def test_secret_by_kek_pages_the_secrets_under_one_kek(driver: Driver, new_job: JobFactory) -> None:
    jobs = [insert(driver, new_job()) for _ in range(3)]
    _store(driver, _sealed(jobs[0]))
    _store(driver, _sealed(jobs[1], kek_id="k2"))
    _store(driver, _sealed(jobs[2]))
    with driver.read() as ex:
        first = driver.secret_by_kek(ex, "k1", after_id=0, limit=1)
        rest = driver.secret_by_kek(ex, "k1", after_id=first[0].job_id, limit=10)
    assert [s.job_id for s in first + rest] == [jobs[0].id, jobs[2].id]


def test_secret_refresh_attempt_counts_for_the_lease_holder_only(
    driver: Driver, new_job: JobFactory
) -> None:
    job = insert(driver, new_job())
    _store(driver, _sealed(job))
    with driver.transaction() as ex:
        assert driver.secret_refresh_attempt(ex, job.id, 1) is None  # not running
    running = claim_one(driver)
    with driver.transaction() as ex:
        assert driver.secret_refresh_attempt(ex, job.id, running.claim_version + 1) is None
        assert driver.secret_refresh_attempt(ex, job.id, running.claim_version) == 1
        assert driver.secret_refresh_attempt(ex, job.id, running.claim_version) == 2


def test_secret_from_row_decodes_a_row_read_by_plain_sql(
    driver: Driver, new_job: JobFactory, sql: PlainSql
) -> None:
    job = insert(driver, new_job())
    sealed = _sealed(job)
    _store(driver, sealed)
    row = sql.one("SELECT * FROM durq_job_secrets WHERE job_id = :id", id=job.id)
    assert driver.secret_from_row(row) == sealed


def test_secret_get_reads_one_jobs_secrets_and_none_for_another(
    driver: Driver, new_job: JobFactory
) -> None:
    job, other = insert(driver, new_job()), insert(driver, new_job())
    _store(driver, _sealed(job, owner=None, refresh_url=None))
    with driver.read() as ex:
        got = driver.secret_get(ex, job.id)
        assert driver.secret_get(ex, other.id) is None
    assert got is not None and (got.owner, got.refresh_url, got.refresh_attempts) == (None, None, 0)


# ---- webhook nonces -----------------------------------------------------------------


def test_nonce_insert_refuses_a_nonce_seen_within_its_window(driver: Driver, sql: PlainSql) -> None:
    with driver.transaction() as ex:
        assert driver.nonce_insert(ex, "n1", 300)
        assert not driver.nonce_insert(ex, "n1", 300)
    set_time(sql, driver, "durq_webhook_nonces", "expires_at", ago(1), where="nonce", key="n1")
    with driver.transaction() as ex:
        assert driver.nonce_insert(ex, "n1", 300)  # its window passed


def test_nonce_prune_deletes_expired_nonces_only(driver: Driver, sql: PlainSql) -> None:
    with driver.transaction() as ex:
        driver.nonce_insert(ex, "old", 300)
        driver.nonce_insert(ex, "new", 300)
    set_time(sql, driver, "durq_webhook_nonces", "expires_at", ago(1), where="nonce", key="old")
    with driver.transaction() as ex:
        driver.nonce_prune(ex)
    assert [r["nonce"] for r in sql.rows("SELECT nonce FROM durq_webhook_nonces")] == ["new"]
