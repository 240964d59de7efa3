"""Beyond the seed: strict revocation under real concurrency (d-008). Four worker
processes run the members' backfills while the members are removed; whatever the
interleaving, no closure edge (and no default row it would justify) survives a removal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.waiting import wait_until

from durq import testing
from recipes.nexus_closure import default_library_closure as closure
from recipes.nexus_closure.libraries import (
    accept_library_member,
    add_media_to_library,
    create_library,
    create_user,
    remove_library_member,
)
from recipes.nexus_closure.tasks import NexusRuntime

from .world import backfill_row, edges, library_media, make_media

WORKERS = 4
MEMBERS = 16  # all but the last two are removed while their backfills run
MEDIA = 60
REPO_ROOT = Path(__file__).resolve().parents[3]


def _start_worker(database_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "DURQ_ENV": "prod"}
    with log.open("wb") as out:  # a file, not a pipe: a full pipe would stall the worker
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "recipes.nexus_closure",
                "--database-url",
                database_url,
                "worker",
                "--concurrency",
                "2",
                "--poll-interval",
                "0.05",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.slow
def test_member_removal_racing_backfill_leaves_no_closure_edge(
    runtime: NexusRuntime, tmp_path: Path
) -> None:
    with runtime.sessions.begin() as session:
        owner = create_user(session, "owner@example.com").id
        library = create_library(session, owner, "Shared").id
        members = [create_user(session, f"m{i}@example.com").id for i in range(MEMBERS)]
    media = {make_media(runtime, owner, f"paper {i}") for i in range(MEDIA)}
    with runtime.sessions.begin() as session:
        for m in media:
            add_media_to_library(session, owner, library, m)
    with runtime.sessions.begin() as session:
        for member in members:  # row + durq job in the accept transaction
            assert accept_library_member(session, library, member, app=runtime.app)
        defaults = {u: closure.default_library_id_for(session, u) for u in members}

    logs = [tmp_path / f"worker-{i}.log" for i in range(WORKERS)]
    workers = [_start_worker(runtime.app.database_url, log) for log in logs]
    try:
        wait_until(
            lambda: runtime.app.list_jobs(state=["running", "succeeded"]),
            timeout=60,
            what="a worker to start a backfill",
        )
        removed = members[:-2]
        # newest first: the workers claim oldest first, so these are still queued or running
        for member in reversed(removed):
            with runtime.sessions.begin() as session:
                assert remove_library_member(session, owner, library, member)
        wait_until(
            lambda: not runtime.app.list_jobs(state=["queued", "retry_wait", "running"]),
            timeout=120,
            what="every backfill job to finish",
        )
        # stop only workers that finished starting (a signal earlier kills, not stops)
        wait_until(
            lambda: sum(w.alive for w in runtime.app.list_workers()) == WORKERS,
            timeout=60,
            what="all four workers to be up",
        )
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc in workers:
            proc.wait(timeout=60)
    assert [p.returncode for p in workers] == [0] * WORKERS, [
        log.read_text()[-2000:] for log in logs
    ]
    assert {j.state for j in runtime.app.list_jobs(limit=1000)} == {"succeeded"}
    for member in removed:
        default = defaults[member]
        assert default is not None
        assert edges(runtime, default_library_id=default) == set(), f"member {member}"
        assert library_media(runtime, default) == set()
        assert backfill_row(runtime, closure.BackfillKey(default, library, member)) is None
    for member in members[-2:]:  # the members who stayed got the whole library
        default = defaults[member]
        assert default is not None
        assert library_media(runtime, default) == media
        row = backfill_row(runtime, closure.BackfillKey(default, library, member))
        assert row is not None and row["status"] == "completed"
    testing.refute_enqueued(runtime.app, closure.BACKFILL_TASK_NAME)
    assert library_media(runtime, library) == media  # the shared library is untouched
