"""Remote environments: games and simulators in any language act through a
gRPC service (`environment.proto`); see docs/remote.md.

`repertory.remote.client` needs only grpcio, protobuf and numpy (no
TensorFlow); the server side (`service`, `node`, `program`) runs inside a
repertory program. This package imports none of them by itself.
"""
