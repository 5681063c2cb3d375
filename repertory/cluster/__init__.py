"""Clusters of hosts on this machine, in network namespaces (root only).

`hosts.Cluster.start(n)` starts a Ray cluster with token authentication on
n hosts of a private network (`netns.Network`): what tests and
`python -m repertory.cluster up` use (docs/launch.md, "A cluster on one
machine").
"""
