"""pteforge.storage."""
