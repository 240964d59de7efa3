"""The HTTP client of webhook delivery and credential refresh: ``httpx``, from the
``webhooks`` extra, imported where it is first needed so a core install runs without it."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from ..errors import ConfigurationError

__all__ = ["INSTALL_HINT", "available", "httpx_module"]

INSTALL_HINT = "pip install 'durq[webhooks]'"


def available() -> bool:
    return importlib.util.find_spec("httpx") is not None


def httpx_module() -> ModuleType:
    try:
        import httpx
    except ImportError:
        raise ConfigurationError(
            f"webhook delivery and credential refresh need httpx: {INSTALL_HINT}"
        ) from None
    return httpx
