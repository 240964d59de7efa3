"""One validated settings class. Every field reads ``DURQ_<NAME>`` or ``.env``."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Literal

import pydantic
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .errors import ConfigurationError
from .logs import redact_text

__all__ = ["Settings", "load_settings", "redact_url", "unknown_variables"]

DEFAULT_DATABASE_URL = "sqlite:///durq.db"
SUPPORTED_SCHEMES = ("sqlite:", "postgresql://", "postgres://", "postgresql+psycopg://")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DURQ_", env_file=".env", extra="ignore", validate_default=True
    )

    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="sqlite:///path.db or postgresql://user:pass@host:port/db",
    )
    env: Literal["dev", "test", "prod"] = "prod"
    # logging (durq worker, durq serve): JSON lines unless stderr is a terminal ("auto")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["auto", "console", "json"] = "auto"

    # enqueue
    default_queue: str = "default"
    default_max_attempts: int = Field(20, ge=1)
    idempotency_ttl_seconds: float = Field(24 * 3600, gt=0)
    # input limits at every entry (Python, CLI, HTTP): the JSON size of a job's args and of
    # a task's result, and how deep either may nest
    max_args_bytes: int = Field(1_048_576, ge=1024)
    max_result_bytes: int = Field(1_048_576, ge=1024)
    max_json_depth: int = Field(32, ge=2, le=500)

    # worker
    queues: str = "default"
    # jobs in flight per process. 100, as River: an async job costs a coroutine and a sync
    # one a pool thread started only when needed; a claim takes up to the free capacity,
    # so a small default would pay a round trip per few jobs.
    concurrency: int = Field(100, ge=1, le=1000)
    # at most this many jobs claimed ahead of free slots, waiting (leases heartbeated) in
    # the worker's buffer: a job starts the moment a slot frees, not after the next claim's
    # round trip. The buffer holds no more than 50 ms of work at the worker's recent rate,
    # so a worker busy with slow jobs holds none back from other workers; buffered jobs
    # are released at shutdown without spending an attempt.
    prefetch: int = Field(100, ge=0, le=1000)
    processes: int = Field(1, ge=1, le=64)
    poll_interval: float = Field(1.0, ge=0)
    lease_seconds: float = Field(30.0, gt=0)
    heartbeat_seconds: float = Field(10.0, gt=0)
    shutdown_timeout: float = Field(30.0, ge=0)
    # after shutdown_timeout: how long tasks that do not stop when asked keep their leases
    shutdown_hard_timeout: float = Field(30.0, ge=0)
    listen_notify: bool = True
    # PostgreSQL: a worker's claims and plain outcome writes are awaited on its event loop,
    # over up to three connections of its own (a claim and two writes in flight), so their
    # round trips overlap the jobs it runs; false runs them on the pool in threads, with
    # three connections fewer per worker process.
    loop_connections: bool = True
    # "process": every task runs in a task process, so a crash fails only its attempt
    pool: Literal["thread", "process"] = "thread"
    max_tasks_per_child: int | None = Field(None, ge=1)  # a task process is replaced after N

    # maintenance retention
    prune_succeeded_seconds: float = Field(24 * 3600, ge=0)
    prune_dead_letter_seconds: float = Field(7 * 24 * 3600, ge=0)
    prune_cancelled_seconds: float = Field(7 * 24 * 3600, ge=0)
    # how long a pruned job's id still answers "gone" rather than "not found"
    prune_tombstone_seconds: float = Field(90 * 24 * 3600, ge=0)

    # health guardrails: a queue is degraded past either threshold
    degraded_p95_age_seconds: float = Field(900, gt=0)
    degraded_ready_count: int = Field(500, gt=0)
    # a queue over a guardrail this long raises an alert (and resolves it when it clears)
    degraded_sustain_seconds: float = Field(900, ge=0)
    # circuit breakers: consecutive failures before a key pauses, and for how long
    breaker_threshold: int = Field(5, ge=1)
    breaker_pause_seconds: float = Field(1800, gt=0)

    # HTTP service (durq serve): roles from lowest to highest, and the role each power needs
    api_roles: str = Field(
        "viewer,producer,operator,admin",
        description="Ordered role ladder, lowest first, comma-separated",
    )
    api_submit_role: str = "producer"  # submit jobs and cancel its owner's jobs
    api_operate_role: str = "operator"  # see and act on every job, requeue, pause queues
    api_admin_role: str = "admin"  # manage API keys
    api_internal_token: SecretStr | None = None  # X-Internal-Token for /internal/... routes
    api_bootstrap_keys: dict[str, str] = Field(
        default_factory=dict, description="DURQ_ENV=dev only: role -> key to seed at start"
    )
    api_rate_limit_per_second: float = Field(50.0, ge=0)  # per API key; 0 turns it off
    api_rate_limit_burst: int = Field(100, ge=1)
    api_max_body_bytes: int = Field(1_048_576, ge=1024)
    api_max_page_size: int = Field(500, ge=1, le=999)
    # execution_mode "sync": how long a submit waits for a worker to finish the job before
    # answering 202 with the job still pending.
    api_sync_wait_seconds: float = Field(30.0, gt=0, le=600)
    # /metrics: open to anyone who can reach it (false), or only with an API key (true)
    metrics_auth: bool = False

    # dashboard (/ui): the key that signs session cookies (unset: a random one per process,
    # so sessions end at a restart; set it when several server processes serve /ui)
    dashboard_session_secret: SecretStr | None = None
    dashboard_session_seconds: float = Field(8 * 3600, gt=0)
    dashboard_refresh_seconds: float = Field(2.0, ge=0.5)

    # outbox delivery (webhooks): batch, concurrency, retries with full jitter
    webhook_batch_size: int = Field(10, ge=1, le=25)
    webhook_concurrency: int = Field(5, ge=1, le=100)
    webhook_max_attempts: int = Field(8, ge=1, le=100)
    webhook_backoff_base: float = Field(1.0, gt=0)
    webhook_backoff_cap: float = Field(600.0, gt=0)
    webhook_timeout: float = Field(10.0, gt=0)
    webhook_lease_seconds: float = Field(30.0, gt=0)
    webhook_poll_min: float = Field(0.5, gt=0)
    webhook_poll_max: float = Field(1.5, gt=0)
    webhook_header_prefix: str = Field("x-durq", pattern=r"^[A-Za-z][A-Za-z0-9-]{0,40}$")
    # owner -> signing secrets, newest first ("*": every other owner); two during a rotation
    webhook_secrets: dict[str, list[SecretStr]] = Field(default_factory=dict)
    # owner -> webhook URL for jobs enqueued without one
    webhook_owner_urls: dict[str, str] = Field(default_factory=dict)

    # job secrets: key-encryption keys (kek_id -> base64 of 32 bytes), or a JSON key file
    secret_keks: dict[str, SecretStr] = Field(default_factory=dict)
    secret_kek_file: str | None = None
    secret_active_kek: str | None = None
    refresh_timeout: float = Field(10.0, gt=0)
    max_refresh_attempts: int = Field(3, ge=0, le=100)

    # SQLite durability: FULL survives power loss in WAL mode, NORMAL only process crashes
    sqlite_synchronous: Literal["FULL", "NORMAL", "OFF"] = "FULL"
    sqlite_busy_timeout_ms: int = Field(30_000, ge=0)

    # PostgreSQL connection pool
    pool_min_size: int = Field(1, ge=0)
    pool_max_size: int = Field(10, ge=1)
    # PostgreSQL behind PgBouncer in transaction pooling mode: no server-side prepared
    # statements, and workers poll instead of LISTEN unless DURQ_LISTEN_NOTIFY says otherwise.
    pgbouncer: bool = False

    @model_validator(mode="after")
    def _check_roles(self) -> Settings:
        ladder = self.role_ladder
        if not ladder or len(set(ladder)) != len(ladder):
            raise ValueError(
                f"DURQ_API_ROLES={self.api_roles!r} must list distinct role names, lowest "
                "first, e.g. viewer,producer,operator,admin"
            )
        ranks = []
        for name in ("api_submit_role", "api_operate_role", "api_admin_role"):
            role = getattr(self, name)
            if role not in ladder:
                raise ValueError(
                    f"DURQ_{name.upper()}={role!r} is not in DURQ_API_ROLES {list(ladder)}"
                )
            ranks.append(ladder.index(role))
        if ranks != sorted(ranks):
            raise ValueError(
                "roles must rise: DURQ_API_SUBMIT_ROLE <= DURQ_API_OPERATE_ROLE <= "
                f"DURQ_API_ADMIN_ROLE on the ladder {list(ladder)}"
            )
        return self

    @model_validator(mode="after")
    def _pgbouncer_polls(self) -> Settings:
        # LISTEN needs a session of its own, which transaction pooling does not keep.
        if self.pgbouncer and "listen_notify" not in self.model_fields_set:
            self.listen_notify = False
        return self

    @property
    def role_ladder(self) -> tuple[str, ...]:
        return tuple(part.strip() for part in self.api_roles.split(",") if part.strip())

    @field_validator("database_url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if not value.startswith(SUPPORTED_SCHEMES):
            scheme = value.split(":", 1)[0] if ":" in value else value[:20]
            raise ValueError(
                f"unsupported database URL scheme {scheme!r} in {redact_url(value)}; use "
                "sqlite:///path.db or postgresql://user@host:5432/dbname (durq "
                "speaks to PostgreSQL through psycopg 3: postgresql+psycopg:// works too)"
            )
        return value

    @field_validator("poll_interval")
    @classmethod
    def _clamp_poll(cls, value: float) -> float:
        # Never spin: poll at least every 0.1 s.
        return max(value, 0.1)


def redact_url(url: str) -> str:
    """``postgresql://u:secret@h/db`` → ``postgresql://u:***@h/db``."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    if ":" in creds:
        user = creds.split(":", 1)[0]
        creds = f"{user}:***"
    return f"{scheme}://{creds}@{host}"


def load_settings(**values: Any) -> Settings:
    """``Settings(**values)`` (plus ``DURQ_*`` and ``.env``), or one ``ConfigurationError``
    naming each bad variable and what it needs, never echoing the values (a URL may hold a
    password)."""
    try:
        return Settings(**values)
    except pydantic.ValidationError as exc:
        problems = []
        for err in exc.errors(include_input=False, include_url=False):
            name = ".".join(str(part) for part in err["loc"]) or "settings"
            message = str(err["msg"]).removeprefix("Value error, ")
            problems.append(f"DURQ_{name.upper()}: {redact_text(message)}")
        raise ConfigurationError("invalid settings: " + "; ".join(problems)) from None


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A warning for each ``DURQ_*`` variable no setting reads (a typo falls back to the
    default silently otherwise), naming the closest valid one."""
    valid = {f"DURQ_{name.upper()}" for name in Settings.model_fields}
    warnings = []
    for name in sorted(environ):
        if name.startswith("DURQ_") and name not in valid:
            close = difflib.get_close_matches(name, sorted(valid), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            warnings.append(f"{name} is not a durq setting and is ignored{hint}")
    return warnings
