"""``/v1/keys`` (admin) and ``/v1/auth/whoami`` (any key)."""

from __future__ import annotations

from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Depends, Path, Query

from ..auth import Principal, require
from ..errors import ApiError
from ..pagination import decode_cursor, encode_cursor
from ..schemas import NUL_FREE, Data, KeyCreatedOut, KeyIn, KeyOut, Page, WhoAmIOut
from ..service import Service, get_service
from . import AUTHENTICATED, error_responses

__all__ = ["router"]

log = structlog.get_logger("durq.api")

router = APIRouter(tags=["keys"], responses=error_responses(*AUTHENTICATED))

ServiceDep = Annotated[Service, Depends(get_service)]
AdminDep = Annotated[Principal, Depends(require("admin"))]


@router.get("/v1/auth/whoami", response_model=Data[WhoAmIOut], summary="The calling key")
def whoami(
    service: ServiceDep, principal: Annotated[Principal, Depends(require("read"))]
) -> dict[str, Any]:
    powers = [p for p in ("read", "submit", "operate", "admin") if p in principal.powers]
    return {
        "data": {
            "key_id": principal.key_id,
            "owner": principal.owner,
            "role": principal.role,
            "roles": list(service.settings.role_ladder),
            "powers": powers,
            "tenant": principal.tenant,
        }
    }


@router.get("/v1/keys", response_model=Page[KeyOut], summary="List API keys (admin)")
def list_keys(
    service: ServiceDep,
    principal: AdminDep,
    limit: Annotated[int, Query(ge=1, description="Capped at DURQ_API_MAX_PAGE_SIZE")] = 100,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    after_id = decode_cursor("k", cursor) if cursor is not None else None
    size = service.page_size(limit)
    keys = service.keys.list_keys(after_id=after_id, limit=size + 1)
    page = keys[:size]
    next_cursor = encode_cursor("k", page[-1].id) if len(keys) > size else None
    return {"data": [k.to_dict() for k in page], "next_cursor": next_cursor}


@router.post(
    "/v1/keys",
    status_code=201,
    response_model=Data[KeyCreatedOut],
    summary="Create an API key (admin); the key is in this response only",
)
def create_key(body: KeyIn, service: ServiceDep, principal: AdminDep) -> dict[str, Any]:
    key, plaintext = service.keys.create(body.owner, body.role)
    log.info("api_key_created", created_key_id=key.id, owner=key.owner, role=key.role)
    return {"data": {**key.to_dict(), "key": plaintext}}


@router.delete(
    "/v1/keys/{key_id}",
    response_model=Data[KeyOut],
    responses=error_responses(404),
    summary="Disable an API key for good (admin)",
)
def disable_key(
    key_id: Annotated[str, Path(max_length=64, pattern=NUL_FREE)],
    service: ServiceDep,
    principal: AdminDep,
) -> dict[str, Any]:
    key = service.keys.disable(key_id)
    if key is None:
        raise ApiError(404, "E_NOT_FOUND", f"no API key {key_id!r}; list them with GET /v1/keys")
    log.info("api_key_disabled", disabled_key_id=key.id)
    return {"data": key.to_dict()}
