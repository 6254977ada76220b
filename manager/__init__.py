"""pteforge.manager."""
