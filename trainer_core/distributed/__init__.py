"""Data-parallel training: one run in several processes, launched by torchrun or accelerate launch.

``launch`` builds the launcher's command and environment and checks a request against the machine,
``group`` supervises the launched processes for the job thread (``RankGroup``: the interface of a
``process.supervisor.WorkerProcess``; each process runs ``training.rank_main``), ``env`` reads
the launcher's variables and ``failure`` reads torchrun's account of a failed process.
"""
