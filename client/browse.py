"""The remote commands that look at or remove what a project holds: ``ls``, ``show``, ``rm``
and ``cancel`` (parsed by ``pteforge.client.cli``, run by ``pteforge.client.commands``).

With ``--json`` each prints what the API answered, in the API's own shape."""

from __future__ import annotations

import argparse
import re
from typing import Any

from pteforge.client.cli import BadInputError
from pteforge.client.config import load_credentials
from pteforge.client.errors import NotFoundError
from pteforge.client.models import Artifact, Job, Model, ModelVersion, Program
from pteforge.client.render import Output
from pteforge.client.sync import Client
from pteforge.client.views import (
    artifact_summary,
    job_summary,
    listing,
    model_summary,
    program_summary,
)
from pteforge.contracts.names import MODEL_NAME_PATTERN

# An id's prefix -> what it names (the API's path segment).
KINDS = {"prog_": "programs", "art_": "artifacts", "job_": "jobs"}


def connect() -> Client:
    """A client of the server the user logged in to (or ``PTEFORGE_URL``/``PTEFORGE_TOKEN``)."""
    creds = load_credentials()
    return Client(creds.url, creds.token)


def kind_of(ident: str) -> str:
    """``programs``, ``artifacts`` or ``jobs``: what ``ident`` names, by its prefix; else
    ``models`` for a model name (``NAME`` or ``NAME:VERSION``)."""
    for prefix, kind in KINDS.items():
        if ident.startswith(prefix) and len(ident) > len(prefix):
            return kind
    name, colon, version = ident.partition(":")
    if re.fullmatch(MODEL_NAME_PATTERN, name) and (not colon or version.isdigit()):
        return "models"
    raise BadInputError(
        f"{ident!r}: expected an id starting with prog_, art_ or job_, or a model name"
    )


def ls(args: argparse.Namespace, out: Output) -> None:
    """``pteforge ls programs|artifacts|jobs``: a table, or ``{KIND: [...]}`` as the API has it."""
    names: dict[str, str] = {}
    with connect() as client:
        if args.what == "programs":
            items: list[Any] = client.list_programs(limit=args.limit)
        elif args.what == "artifacts":
            items = client.list_artifacts(limit=args.limit)
            if not out.as_json and any(a.program_id for a in items):
                names = {p.id: p.name for p in client.list_programs(limit=1000)}
        elif args.what == "models":
            items = client.list_models(limit=args.limit)
        else:
            items = client.list_jobs(status=args.status, limit=args.limit)
    if out.as_json:
        raw = [item.raw for item in items]
        out.json({"object": "list", "data": raw} if args.what == "models" else {args.what: raw})
        return
    listing(out, args.what, items, args.status if args.what == "jobs" else None, names)


def show(args: argparse.Namespace, out: Output) -> None:
    """``pteforge show ID``: a program, artifact, job or model (``NAME:VERSION``: that version),
    as a summary or the API's object."""
    kind = kind_of(args.id)
    with connect() as client:
        item: Program | Artifact | Job | Model | ModelVersion
        if kind == "programs":
            item = client.get_program(args.id)
        elif kind == "artifacts":
            item = client.get_artifact(args.id)
        elif kind == "models":
            name, colon, version = args.id.partition(":")
            item = client.get_model(name)
            item = _version_of(item, int(version)) if colon else item
        else:
            item = client.get_job(args.id)
    if out.as_json:
        out.json(item.raw)
    elif isinstance(item, Program):
        program_summary(out, item)
    elif isinstance(item, Artifact):
        artifact_summary(out, item)
    elif isinstance(item, Model):
        model_summary(out, item)
    elif isinstance(item, ModelVersion):
        out.line(f"model {item.name} version {item.version}: artifact {item.artifact_id}")
    else:
        job_summary(out, item)


def _version_of(model: Model, version: int) -> ModelVersion:
    """``model``'s version ``version`` (as listed in ``GET /v1/models/{name}``)."""
    for candidate in model.versions:
        if candidate.version == version:
            return candidate
    have = ", ".join(str(v.version) for v in model.versions) or "none"
    raise NotFoundError(f"model {model.name!r} has no version {version} (versions: {have})")


def rm(args: argparse.Namespace, out: Output) -> None:
    """``pteforge rm ID``: delete a program (its artifacts stay), an artifact, or a model's
    version (``NAME:VERSION``; the one before becomes the latest)."""
    kind = kind_of(args.id)
    if kind == "jobs":
        raise BadInputError(f"{args.id!r}: a job is not deleted; stop it with `pteforge cancel`")
    name, colon, version = args.id.partition(":")
    if kind == "models" and not colon:
        raise BadInputError(f"{args.id!r}: name the version to delete: NAME:VERSION")
    with connect() as client:
        if kind == "programs":
            client.delete_program(args.id)
        elif kind == "models":
            client.delete_model_version(name, int(version))
        else:
            client.delete_artifact(args.id)
    if out.as_json:
        out.json({"id": args.id, "deleted": True})
        return
    out.line(f"Deleted {'model version' if kind == 'models' else kind[:-1]} {args.id}.")


def cancel(args: argparse.Namespace, out: Output) -> None:
    """``pteforge cancel JOB``: ask the server to stop a compile job."""
    with connect() as client:
        job = client.cancel_job(args.job)
    out.json(job.raw) if out.as_json else out.line(str(job))
