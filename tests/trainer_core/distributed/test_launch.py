"""Several training processes (``trainer_core.distributed``): settings, launch command, machine and
config checks, torchrun's failure summary, the group's event rules and the step plan. The real
two-process runs are in ``tests/e2e/test_distributed_runs.py``."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from trainer_core.distributed import launch
from trainer_core.distributed.failure import RootCause, failures, killed_peer, last_lines, ray_deaths, root_cause
from trainer_core.distributed.launch import Devices, ScalingError, check_config_file, machine_problem
from trainer_core.preflight.steps import plan_steps
from trainer_core.schemas import TrainingStartRequest

CPU2 = Devices(cpu_count=2, gpu_count=0)
GPU4 = Devices(cpu_count=32, gpu_count=4)
# torchrun 2.13's summary after `kill -9` of rank 1 of 2 (captured on this machine)
TORCHRUN_FAILURE = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
=======================================================
trainer_core.training.rank_main FAILED
-------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-02_05:02:52
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 31077)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 31077
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_05:02:52
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 31078)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 31078
=======================================================
"""


def request(**fields) -> TrainingStartRequest:
    return TrainingStartRequest(local_datasets=["/data/a.json"], **fields)


# ----- settings -----
def test_the_defaults_train_in_one_process():
    r = request()
    assert (r.num_processes, r.gpu_ids, r.distributed, r.distributed_config) == (1, None, "ddp", None)
    assert not launch.uses_launcher(r)
    assert launch.uses_launcher(request(num_processes=2)) and launch.uses_launcher(request(gpu_ids="1"))


@pytest.mark.parametrize("value, kept", [(" 0, 1 ", "0,1"), ("3", "3"), ("", None), ("  ", None)])
def test_gpu_ids_are_normalised(value, kept):
    assert request(gpu_ids=value).gpu_ids == kept


@pytest.mark.parametrize("value", ["0;rm -rf /", "a,b", "0,,1", "-1", "0 1", "$(id)"])
def test_gpu_ids_that_are_not_numbers_are_refused_naming_the_field(value):
    with pytest.raises(ValidationError) as caught:
        request(gpu_ids=value)
    assert caught.value.errors()[0]["loc"] == ("gpu_ids",)
    assert "not a list of GPU numbers such as 0,1" in str(caught.value)


@pytest.mark.parametrize(
    "fields, words",
    [
        (dict(distributed="fsdp"), "needs num_processes > 1 and distributed_config (your accelerate FSDP YAML)"),
        (dict(distributed="deepspeed", num_processes=2), "DeepSpeed JSON"),
        (
            dict(distributed_config="/data/ds.json"),
            "distributed_config is read only with distributed fsdp or deepspeed",
        ),
        (dict(num_processes=0), "num_processes"),
        (dict(num_processes=65), "num_processes"),
    ],
)
def test_contradictory_distributed_settings_are_refused(fields, words):
    with pytest.raises(ValidationError) as caught:
        request(**fields)
    assert words in str(caught.value)


# ----- the machine -----
@pytest.mark.parametrize(
    "fields, devices, words",
    [
        (dict(num_processes=2), CPU2, None),
        (dict(num_processes=3), CPU2, "num_processes (3) is more than the 2 CPU core(s) of this machine"),
        (dict(gpu_ids="0"), CPU2, "gpu_ids: this machine has no CUDA GPU; leave GPU ids empty"),
        (dict(num_processes=2, gpu_ids="1,3"), GPU4, None),
        (
            dict(num_processes=2, gpu_ids="1,4"),
            GPU4,
            "gpu_ids: GPU 4 does not exist; this machine has 4 GPU(s), numbered 0 to 3",
        ),
        (dict(num_processes=2, gpu_ids="1,1"), GPU4, "a GPU is listed twice"),
        (dict(num_processes=3, gpu_ids="0,1"), GPU4, "num_processes (3) is more than the 2 GPU(s) in gpu_ids"),
        (dict(num_processes=5), GPU4, "num_processes (5) is more than the 4 GPU(s) of this machine"),
        (
            dict(num_processes=2, distributed="fsdp", distributed_config="/c.yaml"),
            CPU2,
            "distributed: fsdp shards the model across CUDA GPUs",
        ),
    ],
)
def test_machine_problems_name_the_field_and_the_fix(fields, devices, words):
    problem = machine_problem(request(**fields), devices)
    assert problem == words if words is None else words in problem


