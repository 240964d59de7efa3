"""The dashboard over HTTP (both backends): sign-in, sessions, roles, tenancy, CSRF,
confirmations, and what a job page shows and hides."""

from __future__ import annotations

import re

import durq
from durq import testing
from durq.api.keys import KeyService
from durq.keys import BreakerRule

from .conftest import ROLES, Ui

PAGES = ["/ui/", "/ui/overview/panel", "/ui/jobs", "/ui/dead", "/ui/workers", "/ui/breakers"]
ACTION_BUTTON = re.compile(r"<button[^>]*>\s*(Requeue|Cancel|Pause|Resume|Reset|Acknowledge)")


def _dead_letter(app: durq.App, *, owner: str = "acme", code: str = "E_BROKEN") -> durq.Job:
    """A job dead-lettered by a real (inline) run."""
    if "broken" not in app.tasks:

        @app.task(name="broken", max_attempts=1)
        def broken(code: str) -> None:
            raise durq.Fail(code, "it broke")

    job = app.enqueue("broken", {"code": code}, created_by=owner)
    testing.drain(app)
    dead = app.get_job(job.id)
    assert dead.state == "dead_letter"
    return dead


def test_each_role_signs_in_and_reads_every_page(ui: Ui) -> None:
    for who, (owner, role) in ROLES.items():
        client = ui.client(who)
        for page in PAGES:
            response = client.get(page)
            assert response.status_code == 200, (who, page, response.text[:500])
        overview = client.get("/ui/").text
        assert f'data-role="{role}"' in overview and owner in overview, who


def test_the_session_cookie_is_httponly_samesite_strict_and_holds_no_key(ui: Ui) -> None:
    client = ui.client()
    response = client.post("/ui/login", data={"api_key": ui.keys["operator"]})
    assert response.status_code == 303 and response.headers["location"] == "/ui/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui/" in cookie
    assert ui.keys["operator"] not in cookie


def test_a_wrong_key_is_refused_and_gets_no_session(ui: Ui) -> None:
    client = ui.client()
    response = client.post("/ui/login", data={"api_key": "durq_not_a_real_key_at_all"})
    assert response.status_code == 401
    assert "invalid API key" in response.text and "set-cookie" not in response.headers
    assert client.get("/ui/jobs").status_code == 303


def test_pages_send_a_visitor_without_a_session_to_the_login_form(ui: Ui) -> None:
    client = ui.client()
    for page in PAGES:
        response = client.get(page)
        assert (response.status_code, response.headers["location"]) == (303, "/ui/login"), page
    client.cookies.set("durq_session", "forged.1.2.3", path="/ui/")
    assert client.get("/ui/").status_code == 303


def test_disabling_a_key_ends_its_sessions(ui: Ui) -> None:
    client = ui.client("operator")
    assert client.get("/ui/").status_code == 200
    keys = KeyService(ui.app)
    (key,) = [k for k in keys.list_keys() if k.owner == "ops"]
    keys.disable(key.id)
    assert client.get("/ui/").status_code == 303


def test_viewer_sees_no_action_and_a_forged_post_is_refused(ui: Ui) -> None:
    dead = _dead_letter(ui.app)
    ui.app.enqueue("t", {}, unchecked=True, created_by="acme")  # keeps "default" listed
    client = ui.client("viewer")
    for page in [*PAGES, f"/ui/jobs/{dead.id}"]:
        assert not ACTION_BUTTON.search(client.get(page).text), page
    token = ui.csrf(client)  # a valid token of the viewer's own session
    for path in (
        f"/ui/jobs/{dead.id}/requeue",
        f"/ui/jobs/{dead.id}/cancel",
        "/ui/jobs/bulk?action=requeue",
        "/ui/dead/requeue",
        "/ui/queues/default/pause",
    ):
        data = {"csrf_token": token, "ids": str(dead.id), "task": "broken", "confirm": "yes"}
        response = client.post(path, data=data)
        assert response.status_code == 403, path
        assert "needs role" in response.text
    assert ui.app.get_job(dead.id).state == "dead_letter"
    assert [(q.name, q.paused) for q in ui.app.overview()] == [("default", False)]


