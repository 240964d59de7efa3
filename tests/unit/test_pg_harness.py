"""The suite can run where PostgreSQL is installed but no server runs."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

import durq

from .. import pg


@pytest.mark.slow
def test_throwaway_cluster_starts_serves_durq_and_is_removed() -> None:
    bindir = pg._bindir()
    assert bindir is not None, "PostgreSQL's binaries (initdb) are needed for this test"
    with pg.throwaway_cluster(bindir) as url:
        app = durq.App(url)
        app.migrate()
        job = app.enqueue("t", {"n": 1})
        assert app.get_job(job.id).args == {"n": 1}
        app.close()
        with psycopg.connect(url) as conn:
            (datadir,) = conn.execute("SHOW data_directory").fetchone()  # type: ignore[misc]
        assert Path(datadir).exists()
    assert not Path(datadir).exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)


def test_missing_postgres_is_reported_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg, "DEFAULT_URL", "postgresql://postgres@127.0.0.1:1/postgres")
    monkeypatch.setattr(pg, "_bindir", lambda: None)
    monkeypatch.delenv("DURQ_TEST_PG_URL", raising=False)
    with (
        pytest.raises(RuntimeError, match=r"no initdb.*apt-get install postgresql"),
        pg.postgres_server(),
    ):
        pass
