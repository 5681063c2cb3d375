"""Central batched inference (SEED RL): `InferenceServer`, and the
`ServerPolicy` environment-only actors act with.

Importing this package imports neither TensorFlow nor Reverb (the server's
policy and adders import them inside the server's process).
"""

from repertory.components.inference.client import ServerPolicy
from repertory.components.inference.server import InferenceServer
