"""Group commit for SQLite: concurrent writes of one process share one transaction.

A commit under ``synchronous=FULL`` waits for the disk (milliseconds on many machines),
and SQLite admits one writer at a time. When the worker's claim and its outcome write
arrive together, committing them together halves the waits, as a hand-written drain
loop that claims and completes in one transaction does.

The first writer to find no commit under way leads: it takes every write queued so far
(itself included), runs each in a savepoint of one transaction, and commits once. A write
that raises is rolled back to its savepoint and its caller gets the exception; the others
still commit. A failed commit fails them all (none was written). Writes that arrive while
a group commits form the next group.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..sql import Executor, SqliteExecutor

__all__ = ["GroupCommit"]

T = TypeVar("T")

#: Writes one group takes at most; the rest wait for the next commit.
MAX_GROUP = 16
#: How long a lone write waits for a companion before it commits alone. The worker's
#: claim and the outcome write that freed its room are asked for within moments of each
#: other; a commit costs several milliseconds, so a short wait pays for itself.
GATHER_SECONDS = 0.001


class GroupCommit:
    def __init__(self, transaction: Callable[[], AbstractContextManager[Executor]]) -> None:
        self._transaction = transaction
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._queue: list[tuple[Callable[[Executor], Any], Future[Any]]] = []
        self._leading = False
        #: Commits made and writes they carried (diagnostics and tests).
        self.commits = 0
        self.writes = 0

    def run(self, fn: Callable[[Executor], T]) -> T:
        future: Future[T] = Future()
        with self._lock:
            self._queue.append((fn, future))
            self._arrived.notify()
            lead = not self._leading
            if lead:
                self._leading = True
        if lead:
            self._lead()
        return future.result()

    def _lead(self) -> None:
        # Lead until the queue is empty: a write queued while we committed has no other
        # leader coming.
        while True:
            with self._lock:
                if len(self._queue) == 1:
                    self._arrived.wait_for(lambda: len(self._queue) > 1, GATHER_SECONDS)
                group, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
                if not group:
                    self._leading = False
                    return
            self._commit(group)

    def _commit(self, group: list[tuple[Callable[[Executor], Any], Future[Any]]]) -> None:
        outcomes: list[tuple[Future[Any], bool, Any]] = []
        try:
            with self._transaction() as ex:
                for n, (fn, future) in enumerate(_pending(group)):
                    outcomes.append((future, *_in_savepoint(ex, f"durq_g{n}", fn)))
        except BaseException as exc:  # the commit failed: nothing of the group was written
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.commits += 1
        self.writes += len(outcomes)
        for future, ok, value in outcomes:
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


def _pending(
    group: list[tuple[Callable[[Executor], Any], Future[Any]]],
) -> Iterator[tuple[Callable[[Executor], Any], Future[Any]]]:
    for fn, future in group:
        if future.set_running_or_notify_cancel():
            yield fn, future


def _in_savepoint(ex: Executor, name: str, fn: Callable[[Executor], Any]) -> tuple[bool, Any]:
    assert isinstance(ex, SqliteExecutor)
    conn = ex.conn
    conn.execute(f"SAVEPOINT {name}")  # name: ours, never from input
    try:
        value = fn(ex)
    except Exception as exc:
        conn.execute(f"ROLLBACK TO {name}")
        conn.execute(f"RELEASE {name}")
        return False, exc
    conn.execute(f"RELEASE {name}")
    return True, value
