"""The machine speed behind the time estimate (``preflight.speed_probe``): the probe's median and
spread, kept per machine in the data dir and replaced only by a faster probe or when old, the load
named when high, the estimate's range; and two Checks with a busy process started between them
agreeing within 20 %."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.trainer_core.preflight.test_estimates import request, smol
from trainer_core.preflight import speed_probe
from trainer_core.preflight.estimates import estimate_time
from trainer_core.preflight.speed_probe import MachineSpeed, SpeedCache


def _speed(gflops: float, low: float = 0.0, high: float = 0.0, age_s: float = 0.0) -> MachineSpeed:
    return MachineSpeed(
        gflops=gflops, low_gflops=low or gflops, high_gflops=high or gflops, runs=5, measured_at=time.time() - age_s
    )


def test_the_probe_is_the_median_of_several_short_runs():
    speed = speed_probe.probe("cpu", runs=3, run_seconds=0.01)
    assert speed.runs == 3 and 0 < speed.low_gflops <= speed.gflops <= speed.high_gflops
    assert "median of 3 short runs" in speed.described() and "probed just now" in speed.described()


def test_the_kept_speed_is_reused_and_replaced_only_by_a_faster_or_newer_probe(tmp_path, monkeypatch):
    probes = iter([_speed(80.0), _speed(30.0), _speed(95.0)])
    clock = [1000.0]
    monkeypatch.setattr(speed_probe.time, "monotonic", lambda: clock[0])
    first = SpeedCache(lambda device: next(probes))
    assert first.speed("cpu", tmp_path).gflops == 80.0
    assert first.speed("cpu", tmp_path).gflops == 80.0  # within REPROBE_S: no probe
    kept = json.loads((tmp_path / speed_probe.CACHE_FILE).read_text())
    assert [key.split("|")[0] for key in kept] == ["cpu"]  # per machine: device, host, CPU, cores, threads
    restarted = SpeedCache(lambda device: next(probes))  # another process: probes (30, a busy moment) ...
    assert restarted.speed("cpu", tmp_path).gflops == 80.0  # ... and keeps the faster kept one
    clock[0] += speed_probe.REPROBE_S
    assert restarted.speed("cpu", tmp_path).gflops == 95.0  # a faster probe replaces it


def test_an_old_kept_speed_is_replaced_and_a_damaged_file_probed_again(tmp_path):
    old = SpeedCache(lambda device: _speed(80.0, age_s=(speed_probe.KEEP_DAYS + 1) * 86400))
    old.speed("cpu", tmp_path)
    assert SpeedCache(lambda device: _speed(50.0)).speed("cpu", tmp_path).gflops == 50.0  # older than KEEP_DAYS
    (tmp_path / speed_probe.CACHE_FILE).write_text("{not json")
    assert SpeedCache(lambda device: _speed(60.0)).speed("cpu", tmp_path).gflops == 60.0
    assert json.loads((tmp_path / speed_probe.CACHE_FILE).read_text())  # rewritten whole


def test_the_load_is_named_when_more_processes_are_ready_than_cores():
    assert speed_probe.busy_words(1.5, 2) is None
    assert speed_probe.busy_words(7.2, 2) == ("the CPU is busy: 7 processes ready to run on 2 cores (1-minute average)")
    load, cores = speed_probe.cpu_load()
    assert load >= 0 and cores >= 1


def test_a_noisy_probe_or_a_busy_cpu_gives_a_range(monkeypatch):
    monkeypatch.setattr(speed_probe, "cpu_load", lambda: (0.5, 2))
    monkeypatch.setattr(speed_probe, "SPEEDS", SpeedCache(lambda device: _speed(100.0, 60.0, 120.0)))
    noisy = estimate_time(request(), smol(), 100_000, 250, 0, 0, "cpu", None, steps_per_epoch=250)
    train = noisy.parts_seconds["train_steps"]
    fixed = noisy.total_seconds - train
    assert noisy.low_seconds == pytest.approx(fixed + train * 100 / 120, abs=0.5)
    assert noisy.high_seconds == pytest.approx(fixed + train * 100 / 60, abs=0.5)
    monkeypatch.setattr(speed_probe, "SPEEDS", SpeedCache(lambda device: _speed(100.0, 98.0, 101.0)))
    monkeypatch.setattr(speed_probe, "cpu_load", lambda: (7.0, 2))
    busy = estimate_time(request(), smol(), 100_000, 250, 0, 0, "cpu", None, steps_per_epoch=250)
    assert busy.total_seconds == pytest.approx(noisy.total_seconds, rel=0.01)  # the point: the kept speed
    assert busy.low_seconds == pytest.approx(busy.total_seconds, abs=0.5)  # a steady probe: no faster end
    assert busy.high_seconds == pytest.approx(fixed + train * 3.5, abs=1.0)  # 7 ready on 2 cores
    assert busy.load.startswith("the CPU is busy: 7 processes ready to run on 2 cores")


def test_two_checks_with_a_busy_process_started_between_them_agree_within_20_percent(tmp_path, monkeypatch):
    """The real probe, kept in a data dir; the second Check in a fresh process state (its own probe
    taken while two busy processes load the CPU)."""
    monkeypatch.setattr(speed_probe, "SPEEDS", SpeedCache())
    first = estimate_time(request(), smol(), 100_000, 250, 0, 0, "cpu", None, steps_per_epoch=250, cache_dir=tmp_path)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(1.0)
        monkeypatch.setattr(speed_probe, "SPEEDS", SpeedCache())  # as after a restart: probes again
        second = estimate_time(
            request(), smol(), 100_000, 250, 0, 0, "cpu", None, steps_per_epoch=250, cache_dir=tmp_path
        )
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert abs(second.total_seconds - first.total_seconds) <= 0.2 * first.total_seconds, (first, second)
