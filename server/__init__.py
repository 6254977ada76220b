"""pteforge.server."""
