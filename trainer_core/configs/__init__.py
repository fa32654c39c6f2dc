"""Settings as files and commands: a request as YAML (the CLI's ``--config`` keys) and as the
equivalent CLI command and ``curl`` call."""