def test_deepspeed_is_refused_where_it_is_not_installed(monkeypatch):
    monkeypatch.setattr(launch, "find_spec", lambda name: None)
    problem = machine_problem(request(num_processes=2, distributed="deepspeed", distributed_config="/d.json"), GPU4)
    assert "deepspeed is not installed on this server (pip install deepspeed)" in problem


# ----- config files (read, not run) -----
def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_an_accelerate_fsdp_config_and_a_deepspeed_json_are_accepted(tmp_path):
    fsdp = _write(
        tmp_path,
        "fsdp.yaml",
        "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\n"
        "fsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\nnum_processes: 2\n",
    )
    check_config_file(request(num_processes=2, distributed="fsdp", distributed_config=fsdp))
    ds = _write(tmp_path, "ds.json", json.dumps({"zero_optimization": {"stage": 2}, "train_batch_size": "auto"}))
    check_config_file(request(num_processes=2, distributed="deepspeed", distributed_config=ds))


@pytest.mark.parametrize(
    "kind, name, text, words",
    [
        (
            "fsdp",
            "a.yaml",
            "distributed_type: MULTI_GPU\n",
            "is not an accelerate FSDP config (it needs distributed_type: FSDP)",
        ),
        ("fsdp", "b.yaml", "distributed_type: [FSDP\n", "is not valid YAML"),
        ("fsdp", "c.yaml", "- FSDP\n", "is not an accelerate FSDP config"),
        ("deepspeed", "d.json", '{"zero_optimization": ', "is not valid JSON (line 1"),
        ("deepspeed", "e.json", "[1, 2]", "is not a DeepSpeed config (a JSON object"),
    ],
)
def test_config_files_of_the_wrong_kind_are_refused_naming_the_file(tmp_path, kind, name, text, words):
    path = _write(tmp_path, name, text)
    with pytest.raises(ScalingError) as caught:
        check_config_file(request(num_processes=2, distributed=kind, distributed_config=path))
    assert str(caught.value).startswith(f"distributed_config: {name} ") and words in str(caught.value)


def test_a_binary_or_huge_config_file_is_refused(tmp_path):
    binary = tmp_path / "x.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ScalingError, match="cannot be read"):
        check_config_file(request(num_processes=2, distributed="deepspeed", distributed_config=str(binary)))
    huge = tmp_path / "h.json"
    huge.write_text("{" + " " * 1_100_000 + "}")
    with pytest.raises(ScalingError, match="is over 1000 kB"):
        check_config_file(request(num_processes=2, distributed="deepspeed", distributed_config=str(huge)))


# ----- the launcher -----
def test_ddp_is_launched_by_torchrun_with_no_restarts():
    command = launch.launcher_command(request(num_processes=2), python="/py")
    assert command[:3] == ["/py", "-m", "torch.distributed.run"]
    assert command[command.index("--nproc-per-node") + 1] == "2" and command[command.index("--max-restarts") + 1] == "0"
    assert command[-2:] == ["-m", launch.RANK_MODULE] and "--standalone" in command


