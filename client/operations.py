"""Every client call as a sans-IO operation: a generator that yields the :class:`Call` s it
needs, is sent each :class:`Reply`, and returns the typed result. ``Client`` and
``AsyncClient`` only run these generators over their own transport."""

from __future__ import annotations

import warnings
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import numpy as np

from pteforge.client.calls import Call, Reply
from pteforge.client.errors import NumericsWarning, TransportError, raise_for_job
from pteforge.client.files import partial_file
from pteforge.client.models import Artifact, InferResult, Job, Model, ModelVersion, Program
from pteforge.client.sinks import DownloadSink, JobEventSink, ProgressCallback, StageCallback
from pteforge.client.tensors import Inputs, decode_response, encode_request, named_inputs

T = TypeVar("T")
R = TypeVar("R", Program, Artifact, Job)
Op = Generator[Call, Reply, T]
Ref = str | Program | Artifact | Job
MAX_CACHED_SIGNATURES = 1024
ARTIFACT_ID_PREFIX = "art_"
MAX_IDLE_RECONNECTS = 3  # an event stream that closes without news this often is given up
_EVENT_STREAM = {"Accept": "text/event-stream"}


def ref(value: Ref) -> str:
    """The id of a resource given as an object or as its id."""
    return value if isinstance(value, str) else value.id


def _get(model: type[R], kind: str, value: Ref) -> Op[R]:
    """``GET /v1/{kind}/{id}`` as a ``model``."""
    reply = yield Call("GET", f"/v1/{kind}/{ref(value)}", idempotent=True)
    return model.from_json(reply.json())


def _delete(kind: str, value: Ref) -> Op[None]:
    yield Call("DELETE", f"/v1/{kind}/{ref(value)}", ok=(204,), idempotent=True)


def _list(model: type[R], kind: str, limit: int, **params: Any) -> Op[list[R]]:
    """``GET /v1/{kind}`` (``limit`` and the ``params`` given) as ``model`` s, newest first."""
    query = {"limit": limit, **{k: v for k, v in params.items() if v is not None}}
    reply = yield Call("GET", f"/v1/{kind}", params=query, idempotent=True)
    return [model.from_json(item) for item in reply.json()[kind]]


