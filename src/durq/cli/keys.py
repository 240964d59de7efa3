"""``durq keys create|list|disable``: API keys for the HTTP service."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from ..errors import ValidationError
from ..wire import KeyOut, dump
from .common import (
    EXIT_USAGE,
    AppOption,
    JsonOption,
    UrlOption,
    api_extra,
    durq_errors,
    fail,
    load_app,
    print_json,
    table,
)

if TYPE_CHECKING:
    from ..api.keys import KeyService

keys_app = typer.Typer(help="Create, list and disable API keys.", no_args_is_help=True)


def _service(app_spec: str | None, database_url: str | None) -> KeyService:
    with api_extra("keys"):
        from ..api.keys import KeyService

    return KeyService(load_app(app_spec, database_url))


@keys_app.command("create")
def create(
    owner: str = typer.Option(
        ..., "--owner", help="Who the key is for; tenants see only their owner's jobs."
    ),
    role: str = typer.Option(..., "--role", help="A role of DURQ_API_ROLES, e.g. producer."),
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Create a key and print it once: durq stores only its SHA-256 hash."""
    service = _service(app_spec, database_url)
    try:
        service.check_owner(owner)
        service.check_role(role)
    except ValidationError as exc:
        fail(str(exc), EXIT_USAGE)
    with durq_errors():
        key, plaintext = service.create(owner, role)
    if as_json:
        print_json({"id": key.id, "key": plaintext, "owner": key.owner, "role": key.role})
        return
    typer.echo(f"created API key {key.id} for owner {key.owner!r} with role {key.role!r}:\n")
    typer.echo(f"    {plaintext}\n")
    typer.echo("Store it now; it is not shown again. Send it as 'Authorization: Bearer <key>'.")


@keys_app.command("list")
def list_keys(
    limit: int = typer.Option(100, "--limit", min=1, max=999),
    as_json: bool = JsonOption,
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """List keys (never their secrets)."""
    service = _service(app_spec, database_url)
    with durq_errors():
        keys = service.list_keys(limit=limit)
    if as_json:
        print_json([dump(KeyOut, k) for k in keys])
        return
    table(
        f"{len(keys)} key(s)",
        ["id", "owner", "role", "created_at", "last_used_at", "disabled_at"],
        [(k.id, k.owner, k.role, k.created_at, k.last_used_at, k.disabled_at) for k in keys],
    )


@keys_app.command("disable")
def disable(
    key_id: str = typer.Argument(..., help="The key's id (durq keys list)."),
    app_spec: str = AppOption,
    database_url: str = UrlOption,
) -> None:
    """Disable a key for good: requests with it are refused (401)."""
    service = _service(app_spec, database_url)
    with durq_errors():
        key = service.disable(key_id)
    if key is None:
        fail(f"no API key {key_id!r}; see durq keys list")
    typer.echo(f"disabled API key {key_id}")
