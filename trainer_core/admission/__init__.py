"""The checks every Start passes: a request's paths, devices and resume target, and its admission."""
