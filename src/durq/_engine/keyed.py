"""The rules for keyed jobs, applied in the same transaction as the write they follow.

* enqueue: a job naming an open breaker key is refused (``BreakerOpen``, nothing written);
  naming a half-open key, it waits behind the probe; a concurrency key records its limits;
* finish: a failed attempt counts against its breaker key, and at the threshold the key
  opens — its waiting jobs are parked (one probe at the end of the pause, the rest after)
  and an alert is raised once; the first success closes it, releases the parked jobs and
  resolves the alert. A job leaving ``running`` frees its concurrency slot. Run logs are
  stored with the attempt, and a job dead-lettered by a failure raises an alert.

Jobs with no key pay nothing: ``finish_batch`` hands them to the driver's plain write.
Breaker rows are locked first, in key order, so two finishers never deadlock.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from .. import states
from .._drivers import Driver, Executor, FinishRequest, NewJob
from ..errors import BreakerOpen, LeaseLost
from ..keys import Breaker
from ..types import Finished, Job, JobState

__all__ = [
    "BREAKER_CATEGORY",
    "DEAD_LETTER_CATEGORY",
    "breakers_healthy",
    "enter",
    "finish",
    "finish_batch",
    "needs_rules",
    "plain_breaker_keys",
    "reset_breaker",
]

log = logging.getLogger("durq.breakers")

BREAKER_CATEGORY = "circuit_breaker"
DEAD_LETTER_CATEGORY = "dead_letter"
_FAILED = frozenset({"failed", "lost", "crashed"})


def enter(driver: Driver, ex: Executor, new: NewJob) -> NewJob:
    """Check and record ``new``'s keys before it is inserted; may delay it behind a probe."""
    if new.breaker_key is not None:
        breaker = driver.breaker_enter(
            ex, new.breaker_key, new.breaker_threshold, new.breaker_pause
        )
        if breaker.state == "open":
            alert = driver.alert_open(ex, category=BREAKER_CATEGORY, key=new.breaker_key)
            until = breaker.paused_until.isoformat() if breaker.paused_until else None
            raise BreakerOpen(new.breaker_key, until, alert.to_dict() if alert else None)
        if breaker.state == "half_open" and breaker.held_until is not None:
            new = replace(new, run_at=max(breaker.held_until, new.run_at or breaker.now))
    if new.concurrency_key is not None and new.limit is not None:
        lim = new.limit
        driver.limit_define(
            ex, new.concurrency_key, concurrency=lim.concurrency, rate=lim.rate, per=lim.per
        )
    return new


def needs_rules(req: FinishRequest) -> bool:
    """The outcome moves a breaker, a limit slot or an alert: written with those rules."""
    return bool(
        req.breaker_key
        or req.concurrency_key
        or req.report
        or req.change.to_state == JobState.DEAD_LETTER
    )


def _only_breakers_healthy(driver: Driver, reqs: Sequence[FinishRequest]) -> bool:
    """Every keyed outcome is a success for a breaker with nothing to undo (no failure
    counted, not paused), and no other rule applies: the plain write is all there is.
    Read unlocked: a failure another worker commits meanwhile orders after these
    successes, so its count stands, as it would if they had finished first."""
    keys = plain_breaker_keys(reqs)
    if keys is None:
        return False
    with driver.read() as ex:
        return breakers_healthy(driver.breaker_read_many(ex, keys))


def plain_breaker_keys(reqs: Sequence[FinishRequest]) -> list[str] | None:
    """The breaker keys of a batch whose only rule is its successes' breakers (sorted);
    None when any other rule applies. The plain write is all there is when every breaker
    read is :func:`breakers_healthy`."""
    keys: set[str] = set()
    for req in reqs:
        if req.concurrency_key or req.report or req.change.to_state != JobState.SUCCEEDED:
            if needs_rules(req):
                return None
            continue
        if req.breaker_key:
            keys.add(req.breaker_key)
    return sorted(keys)


def breakers_healthy(found: Mapping[str, Breaker]) -> bool:
    """No failure counted and none paused: a success has nothing to undo."""
    return all(b.consecutive_failures == 0 and b.paused_until is None for b in found.values())


def finish_batch(driver: Driver, reqs: Sequence[FinishRequest]) -> list[Finished | LeaseLost]:
    """The worker's batched write. Without keys, reports or dead letters it is the driver's
    plain batch; otherwise the rules run in the same transaction."""
    if not any(needs_rules(req) for req in reqs) or _only_breakers_healthy(driver, reqs):
        return driver.finish_batch(reqs)
    with driver.transaction() as ex:
        locked = _lock_breakers(driver, ex, reqs)
        results = driver.job_finish_many(ex, reqs)
        settle(driver, ex, reqs, results, locked)
    return results


def finish(driver: Driver, ex: Executor, req: FinishRequest) -> Job:
    """One fenced write (reclaimer, ``App.run_job``) and its rules; ``LeaseLost`` if the
    lease is gone."""
    locked = _lock_breakers(driver, ex, [req])
    job = driver.job_finish(ex, req)
    if job is None:
        raise LeaseLost(req.job_id, req.claim_version)
    if needs_rules(req):
        settle(driver, ex, [req], [Finished.of(job)], locked)
    return job


def _lock_breakers(
    driver: Driver, ex: Executor, reqs: Sequence[FinishRequest]
) -> dict[str, Breaker]:
    """One statement locks every breaker the batch names (in key order)."""
    return driver.breaker_lock_many(
        ex, sorted({req.breaker_key for req in reqs if req.breaker_key})
    )


