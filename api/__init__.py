"""The HTTP face: the training API under ``/api/train`` (runs, queue, tasks, share links, the arena)
and the OpenAI-compatible routes under ``/v1``, thin routes over the engine."""
