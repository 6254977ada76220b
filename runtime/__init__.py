"""pteforge.runtime."""