def test_an_action_without_the_csrf_token_is_refused(ui: Ui) -> None:
    dead = _dead_letter(ui.app)
    client = ui.client("operator")
    missing = client.post(f"/ui/jobs/{dead.id}/requeue", data={})
    wrong = client.post(f"/ui/jobs/{dead.id}/requeue", data={"csrf_token": "0" * 64})
    other_session = ui.csrf(ui.client("admin"))
    replayed = client.post(f"/ui/jobs/{dead.id}/requeue", data={"csrf_token": other_session})
    for response in (missing, wrong, replayed):
        assert response.status_code == 403 and "CSRF token" in response.text
    assert ui.app.get_job(dead.id).state == "dead_letter"
    accepted = client.post(f"/ui/jobs/{dead.id}/requeue", data={"csrf_token": ui.csrf(client)})
    assert accepted.status_code == 303 and ui.app.get_job(dead.id).state == "queued"


def test_an_htmx_request_may_send_the_csrf_token_as_a_header(ui: Ui) -> None:
    client = ui.client("operator")
    token = ui.csrf(client)
    response = client.post("/ui/queues/mail/pause", headers={"X-CSRF-Token": token})
    assert response.status_code == 303
    assert [q.paused for q in ui.app.overview() if q.name == "mail"] == [True]


def test_producer_and_viewer_see_only_their_owners_jobs(ui: Ui) -> None:
    mine = ui.app.enqueue("t", {}, unchecked=True, created_by="acme")
    theirs = ui.app.enqueue("t", {}, unchecked=True, created_by="other")
    for who in ("viewer", "producer"):
        client = ui.client(who)
        listed = client.get("/ui/jobs", params={"owner": "other"}).text
        assert f'data-job="{mine.id}"' in listed and f'data-job="{theirs.id}"' not in listed
        assert client.get(f"/ui/jobs/{mine.id}").status_code == 200
        assert client.get(f"/ui/jobs/{theirs.id}").status_code == 404
    operator = ui.client("operator").get("/ui/jobs").text
    assert f'data-job="{mine.id}"' in operator and f'data-job="{theirs.id}"' in operator


def test_a_producer_cancels_its_jobs_but_not_another_owners(ui: Ui) -> None:
    mine = ui.app.enqueue("t", {}, unchecked=True, created_by="acme")
    theirs = ui.app.enqueue("t", {}, unchecked=True, created_by="other")
    client = ui.client("producer")
    token = ui.csrf(client)
    assert (
        client.post(f"/ui/jobs/{theirs.id}/cancel", data={"csrf_token": token}).status_code == 404
    )
    assert client.post(f"/ui/jobs/{mine.id}/cancel", data={"csrf_token": token}).status_code == 303
    assert ui.app.get_job(mine.id).state == "cancelled"
    assert ui.app.get_job(theirs.id).state == "queued"
    requeue = client.post(f"/ui/jobs/{mine.id}/requeue", data={"csrf_token": token})
    assert requeue.status_code == 403  # requeue is an operator's action, as in the API


def test_bulk_cancel_asks_for_a_confirmation_that_says_how_many(ui: Ui) -> None:
    jobs = [ui.app.enqueue("t", {"i": i}, unchecked=True) for i in range(3)]
    client = ui.client("operator")
    token = ui.csrf(client)
    ids = [str(j.id) for j in jobs]
    asked = client.post("/ui/jobs/bulk?action=cancel", data={"csrf_token": token, "ids": ids})
    assert asked.status_code == 200 and "<h1>Cancel 3 jobs?</h1>" in asked.text
    assert {ui.app.get_job(j.id).state for j in jobs} == {"queued"}  # nothing done yet
    done = client.post(
        "/ui/jobs/bulk?action=cancel", data={"csrf_token": token, "ids": ids, "confirm": "yes"}
    )
    assert done.status_code == 303 and "Cancelled+3+jobs+of+3" in done.headers["location"]
    assert {ui.app.get_job(j.id).state for j in jobs} == {"cancelled"}


def test_dead_letters_are_grouped_and_a_group_is_requeued_after_confirmation(ui: Ui) -> None:
    first = _dead_letter(ui.app, code="E_A")
    second = _dead_letter(ui.app, code="E_A")
    other = _dead_letter(ui.app, code="E_B")
    client = ui.client("operator")
    page = client.get("/ui/dead").text
    assert 'data-group="broken:E_A"' in page and 'data-group="broken:E_B"' in page
    token = ui.csrf(client)
    form = {"csrf_token": token, "task": "broken", "error_code": "E_A"}
    asked = client.post("/ui/dead/requeue", data=form)
    assert "<h1>Requeue 2 jobs?</h1>" in asked.text
    client.post("/ui/dead/requeue", data={**form, "confirm": "yes"})
    states = {j.id: str(ui.app.get_job(j.id).state) for j in (first, second, other)}
    assert states == {first.id: "queued", second.id: "queued", other.id: "dead_letter"}


