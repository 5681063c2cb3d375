"""Generic actors: `BatchedActor` (the actor node loop over a batch of
environments with a `core.Policy`, writing through an adder),
`FeedForwardActor` (a Sonnet network's logits with a learner's versioned
weights; a `core.Policy` and an evaluation actor), `limit_tf_threads`
(call it in actor processes) and `add_actor_nodes` (one node per actor).

Importing this package does not import TensorFlow (SEED's environment-only
actors run `BatchedActor`); `FeedForwardActor` and `limit_tf_threads` load
`feed_forward` (and TensorFlow) when first asked for.
"""

from repertory.components.actors.batched import BatchedActor
from repertory.components.actors.nodes import add_actor_nodes

_FEED_FORWARD = ('FeedForwardActor', 'limit_tf_threads')


def __getattr__(name: str):
  if name in _FEED_FORWARD:
    from repertory.components.actors import feed_forward  # pylint: disable=g-import-not-at-top
    return getattr(feed_forward, name)
  raise AttributeError(
      f'module {__name__!r} has no attribute {name!r}')
