"""Job secrets: envelope encryption, rotation, refusal of anything tampered, and a
planted secret that must appear nowhere in clear."""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

import durq
from durq._drivers.postgres.driver import conninfo_from_url
from durq._drivers.sqlite.driver import path_from_url
from durq._engine.secrets import Keyring, parse_kek
from durq.errors import SecretUnavailable
from durq.wire import JobOut, dump

from ..waiting import wait_until
from ..worker.support import running_worker
from .receiver import Receiver, serving

K1 = base64.b64encode(os.urandom(32)).decode()
K2 = base64.b64encode(os.urandom(32)).decode()
PLANTED = "PLANTED-s3cr3t-7f1c9a"


def secret_app(make: Callable[..., durq.App], keks: dict[str, str], active: str) -> durq.App:
    app = make(secret_keks=keks, secret_active_kek=active)

    @app.task(name="use_secret", pass_context=True, max_attempts=2)
    def use_secret(ctx: durq.JobContext) -> dict[str, Any]:
        token = ctx.secrets["token"]
        logging.getLogger("tests.task").info("job %s ran with a token", ctx.job.id)
        return {"token_length": len(token), "version": ctx.credential_version}

    return app


def flip(text: str) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[-1] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def test_secret_tampered_wrong_aad_or_retired_kek_fails(
    outbox_app: Callable[..., durq.App],
) -> None:
    app = secret_app(outbox_app, {"k1": K1}, "k1")
    job = app.enqueue("use_secret", {}, secrets={"token": PLANTED}, created_by="acme")
    with app.driver.read() as ex:
        sealed = app.driver.secret_get(ex, job.id)
    assert sealed is not None and sealed.kek_id == "k1" and sealed.encryption_version == 1
    ring = app.keyring
    assert ring.open(sealed) == {"token": PLANTED}
    wrong = {
        "tampered ciphertext": dataclasses.replace(sealed, encrypted=flip(sealed.encrypted)),
        "tampered data key": dataclasses.replace(sealed, dek_wrapped=flip(sealed.dek_wrapped)),
        "another job id": dataclasses.replace(sealed, job_id=sealed.job_id + 1),
        "another credential_version": dataclasses.replace(sealed, credential_version=2),
        "another owner": dataclasses.replace(sealed, owner="mallory"),
    }
    for case, bad in wrong.items():
        with pytest.raises(SecretUnavailable) as info:
            ring.open(bad)
        assert PLANTED not in str(info.value), case
    retired = Keyring({"k2": parse_kek("k2", K2)}, "k2")
    with pytest.raises(SecretUnavailable, match="retired"):
        retired.open(sealed)

    # A worker that no longer knows k1 fails the job at once, with a clear error.
    later = secret_app(outbox_app, {"k2": K2}, "k2")
    done = later.run_job(job.id)
    assert done.state == "dead_letter"
    assert done.last_error_code == "secret_unavailable"
    assert "KEK 'k1'" in (done.last_error or "") and "retired" in (done.last_error or "")


def test_kek_rotation_rewraps_and_old_jobs_still_run(outbox_app: Callable[..., durq.App]) -> None:
    old = secret_app(outbox_app, {"k1": K1}, "k1")
    jobs = [old.enqueue("use_secret", {}, secrets={"token": f"t-{i}"}) for i in range(3)]
    with old.driver.read() as ex:
        before = {j.id: old.driver.secret_get(ex, j.id) for j in jobs}
    both = secret_app(outbox_app, {"k1": K1, "k2": K2}, "k2")
    assert both.rotate_kek("k1", "k2") == 3
    assert both.rotate_kek("k1", "k2") == 0  # nothing left under k1
    with both.driver.read() as ex:
        after = {j.id: both.driver.secret_get(ex, j.id) for j in jobs}
    for job_id, sealed in after.items():
        assert sealed is not None and sealed.kek_id == "k2"
        assert sealed.encrypted == before[job_id].encrypted  # type: ignore[union-attr]
        assert sealed.dek_wrapped != before[job_id].dek_wrapped  # type: ignore[union-attr]
    # k1 retired: the old jobs still run under k2.
    new = secret_app(outbox_app, {"k2": K2}, "k2")
    for job in jobs:
        done = new.run_job(job.id)
        assert done.state == "succeeded", done.last_error
        assert done.result == {"token_length": 3, "version": 1}
    with pytest.raises(durq.ValidationError):
        new.rotate_kek("k2", "k9")


def _database_text(db_url: str) -> str:
    if db_url.startswith("sqlite"):
        path = Path(path_from_url(db_url))
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(FULL)")
        parts = [p.read_bytes() for p in path.parent.glob(path.name + "*") if p.is_file()]
        return b"".join(parts).decode("latin-1")
    with psycopg.connect(conninfo_from_url(db_url)) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        ]
        rows = []
        for table in tables:
            for (row,) in conn.execute(f"SELECT row_to_json(t)::text FROM {table} t"):
                rows.append(row)
        return "\n".join(rows)


def test_secret_appears_nowhere_in_clear(
    outbox_app: Callable[..., durq.App], db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = Receiver()
    app = secret_app(outbox_app, {"k1": K1}, "k1")
    with serving(receiver) as url:
        job = app.enqueue("use_secret", {}, secrets={"token": PLANTED}, webhook_url=url)
        with running_worker(app, concurrency=2, poll_interval=0.05):
            wait_until(
                lambda: [e.state for e in app.list_events(job_id=job.id)] == ["delivered"] * 3,
                timeout=30,
                what="the job's events delivered",
            )
    done = app.get_job(job.id)
    assert done.state == "succeeded" and done.result == {"token_length": len(PLANTED), "version": 1}
    with app.driver.read() as ex:
        sealed = app.driver.secret_get(ex, job.id)
    places = {
        "logs": caplog.text,
        "result and job": json.dumps(done.to_dict()),
        "API job view": json.dumps(dump(JobOut, done)),
        "attempts": json.dumps([a.to_dict() for a in app.attempts(job.id)]),
        "events": json.dumps([e.to_dict() for e in app.list_events(job_id=job.id)]),
        "webhook bodies": json.dumps(receiver.first),
        "database": _database_text(db_url),
        "sealed row repr": repr(sealed),
    }
    assert f"job {job.id} ran with a token" in caplog.text  # the logs were captured
    assert PLANTED.encode().hex() not in places["database"]
    for where, text in places.items():
        assert PLANTED not in text, f"the secret leaked into {where}"
