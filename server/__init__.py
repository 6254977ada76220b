"""pteforge.server: the FastAPI service (docs/http-api.md) over storage, manager and runtime.

Public entry points::

    from pteforge.server.app import create_app      # create_app(Settings()) -> FastAPI
    from pteforge.server.settings import Settings   # every PTEFORGE_* environment variable
    pteforge serve [--host H] [--port P]            # uvicorn + supervised compile workers
    pteforge tokens create --name N [--project P]   # prints the token as its last line

Feature folders: ``programs/`` (uploads), ``jobs/`` (compile jobs, workers, SSE),
``artifacts/`` (metadata, ranged downloads, `.pte` uploads), ``backends_api/``, ``auth/``;
``errors.py`` is the one place exceptions become ``{"error": {"code", "message"}}``.
``sandbox/`` (hostile-upload defences) and ``inference/`` (``/v2``) are mounted from here.
"""
