"""Generic actors: `FeedForwardActor` (a Sonnet network's logits with a
learner's versioned weights; also an evaluation actor), `BatchedActor` (the
actor node loop over a batch of environments, writing through an adder) and
`limit_tf_threads` (call it in actor processes)."""

from repertory.components.actors.batched import BatchedActor
from repertory.components.actors.feed_forward import FeedForwardActor
from repertory.components.actors.feed_forward import limit_tf_threads