def test_across_machines_torchrun_meets_at_machine_0s_rendezvous():
    r = request(num_processes=2, num_nodes=3, node_rank=1, rdzv_endpoint="10.0.0.5:29400")
    command = launch.launcher_command(r, python="/py")
    assert "--standalone" not in command and launch.uses_launcher(r)
    assert command[command.index("--nnodes") + 1] == "3" and command[command.index("--node-rank") + 1] == "1"
    assert command[command.index("--rdzv-endpoint") + 1] == "10.0.0.5:29400"
    assert command[command.index("--nproc-per-node") + 1] == "2" and r.world_size == 6
    assert launch.uses_launcher(request(num_nodes=2, node_rank=1, rdzv_endpoint="h:1"))  # even one process a machine


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"num_nodes": 2}, "num_nodes > 1 needs rdzv_endpoint"),
        ({"node_rank": 1}, "node_rank and rdzv_endpoint are read only with num_nodes > 1"),
        ({"rdzv_endpoint": "h:1"}, "node_rank and rdzv_endpoint are read only with num_nodes > 1"),
        ({"num_nodes": 2, "node_rank": 2, "rdzv_endpoint": "h:1"}, "node_rank 2 is not below num_nodes 2"),
        (
            {"num_nodes": 2, "rdzv_endpoint": "h:1", "compute": "ray", "ray_address": "h:2"},
            "set num_nodes 1 with compute ray",
        ),
        ({"num_nodes": 2, "rdzv_endpoint": "http://h:1"}, "rdzv_endpoint"),
        ({"num_nodes": 2, "rdzv_endpoint": "h:99999"}, "port from 1 to 65535"),
    ],
)
def test_settings_across_machines_are_refused_naming_the_field(fields, said):
    with pytest.raises(ValidationError, match=said):
        request(**fields)


def test_the_steps_count_every_machines_processes():
    from trainer_core.preflight.steps import plan_steps

    one, two = request(num_processes=2), request(num_processes=2, num_nodes=2, rdzv_endpoint="h:1")
    assert plan_steps(400, one).global_batch_size * 2 == plan_steps(400, two).global_batch_size
    assert plan_steps(400, one).steps_per_epoch == 2 * plan_steps(400, two).steps_per_epoch


def test_fsdp_is_launched_by_accelerate_with_the_users_config():
    r = request(num_processes=4, distributed="fsdp", distributed_config="/cfg/fsdp.yaml")
    command = launch.launcher_command(r, python="/py")
    assert command[:3] == ["/py", "-m", "accelerate.commands.launch"]
    assert command[command.index("--config_file") + 1] == "/cfg/fsdp.yaml"
    assert command[command.index("--num_processes") + 1] == "4" and command[-2:] == ["--module", launch.RANK_MODULE]
    assert launch.launcher_name(r) == "accelerate launch"


