"""HTTP plumbing shared by the feature routers: streamed uploads, ranged downloads."""
