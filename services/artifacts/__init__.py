"""ArtifactService: objects, grants, read-back verification, retention, provenance."""
