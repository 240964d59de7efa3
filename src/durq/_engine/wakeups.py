"""In-process wake-ups: after ``App`` commits new or requeued jobs, the idle producers of
this process on the same database look at once instead of at their next poll.

Across processes PostgreSQL's NOTIFY does the same (see ``durq._worker.notifier``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

__all__ = ["announce", "subscribe", "unsubscribe"]

Callback = Callable[[frozenset[str]], bool]

_subscribers: dict[str, list[Callback]] = {}
_lock = threading.Lock()


def announce(database_url: str, queues: Iterable[str]) -> bool:
    """Jobs were committed to ``queues``: wake this process's producers. True if one of
    them works one of those queues (and so was woken)."""
    if not _subscribers:  # the common case for a process that only enqueues
        return False
    with _lock:
        callbacks = list(_subscribers.get(database_url, ()))
    names = frozenset(queues)
    woken = False
    for callback in callbacks:
        woken = callback(names) or woken
    return woken


def subscribe(database_url: str, callback: Callback) -> None:
    with _lock:
        _subscribers.setdefault(database_url, []).append(callback)


def unsubscribe(database_url: str, callback: Callback) -> None:
    with _lock:
        callbacks = _subscribers.get(database_url, [])
        if callback in callbacks:
            callbacks.remove(callback)
        if not callbacks:
            _subscribers.pop(database_url, None)
