"""The statistics extension and the per-phase Prometheus histograms over real HTTP, read by
an unmodified tritonclient: per model as addressed and version, project-scoped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
import tritonclient.http as triton
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from pteforge.server.inference.statistics import (
    MAX_SERIES,
    MAX_VERSIONS,
    OTHER,
    ModelStatistics,
    PhaseTimes,
    StatsKey,
    phase_times,
)
from tests.server.model_names import INPUT, INPUT_NAME, deploy, infer_body, upload_scales
from tests.server.service import ServiceProcess

DASHBOARD = Path(__file__).resolve().parents[2] / "docker" / "grafana-dashboard.json"
PHASES = ("queue", "compute_input", "compute_infer", "compute_output")
SCALE = 2.0


@pytest.fixture(scope="module")
def artifact_id(admin: httpx.Client) -> str:
    """An ``x * 2`` artifact in the admin's project."""
    return upload_scales(admin, [SCALE])[SCALE]


@pytest.fixture(scope="module")
def outsider(service: ServiceProcess) -> str:
    """A token of another project."""
    return service.create_token("stats-outsider", "stats-other-project")


@pytest.fixture(scope="module")
def triton_client(service: ServiceProcess) -> triton.InferenceServerClient:
    return triton.InferenceServerClient(url=service.url.removeprefix("http://"))


def _deployed(admin: httpx.Client, name: str, artifact_id: str) -> str:
    deploy(admin, name, artifact_id)
    return f"{name}.forward"


def _infer(
    client: triton.InferenceServerClient, token: dict[str, str], model: str, version: str = ""
) -> None:
    tensor = triton.InferInput(INPUT_NAME, list(INPUT.shape), "FP32")
    tensor.set_data_from_numpy(INPUT, binary_data=True)
    result = client.infer(model, [tensor], model_version=version, headers=dict(token))
    expected = torch.from_numpy(INPUT) * SCALE  # the eager program
    np.testing.assert_array_equal(result.as_numpy("output_0"), expected.numpy())


def _by_version(stats: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["version"]: entry for entry in stats["model_stats"]}


def _check_counts(entry: dict[str, Any], success: int, fail: int) -> None:
    stats = entry["inference_stats"]
    assert (entry["inference_count"], entry["execution_count"]) == (success, success)
    assert (stats["success"]["count"], stats["fail"]["count"]) == (success, fail)
    assert [stats[p]["count"] for p in PHASES] == [success] * 4
    # The phases split each successful request's time (int ns: < 1 ns lost per phase).
    phases_ns = sum(stats[p]["ns"] for p in PHASES)
    assert stats["success"]["ns"] - 4 * success <= phases_ns <= stats["success"]["ns"]
    assert entry["last_inference"] > 0 if success else entry["last_inference"] == 0


def _token(admin: httpx.Client) -> dict[str, str]:
    return {"Authorization": admin.headers["Authorization"]}


def test_tritonclient_reads_counts_per_version(
    admin: httpx.Client, triton_client: triton.InferenceServerClient, artifact_id: str
) -> None:
    """A request through ``{name}.{method}`` counts under the version the name resolved to
    (as a pinned request does), not under ``latest``."""
    model, token = _deployed(admin, "counted", artifact_id), _token(admin)
    unused = triton_client.get_inference_statistics(model, headers=dict(token))
    assert [(e["name"], e["version"]) for e in unused["model_stats"]] == [(model, "1")]
    _check_counts(unused["model_stats"][0], 0, 0)
    for _ in range(3):
        _infer(triton_client, token, model)
    for _ in range(2):
        _infer(triton_client, token, model, version="1")
    _infer(triton_client, token, model, version="01")  # version 1 too, counted as such
    _deployed(admin, "counted", artifact_id)  # version 2 becomes the latest
    _infer(triton_client, token, model)
    versions = _by_version(triton_client.get_inference_statistics(model, headers=dict(token)))
    assert set(versions) == {"1", "2"}
    _check_counts(versions["1"], 6, 0)
    _check_counts(versions["2"], 1, 0)
    pinned = triton_client.get_inference_statistics(model, "1", headers=dict(token))
    assert [e["version"] for e in pinned["model_stats"]] == ["1"]
    everything = triton_client.get_inference_statistics(headers=dict(token))
    assert {(model, "1"), (model, "2")} <= {
        (e["name"], e["version"]) for e in everything["model_stats"]
    }


