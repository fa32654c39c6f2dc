"""Finding and loading models (Hub, local folders, the bundled default)."""
