"""Share links: a signed, revocable, optionally expiring token that lets whoever holds it chat with
one trained model (a run's final weights or one of its checkpoints) and nothing else.

A token is ``<link id>.<signature>``: the id is 16 random hex characters; the signature is
HMAC-SHA256 of the id under a server secret, base64url without padding (43 characters). The secret
(32 random bytes, hex) lives in ``<data dir>/share-links.key``, created with mode 0600 on first use;
it is never returned or logged. Links live in the run history's SQLite file (table ``share_links``,
one row per link); deleting a run deletes its links (foreign key), so its tokens stop working at once.
Free of HTTP: the routes (``api/share_routes.py``) and the Runs tab both use ``ShareLinks``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import math
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, Field, computed_field

from trainer_core.refusals import Refusal
from trainer_core.runs.store import SCHEMA as RUNS_SCHEMA
from trainer_core.serving.schemas import BASE_MODEL_ID
from trainer_core.settings import Settings

log = logging.getLogger("finetune_studio.share")

SCHEMA = """
CREATE TABLE IF NOT EXISTS share_links (
    id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES runs(job_id) ON DELETE CASCADE,
    model_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL,
    revoked_at REAL
);
"""
SECRET_FILE = "share-links.key"
SECRET_BYTES = 32
SIGNING_PREFIX = b"finetune-studio share link v1\x00"  # a signature made for anything else never matches
TOKEN_RE = re.compile(r"(?P<id>[0-9a-f]{16})\.(?P<sig>[A-Za-z0-9_-]{43})")
MODEL_ID_RE = re.compile(r"(?P<job>[A-Za-z0-9_.-]{1,128})(?:/checkpoint-[0-9]{1,12})?")
MAX_EXPIRES_IN_HOURS = 24 * 366
MIN_EXPIRES_IN_HOURS = 1 / 60  # one minute: a shorter link would be expired by the time it is shared


class LinkState(str, Enum):
    """Whether a link works now."""

    active = "active"
    revoked = "revoked"
    expired = "expired"


class ShareLink(BaseModel):
    """One link. Times are Unix seconds; ``expires_at`` None means never. ``token`` is the credential
    (kept out of ``repr`` so it never reaches a log by accident)."""

    id: str
    token: str = Field(repr=False)
    model_id: str
    created_at: float
    expires_at: Optional[float] = None
    revoked_at: Optional[float] = None
    state: LinkState

    @computed_field(repr=False)  # type: ignore[prop-decorator]
    @property
    def url_path(self) -> str:
        """The chat page: ``/s/<token>`` (prefix it with the server's address)."""
        return f"/s/{self.token}"

    @computed_field(repr=False)  # type: ignore[prop-decorator]
    @property
    def api_base_path(self) -> str:
        """``base_url`` of an OpenAI client for this one model: ``/s/<token>/v1``."""
        return f"/s/{self.token}/v1"


class ShareLinkError(Refusal):
    """A token that grants nothing now; the message says why, and never echoes the token."""

    code, status = "invalid_share_link", 403


class InvalidShareLink(ShareLinkError):
    """Malformed, or a signature this server did not make."""

    code = "invalid_share_link"


class RevokedShareLink(ShareLinkError):
    """The owner revoked the link."""

    code = "revoked_share_link"


class ExpiredShareLink(ShareLinkError):
    """The link's time is up."""

    code = "expired_share_link"


class GoneShareLink(ShareLinkError):
    """Correctly signed, but its run (and with it the link) was deleted."""

    code, status = "share_link_gone", 404


class UnknownShareLink(Refusal, LookupError):
    """No link with that id (revoke)."""

    code, status = "unknown_share_link", 404


def expiry_problem(expires_in_hours: Optional[float]) -> Optional[str]:
    """Why ``expires_in_hours`` is not a link's lifetime (None: it is; None hours: never expires)."""
    if expires_in_hours is None or (
        math.isfinite(expires_in_hours) and MIN_EXPIRES_IN_HOURS <= expires_in_hours <= MAX_EXPIRES_IN_HOURS
    ):
        return None
    return (
        f"must be at least one minute ({MIN_EXPIRES_IN_HOURS:.4g} hours) and at most {MAX_EXPIRES_IN_HOURS} hours, "
        "or omitted (never expires)"
    )


def load_secret(path: Path) -> bytes:
    """The signing secret at ``path``, made (32 random bytes, hex, mode 0600) if missing. Creation
    is atomic (written beside it, then hard-linked into place), so concurrent first uses agree."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        staging = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(SECRET_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
            os.link(staging, path)
            log.info("created the share-link secret %s (mode 0600)", path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            staging.unlink(missing_ok=True)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)
        log.warning("%s was readable by others; its mode is now 0600", path)
    try:
        secret = bytes.fromhex(path.read_text().strip())
    except ValueError:
        secret = b""
    if len(secret) < SECRET_BYTES:
        raise RuntimeError(
            f"{path} is not a share-link secret; delete it to make a new one "
            "(every existing share link then stops working)"
        )
    return secret


class ShareLinks:
    """Create, list, revoke and verify share links, in ``settings.db_path``; thread-safe.
    ``clock`` (Unix seconds) is for tests."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self._secret_path = Path(settings.data_dir) / SECRET_FILE
        self._secret: Optional[bytes] = None
        self._clock = clock
        self._lock = threading.Lock()
        settings.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(settings.db_path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(RUNS_SCHEMA + SCHEMA)

    def create(self, model_id: str, expires_in_hours: Optional[float] = None) -> ShareLink:
        """A new active link to ``model_id`` (a job id or ``JOB_ID/checkpoint-N`` of a run in the
        history). Raises ``Refusal`` naming the setting; whether the weights load is the
        engine's business (the routes ask it first)."""
        match = MODEL_ID_RE.fullmatch(model_id or "")
        if model_id == BASE_MODEL_ID:
            raise Refusal(
                "model: the base model cannot be shared; share a run or one of its checkpoints",
                fields=("model",),
                code="model_not_shareable",
            )
        if match is None:
            raise Refusal("model: expected a job id or JOB_ID/checkpoint-N", fields=("model",))
        problem = expiry_problem(expires_in_hours)
        if problem:
            raise Refusal(f"expires_in_hours: {problem}", fields=("expires_in_hours",))
        job_id, link_id, now = match["job"], secrets.token_hex(8), self._clock()
        expires_at = None if expires_in_hours is None else now + expires_in_hours * 3600
        self._sign(link_id)  # the secret's file is made first: a full disk then stores no link the caller never got
        with self._lock, self._db:
            if not self._db.execute("SELECT 1 FROM runs WHERE job_id = ?", (job_id,)).fetchone():
                raise Refusal(f"model: no run {job_id} in the history", fields=("model",), code="unknown_run")
            self._db.execute(
                "INSERT INTO share_links (id, job_id, model_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                (link_id, job_id, model_id, now, expires_at),
            )
        log.info(
            "share link %s created for %s (expires %s)",
            link_id,
            model_id,
            "never" if expires_at is None else f"in {expires_in_hours:g} h",
        )
        return self._link(self._row(link_id))

    def list(self, model_id: Optional[str] = None) -> list[ShareLink]:
        """Every link (revoked and expired ones too), newest first; only ``model_id``'s when given."""
        where, args = ("WHERE model_id = ?", (model_id,)) if model_id else ("", ())
        with self._lock:
            rows = self._db.execute(f"SELECT * FROM share_links {where} ORDER BY created_at DESC", args).fetchall()
        return [self._link(row) for row in rows]

    def revoke(self, link_id: str) -> ShareLink:
        """End a link now (idempotent); raises ``UnknownShareLink``."""
        with self._lock, self._db:
            self._db.execute(
                "UPDATE share_links SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?", (self._clock(), link_id)
            )
        row = self._row(link_id)
        if row is None:
            raise UnknownShareLink(f"no share link {link_id}")
        log.info("share link %s revoked", link_id)
        return self._link(row)

    def verify(self, token: str) -> ShareLink:
        """The active link ``token`` belongs to; raises a ``ShareLinkError`` saying why not.
        The signature is checked (constant time) before the database is read."""
        match = TOKEN_RE.fullmatch(token) if isinstance(token, str) else None
        if match is None or not hmac.compare_digest(match["sig"].encode(), self._sign(match["id"]).encode()):
            raise InvalidShareLink("this share link is not valid")
        row = self._row(match["id"])
        if row is None:
            raise GoneShareLink("this share link no longer exists: its run was deleted")
        link = self._link(row)
        if link.state is LinkState.revoked:
            raise RevokedShareLink("this share link was revoked by its owner")
        if link.state is LinkState.expired:
            raise ExpiredShareLink("this share link has expired")
        return link

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def _sign(self, link_id: str) -> str:
        if self._secret is None:
            self._secret = load_secret(self._secret_path)
        digest = hmac.new(self._secret, SIGNING_PREFIX + link_id.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def _row(self, link_id: str) -> Optional[sqlite3.Row]:
        with self._lock:
            return self._db.execute("SELECT * FROM share_links WHERE id = ?", (link_id,)).fetchone()

    def _link(self, row: sqlite3.Row) -> ShareLink:
        if row["revoked_at"] is not None:
            state = LinkState.revoked
        elif row["expires_at"] is not None and row["expires_at"] <= self._clock():
            state = LinkState.expired
        else:
            state = LinkState.active
        return ShareLink(
            id=row["id"],
            token=f"{row['id']}.{self._sign(row['id'])}",
            model_id=row["model_id"],
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            revoked_at=row["revoked_at"],
            state=state,
        )
