"""What the feature folders share: the app's services, owned-row access and blob file moves."""
