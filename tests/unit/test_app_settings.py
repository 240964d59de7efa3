"""``App(url, settings=...)``: the URL given wins, every other setting is kept."""

from __future__ import annotations

from pathlib import Path

import durq


def test_app_with_a_url_and_settings_keeps_both(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    app = durq.App(url, settings=durq.Settings(sqlite_busy_timeout_ms=50, api_internal_token="t"))
    try:
        assert app.settings.database_url == url
        assert app.settings.sqlite_busy_timeout_ms == 50
        token = app.settings.api_internal_token
        assert token is not None and token.get_secret_value() == "t"
    finally:
        app.close()