def test_a_failed_request_counts_as_fail(
    admin: httpx.Client, triton_client: triton.InferenceServerClient, artifact_id: str
) -> None:
    model = f"{artifact_id}.forward"  # an artifact id counts under its own name
    _infer(triton_client, _token(admin), model)
    wrong = infer_body()
    wrong["inputs"][0]["shape"] = [3, 2, 1]
    answer = admin.post(f"/v2/models/{model}/infer", json=wrong)
    assert answer.status_code == 400, answer.text
    stats = admin.get(f"/v2/models/{model}/stats").raise_for_status().json()
    (entry,) = stats["model_stats"]
    _check_counts(entry, 1, 1)


def test_another_projects_model_is_404(
    service: ServiceProcess,
    admin: httpx.Client,
    triton_client: triton.InferenceServerClient,
    artifact_id: str,
    outsider: str,
) -> None:
    model = _deployed(admin, "private", artifact_id)
    _infer(triton_client, _token(admin), model)
    assert model in [e["name"] for e in admin.get("/v2/models/stats").json()["model_stats"]]
    with service.client(outsider) as client:
        assert client.get(f"/v2/models/{model}/stats").status_code == 404
        assert client.get(f"/v2/models/{model}/versions/1/stats").status_code == 404
        theirs = client.get("/v2/models/stats").json()["model_stats"]
        assert model not in [e["name"] for e in theirs]
    with pytest.raises(InferenceServerException):
        headers = {"Authorization": f"Bearer {outsider}"}
        triton_client.get_inference_statistics(model, headers=headers)
    assert httpx.get(f"{service.url}/v2/models/{model}/stats").status_code == 401


def test_one_name_in_two_projects_counts_apart_and_sums_on_metrics(
    service: ServiceProcess,
    admin: httpx.Client,
    triton_client: triton.InferenceServerClient,
    outsider: str,
) -> None:
    with service.client(outsider) as other:
        model = _deployed(other, "twin", upload_scales(other, [SCALE])[SCALE])
        _infer(triton_client, _token(other), model)
        _deployed(admin, "twin", upload_scales(admin, [SCALE])[SCALE])
        for _ in range(2):
            _infer(triton_client, _token(admin), model)
        theirs = other.get(f"/v2/models/{model}/stats").json()["model_stats"]
    ours = admin.get(f"/v2/models/{model}/stats").json()["model_stats"]
    assert [e["inference_count"] for e in theirs + ours] == [1, 2]
    text = httpx.get(f"{service.url}/metrics").raise_for_status().text
    labels = (("model", model), ("outcome", "success"), ("version", "1"))
    requests = _samples(text, "pteforge_inference_requests")
    assert requests[("pteforge_inference_requests_total", *labels)] == 3  # no project label


def _samples(text: str, family: str) -> dict[tuple[str, ...], float]:
    (metric,) = [m for m in text_string_to_metric_families(text) if m.name == family]
    return {(s.name, *sorted(s.labels.items())): s.value for s in metric.samples}


