"""Every setting ``server/settings.py`` reads is in deployment.md's table, and every
``PTEFORGE_`` variable the README and docs/*.md name is read by something: a setting, the
client, the compose file or the load balancer's configuration."""

from __future__ import annotations

import re

from pteforge.server.settings import Settings
from tests.docs.blocks import ROOT, documents

DEPLOYMENT = ROOT / "docs" / "deployment.md"
_VARIABLE = re.compile(r"\bPTEFORGE_[A-Z0-9_]+\b")
_TABLE_ROW = re.compile(r"^\| `(PTEFORGE_[A-Z0-9_]+)` \|", re.M)
# Variables that are no setting of the service, and the files that read them.
_READ_ELSEWHERE = {
    "PTEFORGE_URL": "client/cli.py",
    "PTEFORGE_TOKEN": "client/cli.py",
    "PTEFORGE_CONFIG": "client/cli.py",
    "PTEFORGE_DB_PASSWORD": "docker/compose.yaml",
    "PTEFORGE_PORT": "docker/compose.yaml",
    "PTEFORGE_LB_BIND": "docker/haproxy.cfg",
    "PTEFORGE_LB_GRPC_BIND": "docker/haproxy.cfg",
}


def _settings() -> set[str]:
    return {f"PTEFORGE_{name.upper()}" for name in Settings.model_fields}


def test_the_table_lists_every_setting_once() -> None:
    rows = _TABLE_ROW.findall(DEPLOYMENT.read_text())
    assert len(rows) == len(set(rows)), "a setting has two rows"
    assert set(rows) == _settings(), (
        f"missing from the table: {sorted(_settings() - set(rows))}; "
        f"no setting: {sorted(set(rows) - _settings())}"
    )


def test_every_documented_variable_is_read() -> None:
    for page in documents():
        for name in set(_VARIABLE.findall(page.read_text())) - _settings():
            assert name in _READ_ELSEWHERE, f"{page.name} names {name}, which nothing reads"


def test_the_variables_read_elsewhere_are() -> None:
    for name, reader in _READ_ELSEWHERE.items():
        assert name in (ROOT / reader).read_text(), f"{reader} does not read {name}"
