"""pteforge.backends."""
