"""Envelope encryption of job secrets (AES-256-GCM, via ``cryptography``).

Each sealed blob has its own data key (DEK). The blob is encrypted under the DEK with
associated data binding it to the job id, the owner and the ``credential_version``: moved
to another job, owner or version, it no longer opens. The DEK is wrapped by a
key-encryption key (KEK) named by ``kek_id``; rotation re-wraps DEKs under a new KEK
without touching the blobs. Only the ciphertext, the wrapped DEK, ``kek_id`` and
``encryption_version`` are stored. No message here ever holds key or secret material.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, SecretUnavailable, ValidationError
from ..settings import Settings
from ..types import SealedSecrets

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["ENCRYPTION_VERSION", "Keyring", "aad_for", "keyring_from_settings", "parse_kek"]

#: The format of a sealed blob: AES-256-GCM, 12-byte nonce prefixed, base64 text.
ENCRYPTION_VERSION = 1
_NONCE = 12


def aad_for(job_id: int, owner: str | None, credential_version: int) -> bytes:
    return json.dumps(["durq-secrets", job_id, owner or "", credential_version]).encode()


def parse_kek(kek_id: str, encoded: str) -> bytes:
    """A KEK from its base64 text; it must be 32 bytes (AES-256)."""
    try:
        key = base64.b64decode(encoded, validate=True)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ConfigurationError(
            f"KEK {kek_id!r} must be 32 random bytes in base64 (e.g. from "
            "`python -c 'import os,base64;print(base64.b64encode(os.urandom(32)).decode())'`)"
        )
    return key


def _aesgcm() -> type[AESGCM]:
    """AES-GCM from ``cryptography`` (the ``secrets`` extra), imported when secrets are
    first sealed or opened: an install without job secrets does not need it."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise ConfigurationError(
            "job secrets need the cryptography package: pip install 'durq[secrets]'"
        ) from None
    return AESGCM


def _seal(key: bytes, plaintext: bytes, aad: bytes) -> str:
    nonce = os.urandom(_NONCE)
    return base64.b64encode(nonce + _aesgcm()(key).encrypt(nonce, plaintext, aad)).decode()


def _open(key: bytes, sealed: str, aad: bytes) -> bytes:
    """The plaintext; ``ValueError`` if it does not authenticate under ``key`` and ``aad``."""
    aesgcm = _aesgcm()
    from cryptography.exceptions import InvalidTag

    raw = base64.b64decode(sealed)
    try:
        return aesgcm(key).decrypt(raw[:_NONCE], raw[_NONCE:], aad)
    except InvalidTag:
        raise ValueError("the sealed blob does not authenticate") from None


