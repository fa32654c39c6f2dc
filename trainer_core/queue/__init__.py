"""The job queue: training jobs waiting for the machine, kept in the run history's SQLite file."""
