from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import durq

from .support import WorkerProcess, adopt_test_tasks, worker_processes


@pytest.fixture
def app(make_app: Callable[..., durq.App]) -> durq.App:
    """This test's App, knowing the tasks the worker processes run."""
    return adopt_test_tasks(make_app())


@pytest.fixture
def spawn(db_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """``spawn("--concurrency", "4", name="a")`` starts ``durq worker`` on this test's DB."""
    with worker_processes(db_url, tmp_path) as start:
        yield start
