"""durq: a durable job queue for Python on PostgreSQL and SQLite."""

from ._worker.runner import Worker
from .aio import AsyncApp
from .app import App, EnqueueRequest
from .errors import (
    BreakerOpen,
    ConfigurationError,
    DatabaseUnavailable,
    DurqError,
    IdempotencyConflict,
    InvalidStage,
    InvalidTransition,
    JobGone,
    JobNotFound,
    KeyNotFound,
    LeaseLost,
    SchemaOutOfDate,
    UnknownTask,
    ValidationError,
)
from .jobmetrics import JobMetrics
from .keys import Alert, Breaker, BreakerRule, Limit
from .retry import (
    Exponential,
    Fail,
    Fixed,
    HttpStatusError,
    RefreshCredentials,
    Retry,
    Snooze,
    http_classifier,
)
from .settings import Settings
from .task import JobContext, Task
from .types import Artifact, Attempt, Finished, Job, JobState, OutboxEvent, RequeueResult

__all__ = [
    "Alert",
    "App",
    "Artifact",
    "AsyncApp",
    "Attempt",
    "Breaker",
    "BreakerOpen",
    "BreakerRule",
    "ConfigurationError",
    "DatabaseUnavailable",
    "DurqError",
    "EnqueueRequest",
    "Exponential",
    "Fail",
    "Finished",
    "Fixed",
    "HttpStatusError",
    "IdempotencyConflict",
    "InvalidStage",
    "InvalidTransition",
    "Job",
    "JobContext",
    "JobGone",
    "JobMetrics",
    "JobNotFound",
    "JobState",
    "KeyNotFound",
    "LeaseLost",
    "Limit",
    "OutboxEvent",
    "RefreshCredentials",
    "RequeueResult",
    "Retry",
    "SchemaOutOfDate",
    "Settings",
    "Snooze",
    "Task",
    "UnknownTask",
    "ValidationError",
    "Worker",
    "http_classifier",
]

__version__ = "0.1.0"
