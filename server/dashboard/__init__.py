"""The web dashboard served at ``/``: a static page and its scripts (no build step)."""
