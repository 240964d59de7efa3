"""Who is calling and what they may do: API keys, the role ladder, tenancy, internal routes.

Four powers map onto the configurable ladder (``DURQ_API_ROLES``, lowest first):

* ``read``: the lowest role; reads jobs, queues and workers.
* ``submit`` (``DURQ_API_SUBMIT_ROLE``): submits jobs and cancels them.
* ``operate`` (``DURQ_API_OPERATE_ROLE``): sees and acts on every owner's jobs, requeues,
  pauses and resumes queues. Keys below it are tenants: they see their owner's jobs only.
* ``admin`` (``DURQ_API_ADMIN_ROLE``): manages API keys.

``/internal/...`` routes also need ``X-Internal-Token`` (one policy for the whole prefix,
applied by its router, never by a route of its own).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, Header, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from .errors import ApiError
from .ratelimit import RateLimiter
from .service import Service, get_service

__all__ = ["Power", "Principal", "internal_only", "metrics_access", "require"]

Power = Literal["read", "submit", "operate", "admin"]

bearer_scheme = HTTPBearer(
    auto_error=False, description="Authorization: Bearer <API key>", scheme_name="bearer"
)
header_scheme = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="X-API-Key: <API key>", scheme_name="apiKey"
)

HOW_TO_AUTHENTICATE = (
    "send your API key as 'Authorization: Bearer <key>' or 'X-API-Key: <key>' "
    "(create one with: durq keys create --owner NAME --role ROLE)"
)


@dataclass(frozen=True, slots=True)
class Principal:
    key_id: str
    owner: str
    role: str
    powers: frozenset[str]

    def can(self, power: Power) -> bool:
        return power in self.powers

    @property
    def tenant(self) -> str | None:
        """The owner whose jobs alone this key sees, or ``None`` for every owner."""
        return None if self.can("operate") else self.owner


def role_needed(service: Service, power: Power) -> str:
    s = service.settings
    return {
        "read": s.role_ladder[0],
        "submit": s.api_submit_role,
        "operate": s.api_operate_role,
        "admin": s.api_admin_role,
    }[power]


def powers_of(service: Service, role: str) -> frozenset[str]:
    ladder = service.settings.role_ladder
    rank = ladder.index(role)
    powers: tuple[Power, ...] = ("read", "submit", "operate", "admin")
    return frozenset(p for p in powers if rank >= ladder.index(role_needed(service, p)))


def authenticate(service: Service, request: Request, plaintext: str | None) -> Principal:
    if not plaintext:
        raise ApiError(
            401,
            "E_UNAUTHENTICATED",
            f"missing API key: {HOW_TO_AUTHENTICATE}",
            headers={"WWW-Authenticate": "Bearer"},
        )
    service.ensure_bootstrap()
    if service.settings.env != "dev" and service.keys.is_development_key(plaintext):
        raise ApiError(
            401,
            "E_UNAUTHENTICATED",
            "development keys work only when DURQ_ENV=dev; create a real key with: "
            "durq keys create --owner NAME --role ROLE",
            headers={"WWW-Authenticate": "Bearer"},
        )
    key = service.keys.authenticate(plaintext)
    if key is None:
        raise ApiError(
            401,
            "E_UNAUTHENTICATED",
            "invalid API key: no key with this value exists; check it was copied whole, "
            f"or {HOW_TO_AUTHENTICATE}",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if key.disabled:
        raise ApiError(
            401,
            "E_UNAUTHENTICATED",
            f"API key {key.id} was disabled; ask an admin for a new key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    request.state.key_id = key.id
    wait = service.limiter.acquire(key.id)
    if wait > 0:
        raise ApiError(
            429,
            "E_RATE_LIMITED",
            f"API key {key.id} is over its rate limit of "
            f"{service.settings.api_rate_limit_per_second:g} requests/s "
            f"(bursts of {service.settings.api_rate_limit_burst}); retry after the "
            "Retry-After header's seconds",
            headers={"Retry-After": RateLimiter.retry_after_header(wait)},
        )
    if key.role not in service.settings.role_ladder:
        raise ApiError(
            403,
            "E_FORBIDDEN",
            f"API key {key.id} has role {key.role!r}, which is not on this server's ladder "
            f"{list(service.settings.role_ladder)} (DURQ_API_ROLES); ask an admin for a new key",
        )
    return Principal(key.id, key.owner, key.role, powers_of(service, key.role))


def presented_key(
    request: Request, bearer: HTTPAuthorizationCredentials | None, header_key: str | None
) -> str | None:
    """The one API key of the request. Both headers may carry it, but then they must carry
    the same key: credentials that disagree are refused, never resolved by precedence."""
    both = header_key is not None and "authorization" in request.headers
    if both and (
        bearer is None
        or not hmac.compare_digest(bearer.credentials.encode(), str(header_key).encode())
    ):
        raise ApiError(
            401,
            "E_UNAUTHENTICATED",
            "the Authorization and X-API-Key headers disagree: send your API key in one "
            "of them (or the same key in both), " + HOW_TO_AUTHENTICATE,
            headers={"WWW-Authenticate": "Bearer"},
        )
    return (bearer.credentials if bearer else None) or header_key


def require(power: Power) -> Callable[..., Principal]:
    """A dependency: the caller's principal, if its role has ``power`` (else 401/403/429)."""

    def dependency(
        request: Request,
        service: Annotated[Service, Depends(get_service)],
        bearer: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
        header_key: Annotated[str | None, Security(header_scheme)],
    ) -> Principal:
        principal = authenticate(service, request, presented_key(request, bearer, header_key))
        if not principal.can(power):
            needed = role_needed(service, power)
            raise ApiError(
                403,
                "E_FORBIDDEN",
                f"this route needs role {needed!r} or higher; API key {principal.key_id} "
                f"(owner {principal.owner!r}) has role {principal.role!r}",
            )
        return principal

    dependency.__name__ = f"require_{power}"
    return dependency


def internal_only(
    service: Annotated[Service, Depends(get_service)],
    token: Annotated[str | None, Header(alias="X-Internal-Token")] = None,
) -> None:
    """The one policy for ``/internal/...``: the right X-Internal-Token, else 403."""
    expected = service.settings.api_internal_token
    if expected is None:
        raise ApiError(
            403,
            "E_INTERNAL_ONLY",
            "internal route: this server has no DURQ_API_INTERNAL_TOKEN set, so internal "
            "routes are closed; set it and send it as the X-Internal-Token header",
        )
    if token is None or not hmac.compare_digest(
        token.encode(), expected.get_secret_value().encode()
    ):
        raise ApiError(
            403,
            "E_INTERNAL_ONLY",
            "internal route: send the X-Internal-Token header with the value of "
            "DURQ_API_INTERNAL_TOKEN",
        )


def metrics_access(
    request: Request,
    service: Annotated[Service, Depends(get_service)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
    header_key: Annotated[str | None, Security(header_scheme)],
) -> None:
    """``/metrics`` is open unless ``DURQ_METRICS_AUTH=true``; then it needs any valid key
    (the lowest role reads it), like every other read."""
    if service.settings.metrics_auth:
        require("read")(request, service, bearer, header_key)
