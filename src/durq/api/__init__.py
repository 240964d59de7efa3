"""durq's HTTP service: ``create_app(app)`` returns a FastAPI application."""

from .factory import create_app
from .job_metrics import JobMetricsCollector

__all__ = ["JobMetricsCollector", "create_app"]
