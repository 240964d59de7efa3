"""durq as a user installs it: the wheel, in a fresh venv, with no extras.

The core install runs jobs on SQLite through the Python API and ``durq worker``, loads
neither psycopg nor the HTTP stack for it, and ``durq serve`` says which extra to install.
The wheel is built once per source tree (cached by a hash of the sources); the venv is new
on every run. Needs pip to reach a package index for the core dependencies.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.test_quickstart import quickstart

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow


def _source_hash() -> str:
    digest = hashlib.sha256()
    files = [ROOT / "pyproject.toml", ROOT / "README.md"]
    files += sorted(
        p
        for p in (ROOT / "src" / "durq").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _clean_env() -> dict[str, str]:
    """The caller's environment without what points Python at the source tree."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("DURQ_")
    }


def _run(
    cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=_clean_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def wheel() -> Path:
    cache = Path(tempfile.gettempdir()) / "durq-test-wheels" / _source_hash()
    found = sorted(cache.glob("durq-*.whl"))
    if found:
        return found[0]
    build = cache.with_name(cache.name + f".{os.getpid()}.tmp")
    shutil.rmtree(build, ignore_errors=True)
    out = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(build),
            str(ROOT),
        ],
        cwd=ROOT,
    )
    assert out.returncode == 0, f"building the wheel failed:\n{out.stdout}\n{out.stderr}"
    shutil.rmtree(cache, ignore_errors=True)
    build.rename(cache)
    return sorted(cache.glob("durq-*.whl"))[0]


@pytest.fixture(scope="module")
def core_venv(wheel: Path) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="durq-venv-"))
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(root)
        py = root / "bin" / "python"
        out = _run(
            [
                str(py),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-c",
                str(ROOT / "constraints.txt"),
                str(wheel),
            ],
            cwd=ROOT,
        )
        assert out.returncode == 0, f"installing the wheel failed:\n{out.stdout}\n{out.stderr}"
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _metadata(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return z.read(name).decode().splitlines()


def test_the_wheel_declares_an_spdx_license_and_uncapped_core_dependencies(wheel: Path) -> None:
    meta = _metadata(wheel)
    assert "License-Expression: Apache-2.0" in meta
    core = [line.split(": ", 1)[1] for line in meta if line.startswith("Requires-Dist: ")]
    core = [req for req in core if "extra ==" not in req]
    names = {re.split(r"[<>=\[ ;]", req)[0].lower() for req in core}
    assert names == {
        "psycopg",
        "psycopg-pool",
        "pydantic",
        "pydantic-settings",
        "croniter",
        "typer",
        "click",
        "rich",
        "structlog",
    }
    assert not any("<" in req or "[binary]" in req for req in core), core
    extras = {line.split(": ", 1)[1] for line in meta if line.startswith("Provides-Extra: ")}
    assert {"api", "postgres-binary", "otel", "secrets", "webhooks", "dev", "bench"} <= extras


def test_the_wheel_ships_the_dashboards_templates_and_assets(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    templates = {p.name for p in (ROOT / "src/durq/dashboard/templates").glob("*.html")}
    assert {f"durq/dashboard/templates/{t}" for t in templates} <= names
    for asset in ("htmx.min.js", "htmx.LICENSE.txt", "durq.css"):
        assert f"durq/dashboard/static/{asset}" in names


def _installed(venv_root: Path) -> set[str]:
    out = _run(
        [str(venv_root / "bin" / "python"), "-m", "pip", "list", "--format=freeze"], cwd=ROOT
    )
    return {line.split("==")[0].lower().replace("_", "-") for line in out.stdout.split()}


def test_the_core_install_has_no_extras(core_venv: Path) -> None:
    installed = _installed(core_venv)
    assert {"durq", "psycopg", "psycopg-pool", "pydantic", "typer", "structlog"} <= installed
    for extra in (
        "fastapi",
        "uvicorn",
        "prometheus-client",
        "psycopg-binary",
        "sqlalchemy",
        "httpx",
        "cryptography",
        "opentelemetry-api",
    ):
        assert extra not in installed, f"{extra} is installed without asking for an extra"


def test_a_job_runs_on_sqlite_through_the_api_and_the_worker_cli(
    core_venv: Path, tmp_path: Path
) -> None:
    shutil.copy(HERE / "tasks_app.py", tmp_path / "tasks_app.py")
    env = {
        "PATH": f"{core_venv / 'bin'}:{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "DURQ_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}",
        "PYTHONPATH": str(tmp_path),
    }
    py = str(core_venv / "bin" / "python")

    enq = _run([py, "tasks_app.py", "enqueue"], cwd=tmp_path, env=env)
    assert enq.returncode == 0, enq.stderr
    job_id, loaded = enq.stdout.split("\n")[:2]
    assert loaded == "loaded: none", f"import durq on SQLite loaded {loaded}"

    worker = _run(
        [str(core_venv / "bin" / "durq"), "worker", "--app", "tasks_app:app", "--once"],
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert worker.returncode == 0, worker.stderr
    check = _run([py, "tasks_app.py", "check", job_id], cwd=tmp_path, env=env)
    assert check.stdout.split("\n")[0] == "succeeded {'sum': 5}", check.stdout + check.stderr

    inline = _run([py, "tasks_app.py", "run-inline"], cwd=tmp_path, env=env)
    assert inline.stdout.split("\n")[:2] == ["succeeded", "loaded: none"], (
        inline.stdout + inline.stderr
    )


def test_serve_without_the_api_extra_says_what_to_install(core_venv: Path, tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "DURQ_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}",
    }
    out = _run([str(core_venv / "bin" / "durq"), "serve"], cwd=tmp_path, env=env, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "pip install 'durq[api]'" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_version(core_venv: Path, tmp_path: Path) -> None:
    out = _run([str(core_venv / "bin" / "durq"), "--version"], cwd=tmp_path, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "durq 0.1.0"), out.stderr


def test_the_readme_quickstart_works_in_the_fresh_venv(core_venv: Path, tmp_path: Path) -> None:
    """The README's quickstart, literally, with the core install only."""
    code, commands = quickstart()
    (tmp_path / "tasks.py").write_text(code)
    env = _clean_env() | {"PATH": f"{core_venv / 'bin'}:{os.environ.get('PATH', '')}"}
    outputs = []
    for command in commands:
        done = _run(command, cwd=tmp_path, env=env, timeout=120)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        outputs.append(done.stdout)
    assert "enqueued job 1" in outputs[0]
    assert "succeeded" in outputs[-1]


def test_secrets_without_the_extra_say_what_to_install(core_venv: Path, tmp_path: Path) -> None:
    script = tmp_path / "seal.py"
    script.write_text(
        "import base64, os, sys\n"
        "import durq\n"
        "from durq.errors import ConfigurationError\n"
        "kek = base64.b64encode(os.urandom(32)).decode()\n"
        "os.environ['DURQ_SECRET_KEKS'] = '{\"k1\": \"' + kek + '\"}'\n"
        "app = durq.App(sys.argv[1])\n"
        "app.migrate()\n"
        "try:\n"
        "    app.enqueue('t', {}, secrets={'token': 'x'}, unchecked=True)\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
        "print(app.count_jobs())\n"
    )
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    out = _run([str(core_venv / "bin" / "python"), str(script), url], cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        "job secrets need the cryptography package: pip install 'durq[secrets]'",
        "0",
    ]
