"""The SQL store: transactions over a SQLAlchemy session, and :func:`open_store`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session, sessionmaker

from pteforge.storage.blobs import DEFAULT_CHUNK_SIZE
from pteforge.storage.engine import create_store_engine, reader
from pteforge.storage.ids import utc_now
from pteforge.storage.schema import upgrade_to_head
from pteforge.storage.sql.accounts import SqlProjects, SqlTokens
from pteforge.storage.sql.blobs import SqlBlobStore
from pteforge.storage.sql.catalog import SqlArtifacts, SqlPrograms
from pteforge.storage.sql.errors import translate, translated
from pteforge.storage.sql.jobs import SqlJobs
from pteforge.storage.sql.model_names import SqlModels
from pteforge.storage.sql.stats import SqlStats
from pteforge.storage.sql.workers import SqlWorkers
from pteforge.storage.store import Store, Transaction


class SqlTransaction(Transaction):
    def __init__(self, session: Session, clock: Callable[[], datetime]) -> None:
        self.projects = SqlProjects(session, clock)
        self.tokens = SqlTokens(session, clock)
        self.programs = SqlPrograms(session, clock)
        self.artifacts = SqlArtifacts(session, clock)
        self.models = SqlModels(session, clock)
        self.jobs = SqlJobs(session, clock)
        self.workers = SqlWorkers(session, clock)
        self.stats = SqlStats(session)


class SqlStore(Store):
    """:class:`Store` over SQLite or PostgreSQL through SQLAlchemy."""

    def __init__(
        self,
        engine: Engine,
        clock: Callable[[], datetime] = utc_now,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        self.engine = engine
        self._clock = clock
        self._sessions = sessionmaker(engine, expire_on_commit=False, autoflush=True)
        self._read_sessions = sessionmaker(reader(engine), expire_on_commit=False, autoflush=True)
        self.blobs = SqlBlobStore(engine, clock, chunk_size=chunk_size)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    @contextmanager
    def transaction(self, read_only: bool = False) -> Iterator[Transaction]:
        session = self._read_sessions() if read_only else self._sessions()
        try:
            with session.begin():
                yield SqlTransaction(session, self._clock)
        except sa_exc.SQLAlchemyError as error:
            raise translate(error) from error
        finally:
            session.close()

    def close(self) -> None:
        self.engine.dispose()


def open_store(
    url: str,
    *,
    migrate: bool = True,
    clock: Callable[[], datetime] = utc_now,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> SqlStore:
    """Open the store at ``url``, first bringing its schema to head unless ``migrate=False``.

    Safe to call from several processes at once (migrations serialise on a database lock).
    """
    engine = create_store_engine(url)
    if migrate:
        with translated():
            upgrade_to_head(engine)
    return SqlStore(engine, clock=clock, chunk_size=chunk_size)
