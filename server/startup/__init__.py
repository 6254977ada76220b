"""What one app instance opens at startup: its database, first-run bootstrap, fork server and
toolchain versions."""
