"""The real world around Euterpe in its tests: an S3-compatible server that checks
credentials (moto's server, in a subprocess, with IAM authentication on), a requester that
issues scoped credentials, receives signed webhooks and answers refresh calls, and servers
on free ports."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import httpx
import pytest
import uvicorn
from botocore.config import Config  # type: ignore[import-untyped]
from fastapi import FastAPI, Request, Response
from tests.waiting import wait_until

from durq.webhooks import MemoryNonceStore, WebhookRejected, verify

REPO = Path(__file__).resolve().parents[3]
HOOK_SECRET = "whsec-euterpe-requester-0123456789"
API_KEYS = {"acme": "euterpe-key-acme-0123456789", "globex": "euterpe-key-globex-0123456789"}
PREFIX = "x-euterpe"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ffmpeg_or_skip() -> str:
    """ffmpeg's path. Missing where apt could install it is a broken setup (fail, and say
    how to fix it); the tests skip only where there is no apt."""
    found = shutil.which("ffmpeg")
    if found:
        return found
    if shutil.which("apt-get"):
        pytest.fail("ffmpeg is not installed: run `make install` (it installs Debian's ffmpeg)")
    pytest.skip("ffmpeg is not installed and apt-get is not available to install it")


def make_tone(path: Path, seconds: float = 2.0, *codec: str) -> Path:
    """A generated sine tone (no media files in the repository); its format follows the
    file's suffix, ``codec`` adds encoder options (e.g. ``"-b:a", "32k"``)."""
    tone = f"sine=frequency=440:duration={seconds}"
    command = [ffmpeg_or_skip(), "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi"]
    command += ["-i", tone, "-ac", "1", "-ar", "22050", *codec, str(path)]
    subprocess.run(command, check=True, timeout=30)
    return path