def test_the_launch_environment_sets_devices_threads_and_the_link(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    env = launch.launcher_env(request(num_processes=2, gpu_ids="2, 3"), "/tmp/sock", b"\x01\x02", GPU4)
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env.get("OMP_NUM_THREADS") == os.environ.get("OMP_NUM_THREADS")
    assert env[launch.ADDRESS_ENV] == "/tmp/sock" and env[launch.KEY_ENV] == "0102"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(launch.PROJECT_ROOT)
    cpu = launch.launcher_env(request(num_processes=2), "/tmp/sock", b"k", CPU2)
    assert cpu["OMP_NUM_THREADS"] == "1" and cpu.get("CUDA_VISIBLE_DEVICES") == "7"  # not ours to change


# ----- torchrun's account of a failure -----
RAYLET_DEATH = (
    "\x1b[33m(raylet)\x1b[0m A worker died or was killed while executing a task by an unexpected system error. "
    "To troubleshoot the problem, check the logs for the dead worker. Lease ID: 1a00 Worker ID: 7c62 Node ID: 44f1 "
    "Worker IP address: 192.0.2.2 Worker port: 10811 Worker PID: {pid} Worker exit type: SYSTEM_ERROR Worker exit "
    "detail: Worker unexpectedly exits with a connection error code 2. End of file. Some common causes include: (1)\n"
)


def test_the_workers_ray_reports_dead_are_read_first_first():
    text = "noise\n" + RAYLET_DEATH.format(pid=9259) + "Traceback ...\n" + RAYLET_DEATH.format(pid=9274)
    detail = "Worker unexpectedly exits with a connection error code 2."
    assert ray_deaths(text) == [(9259, detail), (9274, detail)]
    assert ray_deaths("A worker died or was killed ... Worker PID: 12 Worker exit type: INTENDED\n") == [(12, "")]
    assert ray_deaths("Traceback ...\nRuntimeError: boom\n") == []


def test_the_root_cause_is_read_from_torchruns_summary():
    assert root_cause("some log\n" + TORCHRUN_FAILURE) == RootCause(rank=1, exitcode=-9)
    assert root_cause("Traceback ...\nRuntimeError: boom\n") is None
    assert last_lines("a\n\nb\nc\n", count=2) == "b | c"


def test_a_peer_lost_named_first_gives_way_to_the_killed_process():
    """Rank 1 killed: rank 0's gloo error, timed first by torchrun (a signal leaves no error file), is
    not the cause; rank 1's SIGKILL in the Failures block is. SIGTERM (torchrun ending the others) never is."""
    swapped = (
        TORCHRUN_FAILURE.replace("rank      : 1 (local_rank: 1)", "rank      : X")
        .replace("rank      : 0 (local_rank: 0)", "rank      : 1 (local_rank: 1)")
        .replace("rank      : X", "rank      : 0 (local_rank: 0)")
        .replace("exitcode  : -15 (pid: 31077)", "exitcode  : -9 (pid: 31077)")
    )
    swapped = swapped.replace("exitcode  : -9 (pid: 31078)", "exitcode  : 1 (pid: 31078)")
    assert failures(swapped) == [RootCause(rank=1, exitcode=-9), RootCause(rank=0, exitcode=1)]
    cause = root_cause(swapped)
    assert cause == RootCause(rank=0, exitcode=1)
    gloo = "RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:12177"
    assert killed_peer(swapped, cause, gloo) == RootCause(rank=1, exitcode=-9)
    assert killed_peer(swapped, cause, "RuntimeError: CUDA out of memory") is None  # its own error: it came first
    assert killed_peer(TORCHRUN_FAILURE, RootCause(rank=1, exitcode=-9), gloo) is None  # rank 0 was SIGTERMed


# ----- the step plan -----
@pytest.mark.parametrize(
    "rows, batch, accum, processes", [(100, 4, 1, 1), (100, 2, 1, 2), (101, 2, 2, 2), (7, 4, 1, 2), (9, 1, 3, 4)]
)
def test_steps_follow_the_processes(rows, batch, accum, processes):
    plan = plan_steps(
        rows, request(batch_size=batch, gradient_accumulation_steps=accum, num_processes=processes, num_epochs=1)
    )
    per_process_batches = math.ceil(math.ceil(rows / batch) / processes)
    assert plan.steps_per_epoch == max(math.ceil(per_process_batches / accum), 1)
    assert plan.global_batch_size == batch * accum * processes


def test_a_one_process_batch_of_4_and_two_processes_of_2_take_the_same_steps():
    one = plan_steps(91, request(batch_size=4, num_epochs=3))
    two = plan_steps(91, request(batch_size=2, num_processes=2, num_epochs=3))
    assert (one.total_steps, one.global_batch_size) == (two.total_steps, two.global_batch_size) == (69, 4)


# ----- the rank's stop flag -----
def test_the_stop_flag_outside_a_group_is_the_local_one():
    from trainer_core.training.rank_main import GroupStop

    stop = GroupStop()
    assert not stop.is_set()
    stop.set()
    assert stop.is_set()


# ----- the group's account of a failure (no processes: the group's records are set directly) -----
def _group(tmp_path: Path, log: str = ""):
    from trainer_core.distributed.group import RankGroup

    group = RankGroup(request(num_processes=2), "job_x", tmp_path, devices=CPU2)
    (tmp_path / "launcher.log").write_text(log)
    group.pids = {0: 10, 1: 11}
    return group


def test_a_killed_rank_is_named_even_when_rank_0_then_failed_on_the_broken_group(tmp_path):
    from trainer_core.process.supervisor import WorkerExited

    group = _group(tmp_path, TORCHRUN_FAILURE.replace("31078", "11"))
    group._errors = [(0, "RuntimeError: [gloo] Connection closed by peer")]
    group._silent = [1]
    with pytest.raises(WorkerExited) as caught:
        group._failure()
    assert caught.value.exitcode == -9
    assert "The training process of rank 1 (of 2, pid 11) was killed (signal 9)" in caught.value.reason
    assert "torchrun ended the other processes" in caught.value.reason and "gloo" not in caught.value.reason


def test_the_first_failing_ranks_own_error_is_reported(tmp_path):
    rank0_first = TORCHRUN_FAILURE.replace(
        "rank      : 1 (local_rank: 1)\n  exitcode  : -9", "rank      : 0 (local_rank: 0)\n  exitcode  : 1"
    )
    group = _group(tmp_path, rank0_first)
    group._errors = [(0, "Out of memory: ..."), (1, "RuntimeError: Connection closed by peer")]
    assert group._failure() == ("error", {"message": "Out of memory: ..."})
    group = _group(tmp_path, TORCHRUN_FAILURE.replace("exitcode  : -9", "exitcode  : 1"))
    group._errors = [(0, "RuntimeError: Connection closed by peer"), (1, "ValueError: bad row")]
    assert group._failure() == ("error", {"message": "Rank 1 of 2: ValueError: bad row"})
    group = _group(tmp_path, TORCHRUN_FAILURE.replace("exitcode  : -9", "exitcode  : 1"))
    group._errors = [(1, "Training diverged at step 3: loss is nan."), (0, "Training diverged at step 3: loss is nan.")]
    assert group._failure() == (
        "error",
        {"message": "Training diverged at step 3: loss is nan."},
    )  # the same on every rank


def test_without_torchruns_summary_the_first_error_or_death_is_reported(tmp_path):
    from trainer_core.process.supervisor import WorkerExited

    group = _group(tmp_path, "Traceback: launcher crashed\n")
    group._errors = [(1, "KeyError: 'x'")]
    assert group._failure() == ("error", {"message": "Rank 1 of 2: KeyError: 'x'"})
    group = _group(tmp_path, "")
    group._silent = [1]
    with pytest.raises(WorkerExited, match="rank 1 .* ended without a word; torchrun ended the others"):
        group._failure()
    with pytest.raises(WorkerExited, match="were ended"):  # once ended, the group stays ended
        group.next_event(0.01)


class _Conn:
    def __init__(self) -> None:
        self.sent: list = []

    def send(self, message) -> None:
        self.sent.append(message)


def test_the_reporter_sends_every_event_and_the_others_only_errors():
    from trainer_core.training.rank_main import RankEvents

    zero, one = RankEvents(_Conn(), 0, True), RankEvents(_Conn(), 1, False)
    for events in (zero, one):
        events.put(("progress", {"step": 1}))
        events.put(("phase", {"phase": "training"}))
        events.put(("error", {"message": "boom"}))
    assert [m[1][0] for m in zero.conn.sent] == ["progress", "phase", "error"]
    assert one.conn.sent == [("event", ("error", {"message": "boom"}))] and one.failed


@pytest.mark.parametrize("value", ["０,１", "٠", "0,1\n2", "0\t1"])
def test_gpu_ids_take_ascii_digits_only(value):
    with pytest.raises(ValidationError, match="not a list of GPU numbers"):
        request(gpu_ids=value)


def test_a_config_nested_too_deeply_or_not_a_regular_file_is_refused(tmp_path):
    import os as _os

    deep = _write(tmp_path, "deep.json", "[" * 200_000 + "]" * 200_000)
    for kind in ("deepspeed", "fsdp"):
        with pytest.raises(ScalingError, match="deep.json is not"):
            check_config_file(request(num_processes=2, distributed=kind, distributed_config=deep))
    fifo = tmp_path / "pipe.yaml"
    _os.mkfifo(fifo)
    with pytest.raises(ScalingError, match="pipe.yaml is not a regular file"):  # never opened (it would block)
        check_config_file(request(num_processes=2, distributed="fsdp", distributed_config=str(fifo)))


def test_a_launcher_killed_from_outside_is_named_instead_of_a_rank(tmp_path):
    import subprocess
    import sys

    from trainer_core.process.supervisor import WorkerExited

    group = _group(tmp_path, "")
    group.process = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    group.process.wait()
    group._silent = [0]
    with pytest.raises(WorkerExited) as caught:
        group._failure()
    assert f"The torchrun launcher (pid {group.process.pid}) was killed (signal 9)" in caught.value.reason
    assert "The studio ended the training processes." in caught.value.reason and "rank 0" not in caught.value.reason
