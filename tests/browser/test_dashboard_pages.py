"""The dashboard's pages in a real browser: a refused token says why, every page has its own
URL (Back and Forward, reload, a shared link), the lists tell an XNNPACK artifact from a
portable one of the same program, and the job page times each stage."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from pteforge.client import Client
from tests.browser.pages import new_page, script_errors, shot, sign_in
from tests.models import small_mlp_programs
from tests.server.service import ServiceProcess

WAIT_MS = 300_000  # a compile on a loaded 2-core machine
XNNPACK = {"all": {"partitioners": ["xnnpack"]}}
PORTABLE = {"methods": {"forward": {}}}


def _job_events(api: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    """Every ``job`` event of the job's stream, which ends when the job does."""
    events = []
    with api.stream("GET", f"/v1/jobs/{job_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"kind"' in line:
                events.append(json.loads(line[len("data: ") :]))
    return events


@pytest.fixture(scope="module")
def compiled(service: ServiceProcess) -> dict[str, Any]:
    """One program compiled twice through the API: for XNNPACK and portable."""
    token = service.admin_token
    assert token
    with Client(service.url, token) as client:
        program = client.upload_program(
            {"forward": small_mlp_programs().programs["forward"]}, name="pages-mlp"
        )
    jobs = {}
    with service.client(token) as api:
        for name, plan in (("xnnpack", XNNPACK), ("portable", PORTABLE)):
            answer = api.post("/v1/compile-jobs", json={"program_id": program.id, "plan": plan})
            assert answer.status_code == 202, answer.text
            jobs[name] = answer.json()["id"]
        events = {name: _job_events(api, job_id) for name, job_id in jobs.items()}
        done = {name: api.get(f"/v1/jobs/{job_id}").json() for name, job_id in jobs.items()}
    for job in done.values():
        assert job["status"] == "succeeded", job
        assert job["program_id"] == program.id and job["plan"] is not None, job
    return {"program": program, "jobs": done, "events": events}


def test_a_wrong_token_says_it_was_not_accepted(service: ServiceProcess, browser: Browser) -> None:
    with service.client("ptf_not-a-real-token") as api:
        refused = api.get("/v1/programs")
    assert refused.status_code == 401
    page = new_page(browser)
    page.goto(f"{service.url}/")
    sign_in(page, "ptf_not-a-real-token")
    message = page.locator("#message")
    expect(message).to_contain_text("That token was not accepted (401):")
    expect(message).to_contain_text(refused.json()["error"]["message"])
    expect(message).to_have_class("error")
    expect(page.locator("#sign-in")).to_be_visible()
    expect(page.locator("#tabs")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('pteforge.token')") is None


def test_a_refused_token_or_a_lost_server_mid_session_says_so(
    service: ServiceProcess, browser: Browser
) -> None:
    token = service.admin_token
    assert token
    page = new_page(browser)
    page.goto(f"{service.url}/")
    sign_in(page, token)
    expect(page.locator("#programs h2")).to_be_visible(timeout=WAIT_MS)

    page.route("**/v1/jobs*", lambda route: route.abort("internetdisconnected"))
    page.click("#tabs button[data-tab=jobs]")
    expect(page.locator("#message")).to_contain_text("Network error: the server could not be")
    expect(page.locator("#tabs")).to_be_visible()  # still signed in
    page.unroute("**/v1/jobs*")

    # The token is refused from now on, as a revoked or expired one is.
    page.evaluate("sessionStorage.setItem('pteforge.token', 'ptf_revoked')")
    page.click("#tabs button[data-tab=artifacts]")
    expect(page.locator("#message")).to_contain_text("Your token is no longer accepted (401)")
    expect(page.locator("#sign-in")).to_be_visible()
    assert page.url.endswith("#/artifacts")  # signing in again comes back here
    sign_in(page, token)
    expect(page.locator("#artifacts h2")).to_be_visible(timeout=WAIT_MS)


def _row_field(page: Page, table: str, key: str, row_id: str, field: str) -> str:
    return page.locator(f"#{table} tr[data-{key}='{row_id}'] [data-field={field}]").inner_text()


def test_the_lists_show_program_plan_and_attempts(
    service: ServiceProcess, browser: Browser, compiled: dict[str, Any], tmp_path: Path
) -> None:
    token = service.admin_token
    assert token
    jobs = compiled["jobs"]
    page = new_page(browser)
    page.goto(f"{service.url}/#/artifacts")
    sign_in(page, token)
    for name, plan in (("xnnpack", "forward: xnnpack"), ("portable", "forward: portable")):
        artifact = jobs[name]["artifact_id"]
        expect(page.locator(f"#artifacts-table tr[data-artifact='{artifact}']")).to_be_visible(
            timeout=WAIT_MS
        )
        assert _row_field(page, "artifacts-table", "artifact", artifact, "plan") == plan
        assert _row_field(page, "artifacts-table", "artifact", artifact, "program") == "pages-mlp"
    shot(page, tmp_path, "artifacts")

    page.click("#tabs button[data-tab=jobs]")
    expect(page).to_have_url(re.compile(r"#/jobs$"))
    for name, plan in (("xnnpack", "forward: xnnpack"), ("portable", "forward: portable")):
        job = jobs[name]
        expect(page.locator(f"#jobs-table tr[data-job='{job['id']}']")).to_be_visible()
        assert _row_field(page, "jobs-table", "job", job["id"], "plan") == plan
        assert _row_field(page, "jobs-table", "job", job["id"], "program") == "pages-mlp"
        assert _row_field(page, "jobs-table", "job", job["id"], "attempt") == str(job["attempt"])
        assert _row_field(page, "jobs-table", "job", job["id"], "reason") == ""
    shot(page, tmp_path, "jobs")


def _seconds(event: dict[str, Any], following: dict[str, Any]) -> float:
    began = datetime.fromisoformat(event["changed_at"])
    return (datetime.fromisoformat(following["changed_at"]) - began).total_seconds()


def _check_timings(page: Page, events: list[dict[str, Any]]) -> None:
    """One row per event of the job's stream, in order, each lasting until the next."""
    rows = page.locator("#job-timings tbody tr")
    expect(rows).to_have_count(len(events), timeout=WAIT_MS)
    shown = rows.evaluate_all("rows => rows.map(r => [r.dataset.status, r.dataset.stage])")
    assert shown == [[e["status"], e["stage"] or ""] for e in events]
    assert len({stage for _, stage in shown}) >= 4, shown
    took = rows.locator("[data-field=took]").evaluate_all(
        "cells => cells.map(c => c.dataset.seconds)"
    )
    assert took[-1] == ""  # the job's end lasts no time
    for i, value in enumerate(took[:-1]):
        # the page reads the times to the millisecond
        assert float(value) == pytest.approx(_seconds(events[i], events[i + 1]), abs=2e-3)


def test_pages_have_urls_back_forward_and_reload(
    service: ServiceProcess, browser: Browser, compiled: dict[str, Any], tmp_path: Path
) -> None:
    token = service.admin_token
    assert token
    job = compiled["jobs"]["xnnpack"]
    page = new_page(browser)
    page.goto(f"{service.url}/")
    sign_in(page, token)
    expect(page.locator("#programs h2")).to_be_visible(timeout=WAIT_MS)
    page.click("#tabs button[data-tab=jobs]")
    page.click(f"#jobs-table tr[data-job='{job['id']}'] td[data-field=plan]")
    expect(page).to_have_url(re.compile(f"#/jobs/{job['id']}$"))
    expect(page.locator("#job-id")).to_have_text(job["id"])
    _check_timings(page, compiled["events"]["xnnpack"])
    shot(page, tmp_path, "job")

    page.go_back()  # back to the list, the URL with it
    expect(page).to_have_url(re.compile(r"#/jobs$"))
    expect(page.locator(f"#jobs-table tr[data-job='{job['id']}']")).to_be_visible()
    expect(page.locator("#job-id")).to_have_count(0)
    page.go_forward()
    expect(page.locator("#job-id")).to_have_text(job["id"])

    page.reload()  # the same tab keeps its token: the job again, timings and all
    expect(page.locator("#job-id")).to_have_text(job["id"], timeout=WAIT_MS)
    _check_timings(page, compiled["events"]["xnnpack"])

    page.click("#job-artifact")
    artifact = job["artifact_id"]
    expect(page).to_have_url(re.compile(f"#/artifacts/{artifact}$"))
    shared = page.url
    other = new_page(browser)  # a shared link, opened where no one has signed in yet
    other.goto(shared)
    expect(other.locator("#sign-in")).to_be_visible()
    sign_in(other, token)
    expect(other.locator("#artifact-id")).to_have_text(artifact, timeout=WAIT_MS)


def test_the_models_page_lists_versions_and_opens_their_artifacts(
    service: ServiceProcess, browser: Browser, compiled: dict[str, Any], tmp_path: Path
) -> None:
    token = service.admin_token
    assert token
    artifacts = [compiled["jobs"][name]["artifact_id"] for name in ("xnnpack", "portable")]
    with service.client(token) as api:
        for artifact in artifacts:  # version 1, then 2: the latest
            answer = api.post("/v1/models/pages-mlp/versions", json={"artifact_id": artifact})
            assert answer.status_code == 201, answer.text
        model = api.get("/v1/models/pages-mlp").json()
    page = new_page(browser)
    errors = script_errors(page)
    page.goto(f"{service.url}/#/models")
    sign_in(page, token)
    rows = page.locator("#models .model[data-model='pages-mlp'] tr[data-version]")
    expect(rows).to_have_count(2, timeout=WAIT_MS)
    shown = rows.evaluate_all(
        "rows => rows.map(r => [r.dataset.version, r.dataset.latest,"
        " ...['artifact', 'created'].map(f => r.querySelector(`[data-field=${f}]`).innerText)])"
    )
    versions = sorted(model["versions"], key=lambda v: -v["version"])  # newest first
    latest = model["latest_version"]
    assert latest == 2
    assert shown == [
        [str(v["version"]), str(v["version"] == latest).lower(), v["artifact_id"], v["created_at"]]
        for v in versions
    ]
    shot(page, tmp_path, "models")

    page.click("#models tr[data-latest=true] [data-field=artifact] a")
    expect(page).to_have_url(re.compile(f"#/artifacts/{artifacts[1]}$"))
    expect(page.locator("#artifact-id")).to_have_text(artifacts[1], timeout=WAIT_MS)
    page.go_back()
    expect(page).to_have_url(re.compile(r"#/models$"))
    page.click("#models .model[data-model='pages-mlp'] h3 a")
    expect(page).to_have_url(re.compile(r"#/models/pages-mlp$"))
    expect(page.locator("#model-name")).to_have_text("pages-mlp", timeout=WAIT_MS)
    expect(page.locator("#models tr[data-version]")).to_have_count(2)
    assert not errors, errors


def test_an_artifact_page_downloads_its_bundle_and_deploys_it(
    service: ServiceProcess, browser: Browser, compiled: dict[str, Any], tmp_path: Path
) -> None:
    token = service.admin_token
    assert token
    artifact = compiled["jobs"]["xnnpack"]["artifact_id"]
    page = new_page(browser)
    errors = script_errors(page)
    page.goto(f"{service.url}/#/artifacts/{artifact}")
    sign_in(page, token)
    program = compiled["program"]
    shown = page.locator("#artifact-program")
    expect(shown).to_have_text(f"{program.name} · {program.id}", timeout=WAIT_MS)
    with page.expect_download() as download:
        page.click("#artifact-download-bundled")
    saved = tmp_path / "bundled.bpte"
    download.value.save_as(saved)
    with service.client(token) as api:
        assert saved.read_bytes() == api.get(f"/v1/artifacts/{artifact}/bpte").content

    page.fill("#deploy-name", "no spaces allowed")  # refused: the API's message is shown
    page.click("#deploy-form button[type=submit]")
    expect(page.locator("#message")).to_contain_text("invalid model name", timeout=WAIT_MS)
    page.fill("#deploy-name", "pages-deployed")
    page.click("#deploy-form button[type=submit]")
    expect(page).to_have_url(re.compile(r"#/models/pages-deployed$"), timeout=WAIT_MS)
    expect(page.locator("#models tr[data-version] [data-field=artifact]")).to_have_text(artifact)
    assert not errors, errors


def test_an_artifact_with_a_ptd_shows_it_and_downloads_it(
    service: ServiceProcess, browser: Browser, tmp_path: Path
) -> None:
    """A .pte whose constants are in a .ptd: the page shows the data file and downloads it."""
    from tests.program_data import separated_program

    token = service.admin_token
    assert token
    pair = separated_program(tmp_path / "pair", seed=3)
    with Client(service.url, token) as client:
        artifact = client.upload_artifact(pair.pte, ptd=pair.ptd)
    assert artifact.data is not None
    page = new_page(browser)
    errors = script_errors(page)
    page.goto(f"{service.url}/#/artifacts/{artifact.id}")
    sign_in(page, token)
    expect(page.locator("#artifact-data")).to_contain_text(artifact.data["sha256"], timeout=WAIT_MS)
    with page.expect_download() as download:
        page.click("#artifact-download-data")
    saved = tmp_path / "saved.ptd"
    download.value.save_as(saved)
    assert saved.read_bytes() == pair.ptd.read_bytes()
    assert not errors, errors
