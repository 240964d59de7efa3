"""The App the installed-wheel test runs (copied into a fresh venv's working directory)."""

from __future__ import annotations

import os
import sys

import durq

app = durq.App(os.environ["DURQ_DATABASE_URL"])


@app.task
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


if __name__ == "__main__":
    # `python tasks_app.py enqueue` / `python tasks_app.py check <id>` / `... modules`
    command = sys.argv[1]
    if command == "enqueue":
        app.migrate()
        print(add.enqueue(a=2, b=3).id)
    elif command == "check":
        job = app.get_job(int(sys.argv[2]))
        print(job.state.value, job.result)
    elif command == "run-inline":
        job = add.enqueue(a=4, b=5)
        app.work(limit=1)  # the Python API runs the job in this process
        print(app.get_job(job.id).state.value)
    heavy = sorted(
        m
        for m in ("psycopg", "psycopg_pool", "fastapi", "uvicorn", "sqlalchemy", "opentelemetry")
        if m in sys.modules
    )
    print("loaded:", ",".join(heavy) or "none")
