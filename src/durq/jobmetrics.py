"""An application's own Prometheus names and labels over its jobs. Plain data; no I/O.

durq exports ``durq_jobs_total``, ``durq_queue_depth``, ``durq_job_duration_seconds`` and
``durq_job_retries_total`` for every job. An application whose dashboards already speak
other names registers the same four figures, for its own tasks, under its names::

    app.add_job_metrics(durq.JobMetrics(
        tasks=("sync_pair",),
        jobs_total="sync_jobs_total",
        queue_depth="sync_jobs_queue_depth",
        duration="sync_job_duration_seconds",
        retries="sync_job_retries_total",
        state_label="status",
        state_names={"queued": "pending", "running": "in_progress", ...},
        arg_labels=("connector_id",),
    ))

``durq serve``'s ``/metrics`` then carries them too, and ``durq.api.JobMetricsCollector``
exports them from an application's own Prometheus registry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .errors import ValidationError

__all__ = ["JobMetrics"]

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass(frozen=True)
class JobMetrics:
    """The four job figures of ``tasks`` under an application's names.

    * ``jobs_total{<state_label>, *arg_labels}``: stored jobs by current state;
    * ``queue_depth{<state_label>}``: jobs waiting or running (queued, retry_wait, running);
    * ``duration{outcome}``: a histogram of attempt runtimes by attempt outcome;
    * ``retries{*arg_labels}``: attempts after the first.

    ``state_names`` and ``outcome_names`` rename durq's states and attempt outcomes (a
    name not listed keeps durq's). ``arg_labels`` names (at most) one job argument used as
    a label; keep it to an argument with few distinct values (a connector id, not a user
    id). Like
    durq's own job metrics, the figures are read from the database at scrape time.
    """

    tasks: Sequence[str]
    jobs_total: str
    queue_depth: str
    duration: str
    retries: str
    state_label: str = "state"
    state_names: Mapping[str, str] = field(default_factory=dict)
    outcome_names: Mapping[str, str] = field(default_factory=dict)
    arg_labels: Sequence[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        object.__setattr__(self, "arg_labels", tuple(self.arg_labels))
        object.__setattr__(self, "state_names", dict(self.state_names))
        object.__setattr__(self, "outcome_names", dict(self.outcome_names))
        if not self.tasks or not all(isinstance(t, str) and t for t in self.tasks):
            raise ValidationError(
                f"JobMetrics(tasks=...) needs at least one task name, got {self.tasks!r}"
            )
        for what in ("jobs_total", "queue_depth", "duration", "retries"):
            name = getattr(self, what)
            if not isinstance(name, str) or not _METRIC_NAME.match(name):
                raise ValidationError(
                    f"JobMetrics({what}=...) must be a Prometheus metric name, got {name!r}; "
                    "e.g. 'sync_jobs_total'"
                )
        for what in ("jobs_total", "retries"):
            if not getattr(self, what).endswith("_total"):
                raise ValidationError(
                    f"JobMetrics({what}=...) is a counter: its name must end in _total, "
                    f"got {getattr(self, what)!r}"
                )
        if len(self.arg_labels) > 1:
            raise ValidationError(
                f"JobMetrics takes at most one argument label, got {list(self.arg_labels)}"
            )
        labels = (self.state_label, *self.arg_labels)
        for label in labels:
            if not isinstance(label, str) or not _LABEL_NAME.match(label) or label == "le":
                raise ValidationError(
                    f"JobMetrics label {label!r} is not a Prometheus label name; use letters, "
                    "digits and underscores, e.g. 'connector_id'"
                )
        if len(set(labels)) != len(labels) or "outcome" in self.arg_labels:
            raise ValidationError(
                f"JobMetrics labels must be distinct (and not 'outcome'), got {list(labels)}"
            )

    def state(self, durq_state: str) -> str:
        return self.state_names.get(durq_state, durq_state)

    def outcome(self, durq_outcome: str) -> str:
        return self.outcome_names.get(durq_outcome, durq_outcome)
