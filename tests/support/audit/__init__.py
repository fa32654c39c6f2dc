"""The attacker's audit hook, kept for future doors: put this folder on ``PYTHONPATH`` (``audit_env``)
and every Python process started with it logs its file writes, deletes, renames and connects."""
