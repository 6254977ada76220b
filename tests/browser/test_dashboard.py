"""The dashboard in a real browser: sign in, upload with the client, compile from the page,
watch the stages arrive, and check the report's numbers on the page against the API's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from playwright.sync_api import Browser, Locator, Page, expect
from torch import nn

from pteforge.client import Client
from tests.models import export_methods, small_mlp_programs
from tests.server.service import ServiceProcess

PLAN = {"all": {"partitioners": ["xnnpack"]}}
WAIT_MS = 300_000  # a compile on a loaded 2-core machine


def _shot(page: Page, directory: Path, name: str) -> None:
    page.screenshot(path=str(directory / f"{name}.png"), full_page=True)


def _sign_in(page: Page, url: str, token: str) -> None:
    page.goto(f"{url}/")
    page.fill("#token", token)
    page.click("#sign-in button[type=submit]")
    page.wait_for_selector("#programs h2")
    assert token not in page.url
    assert page.evaluate("sessionStorage.getItem('pteforge.token')") == token


def _api_stages(api: httpx.Client, job_id: str) -> list[list[Any]]:
    """(status, stage) of every event the job's stream replays."""
    stages = []
    with api.stream("GET", f"/v1/jobs/{job_id}/events") as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"kind"' in line:
                event = json.loads(line[len("data: ") :])
                stages.append([event["status"], event["stage"] or ""])
    return stages


def _open_programs_tab(page: Page) -> None:
    """Show the Programs tab once it has re-rendered from ``/v1/programs``.

    The tab shows its previous contents at once and replaces them when the listing answers:
    text typed before that lands in a form about to be replaced (holding the default plan).
    """
    stale = page.query_selector("#programs h2")
    page.click("#tabs button[data-tab=programs]")
    if stale is not None:
        page.wait_for_function("el => !el.isConnected", arg=stale, timeout=WAIT_MS)
    page.wait_for_selector("#programs h2", timeout=WAIT_MS)


def _submit_from_page(page: Page, program_id: str, plan: dict[str, Any]) -> str:
    """Fill the compile form of the Programs tab; the id of the job the page then shows."""
    _open_programs_tab(page)
    page.wait_for_selector(f"[data-program='{program_id}']")
    page.select_option("#compile-program", program_id)
    page.fill("#compile-plan", json.dumps(plan))
    page.click("#compile-submit")
    page.wait_for_selector("#job-stages li", timeout=WAIT_MS)
    return page.inner_text("#job-id").strip()


def _compile_from_page(page: Page, program_id: str) -> str:
    job_id = _submit_from_page(page, program_id, PLAN)
    page.wait_for_selector("#job-stages li[data-status=succeeded]", timeout=WAIT_MS)
    page.wait_for_selector("#job-artifact")
    return job_id


def _check_report(page: Page, artifact: dict[str, Any]) -> None:
    for method, report in artifact["report"]["methods"].items():
        row = page.locator(f"#operators-table tr[data-method='{method}']")
        for field in ("delegated_operators", "non_delegated_operators", "delegated_subgraphs"):
            assert row.locator(f"[data-field={field}]").inner_text() == str(report[field])
        for backend, counts in report["backends"].items():
            cell = row.locator(f"[data-backend='{backend}']")
            assert cell.inner_text() == str(counts["delegated_operators"])
    sizes = {"pte file/size_bytes": artifact["size_bytes"]}
    sizes |= {f"program/{k}": v for k, v in artifact["report"]["program"].items()}
    for key, value in sizes.items():
        cell = page.locator(f"#size-table tr[data-size='{key}'] [data-bytes]")
        assert int(cell.get_attribute("data-bytes") or -1) == value, key
    numerics = artifact["numerics"]
    assert page.inner_text("#numerics-status") == numerics["status"]
    for method, check in numerics["methods"].items():
        for output in check["outputs"]:
            row = page.locator(f"#numerics-table tr[data-numerics='{method}/{output['name']}']")
            for field in ("max_abs_error", "max_rel_error", "sqnr_db"):
                shown = row.locator(f"[data-field={field}]").get_attribute("data-value")
                assert float(shown or "nan") == output[field], field