def test_the_job_page_hides_secret_arguments_and_shows_the_failure(ui: Ui) -> None:
    job = ui.app.enqueue(
        "t",
        {"user": "ann", "password": "hunter2", "nested": {"api_token": "tok-123"}},
        unchecked=True,
    )
    client = ui.client("operator")
    page = client.get(f"/ui/jobs/{job.id}").text
    assert "ann" in page and "hunter2" not in page and "tok-123" not in page
    dead = _dead_letter(ui.app, code="E_SHOWN")
    page = client.get(f"/ui/jobs/{dead.id}").text
    assert "E_SHOWN" in page and "Attempt 1" in page and "Traceback" in page


def test_pause_and_resume_a_queue_from_the_overview(ui: Ui) -> None:
    ui.app.enqueue("t", {}, unchecked=True, queue="mail")
    client = ui.client("operator")
    assert "Pause mail" in client.get("/ui/").text
    client.post("/ui/queues/mail/pause", data={"csrf_token": ui.csrf(client)})
    page = client.get("/ui/").text
    assert "Resume mail" in page and 'class="badge warn">paused' in page
    client.post("/ui/queues/mail/resume", data={"csrf_token": ui.csrf(client)})
    assert "Pause mail" in client.get("/ui/").text


def test_bad_addresses_and_ended_sessions_answer_readable_pages(ui: Ui) -> None:
    client = ui.client("operator")
    bad = client.get("/ui/jobs/not-a-number")
    assert bad.status_code == 400 and "<h1>Error 400</h1>" in bad.text
    missing = client.get("/ui/jobs/999999")
    assert missing.status_code == 404 and "999999" in missing.text
    unknown_state = client.get("/ui/jobs", params={"state": "melted"})
    assert unknown_state.status_code == 422 and "unknown state" in unknown_state.text
    ended = ui.client()
    refresh = ended.get("/ui/overview/panel", headers={"HX-Request": "true"})
    assert (refresh.status_code, refresh.headers["HX-Redirect"]) == (401, "/ui/login")


def test_an_operator_acknowledges_an_alert_and_resets_a_breaker(ui: Ui) -> None:
    ui.app.breakers["smtp"] = BreakerRule(threshold=1, pause=600)

    @ui.app.task(max_attempts=3)
    def send(n: int) -> None:
        raise RuntimeError("smtp down")

    ui.app.enqueue("send", {"n": 1}, breaker_key="smtp")
    testing.drain(ui.app)
    (alert,) = ui.app.list_alerts(state="open")
    viewer = ui.client("viewer").get("/ui/breakers").text
    assert 'data-breaker="smtp"' in viewer and "Reset smtp" not in viewer
    client = ui.client("operator")
    page = client.get("/ui/breakers").text
    assert "Reset smtp" in page and f"Acknowledge alert {alert.id}" in page
    token = ui.csrf(client)
    assert client.post(f"/ui/alerts/{alert.id}/ack", data={"csrf_token": token}).status_code == 303
    assert ui.app.list_alerts(state="open")[0].acked_at is not None
    assert client.post("/ui/breakers/smtp/reset", data={"csrf_token": token}).status_code == 303
    assert ui.app.get_breaker("smtp").state == "closed"
    assert ui.app.list_alerts(state="open") == []  # resetting resolves the breaker's alert


def test_a_login_posted_from_another_site_is_refused(ui: Ui) -> None:
    client = ui.client()
    forged = client.post(
        "/ui/login",
        data={"api_key": ui.keys["operator"]},
        headers={"Origin": "https://attacker.example"},
    )
    assert forged.status_code == 403 and "set-cookie" not in forged.headers
    same_site = client.post(
        "/ui/login", data={"api_key": ui.keys["operator"]}, headers={"Origin": "http://testserver"}
    )
    assert same_site.status_code == 303 and "durq_session=" in same_site.headers["set-cookie"]
