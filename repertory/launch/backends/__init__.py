"""Where a program runs: threads of one process, or Ray actors.

`threads_backend` serves `test_mt` and `local_mt`; `ray_backend` serves
`local_mp` (a local Ray instance, `local_ray`) and `ray` (an existing
cluster). `hosting` brings nodes up inside a process for both; `reaper` ends
every process a launcher left when it dies. Agents never import a backend:
`launch.launch()` picks one by launch type.
"""