def settle(
    driver: Driver,
    ex: Executor,
    reqs: Sequence[FinishRequest],
    results: Sequence[Finished | LeaseLost | None],
    locked: dict[str, Breaker],
) -> None:
    """Apply the rules to the outcomes that were written (a lost lease wrote nothing);
    ``locked`` holds the batch's breakers as locked before the write."""
    by_key: dict[str, list[tuple[FinishRequest, Finished]]] = {}
    slots: Counter[str] = Counter()
    dead: list[tuple[FinishRequest, Finished]] = []
    for req, res in zip(reqs, results, strict=True):
        if not isinstance(res, Finished):
            continue
        if req.report is not None:
            driver.attempt_report(
                ex, job_id=req.job_id, claim_version=req.claim_version, report=req.report
            )
        if req.breaker_key:
            by_key.setdefault(req.breaker_key, []).append((req, res))
        if req.concurrency_key:
            slots[req.concurrency_key] += 1
        if res.state == JobState.DEAD_LETTER and req.change.attempt_outcome in _FAILED:
            dead.append((req, res))
    for key in sorted(by_key):
        for req, res in by_key[key]:
            _count(driver, ex, key, req.change, res, locked)
    for key in sorted(slots):
        driver.limit_release(ex, key, slots[key])
    for req, res in sorted(dead, key=lambda pair: pair[0].task):
        driver.alert_raise(
            ex,
            category=DEAD_LETTER_CATEGORY,
            severity="error",
            key=req.task or "unknown",
            # A summary only: the job's arguments and error message may hold secrets.
            context={
                "job_id": req.job_id,
                "task": req.task,
                "error_code": res.last_error_code,
                "breaker_key": req.breaker_key,
            },
        )


def _count(
    driver: Driver,
    ex: Executor,
    key: str,
    change: states.Change,
    res: Finished,
    locked: dict[str, Breaker],
) -> None:
    if res.state == JobState.SUCCEEDED:
        b = locked.get(key)
        if b is not None and (b.consecutive_failures or b.paused_until is not None):
            _success(driver, ex, key)
            locked.pop(key)  # closed now: later successes of this batch have nothing to do
    elif change.attempt_outcome in _FAILED and res.state != JobState.CANCELLED:
        _failure(driver, ex, key, res)
        after = driver.breaker_lock(ex, key)  # its count and pause as just written
        if after is not None:
            locked[key] = after


def _failure(driver: Driver, ex: Executor, key: str, res: Finished) -> None:
    b = driver.breaker_lock(ex, key) or driver.breaker_enter(ex, key, 5, 1800.0)
    failures = b.consecutive_failures + 1
    if b.state == "open":  # a job that was running when it opened: park its retry too
        driver.breaker_set(
            ex,
            key,
            failures=failures,
            failed=True,
            paused_until=b.paused_until,
            held_until=b.held_until,
            opened=False,
        )
        _park(driver, ex, b, b.paused_until, b.held_until)
        return
    if failures < b.threshold and b.state == "closed":
        driver.breaker_set(
            ex,
            key,
            failures=failures,
            failed=True,
            paused_until=None,
            held_until=None,
            opened=False,
        )
        return
    pause = timedelta(seconds=b.pause_seconds)
    paused_until, held_until = b.now + pause, b.now + 2 * pause
    driver.breaker_set(
        ex,
        key,
        failures=failures,
        failed=True,
        paused_until=paused_until,
        held_until=held_until,
        opened=True,
    )
    _park(driver, ex, b, paused_until, held_until)
    context = {
        "breaker_key": key,
        "consecutive_failures": failures,
        "paused_until": paused_until.isoformat(),
        "last_job_id": res.id,
        "last_error_code": res.last_error_code,
        "reopened": b.state == "half_open",
    }
    driver.alert_raise(ex, category=BREAKER_CATEGORY, severity="warning", key=key, context=context)
    log.warning(
        "circuit breaker %r opened after %d consecutive failures; its jobs wait until %s, "
        "then one probe runs (durq breakers reset %r to close it now)",
        key,
        failures,
        paused_until.isoformat(),
        key,
    )


def _park(
    driver: Driver,
    ex: Executor,
    b: Breaker,
    probe_at: datetime | None,
    held_until: datetime | None,
) -> None:
    if probe_at is not None and held_until is not None:
        driver.job_park(ex, b.key, probe_at=probe_at, held_until=held_until)


def _success(driver: Driver, ex: Executor, key: str) -> None:
    b = driver.breaker_lock(ex, key)
    if b is None or (b.consecutive_failures == 0 and b.paused_until is None):
        return
    _close(driver, ex, b)
    if b.paused_until is not None:
        log.info("circuit breaker %r closed: a job succeeded after the pause", key)


def _close(driver: Driver, ex: Executor, b: Breaker) -> None:
    driver.breaker_set(
        ex, b.key, failures=0, failed=False, paused_until=None, held_until=None, opened=False
    )
    if b.held_until is not None:
        driver.job_release(ex, b.key, b.held_until)
    driver.alert_resolve(ex, category=BREAKER_CATEGORY, key=b.key)


def reset_breaker(driver: Driver, ex: Executor, key: str) -> Breaker | None:
    """An operator closes ``key`` now: count 0, parked jobs due, alert resolved."""
    b = driver.breaker_lock(ex, key)
    if b is None:
        return None
    _close(driver, ex, b)
    return driver.breaker_lock(ex, key)
