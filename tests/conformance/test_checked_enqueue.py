"""Enqueue checks what it can: a task this App defines gets its arguments checked against
its signature, and a name it does not know is refused, with the closest name offered.
Either way nothing is written. Enqueue by name stays possible, but explicit."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api
from typer.testing import CliRunner

import durq
from durq.cli.main import app as cli

REPO = Path(__file__).resolve().parents[2]


def images_app(db_url: str) -> durq.App:
    app = durq.App(db_url)

    @app.task(queue="images", max_attempts=3)
    def resize(image_id: int, width: int = 640) -> None:
        pass

    @app.task(pass_context=True)
    def staged(ctx: durq.JobContext, path: str) -> None:
        pass

    @app.task
    def anything(**fields: object) -> None:
        pass

    return app


def test_wrong_arguments_are_refused_naming_task_and_argument(db_url: str) -> None:
    app = images_app(db_url)
    resize = app.tasks["resize"]
    with pytest.raises(durq.ValidationError, match=r"'resize'.*unexpected keyword.*'imageid'"):
        resize.enqueue(imageid=7)
    with pytest.raises(durq.ValidationError, match=r"missing a required argument: 'image_id'"):
        app.enqueue("resize", {"width": 10})
    with pytest.raises(durq.ValidationError, match=r"item 1: .*'path'"):
        app.enqueue_many([("resize", {"image_id": 1}), ("staged", {})])
    # The second item of a task is checked against its signature too.
    with pytest.raises(durq.ValidationError, match=r"item 1: .*unexpected keyword.*'imageid'"):
        app.enqueue_many([("resize", {"image_id": 1}), ("resize", {"imageid": 2})])
    assert app.list_jobs() == []
    app.close()


def test_a_misspelled_task_is_refused_with_the_closest_name(db_url: str) -> None:
    app = images_app(db_url)
    with pytest.raises(durq.UnknownTask, match=r"no task named 'resiz'.*did you mean 'resize'"):
        app.enqueue("resiz", {"image_id": 7})
    assert app.list_jobs() == []
    job = app.enqueue("resiz", {"image_id": 7}, unchecked=True)  # another code base's task
    assert (job.task, job.queue) == ("resiz", "default")
    app.close()


def test_checked_arguments_are_stored_by_name(db_url: str) -> None:
    app = images_app(db_url)
    job = app.tasks["resize"].enqueue(7, width=100)  # positional arguments are named
    assert (job.args, job.queue, job.max_attempts) == ({"image_id": 7, "width": 100}, "images", 3)
    assert app.tasks["staged"].enqueue(path="/a").args == {"path": "/a"}  # no context arg
    assert app.tasks["anything"].enqueue(a=1, b="x").args == {"a": 1, "b": "x"}
    app.close()


def test_an_app_without_tasks_enqueues_any_name(db_url: str) -> None:
    producer = durq.App(db_url)  # a producer that has none of the tasks' code
    assert producer.enqueue("send_welcome", {"user_id": 1}).state == "queued"
    producer.close()


def test_durq_enqueue_checks_with_app_and_warns_without(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "shop_tasks.py").write_text(
        textwrap.dedent(
            """
            import durq

            app = durq.App()

            @app.task(queue="emails", max_attempts=4)
            def send_welcome(user_id: int) -> None:
                pass
            """
        )
    )
    runner = CliRunner()
    base = ["--database-url", db_url, "--json"]
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(tmp_path))
        typo = runner.invoke(cli, ["enqueue", "send_welcom", "--app", "shop_tasks:app", *base])
        assert typo.exit_code == 2 and "did you mean 'send_welcome'" in typo.output
        bad = runner.invoke(
            cli,
            [
                "enqueue",
                "send_welcome",
                "--args",
                '{"userid": 1}',
                "--app",
                "shop_tasks:app",
                *base,
            ],
        )
        assert bad.exit_code == 2 and "'userid'" in bad.output
        ok = runner.invoke(
            cli,
            [
                "enqueue",
                "send_welcome",
                "--args",
                '{"user_id": 1}',
                "--app",
                "shop_tasks:app",
                *base,
            ],
        )
        assert ok.exit_code == 0, ok.output
        assert '"queue": "emails"' in ok.stdout and '"max_attempts": 4' in ok.stdout
    blind = runner.invoke(cli, ["enqueue", "send_welcome", *base])
    assert blind.exit_code == 0, blind.output
    assert "no --app given" in blind.stderr and "'send_welcome' is not checked" in blind.stderr
    assert '"queue": "default"' in blind.stdout


@pytest.mark.slow
def test_mypy_refuses_a_wrong_keyword(tmp_path: Path) -> None:
    snippet = tmp_path / "uses_tasks.py"
    snippet.write_text(
        textwrap.dedent(
            """
            import durq

            app = durq.App("sqlite:///unused.db")

            @app.task
            def resize(image_id: int) -> None: ...

            @app.task(pass_context=True)
            def staged(ctx: durq.JobContext, path: str) -> None: ...

            resize.enqueue(image_id=7)
            staged.enqueue(path="/tmp/a")
            resize.enqueue(imageid=7)
            staged.enqueue(7)
            """
        )
    )
    out, _, code = mypy_api.run(
        [str(snippet), "--strict", "--cache-dir", str(tmp_path / ".mypy"), "--no-incremental"]
    )
    assert code == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 2, out
    assert 'Unexpected keyword argument "imageid"' in errors[0]
    assert 'incompatible type "int"; expected "str"' in errors[1]
