"""Where the client finds its server: arguments, then ``PTEFORGE_URL``/``PTEFORGE_TOKEN``,
then the file ``pteforge login`` writes (mode 0600)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pteforge.client.errors import PteforgeError

ENV_URL = "PTEFORGE_URL"
ENV_TOKEN = "PTEFORGE_TOKEN"
ENV_CONFIG = "PTEFORGE_CONFIG"
URL_FORM = "expected [http[s]://]HOST[:PORT], e.g. 127.0.0.1:8000 or https://pteforge.example"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_HOST = re.compile(r"^[\w.-]+$|^[0-9A-Fa-f:.]+$")  # a name, an IPv4 or an IPv6 address


class NotConfiguredError(PteforgeError):
    """No server URL or token was given, set in the environment, or saved by login."""


class InvalidURLError(PteforgeError, ValueError):
    """The server URL given is not an ``http``/``https`` URL (nor a bare ``HOST[:PORT]``)."""


def base_url(url: str) -> str:
    """The client's base URL for ``url``: ``http://`` added to a bare ``HOST[:PORT]``, no
    trailing slash; :class:`InvalidURLError` naming ``url`` when it is not a server URL."""
    text = url.strip()
    full = text if _SCHEME.match(text) else f"http://{text}"
    if not _is_server_url(full):
        raise InvalidURLError(f"{url!r} is not a server URL: {URL_FORM}")
    return full.rstrip("/")


def _is_server_url(url: str) -> bool:
    """An ``http``/``https`` URL with a host, a valid port if any, no user, query or fragment."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # an out-of-range or non-numeric port, an unclosed IPv6 bracket
        return False
    return (
        parts.scheme.lower() in ("http", "https")
        and bool(parts.hostname and _HOST.match(parts.hostname))
        and port != 0
        and parts.username is None
        and not parts.query
        and not parts.fragment
    )


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
    url_source: str | None = None  # where the URL came from, when not from the caller
    if url is None:
        url, url_source = _pick(ENV_URL, saved.get("url"))
        sources.append(url_source)
    if token is None:
        token, where = _pick(ENV_TOKEN, saved.get("token"))
        sources.append(where)
    if not url or not token:
        missing = " and ".join(n for n, v in (("a URL", url), ("a token", token)) if not v)
        raise NotConfiguredError(
            f"no server configured ({missing} missing): run `pteforge login URL --token TOKEN` "
            f"or set {ENV_URL} and {ENV_TOKEN}"
        )
    try:
        url = base_url(url)
    except InvalidURLError as exc:
        if url_source is None:
            raise
        raise InvalidURLError(f"{exc} (from {url_source})") from None
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
            json.dump({"url": base_url(url), "token": token}, out)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return path
