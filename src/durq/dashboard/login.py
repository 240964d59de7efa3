"""Signing in and out: an API key is exchanged for a session cookie (HttpOnly,
SameSite=strict, Secure over HTTPS); the key is checked exactly as the API checks it."""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException

from ..api.auth import authenticate
from ..api.errors import ApiError
from .pages import dashboard
from .session import COOKIE_NAME
from .web import LoginRequired, read_form

__all__ = ["router"]

log = structlog.get_logger("durq.dashboard")

router = APIRouter()


def _cookie_path(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/") + "/"


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> HTMLResponse:
    ui = dashboard(request)
    return ui.render(request, "login.html", None, error=None)


@router.post("/login")
async def login(request: Request) -> Response:
    ui = dashboard(request)
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.headers.get("host"):
        # A form on another site must not sign this browser in (login CSRF).
        raise HTTPException(403, "sign in from this server's own login page")
    form = await read_form(request)
    plaintext = form.get("api_key").strip()
    try:
        principal = authenticate(ui.service, request, plaintext)
    except ApiError as exc:
        return ui.render(request, "login.html", None, status_code=exc.status, error=exc.message)
    session = ui.sessions.issue(principal.key_id)
    response = ui.redirect(request, "/")
    response.set_cookie(
        COOKIE_NAME,
        session.cookie,
        max_age=int(ui.sessions.max_age),
        path=_cookie_path(request),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    log.info("dashboard_login", key_id=principal.key_id, owner=principal.owner, role=principal.role)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    ui = dashboard(request)
    with contextlib.suppress(LoginRequired):  # already signed out: nothing to end
        await ui.action(request, "read")
    response = ui.redirect(request, "/login")
    response.delete_cookie(
        COOKIE_NAME, path=_cookie_path(request), httponly=True, samesite="strict"
    )
    return response