def test_compile_and_report_in_the_browser(
    service: ServiceProcess, browser: Browser, tmp_path: Path
) -> None:
    token = service.admin_token
    assert token
    page = browser.new_page(viewport={"width": 1200, "height": 900}, accept_downloads=True)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    _sign_in(page, service.url, token)  # 1. sign in

    exported = small_mlp_programs().programs["forward"]  # 2. upload with the client
    with Client(service.url, token) as client:
        program = client.upload_program({"forward": exported}, name="small-mlp")
    _open_programs_tab(page)
    card = page.locator(f"[data-program='{program.id}']")
    assert card.locator(".program-size").get_attribute("data-bytes") == str(program.size_bytes)
    assert "args_0: float32[1, 16]" in card.inner_text()
    _shot(page, tmp_path, "programs")

    job_id = _compile_from_page(page, program.id)  # 3. compile from the page
    with service.client(token) as api:
        job = api.get(f"/v1/jobs/{job_id}").json()
        shown = page.locator("#job-stages li").evaluate_all(
            "items => items.map(i => [i.dataset.status, i.dataset.stage])"
        )
        assert shown == _api_stages(api, job_id)  # 4. every stage arrived, in order
        assert len({stage for _, stage in shown}) >= 4, shown
        assert job["toolchain"]["torch"] == torch.__version__
        assert f"torch {torch.__version__}" in page.inner_text("#job-summary")
        _shot(page, tmp_path, "job")

        page.click("#job-artifact")  # 5. the report's numbers equal the API's
        page.wait_for_selector("#operators-table")
        artifact = api.get(f"/v1/artifacts/{job['artifact_id']}").json()
    _check_report(page, artifact)
    assert page.inner_text("#artifact-toolchain").startswith(f"torch {torch.__version__}")
    _shot(page, tmp_path, "artifact")

    with page.expect_download() as download:
        page.click("#artifact-download")
    saved = tmp_path / "downloaded.pte"
    download.value.save_as(saved)
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == artifact["sha256"]
    page.click("#tabs button[data-tab=jobs]")
    page.wait_for_selector(f"#jobs-table tr[data-job='{job_id}']")
    _shot(page, tmp_path, "jobs")
    assert not errors, errors
    print(f"screenshots in {tmp_path}")


def test_cancel_compile_again_and_errors_in_the_browser(
    service: ServiceProcess, browser: Browser, tmp_path: Path
) -> None:
    token = service.admin_token
    assert token
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    _sign_in(page, service.url, token)
    with Client(service.url, token) as client:
        program = client.upload_program(
            {"forward": small_mlp_programs().programs["forward"]}, name="to-cancel"
        )
    with service.client(token) as api:
        # The one worker compiles this while the page's jobs wait in the queue.
        busy = api.post("/v1/compile-jobs", json={"program_id": program.id, "plan": PLAN})
        assert busy.status_code == 202, busy.text

        job_id = _submit_from_page(page, program.id, {"all": {}})
        page.click("#job-cancel")
        page.wait_for_selector("#job-stages li[data-status=canceled]", timeout=WAIT_MS)
        assert api.get(f"/v1/jobs/{job_id}").json()["status"] == "canceled"
        assert page.inner_text("#job-status") == "canceled"
        _shot(page, tmp_path, "canceled")

        page.click("#job-again")  # compile again with another plan
        page.fill("#again-plan", json.dumps({"methods": {"forward": {}}}))
        page.click("#again-submit")
        expect(page.locator("#job-id")).not_to_have_text(job_id, timeout=WAIT_MS)
        again = page.inner_text("#job-id")
        resubmitted = api.get(f"/v1/jobs/{again}").json()
        # The busy job may be done by now, so the new one can be anywhere but failed.
        assert resubmitted["status"] in {"queued", "running", "succeeded"}, resubmitted
        assert resubmitted["id"] != job_id

    _open_programs_tab(page)
    page.fill("#compile-plan", "{not json")
    page.click("#compile-submit")
    expect(page.locator("#message")).to_contain_text("the plan is not JSON", timeout=WAIT_MS)


