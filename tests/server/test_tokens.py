"""Token administration: list and revoke reach the service; a revoked token stops working."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.server.service import ServiceProcess, wait_until

# /v2 trusts a resolved token for this long (the /v2 default, DEFAULT_TOKEN_TTL_S).
V2_TOKEN_TTL_S = 1.0


def _tokens(service: ServiceProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pteforge", "tokens", *args],
        env=service.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_admin_commands_say_which_database(service: ServiceProcess) -> None:
    done = _tokens(service, "list")
    assert done.returncode == 0, done.stderr
    assert f"{service.home}/pteforge.db" in done.stderr
    assert done.stderr.startswith("database: sqlite")


def test_list_and_revoke_create_no_database_or_project(
    service: ServiceProcess, tmp_path: Path
) -> None:
    """A typo in PTEFORGE_HOME or --project is said (exit 2): ``list`` created an empty
    database or project there and listed nothing, as if the server had no tokens."""
    nobody = _tokens(service, "list", "--project", "nobody-here")
    assert nobody.returncode == 2 and "no project 'nobody-here'" in nobody.stderr
    assert _tokens(service, "list", "--project", "nobody-here").returncode == 2  # not made
    elsewhere = {**service.env, "PTEFORGE_HOME": str(tmp_path / "typo")}
    for args in (("list",), ("revoke", "tok_x")):
        done = subprocess.run(
            [sys.executable, "-m", "pteforge", "tokens", *args],
            env=elsewhere, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert f"no database at {tmp_path / 'typo' / 'pteforge.db'}" in done.stderr
    assert not (tmp_path / "typo").exists()


def test_revoked_token_stops_at_once_on_v1_and_within_the_ttl_on_v2(
    service: ServiceProcess,
) -> None:
    token = service.create_token("short-lived", "revocation")
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{service.url}/v1/programs", headers=headers).status_code == 200
    assert httpx.get(f"{service.url}/v2", headers=headers).status_code == 200

    listed = _tokens(service, "list", "--project", "revocation")
    assert listed.returncode == 0, listed.stderr
    (line,) = [row for row in listed.stdout.splitlines() if "\tshort-lived\t" in row]
    token_id = line.split("\t")[0]
    assert line.endswith("active")

    revoked = _tokens(service, "revoke", token_id, "--project", "revocation")
    assert revoked.returncode == 0, revoked.stderr
    assert httpx.get(f"{service.url}/v1/programs", headers=headers).status_code == 401
    wait_until(
        lambda: httpx.get(f"{service.url}/v2", headers=headers).status_code == 401,
        timeout=V2_TOKEN_TTL_S + 5,
        what="/v2 to refuse the revoked token",
    )
    relisted = _tokens(service, "list", "--project", "revocation").stdout
    assert f"{token_id}\tshort-lived\t" in relisted and "revoked" in relisted


def test_revoking_an_unknown_token_fails_clearly(service: ServiceProcess) -> None:
    done = _tokens(service, "revoke", "tok_nope", "--project", "revocation")
    assert done.returncode == 2
    assert "no token 'tok_nope'" in done.stderr


def test_an_authorization_header_without_bearer_says_so(
    service: ServiceProcess, admin: httpx.Client
) -> None:
    """A token sent as ``Authorization: $TOKEN`` was 'missing bearer token'; the answer now
    says what the header lacks, on /v1 and /v2, and never quotes the token."""
    token = service.admin_token
    assert token
    cases = {
        token: "it has no scheme",
        f"Basic {token}": "its scheme is 'Basic'",
        "Bearer": "its token is empty",
    }
    for value, why in cases.items():
        for path in ("/v1/programs", "/v2/models/art_none.forward"):
            answer = httpx.get(f"{service.url}{path}", headers={"authorization": value})
            assert answer.status_code == 401, answer.text
            assert why in answer.text and token not in answer.text
            assert "the Authorization header is not 'Bearer <token>'" in answer.text
    assert "missing bearer token" in httpx.get(f"{service.url}/v1/programs").text
