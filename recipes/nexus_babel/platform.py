"""Every service of the platform, built from one ``Settings`` (the API and the worker share it)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from opentelemetry.trace import Tracer, TracerProvider

import durq

from .auth import AuthService
from .config import Settings
from .db import DBManager
from .domain import AnalysisService, EvolutionService, IngestionService, IntegrityService
from .jobs import JOB_TYPES, JobService
from .metrics import MetricsService, PrometheusMetrics
from .observability import get_tracer
from .plugins import PluginRegistry

__all__ = ["Platform", "worker_identity"]


def worker_identity(role: str) -> str:
    """``host:pid:role``: which process held a lease (US-INFRA-25)."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}"


@dataclass
class Platform:
    settings: Settings
    db: DBManager
    queue_app: durq.App
    auth_service: AuthService
    ingestion_service: IngestionService
    analysis_service: AnalysisService
    evolution_service: EvolutionService
    integrity_service: IntegrityService
    plugin_registry: PluginRegistry
    job_service: JobService
    metrics: MetricsService
    prometheus: PrometheusMetrics
    tracer: Tracer

    @classmethod
    def build(
        cls, settings: Settings, *, tracer_provider: TracerProvider | None = None
    ) -> Platform:
        tracer = get_tracer(tracer_provider)
        db = DBManager(settings.database_url)
        queue_app = durq.App(
            settings=durq.Settings(
                database_url=settings.database_url,
                lease_seconds=settings.worker_lease_seconds,
                heartbeat_seconds=settings.worker_lease_seconds / 3,
                poll_interval=settings.worker_poll_interval,
                default_queue="nexus_babel",
            )
        )
        plugins = PluginRegistry(settings.plugin_profile, settings.plugin_ml_enabled, tracer=tracer)
        ingestion = IngestionService(db, settings.corpus_root)
        metrics = MetricsService(
            timings=["http.request.ms", *(f"jobs.{job_type}.ms" for job_type in JOB_TYPES)]
        )
        holder: list[JobService] = []
        prometheus = PrometheusMetrics(lambda: holder[0].status_counts())

        def finished(job_type: str, outcome: str, runtime_ms: float) -> None:
            metrics.inc(f"jobs.{job_type}.{outcome}")
            metrics.observe(f"jobs.{job_type}.ms", runtime_ms)
            prometheus.jobs_finished.labels(job_type, outcome).inc()

        jobs = JobService(
            queue_app,
            db,
            ingestion,
            AnalysisService(ingestion, plugins),
            EvolutionService(ingestion),
            IntegrityService(db),
            max_attempts=settings.job_max_attempts,
            idempotency_ttl=settings.job_idempotency_ttl_seconds,
            on_finished=finished,
            tracer=tracer,
        )
        holder.append(jobs)
        return cls(
            settings=settings,
            db=db,
            queue_app=queue_app,
            auth_service=AuthService(db),
            ingestion_service=ingestion,
            analysis_service=jobs.analysis,
            evolution_service=jobs.evolution,
            integrity_service=jobs.integrity,
            plugin_registry=plugins,
            job_service=jobs,
            metrics=metrics,
            prometheus=prometheus,
            tracer=tracer,
        )

    def start(self) -> None:
        """Migrate durq's schema, create the platform's tables, seed the bootstrap keys."""
        self.queue_app.migrate()
        self.db.create_all()
        self.auth_service.ensure_default_api_keys(self.settings)

    def close(self) -> None:
        self.queue_app.close()
        self.db.close()
