"""durq's web dashboard: ``create_dashboard(app)`` returns an ASGI application."""

from .factory import create_dashboard

__all__ = ["create_dashboard"]
