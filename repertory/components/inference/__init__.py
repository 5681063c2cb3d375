"""Central batched inference (SEED RL): `InferenceServer`, the
`ServerPolicy` environment-only actors act with, and `ServerActor`, such an
actor whose environments' calls overlap its own work.

Importing this package imports neither TensorFlow nor Reverb (the server's
policy and adders import them inside the server's process).
"""

from repertory.components.inference.actor import ServerActor
from repertory.components.inference.client import ServerPolicy
from repertory.components.inference.server import InferenceServer
