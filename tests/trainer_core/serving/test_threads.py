"""Threads for a CPU generation chosen for the load (``serving.threads``)."""

from __future__ import annotations

import torch

from trainer_core.serving import threads


def test_a_generation_takes_the_cores_the_others_leave_and_one_at_least():
    assert threads.threads_for(2, 0.0) == 2  # a quiet machine: as before, every core
    assert threads.threads_for(2, 1.0) == 1
    assert threads.threads_for(2, 7.0) == 1  # oversubscribed: one thread (bench/chat_threads.py)
    assert threads.threads_for(16, 3.0) == 13


def test_the_running_processes_are_read_from_proc_stat(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3\nprocs_running 8\nprocs_blocked 0\n")
    monkeypatch.setattr(threads, "PROC_STAT", stat)
    monkeypatch.setattr(threads, "READING_GAP_S", 0.0)
    assert threads.others_running() == 7.0  # this process left out
    monkeypatch.setattr(threads, "PROC_STAT", tmp_path / "none")
    assert threads.others_running() >= 0.0  # the load average instead


def test_torch_threads_are_set_for_the_block_and_put_back(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "others_running", lambda: 50.0)
    with threads.cpu_threads("cpu") as used:
        assert used == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with threads.cpu_threads("cuda") as used:
        assert used == before and torch.get_num_threads() == before