def gated_ffmpeg(folder: Path) -> tuple[Path, Path]:
    """A wrapper that runs the real ffmpeg once its gate file exists: ``(wrapper, gate)``.
    A job is held in its ``processing`` stage until the test creates the gate."""
    gate = folder / "ffmpeg-gate"
    wrapper = folder / "ffmpeg-gated"
    wrapper.write_text(
        f'#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.02; done\nexec "{ffmpeg_or_skip()}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, gate


# ---- the S3-compatible server ----------------------------------------------------------


@dataclass
class Credentials:
    access_key_id: str
    secret_access_key: str
    user: str

    def as_json(self) -> dict[str, str]:
        return {"access_key_id": self.access_key_id, "secret_access_key": self.secret_access_key}


class S3Server:
    """moto's S3 server on a free port. Buckets and an admin user are made before IAM
    authentication is switched on; from then on every request must carry a live access key
    whose policy allows it, or the server answers 403 (InvalidAccessKeyId, AccessDenied,
    SignatureDoesNotMatch)."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_until(self._up, timeout=30, what="the S3 server to start")
        iam = self.client("iam", "bootstrap", "bootstrap")
        iam.create_user(UserName="admin")
        iam.put_user_policy(
            UserName="admin",
            PolicyName="all",
            PolicyDocument=_policy([{"Action": "*", "Resource": "*"}]),
        )
        key = iam.create_access_key(UserName="admin")["AccessKey"]
        self.admin = Credentials(key["AccessKeyId"], key["SecretAccessKey"], "admin")
        httpx.post(f"{self.url}/moto-api/reset-auth", content=b"0").raise_for_status()
        self.iam = self.client("iam", self.admin.access_key_id, self.admin.secret_access_key)
        self.s3 = self.client("s3", self.admin.access_key_id, self.admin.secret_access_key)

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the S3 server exited with {self.proc.returncode}")
        try:
            return httpx.get(f"{self.url}/moto-api/", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    def client(self, service: str, key: str, secret: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )

    def new_bucket(self) -> str:
        name = f"media-{uuid.uuid4().hex[:12]}"
        self.s3.create_bucket(Bucket=name)
        return name

    def issue(self, bucket: str, source_key: str, output_prefix: str) -> Credentials:
        """Scoped credentials: read the one source object, write under the output prefix."""
        user = f"job-{uuid.uuid4().hex[:12]}"
        self.iam.create_user(UserName=user)
        self.iam.put_user_policy(
            UserName=user,
            PolicyName="scoped",
            PolicyDocument=_policy(
                [
                    {"Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/{source_key}"},
                    {
                        "Action": "s3:PutObject",
                        "Resource": f"arn:aws:s3:::{bucket}/{output_prefix}*",
                    },
                ]
            ),
        )
        return self.rotate(user)

    def rotate(self, user: str) -> Credentials:
        """A new access key for ``user``; every older one is deleted (expired)."""
        for old in self.iam.list_access_keys(UserName=user)["AccessKeyMetadata"]:
            self.iam.delete_access_key(UserName=user, AccessKeyId=old["AccessKeyId"])
        key = self.iam.create_access_key(UserName=user)["AccessKey"]
        return Credentials(key["AccessKeyId"], key["SecretAccessKey"], user)

    def expire(self, creds: Credentials) -> None:
        self.iam.delete_access_key(UserName=creds.user, AccessKeyId=creds.access_key_id)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def _policy(statements: list[dict[str, str]]) -> str:
    return json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", **s} for s in statements]}
    )


# ---- servers on free ports -------------------------------------------------------------


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """An ASGI app on a real uvicorn server in a thread; its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=30, what="a test server to start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


# ---- the requester ---------------------------------------------------------------------


@dataclass
class Requester:
    """What a requester runs: a webhook receiver (verifies ``x-euterpe-*`` signatures,
    deduplicates by event id) and a refresh endpoint (verifies the worker's signed call,
    rotates the job's storage key and pushes it to Euterpe)."""

    s3: S3Server
    api_key: str
    euterpe_url: str = ""
    users: dict[int, str] = field(default_factory=dict)  # job id -> the job's storage user
    events: list[dict[str, Any]] = field(default_factory=list)  # deduplicated, in order
    seen: set[str] = field(default_factory=set)
    duplicates: int = 0
    rejected: list[str] = field(default_factory=list)
    refresh_calls: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.nonces = MemoryNonceStore()
        self.lock = threading.Lock()
        self.http = FastAPI()
        self.http.post("/hooks")(self.hook)
        self.http.post("/refresh")(self.refresh)

    def _verified(self, request: Request, body: bytes) -> str | None:
        try:
            verify(request.headers, body, [HOOK_SECRET], nonce_store=self.nonces, prefix=PREFIX)
        except WebhookRejected as exc:
            self.rejected.append(exc.reason)
            return None
        return request.headers[f"{PREFIX}-event-id"]

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        event_id = self._verified(request, body)
        if event_id is None:
            return Response(status_code=401)
        with self.lock:
            if event_id in self.seen:
                self.duplicates += 1
            else:
                self.seen.add(event_id)
                self.events.append(json.loads(body))
        return Response(status_code=204)

    async def refresh(self, request: Request) -> Response:
        body = await request.body()
        if self._verified(request, body) is None:
            return Response(status_code=401)
        call = json.loads(body)
        self.refresh_calls.append(call)
        fresh = self.s3.rotate(self.users[call["job_id"]])
        async with httpx.AsyncClient() as client:
            pushed = await client.post(
                f"{self.euterpe_url}/transcode/credentials",
                headers={"X-API-Key": self.api_key},
                json={
                    "job_id": call["job_id"],
                    "credential_version": call["credential_version"],
                    "storage_credentials": fresh.as_json(),
                },
            )
        return Response(status_code=204 if pushed.status_code == 200 else 502)

    def statuses(self, job_id: int) -> list[tuple[str, str | None]]:
        with self.lock:
            return [
                (e["data"]["state"], e["data"].get("stage"))
                for e in self.events
                if e["job_id"] == job_id
            ]


# ---- the worker ------------------------------------------------------------------------


def euterpe_env(db_url: str, s3_url: str, work_dir: Path, kek: str, **extra: str) -> dict[str, str]:
    """The environment of a deployment: ``EUTERPE_*`` and ``DURQ_*`` variables."""
    return {
        "EUTERPE_DATABASE_URL": db_url,
        "EUTERPE_S3_ENDPOINT_URL": s3_url,
        "EUTERPE_WORK_DIR": str(work_dir),
        "EUTERPE_API_KEYS": json.dumps(API_KEYS),
        "DURQ_WEBHOOK_SECRETS": json.dumps({"*": [HOOK_SECRET]}),
        "DURQ_SECRET_KEKS": json.dumps({"k1": kek}),
        "DURQ_SECRET_ACTIVE_KEK": "k1",
        **extra,
    }


class WorkerProcess:
    """``durq worker --app recipes.euterpe:worker_app``, as the README runs it."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("w")
        full = {k: v for k, v in os.environ.items() if not k.startswith(("DURQ_", "EUTERPE_"))}
        full |= env
        full["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO)])
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "durq.cli.main",
                "worker",
                "--app",
                "recipes.euterpe:worker_app",
            ],
            cwd=REPO,
            env=full,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode
