"""``GET /v1/backends``: the backend catalog as the service sees it."""
