"""Bearer-token authentication: every token belongs to exactly one project."""
