"""The PostgreSQL ``NOTIFY`` channels the job store publishes on, inside the transaction that
makes the change, so a listener hears of it exactly when it is committed.

SQLite has no notifications: on it nothing is sent and workers rely on a local signal and on
polling.
"""

from __future__ import annotations

JOB_QUEUED_CHANNEL = "pteforge_job_queued"
"""A job became claimable (queued, or requeued after its worker stopped); payload: its kind."""

JOB_CANCEL_CHANNEL = "pteforge_job_cancel"
"""A running job's cancel was requested; payload: the job id."""
