"""Launchpad's programming model: programs, nodes, handles, `launch()`.

`repertory.launch` re-exports every public name; import from there.
"""