class ManyKinds(nn.Module):
    """Linear layers around a dozen elementwise kinds, most of which XNNPACK leaves to the
    portable kernels: a profile with more operator rows than the page shows at first."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        y = torch.cumsum(torch.sin(y) + torch.cos(y), dim=-1).flip(-1)
        y = torch.log1p(torch.abs(torch.atan(y) * torch.erf(y)))
        y = torch.tan(y) - torch.asin(torch.tanh(y) * 0.5) + torch.acos(torch.tanh(y) * 0.5)
        return self.fc(torch.round(y * 3) + torch.sign(y) + torch.sinh(y))  # type: ignore[no-any-return]


def _bars(rows: Locator) -> list[list[Any]]:
    return rows.evaluate_all(
        "rows => rows.map(r => [r.dataset.operator, r.dataset.backend, Number(r.dataset.totalUs)])"
    )


def test_profile_of_an_xnnpack_method_in_the_browser(
    service: ServiceProcess, browser: Browser, tmp_path: Path
) -> None:
    token = service.admin_token
    assert token
    torch.manual_seed(0)
    programs = export_methods(ManyKinds().eval(), {"forward": (torch.randn(1, 16),)}).programs
    with Client(service.url, token) as client:
        program = client.upload_program(programs, name="many-kinds")
        artifact = client.compile(program, PLAN)
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    _sign_in(page, service.url, token)
    page.goto(f"{service.url}/#/artifacts/{artifact.id}")
    page.click("button[data-profile=forward]")
    view = page.locator("#profile-forward")
    expect(view).to_be_visible(timeout=WAIT_MS)
    with service.client(token) as api:
        profile = api.get(f"/v1/jobs/{view.get_attribute('data-job')}/profile").json()
        report = api.get(f"/v1/artifacts/{artifact.id}").json()["report"]["methods"]["forward"]
    operators = [[o["name"], o["backend"], o["total_us"]] for o in profile["operators"]]
    assert len(operators) > 11, operators  # enough rows to collapse some
    top = _bars(page.locator("#profile-operators > .bar-row"))
    assert top == operators[:10]  # the API's order: by time, largest first
    assert [us for *_, us in top] == sorted((us for *_, us in top), reverse=True)
    assert {"XnnpackBackend", "portable"} <= {backend for _, backend, _ in operators}
    other = page.locator("#profile-rest > summary")
    label = other.locator(".bar-label").text_content()
    assert label == f"{len(operators) - 10} other operators"
    assert float(other.get_attribute("data-total-us") or 0) == pytest.approx(
        sum(us for *_, us in operators[10:])
    )
    for field in ("p50", "p90"):
        shown = view.locator(f"[data-field={field}]").get_attribute("data-value")
        assert float(shown or "nan") == profile["latency_us"][field]
    _check_the_rest_expands(page, view, operators, tmp_path)
    _check_the_delegation_summary(page, report)
    _check_the_profile_jobs_page(page, service.url, view.get_attribute("data-job"), operators)
    assert not errors, errors


def _check_the_profile_jobs_page(
    page: Page, url: str, job_id: str | None, operators: list[list[Any]]
) -> None:
    """The profile job's own page shows its profile, the same bars as the artifact's card."""
    page.goto(f"{url}/#/jobs/{job_id}")
    view = page.locator(f"#jobs #profile-forward[data-job='{job_id}']")  # the jobs tab's
    expect(view).to_be_visible(timeout=WAIT_MS)
    assert _bars(view.locator("#profile-operators > .bar-row")) == operators[:10]


def _check_the_rest_expands(
    page: Page, view: Locator, operators: list[list[Any]], tmp_path: Path
) -> None:
    """The rows after the top 10 are hidden (the page stays short) until their row opens."""
    rest = page.locator("#profile-rest > div.bar-row")
    expect(rest.first).to_be_hidden()
    collapsed = view.bounding_box()
    _shot(page, tmp_path, "profile")
    page.locator("#profile-rest > summary").click()
    expect(rest.first).to_be_visible()
    assert _bars(rest) == operators[10:]
    expanded = view.bounding_box()
    assert collapsed and expanded and collapsed["height"] < expanded["height"]


def _check_the_delegation_summary(page: Page, report: dict[str, Any]) -> None:
    """The non-delegated operator kinds and the subgraph count are the compile report's."""
    kinds = page.locator("#delegation-forward tr[data-operator]").evaluate_all(
        "rows => rows.map(r => r.dataset.operator)"
    )
    expected = {k for k, c in report["operators"].items() if c["non_delegated"] and k != "getitem"}
    assert set(kinds) == expected and "aten_cumsum_default" in kinds
    summary = page.inner_text("#delegation-forward-summary")
    assert summary.startswith(f"{report['delegated_subgraphs']} delegate subgraphs")
