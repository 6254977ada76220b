"""Model names through ``pteforge.client`` (sync and asyncio) and the ``deploy`` and ``run``
commands, against the real service."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from pteforge.cli import main
from pteforge.client import AsyncClient, Client, NotFoundError
from tests.server.model_names import INPUT, INPUT_NAME, upload_scales
from tests.server.service import ServiceProcess


@pytest.fixture(scope="module")
def scales(admin: httpx.Client) -> dict[float, str]:
    """Artifacts ``x * 5`` and ``x * 6`` in the admin's project."""
    return upload_scales(admin, [5.0, 6.0])


@pytest.fixture
def client(service: ServiceProcess) -> Iterator[Client]:
    assert service.admin_token
    with Client(service.url, service.admin_token) as client:
        yield client


def test_deploy_list_get_infer_and_delete(client: Client, scales: dict[float, str]) -> None:
    first = client.deploy(scales[5.0], "client-model")
    second = client.deploy(scales[6.0], "client-model")
    assert (first.version, second.version) == (1, 2)
    assert second.name == "client-model" and second.artifact_id == scales[6.0]
    listed = {m.name: m for m in client.list_models()}
    assert listed["client-model"].latest_version == 2
    model = client.get_model("client-model")
    assert [(v.version, v.artifact_id) for v in model.versions] == [
        (1, scales[5.0]),
        (2, scales[6.0]),
    ]
    (latest,) = client.infer("client-model", "forward", [INPUT])
    np.testing.assert_allclose(latest, INPUT * 6.0)
    (pinned,) = client.infer("client-model", "forward", [INPUT], version=1)
    np.testing.assert_allclose(pinned, INPUT * 5.0)
    client.delete_model_version("client-model", 2)
    (fallback,) = client.infer("client-model", "forward", {INPUT_NAME: INPUT})
    np.testing.assert_allclose(fallback, INPUT * 5.0)
    with pytest.raises(NotFoundError):
        client.delete_model_version("client-model", 2)


def test_async_client_deploys_and_infers(service: ServiceProcess, scales: dict[float, str]) -> None:
    assert service.admin_token

    async def go() -> np.ndarray:
        async with AsyncClient(service.url, service.admin_token) as client:
            created = await client.deploy(scales[5.0], "async-model")
            assert (await client.get_model("async-model")).latest_version == created.version
            (out,) = await client.infer("async-model", "forward", [INPUT])
            return out

    np.testing.assert_allclose(asyncio.run(go()), INPUT * 5.0)


@pytest.mark.usefixtures("cli_as_admin")
def test_deploy_and_run_commands(
    scales: dict[float, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deploy", scales[6.0], "cli-model", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 1
    np.save(tmp_path / "x.npy", INPUT)
    argv = ["run", "cli-model.forward", "--input", str(tmp_path / "x.npy"), "--json"]
    assert main(argv) == 0
    (output,) = json.loads(capsys.readouterr().out)["outputs"]
    np.testing.assert_allclose(np.asarray(output["data"]).reshape(2, 3), INPUT * 6.0)


@pytest.mark.usefixtures("cli_as_admin")
def test_deploy_attaches_a_tokenizer(
    scales: dict[float, str],
    service: ServiceProcess,
    admin: httpx.Client,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A language model's tokenizer needed a curl PUT: neither the client nor the command
    line could attach one (new-user pass, text generation)."""
    tokenizer, config = tmp_path / "tokenizer.json", tmp_path / "tokenizer_config.json"
    tokenizer.write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}))
    config.write_text(json.dumps({"chat_template": "{{ messages[0]['content'] }}"}))
    assert main(["deploy", scales[5.0], "lm-cli", "--tokenizer-config", str(config)]) == 2
    missing = ["deploy", scales[5.0], "lm-cli", "--tokenizer", str(tmp_path / "nope.json")]
    assert main(missing) == 2
    assert "no such file" in capsys.readouterr().err
    argv = ["deploy", scales[5.0], "lm-cli", "--tokenizer", str(tokenizer)]
    assert main([*argv, "--tokenizer-config", str(config), "--json"]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    # scales is no language model: it said 'answers text generation', and chats got a 400
    assert "warning: the tokenizer is attached, but the artifact is not a language" in captured.err
    assert (printed["version"], printed["tokenizer"]["version"]) == (1, 1)  # nothing added before
    attached = admin.get("/v1/models/lm-cli/versions/1/tokenizer").json()
    assert attached["tokenizer"]["size_bytes"] == tokenizer.stat().st_size
    assert attached["tokenizer_config"]["size_bytes"] == config.stat().st_size
    assert service.admin_token
    with Client(service.url, service.admin_token) as client:
        again = client.set_tokenizer("lm-cli", 1, tokenizer)
        template = tmp_path / "chat_template.jinja"
        template.write_text("{{ messages[0]['content'] }}")
        jinja = client.set_tokenizer("lm-cli", 1, tokenizer, chat_template=template)
    assert again["tokenizer_config"] is None
    stored = json.dumps({"chat_template": template.read_text()}).encode()
    assert jinja["tokenizer_config"]["sha256"] == hashlib.sha256(stored).hexdigest()
    assert main(["deploy", scales[5.0], "lm-cli", "--chat-template", str(template)]) == 2
    assert main([*argv, "--chat-template", str(template), "--json"]) == 0  # as transformers saves
    from_cli = json.loads(capsys.readouterr().out)["tokenizer"]["tokenizer_config"]
    assert from_cli["sha256"] == hashlib.sha256(stored).hexdigest()
