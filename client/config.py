"""Where the client finds its server: arguments, then ``PTEFORGE_URL``/``PTEFORGE_TOKEN``,
then the file ``pteforge login`` writes (mode 0600)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pteforge.client.errors import PteforgeError

ENV_URL = "PTEFORGE_URL"
ENV_TOKEN = "PTEFORGE_TOKEN"
ENV_CONFIG = "PTEFORGE_CONFIG"


class NotConfiguredError(PteforgeError):
    """No server URL or token was given, set in the environment, or saved by login."""


@dataclass(frozen=True)
class Credentials:
    """A server and a token, and where each came from (for messages)."""

    url: str
    token: str
    source: str


def config_path() -> Path:
    """``$PTEFORGE_CONFIG``, else ``$XDG_CONFIG_HOME/pteforge/client.json`` (``~/.config``)."""
    if os.environ.get(ENV_CONFIG):
        return Path(os.environ[ENV_CONFIG]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "pteforge" / "client.json"


def load_credentials(url: str | None = None, token: str | None = None) -> Credentials:
    """The URL and token to use: explicit values, then the environment, then the file."""
    saved = _read_saved() if url is None or token is None else {}
    sources = []
    if url is None:
        url, where = _pick(ENV_URL, saved.get("url"))
        sources.append(where)
    if token is None:
        token, where = _pick(ENV_TOKEN, saved.get("token"))
        sources.append(where)
    if not url or not token:
        missing = " and ".join(n for n, v in (("a URL", url), ("a token", token)) if not v)
        raise NotConfiguredError(
            f"no server configured ({missing} missing): run `pteforge login URL --token TOKEN` "
            f"or set {ENV_URL} and {ENV_TOKEN}"
        )
    return Credentials(url, token, ", ".join(sorted(set(sources))) or "arguments")


def _pick(env: str, saved: object) -> tuple[str | None, str]:
    if os.environ.get(env):
        return os.environ[env], env
    return (str(saved), str(config_path())) if saved else (None, "nowhere")


def _read_saved() -> dict[str, object]:
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise NotConfiguredError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def save_credentials(url: str, token: str) -> Path:
    """Write the URL and token to :func:`config_path` (directory 0700, file 0600); the file
    is replaced atomically and never exists with looser permissions."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump({"url": url.rstrip("/"), "token": token}, out)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path
