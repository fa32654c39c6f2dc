"""Share links: signing, expiry (fake clock), revocation, deleted runs, the secret file."""

from __future__ import annotations

import stat

import pytest

from trainer_core.runs.store import RunStore
from trainer_core.serving.share import (
    MIN_EXPIRES_IN_HOURS,
    SECRET_FILE,
    ExpiredShareLink,
    GoneShareLink,
    InvalidShareLink,
    LinkState,
    RevokedShareLink,
    ShareLinks,
    UnknownShareLink,
    load_secret,
)
from trainer_core.settings import Settings

JOB = "job_20250101_120000_abcd1234"


@pytest.fixture
def setup(tmp_path):
    """(links, store, clock) over a fresh data dir holding one run."""
    settings = Settings(data_dir=tmp_path)
    store = RunStore(settings.db_path)
    store.create_run(JOB, {"max_steps": 1}, str(tmp_path / "runs" / JOB), "completed")
    now = [1_000_000.0]
    links = ShareLinks(settings, clock=lambda: now[0])
    yield links, store, now
    links.close()
    store.close()


def test_create_then_verify(setup, tmp_path):
    links, store, now = setup
    link = links.create(JOB)
    assert link.state is LinkState.active and link.model_id == JOB and link.expires_at is None
    assert link.url_path == f"/s/{link.token}" and link.api_base_path == f"/s/{link.token}/v1"
    assert link.token.startswith(link.id + ".") and link.token not in repr(link)
    assert links.verify(link.token).id == link.id
    now[0] += 1
    checkpoint = links.create(f"{JOB}/checkpoint-20", expires_in_hours=1)
    assert checkpoint.expires_at == now[0] + 3600
    assert [x.id for x in links.list()] == [checkpoint.id, link.id]  # newest first
    assert [x.id for x in links.list(f"{JOB}/checkpoint-20")] == [checkpoint.id]


def test_the_secret_file_is_private_and_stable(setup, tmp_path):
    links, store, now = setup
    token = links.create(JOB).token
    secret = tmp_path / SECRET_FILE
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    again = ShareLinks(Settings(data_dir=tmp_path))  # a restart signs the same way
    assert again.verify(token).model_id == JOB
    secret.chmod(0o644)
    assert load_secret(secret) == bytes.fromhex(secret.read_text())
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600  # tightened
    secret.write_text("short")
    with pytest.raises(RuntimeError, match="delete it"):
        load_secret(secret)


def test_forged_tokens_fail(setup, tmp_path):
    links, store, now = setup
    link = links.create(JOB)
    other = links.create(JOB)
    link_id, sig = link.token.split(".")
    forged = [
        "",
        "x",
        link_id,
        f"{link_id}.",
        f"{link_id}.{'A' * 43}",
        f"{other.id}.{sig}",  # another link's signature
        f"{link_id}.{sig[:-1]}",
        f"{link_id}.{sig}x",
        f"{link_id}.{sig}=",
        f"{link_id.upper()}.{sig}",
        f"{link_id}.{sig.swapcase()}",
        f"{link_id}/{sig}",
        f" {link.token}",
        f"{link.token}\n",
        f"{link.token}\x00",
        f"../{link.token}",
        link.token + "/../x",
        "0" * 16 + "." + sig,
    ]
    for token in forged:
        with pytest.raises(InvalidShareLink, match="not valid"):
            links.verify(token)
    with pytest.raises(InvalidShareLink):
        links.verify(None)  # type: ignore[arg-type]
    # A different secret (another install) signs differently.
    elsewhere = ShareLinks(Settings(data_dir=tmp_path / "elsewhere"))
    RunStore(Settings(data_dir=tmp_path / "elsewhere").db_path).create_run(JOB, {}, "x", "completed")
    with pytest.raises(InvalidShareLink):
        elsewhere.verify(link.token)
    assert elsewhere.create(JOB).token != link.token


def test_expiry_follows_the_clock(setup):
    links, store, now = setup
    link = links.create(JOB, expires_in_hours=0.5)
    now[0] += 1799
    assert links.verify(link.token).state is LinkState.active
    now[0] += 1
    with pytest.raises(ExpiredShareLink, match="expired"):
        links.verify(link.token)
    assert links.list()[0].state is LinkState.expired


def test_the_shortest_link_lives_one_minute(setup):
    links, store, now = setup
    link = links.create(JOB, expires_in_hours=MIN_EXPIRES_IN_HOURS)
    now[0] += 59
    assert links.verify(link.token).state is LinkState.active
    now[0] += 1
    with pytest.raises(ExpiredShareLink):
        links.verify(link.token)


def test_revocation_is_immediate_and_idempotent(setup):
    links, store, now = setup
    link = links.create(JOB)
    revoked = links.revoke(link.id)
    assert revoked.state is LinkState.revoked and revoked.revoked_at == now[0]
    now[0] += 10
    assert links.revoke(link.id).revoked_at == revoked.revoked_at
    with pytest.raises(RevokedShareLink, match="revoked"):
        links.verify(link.token)
    with pytest.raises(UnknownShareLink):
        links.revoke("0123456789abcdef")


def test_deleting_the_run_ends_its_links(setup):
    links, store, now = setup
    link = links.create(f"{JOB}/checkpoint-5")
    assert store.delete_run(JOB)
    with pytest.raises(GoneShareLink, match="deleted"):
        links.verify(link.token)
    assert links.list() == []


@pytest.mark.parametrize(
    "model, hours, message",
    [
        ("base", None, "base model cannot be shared"),
        ("job_unknown", None, "no run job_unknown"),
        (f"{JOB}/../../etc", None, "expected a job id"),
        (f"{JOB}/checkpoint-x", None, "expected a job id"),
        ("", None, "expected a job id"),
        (JOB, 0, "expires_in_hours"),
        (JOB, -1, "expires_in_hours"),
        (JOB, float("nan"), "expires_in_hours"),
        (JOB, float("inf"), "expires_in_hours"),
        (JOB, 10**9, "expires_in_hours"),
        (JOB, 5e-324, r"expires_in_hours: must be at least one minute \(0.01667 hours\)"),  # created expired
        (JOB, 0.99 / 60, "at least one minute"),
    ],
)
def test_create_refuses_bad_input(setup, model, hours, message):
    links, store, now = setup
    with pytest.raises(ValueError, match=message):
        links.create(model, expires_in_hours=hours)
    assert links.list() == []
