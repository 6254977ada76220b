"""Artifacts: `.pte` metadata, verified ranged downloads, and uploads of `.pte` files."""
