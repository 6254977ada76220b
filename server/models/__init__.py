"""Model names and versions: stable names for series of artifacts (``/v1/models``)."""
