"""durq's HTTP service: ``create_app(app)`` returns a FastAPI application."""

from .factory import create_app

__all__ = ["create_app"]
