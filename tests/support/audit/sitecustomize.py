"""Imported by Python at start-up when this folder is on ``PYTHONPATH``: installs the audit hook
(``audit_hook.install``), which does nothing unless ``STUDIO_AUDIT_LOG`` names a log file."""

import audit_hook

audit_hook.install()
