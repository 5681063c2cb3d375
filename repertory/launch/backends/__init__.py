"""Where a program runs: threads of one process, or Ray actors.

`threads_backend` serves `test_mt` and `local_mt`. `ray_backend` serves
`local_mp` (a local Ray instance started by `local_ray`) and `ray` (an
existing cluster, joined and checked by `local_ray`): its `RayLauncher`
creates, watches and stops one Ray actor per unit (`ray_node.NodeActor`,
whose nodes `pickling` serialises) and restarts failed units
(`ray_restarts`); `ray_auth` keeps Ray's token authentication on. `hosting`
brings nodes up inside a process for both backends; `reaper` ends every
process a launcher left when it dies. Agents never import a backend:
`launch.launch()` picks one by launch type. Private Ray names used here live
in `launch/process/ray_internals.py`.
"""
