"""Compile jobs: the HTTP routes, the worker processes that claim jobs from storage, and
the disposable lowering process each job runs in."""
