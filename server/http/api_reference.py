"""``docs/http-api.md``, rendered from the service's own OpenAPI document.

The reference in the repository is generated, never hand-edited, and a test renders the
live server's ``/openapi.json`` and compares, so the document and the code cannot drift.
Regenerate with ``python -m pteforge.server.http.api_reference URL > docs/http-api.md``
against a running ``pteforge serve``.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from typing import Any

_HEADER = """# pteforge HTTP API reference

Generated from the OpenAPI document of `pteforge serve` (`GET /openapi.json`; browsable at
`/docs`) by `python -m pteforge.server.http.api_reference URL > docs/http-api.md`. Do not edit
by hand: `tests/server/test_api_reference.py` fails when this file and the service disagree.

Every route but the health routes takes `Authorization: Bearer <token>`. `/v1` errors are
`{"error": {"code", "message"}}`; `/v2` errors are `{"error": "..."}` (Open Inference
Protocol). When ExecuTorch refuses a program or fails a run, the `/v2` message names its
error code (`0x12 (InvalidArgument)`) and ends with `runtime log:` and the lines the native
runtime logged during that request (control characters removed, bounded in length).
"""


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return f"`{schema['$ref'].rsplit('/', 1)[-1]}`"
    if schema.get("type") == "array" and "items" in schema:
        return f"list of {_schema_name(schema['items'])}"
    return f"`{schema.get('type', 'object')}`"


def _body(operation: dict[str, Any]) -> str:
    content = operation.get("requestBody", {}).get("content", {})
    return "; ".join(f"{kind}: {_schema_name(c.get('schema', {}))}" for kind, c in content.items())


def _parameters(operation: dict[str, Any]) -> list[str]:
    rows = []
    for p in operation.get("parameters", []):
        note = p.get("description", "").replace("\n", " ")
        rows.append(f"- `{p['name']}` ({p['in']}{', required' if p.get('required') else ''})"
                    f"{': ' + note if note else ''}")  # fmt: skip
    return rows


def _responses(operation: dict[str, Any]) -> list[str]:
    rows = []
    for status, answer in sorted(operation.get("responses", {}).items()):
        content = answer.get("content", {})
        shape = "; ".join(_schema_name(c.get("schema", {})) for c in content.values() if c)
        rows.append(f"- {status}: {answer.get('description', '')}{' ' + shape if shape else ''}")
    return rows


def _operation(path: str, method: str, operation: dict[str, Any]) -> str:
    lines = [f"### `{method.upper()} {path}`", "", operation.get("summary", "")]
    description = operation.get("description", "").strip()
    if description:
        lines += ["", description]
    parameters, body = _parameters(operation), _body(operation)
    if parameters:
        lines += ["", "Parameters:", *parameters]
    if body:
        lines += ["", f"Body: {body}"]
    return "\n".join([*lines, "", "Answers:", *_responses(operation), ""])


def _schemas(document: dict[str, Any]) -> list[str]:
    lines = ["## Schemas", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        fields = schema.get("properties", {})
        required = set(schema.get("required", []))
        listed = ", ".join(f"`{f}`{'' if f in required else '?'}" for f in fields)
        lines.append(f"- `{name}`: {listed or _schema_name(schema)}")
    return [*lines, ""]


def render(document: dict[str, Any]) -> str:
    """The markdown reference of an OpenAPI ``document``, operations grouped by path."""
    parts = [_HEADER, f"API version {document.get('info', {}).get('version', '?')}.", ""]
    for path, operations in sorted(document.get("paths", {}).items()):
        for method, operation in operations.items():
            parts.append(_operation(path, method, operation))
    parts += _schemas(document)
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str]) -> int:
    """Print the reference of the server at ``argv[0]`` (default http://127.0.0.1:8000)."""
    base = (argv[0] if argv else "http://127.0.0.1:8000").rstrip("/")
    with urllib.request.urlopen(f"{base}/openapi.json", timeout=60) as answer:
        document = json.load(answer)
    sys.stdout.write(render(document))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
