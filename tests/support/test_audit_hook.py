"""The audit-hook test helper (``tests/support/audit``): a process started with ``audit_env`` logs its
writes, deletes, renames, links, mkdirs and connects, and so do the processes it starts; reads are
not logged; the reader names what was changed outside the given folders."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.support.audit.audit_hook import audit_env, read_events, touched_inside, touched_outside

SCRIPT = textwrap.dedent(
    """
    import os, shutil, socket, subprocess, sys
    inside, outside = sys.argv[1], sys.argv[2]
    open(os.path.join(inside, "ok.txt"), "w").write("x")
    open(os.path.join(inside, "ok.txt")).read()                      # a read: not logged
    open(os.path.join(outside, "written.txt"), "a").write("x")
    os.remove(os.path.join(outside, "victim.txt"))
    shutil.rmtree(os.path.join(outside, "tree"))                      # its files through dir_fd
    os.rename(os.path.join(inside, "ok.txt"), os.path.join(outside, "moved.txt"))
    os.mkdir("outside/made")                                          # relative to the working folder
    os.symlink("/etc/hostname", "inside/link")
    server = socket.create_server(("127.0.0.1", 0))
    socket.create_connection(server.getsockname()).close()
    subprocess.run([sys.executable, "-c", f"open({os.path.join(outside, 'child.txt')!r}, 'w')"], check=True)
    """
)


def test_the_audit_hook_logs_changes_of_a_process_and_its_children(tmp_path):
    inside, outside, log = tmp_path / "inside", tmp_path / "outside", tmp_path / "audit.jsonl"
    inside.mkdir()
    (outside / "tree" / "sub").mkdir(parents=True)
    (outside / "tree" / "sub" / "f.txt").write_text("x")
    (outside / "victim.txt").write_text("x")
    env = {**os.environ, **audit_env(log)}
    subprocess.run(
        [sys.executable, "-c", SCRIPT, str(inside), str(outside)], env=env, cwd=tmp_path, check=True, timeout=60
    )
    events = read_events(log)
    found = {(e["kind"], os.path.relpath(e["path"], tmp_path)) for e in touched_outside(events, [inside])}
    assert found == {
        ("write", "outside/written.txt"),
        ("delete", "outside/victim.txt"),
        ("delete", "outside/tree"),
        ("delete", "outside/tree/sub/f.txt"),
        ("delete", "outside/tree/sub"),
        ("rename", "inside/ok.txt"),  # its target is outside
        ("mkdir", "outside/made"),
        ("write", "outside/child.txt"),
    }, found
    assert {e["kind"] for e in touched_inside(events, [inside])} == {"write", "rename", "link"}
    assert not [e for e in events if e.get("path", "").endswith("ok.txt") and e["kind"] == "write"][1:]  # one write
    assert len({e["pid"] for e in events if e.get("path", "").endswith(("written.txt", "child.txt"))}) == 2
    (connect,) = [e for e in events if e["kind"] == "connect"]
    assert connect["address"][0] == "127.0.0.1" and isinstance(connect["address"][1], int)
    assert touched_outside(events, [tmp_path]) == [] and read_events(tmp_path / "none.jsonl") == []
    assert read_events(log, start=log.stat().st_size) == []