def _dashboard_series() -> set[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = [target["expr"] for panel in panels for target in panel["targets"]]
    return {name for expr in exprs for name in re.findall(r"pteforge_\w+", expr)}


def test_metrics_have_phase_histograms_by_model_and_version(
    service: ServiceProcess,
    admin: httpx.Client,
    triton_client: triton.InferenceServerClient,
    artifact_id: str,
) -> None:
    model = _deployed(admin, "scraped", artifact_id)
    for _ in range(2):
        _infer(triton_client, _token(admin), model)
    assert admin.post(f"/v2/models/{model}/infer", json={"inputs": []}).status_code == 400
    text = httpx.get(f"{service.url}/metrics").raise_for_status().text
    histograms = _samples(text, "pteforge_inference_phase_seconds")
    for phase in PHASES:  # the version "scraped.forward" resolved to, not "latest"
        labels = (("model", model), ("phase", phase), ("version", "1"))
        assert histograms[("pteforge_inference_phase_seconds_count", *labels)] == 2
        assert ("pteforge_inference_phase_seconds_bucket", ("le", "+Inf"), *labels) in histograms
    requests = _samples(text, "pteforge_inference_requests")
    for outcome, count in (("success", 2), ("fail", 1)):
        labels = (("model", model), ("outcome", outcome), ("version", "1"))
        assert requests[("pteforge_inference_requests_total", *labels)] == count
    # docker/grafana-dashboard.json reads only series the server serves.
    served = {s.name for m in text_string_to_metric_families(text) for s in m.samples}
    assert _dashboard_series() <= served, _dashboard_series() - served


def test_a_model_counts_a_bounded_number_of_versions() -> None:
    statistics = ModelStatistics()
    for version in range(MAX_VERSIONS + 10):
        key = StatsKey("project", "art_x.forward", str(version))
        statistics.count(key, 0.001, PhaseTimes(0.0, 0.0005, 0.0004, 0.0001))
    versions = _by_version(statistics.answer("project", "art_x.forward"))
    assert len(versions) == MAX_VERSIONS + 1
    assert versions[OTHER]["inference_count"] == 10


def test_a_project_keeps_a_bounded_number_of_series_the_latest_counted() -> None:
    """Series outlived their models: an artifact uploaded, run once and deleted, over and
    over, grew the statistics and /metrics without end while the project stored nothing."""
    statistics = ModelStatistics(bounds=(0.001,))
    phases = PhaseTimes(0.0, 0.0005, 0.0004, 0.0001)
    kept = StatsKey("project", "art_kept.forward", "latest")
    statistics.count(kept, 0.001, phases)
    for n in range(3 * MAX_SERIES):
        statistics.count(StatsKey("project", f"art_{n}.forward", "latest"), 0.001, phases)
        if n % 100 == 0:
            statistics.count(kept, 0.001, None)  # run now and then: kept
    models = statistics.answer("project")["model_stats"]
    assert len(models) == MAX_SERIES
    assert len(statistics.series()) == MAX_SERIES
    counted = {m["name"]: m for m in models}
    assert counted["art_kept.forward"]["inference_stats"]["fail"]["count"] == 31
    assert f"art_{3 * MAX_SERIES - 1}.forward" in counted and "art_0.forward" not in counted
    statistics.count(StatsKey("other-project", "art_0.forward", "1"), 0.001, phases)
    assert len(statistics.answer("other-project")["model_stats"]) == 1


@pytest.mark.parametrize(("queue_ms", "execute_ms"), [(1.0, 2.0), (4.0, 2.0), (0.5, 9.0)])
def test_phases_never_add_up_to_more_than_the_request(queue_ms: float, execute_ms: float) -> None:
    """The pool's queue and execute times come from another process's clock and may exceed
    the round trip measured around them; the phases stay within the request's time."""
    decode_s, pool_s, encode_s = 0.001, 0.004, 0.0005
    timings = {"queue_ms": queue_ms, "execute_ms": execute_ms}
    phases = phase_times(timings, decode_s, pool_s, encode_s)
    assert sum(phases) <= decode_s + pool_s + encode_s + 1e-12
    assert min(phases) >= 0.0
    if queue_ms + execute_ms <= pool_s * 1e3:  # consistent timings are kept as measured
        assert (phases.queue, phases.compute_infer) == (queue_ms / 1e3, execute_ms / 1e3)
