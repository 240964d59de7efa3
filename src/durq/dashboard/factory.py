"""``create_dashboard``: the web dashboard as an ASGI application.

``durq serve`` mounts it at ``/ui`` beside the API; mount it in your own application the
same way: ``main.mount("/ui", create_dashboard(durq_app))``.
"""

from __future__ import annotations

from pathlib import Path

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from ..api.errors import ApiError, durq_error_status
from ..api.service import Service
from ..app import App
from ..errors import DurqError
from ..settings import Settings
from . import actions, login, pages
from .web import Dashboard, LoginRequired

__all__ = ["create_dashboard"]

log = structlog.get_logger("durq.dashboard")

STATIC = Path(__file__).parent / "static"


def create_dashboard(app: App | Service, settings: Settings | None = None) -> FastAPI:
    """The dashboard for ``app`` (or for the service of an API built by ``create_app``,
    sharing its keys and rate limits)."""
    service = app if isinstance(app, Service) else Service.build(app, settings or app.settings)
    ui = FastAPI(title="durq dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    ui.state.dashboard = Dashboard(service)
    ui.mount("/static", StaticFiles(directory=STATIC), name="static")
    for module in (login, pages, actions):
        ui.include_router(module.router)

    def error_page(request: Request, status: int, message: str) -> HTMLResponse:
        dash: Dashboard = ui.state.dashboard
        try:
            user = dash.user(request)
        except LoginRequired:
            user = None
        return dash.render(
            request, "error.html", user, status_code=status, status=status, message=message
        )

    @ui.exception_handler(LoginRequired)
    async def _login_required(request: Request, exc: LoginRequired) -> Response:
        dash: Dashboard = ui.state.dashboard
        if request.headers.get("HX-Request"):  # a refresh: send the whole page to sign in
            login_url = dash.redirect(request, "/login").headers["location"]
            return Response(status_code=401, headers={"HX-Redirect": login_url})
        if request.method == "GET":
            return dash.redirect(request, "/login")
        return error_page(request, 401, "your session ended: sign in again")

    @ui.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in exc.errors()
        )
        return error_page(request, 400, f"this address is not one the dashboard knows: {problems}")

    @ui.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        return error_page(request, exc.status_code, str(exc.detail))

    @ui.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return error_page(request, exc.status, exc.message)

    @ui.exception_handler(DurqError)
    async def _durq_error(request: Request, exc: DurqError) -> Response:
        status = durq_error_status(exc)
        if status >= 500:
            log.error("dashboard_error", error=str(exc), code=exc.code)
        return error_page(request, status, str(exc))

    return ui
