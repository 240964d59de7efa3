"""OpenTelemetry is optional: without it durq imports none of it, and with it installed
tracing follows the application's global provider (checked in fresh interpreters, since a
process can set its global provider only once)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

RUN_A_JOB = """
import durq
from durq import _tracing

app = durq.App(DB)
app.migrate()

@app.task
def add(a: int, b: int) -> int:
    return a + b

job = app.enqueue("add", {"a": 1, "b": 2})
app.enqueue_many([("add", {"a": 3, "b": 4})])
done = app.work()
assert [j.state for j in done] == ["succeeded", "succeeded"], done
assert app.get_job(job.id).result == 3
"""

BLOCK_OTEL = """
import sys

class NoOpenTelemetry:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"{name} is not installed")
        return None

sys.meta_path.insert(0, NoOpenTelemetry())
"""

NO_OTEL_LOADED = """
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
assert loaded == [], loaded
assert not _tracing.active()
print("ok")
"""


def run(code: str, db: Path) -> str:
    script = f"DB = {f'sqlite:///{db}'!r}\n" + textwrap.dedent(code)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": f"{REPO / 'src'}:{REPO}", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_without_opentelemetry_durq_runs_jobs_and_imports_none_of_it(tmp_path: Path) -> None:
    assert run(BLOCK_OTEL + RUN_A_JOB + NO_OTEL_LOADED, tmp_path / "a.db") == "ok\n"


def test_the_blocker_would_catch_an_import_of_opentelemetry(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="ImportError: opentelemetry is not installed"):
        run(BLOCK_OTEL + "import opentelemetry.trace\n", tmp_path / "a.db")


def test_installed_but_unconfigured_opentelemetry_is_not_imported(tmp_path: Path) -> None:
    assert run("import sys\n" + RUN_A_JOB + NO_OTEL_LOADED, tmp_path / "a.db") == "ok\n"


def test_the_no_op_global_provider_leaves_tracing_off(tmp_path: Path) -> None:
    code = """
    import sys
    from opentelemetry import trace
    from durq import _tracing
    assert not _tracing.active()
    trace.set_tracer_provider(trace.NoOpTracerProvider())
    assert not _tracing.active()
    print("ok")
    """
    assert run(code, tmp_path / "a.db") == "ok\n"


def test_a_global_provider_the_application_sets_turns_tracing_on(tmp_path: Path) -> None:
    code = (
        """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    """
        + textwrap.indent(RUN_A_JOB, "    ")
        + """
    assert _tracing.active()
    names = sorted(span.name for span in exporter.get_finished_spans())
    print(" ".join(names))
    """
    )
    expected = ["durq.claim", "durq.enqueue", "durq.execute", "durq.finish"]
    assert run(code, tmp_path / "a.db").split() == sorted(expected * 2)
