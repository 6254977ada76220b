"""The SQLAlchemy implementation of the store (SQLite and PostgreSQL)."""
