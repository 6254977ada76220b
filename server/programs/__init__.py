"""Program uploads: receive, validate, describe and store multi-method programs."""
