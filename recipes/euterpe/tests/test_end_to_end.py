"""Seed 003 end to end: a real ffmpeg transcode of a generated tone, from and to a real
S3-compatible server that refuses expired credentials, by a real ``durq worker`` process,
announced by signed webhooks to a real receiver."""

from __future__ import annotations

import itertools
import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from tests.waiting import wait_until

from recipes.euterpe import Settings, create_app
from recipes.euterpe.states import TRANSITIONS, euterpe_status

from .world import API_KEYS, Requester, S3Server, WorkerProcess, serving


def _duration(ffmpeg: str, path: Path) -> float:
    probe = Path(ffmpeg).with_name("ffprobe")
    out = subprocess.run(
        [
            str(probe),
            "-v",
            "error",
            "-show_entries",
            "format=duration",
            "-of",
            "csv=p=0",
            str(path),
        ],
        capture_output=True,
        check=True,
        timeout=30,
    )
    return float(out.stdout.decode().strip())


def test_transcode_end_to_end_with_ffmpeg(
    deployment: dict[str, str],
    make_settings: Callable[..., Settings],
    s3: S3Server,
    tone: Path,
    ffmpeg: str,
    work_dir: Path,
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    s3.s3.upload_file(str(tone), bucket, "in/tone.wav")
    prefix = f"out/{uuid.uuid4().hex[:8]}/"
    creds = s3.issue(bucket, "in/tone.wav", prefix)
    requester = Requester(s3, API_KEYS["acme"])
    with serving(create_app(make_settings())) as euterpe_url, serving(requester.http) as hooks:
        requester.euterpe_url = euterpe_url
        client = httpx.Client(base_url=euterpe_url, headers={"X-API-Key": API_KEYS["acme"]})
        body = {
            "idempotency_key": "tone-1",
            "source": {"bucket": bucket, "key": "in/tone.wav"},
            "output": {"bucket": bucket, "prefix": prefix},
            "renditions": [
                {"name": "low", "format": "mp3", "bitrate": "64k"},
                {"name": "web", "format": "ogg"},
            ],
            "storage_credentials": creds.as_json(),
            "status_webhook_url": f"{hooks}/hooks",
            "refresh_url": f"{hooks}/refresh",
        }
        accepted = client.post("/transcode", json=body)
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["job_id"]
        assert client.post("/transcode", json=body).json() == accepted.json()
        requester.users[job_id] = creds.user
        # The short-lived key expires before a worker gets to the job: the storage itself
        # answers 403, the worker asks the requester's refresh URL, and runs on the new key.
        s3.expire(creds)
        worker = WorkerProcess(deployment | {"POD_NAME": "euterpe-0"}, tmp_path / "worker.log")
        try:
            wait_until(
                lambda: ("succeeded", None) in requester.statuses(job_id),
                timeout=60,  # a deadline for loaded machines; about 3 s when idle
                what="the job.succeeded webhook",
            )
            status = client.get("/transcode/status", params={"job_id": job_id}).json()
        finally:
            code = worker.stop()
        log = worker.log()
    assert code == 0, log

    # the status read: outputs where the request said, real audio of the tone's length
    assert status["status"] == "succeeded" and status["attempt_count"] == 1
    assert status["credential_version"] == 2
    assert status["counters"] == {
        "execution_attempts": 1,
        "refresh_attempts": 1,
        "delivery_attempts": len(requester.events),
    }
    assert [(o["name"], o["key"]) for o in status["outputs"]] == [
        ("low", f"{prefix}low.mp3"),
        ("web", f"{prefix}web.ogg"),
    ]
    for output in status["outputs"]:
        local = tmp_path / Path(output["key"]).name
        s3.s3.download_file(bucket, output["key"], str(local))
        assert local.stat().st_size == output["bytes"] > 0
        assert abs(_duration(ffmpeg, local) - 2.0) < 0.1

    # the refresh: one signed call naming the refused version
    assert requester.refresh_calls == [
        {"type": "credentials.refresh", "job_id": job_id, "credential_version": 1}
    ]

    # the webhooks: all signed (x-euterpe-*), each event once, in an order §3 allows
    assert requester.rejected == []
    seen = [euterpe_status(state, stage) for state, stage in requester.statuses(job_id)]
    assert seen == [
        "queued",
        "claimed",
        "fetching",  # 403 from the storage here: refresh, then run again at once
        "queued",
        "claimed",
        "fetching",
        "processing",
        "uploading",
        "succeeded",
    ]
    assert all(pair in TRANSITIONS for pair in itertools.pairwise(seen))
    events = [e for e in requester.events if e["job_id"] == job_id]
    assert [e["sequence"] for e in events] == sorted(e["sequence"] for e in events)
    assert all("result" not in e["data"] for e in events[:-1])
    assert events[-1]["type"] == "job.succeeded"
    assert events[-1]["data"]["result"]["outputs"] == status["outputs"]

    # the worker's own delivery counters, in its shutdown line
    sent = len(requester.events) + requester.duplicates
    assert f"deliveries: {sent} attempted, {sent} succeeded, 0 failed" in log

    # worker identity from POD_NAME; temp files gone; no credential in events or logs
    assert "euterpe-0:" in log
    assert list(work_dir.iterdir()) == []
    dumped = json.dumps(requester.events) + log + json.dumps(status)
    assert creds.secret_access_key not in dumped
