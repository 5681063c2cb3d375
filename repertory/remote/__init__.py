"""Remote environments: games and simulators in any language act through a
gRPC service (`environment.proto`); see docs/remote.md.

The server side (`service`, `validation`, `hub`, `node`, `program`) runs
inside a repertory program, and `environment.SlotEnvironment`s bring its
episodes to any agent's actors as plain `dm_env` environments; the Python
client is its own package, `repertory_remote` (clients/python: no
TensorFlow). This package imports none of them by
itself.
"""
