"""The single-job runner, the run history and each run's folder."""
