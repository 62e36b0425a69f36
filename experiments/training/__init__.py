"""Training runs: the schedule, checkpoints, provenance, the run's parts (device, task, model) and the one training loop
(ordinary runs, and packs of runs trained together)."""
