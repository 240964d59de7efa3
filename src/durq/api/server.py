"""uvicorn's HTTP/1.1 protocol with one change: a request it cannot parse (a negative or
malformed Content-Length, a broken request line) gets durq's error envelope, not plain text.

Such a request never reaches the ASGI app, so this is the only place to answer it."""

from __future__ import annotations

import json
import uuid

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["EnvelopeH11Protocol"]


class EnvelopeH11Protocol(H11Protocol):
    def send_400_response(self, msg: str) -> None:
        request_id = uuid.uuid4().hex
        body = json.dumps(
            {
                "error": {
                    "code": "E_BAD_REQUEST",
                    "message": "the request is not valid HTTP/1.1 (for example a negative or "
                    "malformed Content-Length header); fix the client or proxy that sent it",
                    "request_id": request_id,
                }
            }
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-request-id", request_id.encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()
