"""What every dashboard route needs: templates, the signed-in user, CSRF checks, forms."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.exceptions import HTTPException

from ..api.auth import Power, Principal, powers_of, role_needed
from ..api.service import Service
from ..logs import SECRET_KEYS
from .session import COOKIE_NAME, CSRF_FIELD, CSRF_HEADER, Session, SessionSigner

__all__ = [
    "Dashboard",
    "Form",
    "LoginRequired",
    "User",
    "redact_args",
]

#: The largest form the dashboard reads (a bulk action names at most a page of ids).
MAX_FORM_BYTES = 64 * 1024


class LoginRequired(Exception):
    """No valid session: pages redirect to the login form, actions answer 401."""


@dataclass(frozen=True, slots=True)
class User:
    principal: Principal
    session: Session
    csrf: str

    def can(self, power: Power) -> bool:
        return self.principal.can(power)

    @property
    def tenant(self) -> str | None:
        return self.principal.tenant


@dataclass(frozen=True, slots=True)
class Form:
    fields: dict[str, list[str]]

    def get(self, name: str, default: str = "") -> str:
        values = self.fields.get(name)
        return values[0] if values else default

    def all(self, name: str) -> list[str]:
        return self.fields.get(name, [])


class Dashboard:
    """The dashboard's shared parts, kept on ``ui.state.dashboard``."""

    def __init__(self, service: Service) -> None:
        s = service.settings
        self.service = service
        secret = s.dashboard_session_secret
        self.sessions = SessionSigner(
            secret.get_secret_value().encode() if secret is not None else None,
            s.dashboard_session_seconds,
        )
        self.templates = Environment(
            loader=PackageLoader("durq.dashboard", "templates"),
            autoescape=select_autoescape(["html"]),
            trim_blocks=True,
            lstrip_blocks=True,
        )

    # ---- who is asking -------------------------------------------------------------------

    def user(self, request: Request) -> User:
        """The signed-in user; ``LoginRequired`` when the session is missing, expired, or
        its key was disabled or moved off the role ladder."""
        session = self.sessions.read(request.cookies.get(COOKIE_NAME))
        if session is None:
            raise LoginRequired
        key = self.service.keys.get(session.key_id)
        if key is None or key.disabled or key.role not in self.service.settings.role_ladder:
            raise LoginRequired
        request.state.key_id = key.id
        principal = Principal(key.id, key.owner, key.role, powers_of(self.service, key.role))
        return User(principal, session, self.sessions.csrf_token(session))

    async def action(self, request: Request, power: Power) -> tuple[User, Form]:
        """A state-changing request: a session, the right CSRF token, then the power.
        Each failure is refused before anything is read or written."""
        user = self.user(request)
        form = await read_form(request)
        token = form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
        if not token or not hmac.compare_digest(token, user.csrf):
            raise HTTPException(
                403,
                "CSRF token missing or wrong: reload the page and submit the form again",
            )
        if not user.can(power):
            raise HTTPException(
                403,
                f"this action needs role {role_needed(self.service, power)!r} or higher; "
                f"you are signed in as {user.principal.owner!r} with role "
                f"{user.principal.role!r}",
            )
        return user, form

    # ---- rendering -----------------------------------------------------------------------

    def render(
        self,
        request: Request,
        template: str,
        user: User | None,
        status_code: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        base = request.scope.get("root_path", "").rstrip("/")
        page = self.templates.get_template(template).render(
            request=request,
            base=base,
            user=user,
            csrf_field=CSRF_FIELD,
            refresh_seconds=self.service.settings.dashboard_refresh_seconds,
            query=lambda **kw: urlencode({k: v for k, v in kw.items() if v not in (None, "")}),
            **context,
        )
        return HTMLResponse(page, status_code=status_code)

    def redirect(self, request: Request, path: str, **params: str) -> RedirectResponse:
        base = request.scope.get("root_path", "").rstrip("/")
        query = f"?{urlencode(params)}" if params else ""
        return RedirectResponse(f"{base}{path}{query}", status_code=303)


async def read_form(request: Request) -> Form:
    """An ``application/x-www-form-urlencoded`` body (the only kind the dashboard sends)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HTTPException(413, f"form over {MAX_FORM_BYTES} bytes; select fewer jobs")
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise HTTPException(400, "the form is not UTF-8 text") from None
    return Form(parse_qs(text, keep_blank_values=True, max_num_fields=2000))


def redact_args(value: Any) -> Any:
    """Job arguments as shown: values under secret-looking names replaced by ``***``."""
    if isinstance(value, dict):
        return {
            k: "***" if str(k).lower() in SECRET_KEYS or _secretish(str(k)) else redact_args(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_args(v) for v in value]
    return value


def _secretish(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ("password", "secret", "token", "credential"))