class Keyring:
    """The KEKs this process knows, by id, and the one new secrets are sealed with.

    A KEK missing from the keyring is retired: secrets wrapped by it no longer open."""

    def __init__(self, keks: Mapping[str, bytes], active: str | None = None) -> None:
        self._keks = dict(keks)
        self.active = active if active is not None else (next(iter(self._keks), None))
        if self.active is not None and self.active not in self._keks:
            raise ConfigurationError(
                f"the active KEK {self.active!r} is not among the configured KEKs "
                f"{sorted(self._keks)}"
            )

    def __repr__(self) -> str:
        return f"Keyring(kek_ids={sorted(self._keks)}, active={self.active!r})"

    @property
    def kek_ids(self) -> list[str]:
        return sorted(self._keks)

    def _kek(self, kek_id: str, job_id: int) -> bytes:
        key = self._keks.get(kek_id)
        if key is None:
            raise SecretUnavailable(
                f"job {job_id}: its secrets are wrapped by KEK {kek_id!r}, which is retired "
                "or not configured here; configure it again (DURQ_SECRET_KEKS) or re-wrap "
                f"with `durq secrets rotate-kek --from {kek_id} --to <new>` while it is known"
            )
        return key

    def seal(
        self,
        job_id: int,
        owner: str | None,
        credential_version: int,
        values: Mapping[str, Any],
        *,
        refresh_url: str | None = None,
        max_refresh_attempts: int = 3,
    ) -> SealedSecrets:
        if self.active is None:
            raise ConfigurationError(
                "secrets= needs a key-encryption key: set DURQ_SECRET_KEKS (kek_id → base64 "
                "of 32 bytes) and DURQ_SECRET_ACTIVE_KEK, or DURQ_SECRET_KEK_FILE"
            )
        try:
            plaintext = json.dumps(dict(values), sort_keys=True).encode()
        except (TypeError, ValueError):
            raise ValidationError("secrets must be a JSON object of plain values") from None
        dek = _aesgcm().generate_key(bit_length=256)
        aad = aad_for(job_id, owner, credential_version)
        return SealedSecrets(
            job_id=job_id,
            owner=owner,
            credential_version=credential_version,
            encrypted=_seal(dek, plaintext, aad),
            dek_wrapped=_seal(self._keks[self.active], dek, self.active.encode()),
            kek_id=self.active,
            encryption_version=ENCRYPTION_VERSION,
            refresh_url=refresh_url,
            max_refresh_attempts=max_refresh_attempts,
        )

    def open(self, sealed: SealedSecrets) -> dict[str, Any]:
        """The plaintext secrets, in memory; ``SecretUnavailable`` if they do not open."""
        if sealed.encryption_version != ENCRYPTION_VERSION:
            raise SecretUnavailable(
                f"job {sealed.job_id}: unknown encryption_version {sealed.encryption_version}"
            )
        dek = self._unwrap(sealed)
        aad = aad_for(sealed.job_id, sealed.owner, sealed.credential_version)
        try:
            values: dict[str, Any] = json.loads(_open(dek, sealed.encrypted, aad))
        except ValueError:
            raise SecretUnavailable(
                f"job {sealed.job_id}: its secrets failed authentication (tampered, or sealed "
                "for another job, owner or credential_version)"
            ) from None
        return values

    def rewrap(self, sealed: SealedSecrets, to_kek: str) -> str:
        """The DEK wrapped by ``to_kek``; the blob itself is never decrypted."""
        dek = self._unwrap(sealed)
        return _seal(self._kek(to_kek, sealed.job_id), dek, to_kek.encode())

    def _unwrap(self, sealed: SealedSecrets) -> bytes:
        kek = self._kek(sealed.kek_id, sealed.job_id)
        try:
            return _open(kek, sealed.dek_wrapped, sealed.kek_id.encode())
        except ValueError:
            raise SecretUnavailable(
                f"job {sealed.job_id}: its wrapped data key does not open under KEK "
                f"{sealed.kek_id!r} (tampered, or a different key under that id)"
            ) from None


def keyring_from_settings(settings: Settings) -> Keyring:
    """The KEKs of ``DURQ_SECRET_KEKS`` and of ``DURQ_SECRET_KEK_FILE`` (a JSON object of
    kek_id → base64 key), with ``DURQ_SECRET_ACTIVE_KEK`` sealing new secrets."""
    encoded = {kek_id: v.get_secret_value() for kek_id, v in settings.secret_keks.items()}
    if settings.secret_kek_file:
        try:
            with open(settings.secret_kek_file, encoding="utf-8") as handle:
                from_file = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(
                f"cannot read the KEK file {settings.secret_kek_file!r}: {type(exc).__name__}"
            ) from None
        if not isinstance(from_file, dict):
            raise ConfigurationError("the KEK file must hold a JSON object: kek_id -> base64")
        encoded.update({str(k): str(v) for k, v in from_file.items()})
    keks = {kek_id: parse_kek(kek_id, value) for kek_id, value in encoded.items()}
    active = settings.secret_active_kek
    if active is None and keks:
        active = sorted(keks)[-1]
    return Keyring(keks, active)
