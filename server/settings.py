"""Service settings: the one place that reads the environment (prefix ``PTEFORGE_``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _physical_memory() -> int:
    """The memory this process may use: the host's, or its cgroup's limit when lower (a
    container sees the host's size in ``sysconf``)."""
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return host
    return min(host, int(limit)) if limit.isdigit() else host


def _positive(default: float, description: str = "") -> Any:
    """A field that must be above zero (``PTEFORGE_<FIELD>`` as every other)."""
    return Field(default=default, gt=0, description=description or None)


class Settings(BaseSettings):
    """Every knob of ``pteforge serve``; each field maps to ``PTEFORGE_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="PTEFORGE_", extra="ignore")

    home: Path = Field(
        default_factory=lambda: Path.home() / ".pteforge",
        description="The embedded SQLite database (pteforge.db, with every program and "
        "artifact), then this machine's caches and uploads in progress.",
    )
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL replacing the embedded SQLite default."
    )
    grpc_port: int = Field(
        default=8001,
        ge=0,
        le=65535,
        description="Port of the gRPC frontend (inference.GRPCInferenceService, for "
        "tritonclient.grpc), on the HTTP host; 0 turns it off.",
    )
    grpc_host: str = Field(
        default="127.0.0.1",
        description="Address gRPC listens on; unset, serve's --host (HTTP's address).",
    )
    max_upload_bytes: int = _positive(2 * 1024**3, "Largest accepted request body (413 above it).")
    max_json_body_bytes: int = _positive(
        16 * 1024**2,
        "Largest JSON body of a /v1 route (a compile job's plan and calibration tensors, "
        "a chat): 413 above it, counted as it arrives, before it is parsed.",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="A bearer token /metrics then requires (401 without it). Unset, /metrics "
        "needs none, and its series name every project's models: keep it off networks "
        "that tenants reach.",
    )
    http_max_header_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        description="Largest request line plus headers (431 above it, before it is parsed).",
    )
    http_header_timeout_seconds: float = _positive(
        10.0,
        "Time a client has to send a request's headers, from connecting or from "
        "the previous response (408 and closed after it: slow clients cannot hold sockets).",
    )
    http_keep_alive_seconds: float = _positive(5.0, "Idle keep-alive connections close after this.")
    max_infer_request_bytes: int = _positive(
        256 * 1024**2,
        "Largest /v2 infer body, as sent and once decompressed (413 above it).",
    )
    compile_workers: int = Field(default=1, ge=0, description="Compile worker processes.")
    job_lease_seconds: float = _positive(
        10.0,
        "Heartbeat timeout: a worker silent this long is presumed dead, and its "
        "job goes back to the queue (within one heartbeat of that) with the reason recorded.",
    )
    heartbeat_seconds: float = _positive(
        1.0,
        "How often a worker heartbeats (renewing its job's lease), checks for a "
        "cancel and requeues the jobs of silent workers.",
    )
    worker_poll_seconds: float = _positive(
        0.5,
        "How often an idle worker looks for a queued job when no notification "
        "can wake it (SQLite with workers outside `pteforge serve`; PostgreSQL while the "
        "listening connection is down).",
    )
    worker_fallback_poll_seconds: float = _positive(
        5.0,
        "How often an idle worker polls anyway while PostgreSQL notifications "
        "wake it (a fallback).",
    )
    project_storage_bytes: int | None = Field(
        default=None,
        gt=0,
        description="What one project may store: its programs, artifacts and tokenizers "
        "(507 `insufficient_storage` for an upload past it; a compile past it fails with "
        "that code; `none`: no quota).",
    )
    compile_memory_limit_bytes: int | None = Field(
        default=8 * 1024**3,
        gt=0,
        description="RLIMIT_AS of the process lowering one job (`none`: no limit).",
    )
    compile_warmup: bool = Field(
        default=True,
        description="Warm each compile worker's lowering fork server up with a tiny lowering "
        "when it starts, so every lowering process forked from it starts warm and a job, "
        "even one right after another, does not pay the first-lowering cost (about 2 s). "
        "Off, a worker starts its fork server at its first job instead (imports: about 7 s "
        "of CPU), and one that never lowers never pays them.",
    )
    describe_backends_at_start: bool = Field(
        default=True,
        description="Describe the backend catalog (the body of GET /v1/backends) on a thread "
        "as soon as the service is up, so the first request finds it ready. Describing it "
        "imports every backend's lowering package and the native runtime (about 14 s of CPU); "
        "off: the first GET /v1/backends pays that instead.",
    )
    compile_timeout_seconds: float = _positive(1800.0, "Wall-clock limit of one compile job.")
    validate_timeout_seconds: float = _positive(120.0, "Wall-clock limit of validating one upload.")
    validate_memory_limit_bytes: int = _positive(
        4 * 1024**3, "RLIMIT_AS of the process validating an upload."
    )
    sse_poll_seconds: float = _positive(0.2, "How often the job event stream looks at the job row.")
    event_streams_per_project: int = Field(
        default=32,
        ge=1,
        description="Job event streams one project may have open at once (429 above): each "
        "polls the database every sse_poll_seconds.",
    )
    unfinished_jobs_per_project: int = Field(
        default=100,
        ge=1,
        description="Queued or running jobs (compile and profile) one project may have at "
        "once (429 above): each is a database row the workers must pass over.",
    )
    public_url: str = Field(
        default="http://127.0.0.1:8000", description="Base URL shown in the first-start help."
    )
    blob_gc_interval_seconds: float = _positive(
        600.0, "How often a worker removes unreferenced content."
    )
    blob_gc_grace_seconds: float = _positive(
        3600.0,
        "Age before unreferenced content or an abandoned upload is removed; "
        "longer than any upload or compile takes to reference what it wrote.",
    )
    job_retention_seconds: float = _positive(
        30 * 24 * 3600.0,
        "Age after which a finished job and its event log are deleted (its "
        "artifact stays); workers check every blob_gc_interval_seconds.",
    )
    runtime_pool_size: int = Field(
        default_factory=lambda: max(1, (os.cpu_count() or 1) - 1),
        ge=1,
        description="Inference runtime processes (default: one per core but one, which the "
        "HTTP side needs: see docs/benchmarks.md, remote execution).",
    )
    request_memory_bytes: int = Field(
        default_factory=lambda: _physical_memory() // 4,
        ge=1,
        description="Bytes that requests in flight may hold in the server at once: /v1 JSON "
        "bodies; /v2 and gRPC infer bodies, decoded inputs and the most their outputs can "
        "take, until answered (503 above; default: a quarter of the host's memory).",
    )
    request_memory_bytes_per_project: int | None = Field(
        default=None,
        ge=1,
        description="What one project's requests in flight may hold (429 above; a request "
        "needing more alone, 413), so one project's waiting requests cannot take the "
        "server's memory (default: half of request_memory_bytes).",
    )
    requests_per_project: int = Field(
        default=256,
        ge=1,
        description="How many requests with a body (uploads, JSON bodies, /v2 and gRPC "
        "infer, generation, open gRPC streams) one project may have in flight (429 above): "
        "each holds a connection, so one project's slow uploads cannot take every file "
        "descriptor.",
    )
    runtime_request_threads: int = Field(
        default=0,
        ge=0,
        description="XNNPACK threads of a stateless request that finds the runtime pool quiet "
        "(0, the default: every core): it runs on one extra runtime process of that many "
        "threads; while requests overlap, and for 100 ms after, they run on the one-thread "
        "processes. 1: no extra process (docs/benchmarks.md, full-speed single requests).",
    )
    runtime_cache_bytes: int = _positive(
        2 * 1024**3, "Loaded-program cache of each runtime process."
    )
    runtime_disk_cache_bytes: int = _positive(
        16 * 1024**3,
        "Local artifact copies the runtime loads by path; least recently used are "
        "deleted above this (never one used in the last 5 minutes).",
    )
    runtime_request_timeout_seconds: float = _positive(
        60.0,
        "Longest one /v2 or gRPC request may hold a runtime worker; a hung worker is "
        "killed and replaced after it, and the request answers 503 with Retry-After. A text "
        "generation that runs this long ends after its token under way (finish_reason "
        "length).",
    )
    runtime_restart_attempts: int = Field(
        default=6,
        ge=1,
        description="Failed starts in a row (0.1 s apart, doubling up to 5 s) after which a "
        "lost runtime worker is no longer replaced; with none left /v2 answers 503 naming "
        "the start error, and a request 30 s later starts a new round.",
    )
    runtime_crashes_per_project: int = Field(
        default=4,
        ge=1,
        description="Runtime workers one project's requests may crash or hang (each one "
        "replaced, the sessions it held lost, other projects' too) within "
        "runtime_crash_window_seconds; past it the project's /v2, gRPC and generation "
        "requests answer 429 with Retry-After until the oldest crash leaves the window.",
    )
    runtime_crash_window_seconds: float = _positive(
        600.0, "The window runtime_crashes_per_project counts a project's crashes in."
    )
    stream_send_timeout_seconds: float = _positive(
        60.0,
        "Longest one send of a generation stream may wait for its client: past it the "
        "connection is closed and the generation, if it still runs, cancelled. Also how long "
        "a client may take nothing of any answer before its connection is closed.",
    )
    stream_buffer_bytes: int = _positive(
        4 * 1024**2,
        "Generated text (UTF-8; 128 bytes an event, 8 a token id, 256 a logprob) that may "
        "wait for a generation stream's slow client; past it the generation is cancelled, "
        "the stream ends with an error event.",
    )
    session_idle_seconds: float = _positive(
        300.0,
        "A /v2 session (sequence) unused this long is freed; a later request on "
        "it gets 410 naming the expired sequence.",
    )
    session_max_per_project: int = Field(
        default=16, ge=1, description="Open /v2 sessions one project may hold (429 above)."
    )
    session_memory_bytes: int = _positive(
        1024**3,
        "Planned memory all open /v2 sessions together may hold (503 above).",
    )
    session_memory_bytes_per_project: int | None = Field(
        default=None,
        ge=1,
        description="Planned memory one project's open sessions may hold (429 above), so one "
        "project cannot take the whole session budget from the others (default: half of "
        "session_memory_bytes).",
    )

    @field_validator("metrics_token", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """``PTEFORGE_METRICS_TOKEN=`` (compose passes an unset one so) means no token."""
        return None if value == "" else value

    @field_validator("compile_memory_limit_bytes", "project_storage_bytes", mode="before")
    @classmethod
    def _none_is_no_limit(cls, value: object) -> object:
        """``PTEFORGE_COMPILE_MEMORY_LIMIT_BYTES=none`` and ``PTEFORGE_PROJECT_STORAGE_BYTES=none``
        (an environment holds only strings)."""
        return None if isinstance(value, str) and value.strip().lower() == "none" else value

    @property
    def uploads_dir(self) -> Path:
        """Scratch space for request bodies streamed to disk before validation."""
        return self.home / "uploads"


def settings_from_environment(command: str) -> Settings:
    """The settings of ``pteforge COMMAND``: a ``PTEFORGE_`` variable that does not parse ends
    the command with one line naming the variable, its value and why, not a traceback."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"PTEFORGE_{'_'.join(map(str, error['loc'])).upper()}={error.get('input')!r}: "
            f"{error['msg']}"
            for error in exc.errors()
        )
        raise SystemExit(f"pteforge {command}: {problems}") from None
