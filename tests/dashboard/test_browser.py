"""The dashboard in a real browser: headless Chromium (Playwright) against a real
``durq serve`` and a real ``durq worker`` process. Each test runs on one backend to keep
the suite fast; the HTTP tests beside these cover both."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .. import pg
from ..waiting import wait_until
from .browser import AXE, ROLES, SCREENSHOTS, Stack, chromium_path, running_stack

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

CHROMIUM = chromium_path()
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="Chromium is not installed (make install adds Debian's chromium package)",
    ),
    pytest.mark.slow,
]
UPDATE_SCREENSHOTS = os.environ.get("DURQ_UPDATE_SCREENSHOTS") == "1"
#: axe-core impacts that fail a page (minor and moderate findings are reported, not fatal).
FATAL_IMPACTS = {"serious", "critical"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("dashboard")
    if request.param == "sqlite":
        with running_stack(f"sqlite:///{workdir / 'durq.db'}", workdir) as made:
            yield made
        return
    admin = str(request.getfixturevalue("pg_admin_url"))
    template = str(request.getfixturevalue("pg_template"))
    name = pg.unique_name("durq_ui")
    url = pg.create_database(admin, name, template=template)
    try:
        with running_stack(url, workdir) as made:
            yield made
    finally:
        pg.drop_database(admin, name)


def sign_in(browser: Any, stack: Stack, who: str) -> Any:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{stack.url}/")
    assert page.url.endswith("/ui/login")  # no session: the login form
    page.get_by_label("API key").fill(stack.keys[who])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{stack.url}/")
    return page


def wait_state(stack: Stack, job_ids: list[int], state: str, timeout: float = 30.0) -> None:
    wait_until(
        lambda: all(stack.app.get_job(i).state == state for i in job_ids),
        timeout=timeout,
        what=f"jobs {job_ids[:5]}… to be {state}",
    )


def dead_letters(stack: Stack, path: Path | str, n: int) -> list[int]:
    """``n`` jobs that the real worker dead-letters (their file is missing)."""
    jobs = [
        stack.app.enqueue("needs_file", {"path": str(path)}, created_by="acme") for _ in range(n)
    ]
    ids = [j.id for j in jobs]
    wait_state(stack, ids, "dead_letter")
    return ids


def check_accessibility(page: Any, name: str) -> None:
    page.add_script_tag(path=str(AXE))
    result = page.evaluate(
        "async () => await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'best-practice']})"
    )
    fatal = [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for v in result["violations"]
        if v["impact"] in FATAL_IMPACTS
    ]
    assert result["passes"], f"{name}: axe-core checked nothing"
    assert not fatal, f"{name}: axe-core found {fatal}"
    minor = sorted({(v["id"], v["impact"]) for v in result["violations"]})
    if minor:
        print(f"{name}: axe-core minor findings {minor}")
    if UPDATE_SCREENSHOTS:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"dashboard-{name}.png"), full_page=True)


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_browser_sign_in_as_each_role(browser: Any, stack: Stack) -> None:
    stack.app.enqueue("noop", {"n": 1}, queue="burst", created_by="acme", delay=3600)
    for who, (owner, role) in ROLES.items():
        page = sign_in(browser, stack, who)
        header = page.locator("header")
        assert owner in header.inner_text() and role in header.inner_text()
        pause = page.get_by_role("button", name="Pause burst")
        assert pause.count() == (1 if who in ("operator", "admin") else 0), who
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(f"{stack.url}/login")
        page.goto(f"{stack.url}/jobs")
        assert page.url.endswith("/ui/login"), f"{who}: still signed in after signing out"
        page.context.close()


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_the_read_pages_work_with_javascript_off(browser: Any, stack: Stack) -> None:
    job = stack.app.enqueue("noop", {"n": 42}, queue="burst", created_by="acme", delay=3600)
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{stack.url}/login")
    page.get_by_label("API key").fill(stack.keys["viewer"])
    page.get_by_role("button", name="Sign in").click()  # a plain form post
    page.wait_for_url(f"{stack.url}/")
    assert page.locator('section[data-queue="burst"] [data-count="queued"]').inner_text() != "0"
    assert page.locator("svg.chart title").first.text_content() == "Throughput of burst"
    page.goto(f"{stack.url}/jobs?queue=burst")
    page.get_by_role("link", name=str(job.id), exact=True).click()
    assert page.locator("#job-state").inner_text() == "queued"
    assert '"n": 42' in page.locator("main").inner_text()
    context.close()


@pytest.mark.parametrize("stack", ["postgresql"], indirect=True)
def test_operator_requeues_a_dead_letter_from_the_job_page_and_it_succeeds(
    browser: Any, stack: Stack, tmp_path: Path
) -> None:
    marker = tmp_path / "fixed"
    (job_id,) = dead_letters(stack, marker, 1)
    page = sign_in(browser, stack, "operator")
    page.get_by_role("link", name="Dead letters").click()
    group = page.locator('tr[data-group="needs_file:E_MISSING_FILE"]')
    group.get_by_role("link", name=f"job {job_id}").click()
    page.wait_for_url(f"{stack.url}/jobs/{job_id}")
    assert page.locator("#job-state").inner_text() == "dead_letter"
    assert "E_MISSING_FILE" in page.locator("main").inner_text()
    marker.write_text("the operator fixed the cause")
    page.get_by_role("button", name=f"Requeue job {job_id}").click()
    page.wait_for_url(f"{stack.url}/jobs/{job_id}?*")
    assert f"Job {job_id} requeued" in page.get_by_role("status").inner_text()
    wait_state(stack, [job_id], "succeeded")
    page.reload()
    assert page.locator("#job-state").inner_text() == "succeeded"
    assert '"found"' in page.locator("main").inner_text()
    page.context.close()


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_bulk_requeue_of_20_selected_jobs(browser: Any, stack: Stack, tmp_path: Path) -> None:
    marker = tmp_path / "fixed"
    ids = dead_letters(stack, marker, 20)
    marker.write_text("fixed")
    page = sign_in(browser, stack, "operator")
    page.goto(f"{stack.url}/jobs?state=dead_letter&task=needs_file")
    for job_id in ids:
        page.get_by_label(f"Select job {job_id}", exact=True).check()
    page.get_by_role("button", name="Requeue selected").click()
    assert page.get_by_role("heading", level=1).inner_text() == "Requeue 20 jobs?"
    assert {stack.app.get_job(i).state for i in ids} == {"dead_letter"}  # not before confirming
    stack.app.pause_queue("default")  # hold them queued until the list is on screen
    page.get_by_role("button", name="Requeue 20 jobs").click()
    assert "Requeued 20 jobs of 20 selected" in page.get_by_role("status").inner_text()
    first = page.locator(f'tr[data-job="{ids[0]}"] [data-state]')
    assert first.inner_text() == "queued"
    # The job list refreshes itself: the rows turn succeeded without a reload.
    page.evaluate("window.durqNoReload = true")
    stack.app.resume_queue("default")
    wait_state(stack, ids, "succeeded")
    page.wait_for_function(
        'ids => ids.every(id => document.querySelector(`tr[data-job="${id}"] [data-state]`)'
        "?.innerText === 'succeeded')",
        arg=ids,
    )
    assert page.evaluate("window.durqNoReload") is True
    page.context.close()


@pytest.mark.parametrize("stack", ["postgresql"], indirect=True)
def test_the_overview_updates_when_jobs_finish_without_a_reload(browser: Any, stack: Stack) -> None:
    stack.app.pause_queue("burst")
    ids = [stack.app.enqueue("noop", {"n": n}, queue="burst").id for n in range(5)]
    page = sign_in(browser, stack, "operator")
    page.evaluate("window.durqNoReload = true")  # gone if the page reloads
    panel = page.locator('section[data-queue="burst"]')
    assert panel.locator('[data-count="queued"]').inner_text() == "5"
    stack.app.resume_queue("burst")
    wait_state(stack, ids, "succeeded")
    page.wait_for_function(
        'document.querySelector(\'section[data-queue="burst"] [data-count="queued"]\')'
        ".innerText === '0'"
    )
    # Maintenance rolls the finished attempts up; the chart's counts follow.
    page.wait_for_function(
        'document.querySelector(\'section[data-queue="burst"] '
        "[data-count=\"succeeded_last_hour\"]').innerText === '5'",
        timeout=30_000,
    )
    assert page.evaluate("window.durqNoReload") is True
    page.context.close()


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_every_page_passes_axe_core_checks(browser: Any, stack: Stack) -> None:
    dead = dead_letters(stack, "inbox/report.csv", 3)  # relative to the worker's folder
    ok = stack.app.enqueue("noop", {"n": 7}, created_by="acme")
    wait_state(stack, [ok.id], "succeeded")
    stack.app.enqueue("noop", {"n": 8}, queue="burst", delay=3600)
    login = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    login.goto(f"{stack.url}/login")
    check_accessibility(login, "login")
    login.context.close()
    page = sign_in(browser, stack, "operator")
    pages = [
        ("overview", "/"),
        ("jobs", "/jobs"),
        ("job", f"/jobs/{dead[0]}"),
        ("dead-letters", "/dead"),
        ("workers", "/workers"),
        ("breakers", "/breakers"),
    ]
    for name, path in pages:
        page.goto(f"{stack.url}{path}")
        check_accessibility(page, name)
    page.goto(f"{stack.url}/jobs?state=dead_letter")
    for job_id in dead:
        page.get_by_label(f"Select job {job_id}", exact=True).check()
    page.get_by_role("button", name="Requeue selected").click()
    check_accessibility(page, "confirm")
    page.context.close()
