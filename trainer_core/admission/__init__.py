"""The checks every Start passes: a request's paths, devices and resume target, and its admission;
the pre-flight check's own worker process (``check_worker``), which every door's check goes through."""