class Operations:
    """The operations of one client, with what they remember between calls (the input names
    of methods, the server's protocol extensions)."""

    def __init__(self) -> None:
        self._input_names: dict[str, tuple[str, ...]] = {}
        self._extensions: frozenset[str] | None = None

    # programs
    def upload_program(self, files: Mapping[str, Path], name: str | None) -> Op[Program]:
        data = {"name": name} if name else None
        reply = yield Call("POST", "/v1/programs", ok=(201,), files=files, data=data)
        return Program.from_json(reply.json())

    def get_program(self, program: Ref) -> Op[Program]:
        return _get(Program, "programs", program)

    def list_programs(self, limit: int = 100) -> Op[list[Program]]:
        """The project's programs, newest first."""
        return _list(Program, "programs", limit)

    def delete_program(self, program: Ref) -> Op[None]:
        return _delete("programs", program)

    # jobs
    @overload
    def compile(self, program: Ref, plan: Mapping[str, Any], wait: Literal[True] = True,
                on_stage: StageCallback | None = None) -> Op[Artifact]: ...  # fmt: skip
    @overload
    def compile(self, program: Ref, plan: Mapping[str, Any], wait: Literal[False],
                on_stage: StageCallback | None = None) -> Op[Job]: ...  # fmt: skip
    def compile(
        self,
        program: Ref,
        plan: Mapping[str, Any],
        wait: bool = True,
        on_stage: StageCallback | None = None,
    ) -> Op[Artifact] | Op[Job]:
        """Queue a compile; with ``wait``, follow its events (``on_stage(job)`` at each status
        or stage change) and return the artifact, or raise the error the job failed with."""
        # a plan that is no mapping goes as it is: the service names what is wrong with it
        sent = dict(plan) if isinstance(plan, Mapping) else plan
        body = {"program_id": ref(program), "plan": sent}
        reply = yield Call("POST", "/v1/compile-jobs", ok=(202,), json=body)
        job = Job.from_json(reply.json())
        if not wait:
            return job
        return (yield from self.wait(job, on_stage))

    def wait(self, job: Ref, on_stage: StageCallback | None = None) -> Op[Artifact]:
        """Follow a queued job to its artifact (or its error); a ``NumericsWarning`` per
        method whose numerics check failed while the artifact was kept."""
        final = yield from self.follow(job, on_stage)
        raise_for_job(final)
        artifact = yield from self.get_artifact(str(final.artifact_id))
        for problem in artifact.numerics_failures():
            warnings.warn(problem, NumericsWarning, stacklevel=4)  # the caller of compile
        return artifact

    def follow(self, job: Ref, on_stage: StageCallback | None) -> Op[Job]:
        """Read ``GET /v1/jobs/{id}/events`` until ``end`` (reconnecting with
        ``Last-Event-ID``); the job as it ended."""
        sink = JobEventSink(on_stage)
        path = f"/v1/jobs/{ref(job)}/events"
        idle = 0
        while not sink.ended:
            before = sink.received
            yield Call("GET", path, sink=sink, idempotent=True, headers=_EVENT_STREAM)
            idle = 0 if sink.received > before else idle + 1
            if idle >= MAX_IDLE_RECONNECTS:
                raise TransportError(f"GET {path}: the stream closed {idle} times with no event")
        if sink.job is not None and sink.job.done:
            return sink.job
        return (yield from self.get_job(job))

    def get_job(self, job: Ref) -> Op[Job]:
        return _get(Job, "jobs", job)

    def list_jobs(self, status: str | None = None, limit: int = 100) -> Op[list[Job]]:
        """The project's jobs, newest first, optionally only those in ``status``."""
        return _list(Job, "jobs", limit, status=status)

    def cancel_job(self, job: Ref) -> Op[Job]:
        reply = yield Call("POST", f"/v1/jobs/{ref(job)}/cancel", idempotent=True)
        return Job.from_json(reply.json())

    # artifacts
    def get_artifact(self, artifact: Ref) -> Op[Artifact]:
        return _get(Artifact, "artifacts", artifact)

    def list_artifacts(self, limit: int = 100) -> Op[list[Artifact]]:
        """The project's artifacts, newest first."""
        return _list(Artifact, "artifacts", limit)

    def delete_artifact(self, artifact: Ref) -> Op[None]:
        return _delete("artifacts", artifact)

    def upload_artifact(self, path: str | Path, ptd: str | Path | None = None) -> Op[Artifact]:
        """Upload a ``.pte`` built elsewhere, and the ``.ptd`` holding its constants if it
        was exported with them outside (program-data separation); streamed from disk."""
        files = {"pte": Path(path)} | ({} if ptd is None else {"ptd": Path(ptd)})
        reply = yield Call("POST", "/v1/artifacts", ok=(201,), files=files)
        return Artifact.from_json(reply.json())

    def download(
        self,
        artifact: Ref,
        path: str | Path,
        on_progress: ProgressCallback | None = None,
        bundled: bool = False,
        data: bool = False,
    ) -> Op[Path]:
        """Stream the artifact's ``.pte`` (``bundled``: its BundledProgram ``.bpte``; ``data``:
        its ``.ptd``) to ``path`` (``on_progress(bytes, total)``, resumed by ``Range``), there
        once its sha256 matched (that of an ``Artifact`` given, or the server's ``ETag``)."""
        part = "bpte" if bundled else "ptd" if data else "pte"
        sha256 = artifact.sha256_of(part) if isinstance(artifact, Artifact) else None
        with partial_file(Path(path)) as file:
            sink = DownloadSink(file, sha256, on_progress)
            url = f"/v1/artifacts/{ref(artifact)}/{part}"
            yield Call("GET", url, ok=(200, 206), sink=sink, idempotent=True)
            sink.check()
        return Path(path)

    def backends(self) -> Op[list[dict[str, Any]]]:
        """The backend catalog (``GET /v1/backends``)."""
        reply = yield Call("GET", "/v1/backends", idempotent=True)
        return list(reply.json())

    # models
    def deploy(self, artifact: Ref, name: str) -> Op[ModelVersion]:
        """Make ``artifact`` the next version of model ``name`` (the first creates it)."""
        body = {"artifact_id": ref(artifact)}
        reply = yield Call("POST", f"/v1/models/{name}/versions", ok=(201,), json=body)
        return ModelVersion.from_json(reply.json())

    def set_tokenizer(
        self,
        name: str,
        version: int,
        tokenizer: str | Path,
        config: str | Path | None = None,
        chat_template: str | Path | None = None,
    ) -> Op[dict[str, Any]]:
        """Attach ``tokenizer`` (a ``tokenizer.json``) and optionally ``config`` (its
        ``tokenizer_config.json``, whose ``chat_template`` renders chats) and
        ``chat_template`` (the ``chat_template.jinja`` ``transformers`` saves beside a config
        without one) to ``version`` of model ``name`` for text generation; returns the
        server's record (sha256s, sizes)."""
        files = {"tokenizer": Path(tokenizer)}
        if config is not None:
            files["tokenizer_config"] = Path(config)
        if chat_template is not None:
            files["chat_template"] = Path(chat_template)
        path = f"/v1/models/{name}/versions/{version}/tokenizer"
        reply = yield Call("PUT", path, ok=(201,), files=files)
        return dict(reply.json())

    def list_models(self, limit: int = 100) -> Op[list[Model]]:
        """The project's models, by name (without their versions: see ``get_model``)."""
        reply = yield Call("GET", "/v1/models", params={"limit": limit}, idempotent=True)
        return [Model.from_json(item) for item in reply.json()["data"]]

    def get_model(self, name: str) -> Op[Model]:
        """The model with its versions, oldest first."""
        reply = yield Call("GET", f"/v1/models/{name}", idempotent=True)
        return Model.from_json(reply.json())

    def delete_model_version(self, name: str, version: int) -> Op[None]:
        """Delete one version (its artifact stays); its number is never reused."""
        path = f"/v1/models/{name}/versions/{version}"
        yield Call("DELETE", path, ok=(204,), idempotent=True)

    # inference
    def infer(
        self,
        artifact: Ref,
        method: str,
        inputs: Inputs,
        *,
        parameters: Mapping[str, Any] | None = None,
        version: int | None = None,
    ) -> Op[InferResult]:
        """Run ``method`` of ``artifact`` over ``/v2`` with binary tensors. ``artifact`` may
        also be a model name: its latest version, or ``version``. ``inputs``: numpy arrays
        or torch tensors, in order or by name; the outputs come back as numpy."""
        # Without sequence parameters a call is stateless, so it is retried like any
        # idempotent call; a session's call is not.
        model = f"{ref(artifact)}.{method}"
        path = model if version is None else f"{model}/versions/{version}"
        arrays = yield from self.by_name(artifact, method, path, inputs)
        body, headers = encode_request(arrays, parameters)
        stateless = not parameters or "sequence_id" not in parameters
        reply = yield Call(
            "POST",
            f"/v2/models/{path}/infer",
            content=body,
            headers=headers,
            idempotent=stateless,
        )
        return decode_response(reply.body, reply.headers)  # names the model as addressed

    def by_name(
        self, artifact: Ref, method: str, model: str, inputs: Inputs
    ) -> Op[dict[str, np.ndarray]]:
        """``inputs`` by name: a mapping as given, a sequence matched in order to the input
        names of ``model`` (a /v2 model path of ``method`` of ``artifact``)."""
        if isinstance(inputs, Mapping):
            return named_inputs(inputs, None)
        names = yield from self._names(artifact, method, model)
        return named_inputs(inputs, names)

    def _names(self, artifact: Ref, method: str, model: str) -> Op[tuple[str, ...]]:
        """The input names of ``model`` (a /v2 model path), remembered unless it is a
        model name's latest version, which a new version may change."""
        names = self._input_names.get(model)
        if names is not None:
            return names
        spec = artifact.method(method) if isinstance(artifact, Artifact) else None
        if spec is not None:
            names = tuple(t.name for t in spec.inputs)
        else:
            reply = yield Call("GET", f"/v2/models/{model}", idempotent=True)
            names = tuple(str(t["name"]) for t in reply.json().get("inputs", []))
        if isinstance(artifact, str) and not _names_fixed(artifact, model):
            return names
        if len(self._input_names) >= MAX_CACHED_SIGNATURES:
            self._input_names.pop(next(iter(self._input_names)))
        self._input_names[model] = names
        return names

    def extensions(self) -> Op[frozenset[str]]:
        """The protocol extensions the server announces (``GET /v2``), asked once."""
        if self._extensions is None:
            reply = yield Call("GET", "/v2", idempotent=True)
            self._extensions = frozenset(str(e) for e in reply.json().get("extensions", []))
        return self._extensions


def _names_fixed(reference: str, model: str) -> bool:
    """Whether a /v2 model path always means one artifact: an artifact id, or a pinned
    version of a model name (not a name's latest version)."""
    return reference.startswith(ARTIFACT_ID_PREFIX) or "/versions/" in model
