"""Launchpad's programming model: programs, nodes, handles, the node's view
of its program (`context`), errors, resources per group and Launchpad's
other names (`compat`); `launch()` itself is `repertory.launch.launcher`.

`repertory.launch` re-exports every public name; import from there.
"""
