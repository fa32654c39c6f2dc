"""Worker processes: warm standby and why a worker died."""
