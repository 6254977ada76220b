"""The application factory: ``create_app(settings)`` builds one independent service."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import grpc
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.concurrency import run_in_threadpool

from pteforge import __version__
from pteforge.backends import default_catalog
from pteforge.runtime import RuntimePool
from pteforge.server import error_map
from pteforge.server.artifacts.router import router as artifacts_router
from pteforge.server.backends_api.router import router as backends_router
from pteforge.server.common.services import Services
from pteforge.server.dashboard.router import mount_dashboard
from pteforge.server.errors import install_error_handlers
from pteforge.server.generation import bare_routers as generation_bare_routers
from pteforge.server.generation import router as generation_router
from pteforge.server.generation.target import forget_target
from pteforge.server.grpc_api import STOP_GRACE_S, start_grpc_server
from pteforge.server.http import health
from pteforge.server.http.docs import install_docs
from pteforge.server.http.memory import RequestMemory
from pteforge.server.http.openapi import install_openapi
from pteforge.server.inference import router as inference_router
from pteforge.server.inference.dependencies import InferenceState
from pteforge.server.inference.routes_infer import front_routes
from pteforge.server.inference.startup import (
    start_runtime_pool,
    store_inference_state,
)
from pteforge.server.jobs.compile_workers import WorkerSupervisor
from pteforge.server.jobs.metrics import OperationsCollector
from pteforge.server.jobs.router import router as jobs_router
from pteforge.server.jobs.streams import OpenStreams
from pteforge.server.models.router import router as models_router
from pteforge.server.programs.router import router as programs_router
from pteforge.server.sandbox import ForkServerIsolation, ProcessLimits
from pteforge.server.settings import Settings
from pteforge.server.startup.bootstrap import bootstrap_if_empty, usage_text
from pteforge.server.startup.database import open_service_store
from pteforge.server.startup.fork_server import start_fork_server
from pteforge.server.startup.heap import freeze_startup_heap
from pteforge.server.startup.host import report_confinement

log = logging.getLogger(__name__)


def _process_limits(settings: Settings) -> ProcessLimits:
    return ProcessLimits(
        memory_bytes=settings.validate_memory_limit_bytes,
        wall_seconds=settings.validate_timeout_seconds,
        cpu_seconds=int(settings.validate_timeout_seconds),
    )


def _build_services(settings: Settings) -> Services:
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    store = open_service_store(settings)
    isolation = ForkServerIsolation(start_fork_server())
    memory = RequestMemory(
        settings.request_memory_bytes,
        settings.request_memory_bytes_per_project,
        settings.requests_per_project,
    )
    streams = OpenStreams(settings.event_streams_per_project)
    return Services(
        settings,
        store,
        default_catalog(),
        _process_limits(settings),
        isolation,
        memory=memory,
        event_streams=streams,
    )


def operations_registry(services: Services) -> CollectorRegistry:
    """The /metrics registry, starting with the jobs, workers and store figures (read once
    now, so the first scrape has them)."""
    registry = CollectorRegistry()
    operations = OperationsCollector(services.store)
    operations.refresh()
    registry.register(operations)
    return registry


async def _start_grpc(settings: Settings, app: FastAPI) -> grpc.aio.Server | None:
    """The gRPC frontend serving ``app``'s runtime once its lifespan sets it (None: off)."""
    if settings.grpc_port == 0:
        return None
    current = partial(getattr, app.state, "inference", None)
    return await start_grpc_server(
        current, settings.grpc_host, settings.grpc_port, settings.max_infer_request_bytes
    )


async def _start_inference(app: FastAPI, services: Services) -> RuntimePool:
    """Start the runtime pool; the /v2 and generation routes (created with the app) serve
    it through ``app.state.inference`` until shutdown."""
    settings = services.settings
    pool = await run_in_threadpool(start_runtime_pool, settings)
    registry = await run_in_threadpool(operations_registry, services)
    app.state.inference = store_inference_state(services, pool, registry)
    services.model_changed = partial(_forget_model, app.state.inference)
    return pool


def _forget_model(state: InferenceState, project_id: str, name: str, version: int) -> None:
    """A version of model ``name`` was added, deleted or given a tokenizer through this
    server: its generation targets and the resolved /v2 artifacts (a name's latest version
    among them; keyed by caller, so all of them: changes are rare) are forgotten, so the
    change serves at once. Through another replica it takes the resolve cache's time to
    live (``new_inference_state``)."""
    forget_target(state.targets, project_id, name, version)
    state.artifacts.clear()


def create_app(settings: Settings | None = None) -> FastAPI:
    """A FastAPI app whose lifespan opens the store, bootstraps it and runs the workers."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        services = _build_services(settings)
        boot = bootstrap_if_empty(services.store)
        if boot is not None:
            print(usage_text(boot, settings.public_url), file=sys.stderr, flush=True)
        app.state.services = services
        services.host = await run_in_threadpool(report_confinement, settings.home)
        # With no local workers (`serve --no-workers`) the queue is served by `pteforge worker`
        # processes elsewhere, woken by the database (PostgreSQL) or their polling.
        supervisor = WorkerSupervisor(settings, settings.compile_workers)
        supervisor.start()
        services.job_queued = supervisor.wake
        services.job_canceled = supervisor.interrupt
        pool = await _start_inference(app, services)
        grpc_server = await _start_grpc(settings, app)  # last: nothing after it can fail
        freeze_startup_heap()
        if settings.describe_backends_at_start:  # in the background: seconds of imports
            describe = threading.Thread(target=services.catalog_json, name="describe-backends")
            describe.daemon = True  # a stop need not wait for it
            describe.start()
        try:
            yield
        finally:
            if grpc_server is not None:
                await grpc_server.stop(STOP_GRACE_S)
            del app.state.inference
            pool.close()
            supervisor.stop()
            services.store.close()

    app = FastAPI(
        title="pteforge",
        version=__version__,
        description="Compile multi-method torch.export programs into ExecuTorch .pte artifacts.",
        lifespan=lifespan,
        docs_url=None,  # install_docs serves /docs and /redoc from local files, not a CDN
        redoc_url=None,
    )
    _install_routes(app)
    return app


def _install_routes(app: FastAPI) -> None:
    """What ``app`` answers: its error handlers, the OpenAPI document and its pages, the
    dashboard, then every router."""
    install_error_handlers(app, error_map.answer, error_map.ROOTS)
    install_openapi(app)
    install_docs(app)
    mount_dashboard(app)
    for router in (
        health.router,
        programs_router,
        jobs_router,
        artifacts_router,
        backends_router,
        models_router,
        inference_router,
        generation_router,
    ):
        app.include_router(router)
    front = front_routes()  # /v2 infer found first: ~200 us less per call
    for bare in generation_bare_routers:  # then generation: as much off time to first token
        front += front_routes(bare)
    app.router.routes[:0] = front
