"""The dev seed script: ``python -m recipes.calendar_sync.seed``.

Logs in through ``POST /auth/session`` (the client keeps the ``syn_session`` cookie),
then schedules a sync window for each pair with ``POST /jobs/schedule``, sending the CSRF
token and one ``Idempotency-Key`` per pair: run it twice and nothing is scheduled twice.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta

import httpx

from .config import DEV_ADMIN_PASSWORD

__all__ = ["main", "seed"]

DEMO_PAIRS = (
    "11111111-1111-4111-8111-111111111111",
    "22222222-2222-4222-8222-222222222222",
    "33333333-3333-4333-8333-333333333333",
)


def seed(
    client: httpx.Client,
    *,
    email: str,
    password: str,
    pairs: list[str],
    start: datetime,
    hours: int,
    key_prefix: str,
) -> list[dict[str, object]]:
    login = client.post("/auth/session", json={"email": email, "password": password})
    login.raise_for_status()
    csrf = login.json()["csrfToken"]
    results = []
    for pair in pairs:
        key = f"{key_prefix}-{pair}-{start:%Y%m%dT%H%M}"
        body = {
            "pairId": pair,
            "window": {
                "start": start.isoformat().replace("+00:00", "Z"),
                "end": (start + timedelta(hours=hours)).isoformat().replace("+00:00", "Z"),
            },
            "priority": 0,
            "payload": {"reason": "seed"},
        }
        response = client.post(
            "/jobs/schedule", json=body, headers={"X-CSRF-Token": csrf, "Idempotency-Key": key}
        )
        results.append({"pairId": pair, "status": response.status_code, "body": response.json()})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.calendar_sync.seed")
    parser.add_argument(
        "--base-url", default=os.environ.get("CALSYNC_URL", "http://127.0.0.1:8000")
    )
    parser.add_argument(
        "--email", default=os.environ.get("CALSYNC_ADMIN_EMAIL", "admin@example.com")
    )
    parser.add_argument(
        "--pair", action="append", help="a pair id (repeatable); default: 3 demo pairs"
    )
    parser.add_argument("--start", help="window start, ISO 8601 (default: this hour, UTC)")
    parser.add_argument("--hours", type=int, default=1)
    parser.add_argument("--key-prefix", default="seed", help="Idempotency-Key prefix")
    args = parser.parse_args(argv)
    password = os.environ.get("CALSYNC_ADMIN_PASSWORD", DEV_ADMIN_PASSWORD)
    start = (
        datetime.fromisoformat(args.start)
        if args.start
        else datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    )
    pairs = [str(uuid.UUID(p)) for p in args.pair] if args.pair else list(DEMO_PAIRS)
    with httpx.Client(base_url=args.base_url, timeout=30) as client:
        try:
            results = seed(
                client,
                email=args.email,
                password=password,
                pairs=pairs,
                start=start,
                hours=args.hours,
                key_prefix=args.key_prefix,
            )
        except httpx.HTTPError as exc:
            print(f"seed failed: {exc}", file=sys.stderr)
            return 1
    for result in results:
        print(json.dumps(result, sort_keys=True))
    return 0 if all(r["status"] in (202, 409) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
