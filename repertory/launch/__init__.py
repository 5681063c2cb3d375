"""The program graph: Launchpad's programming model on threads or Ray.

```
from repertory import launch

program = launch.Program('consumer_producers')
with program.group('consumer'):
  consumer = program.add_node(launch.CourierNode(Consumer))
with program.group('producer'):
  for i in range(2):
    program.add_node(launch.PyNode(produce, i, consumer))
launch.launch(program)   # --lp_launch_type=test_mt|local_mt|local_mp|test_mp|ray
```

Launchpad programs run with `import repertory.launch as lp` in place of
`import launchpad as lp`; docs/launch.md lists every Launchpad name and what
it maps to here.

Importing this package imports neither TensorFlow nor Ray; Reverb (and with
it TensorFlow) is imported inside ReverbNode code, Ray inside the Ray backend.
"""

from repertory.launch import flags
from repertory.launch.transport.batching import batched_handler
from repertory.launch.process.blas_threads import limit_blas_threads
from repertory.launch.transport.channel import ChannelAuthenticationError
from repertory.launch.transport.channel import ChannelClient
from repertory.launch.transport.channel import ChannelError
from repertory.launch.transport.channel import ChannelServer
from repertory.launch.transport.channel import LazyChannel
from repertory.launch.transport.channel import serve_channel
from repertory.launch.transport.channel import TRANSPORTS
from repertory.launch.api.compat import Address
from repertory.launch.api.compat import get_port_from_address
from repertory.launch.api.compat import is_local_launch
from repertory.launch.api.compat import is_local_launch_or_test
from repertory.launch.api.compat import LaunchType
from repertory.launch.api.compat import make_program_stopper
from repertory.launch.api.compat import PythonProcess
from repertory.launch.api.context import channel_key
from repertory.launch.api.context import close_at_stop
from repertory.launch.api.context import get_launch_type
from repertory.launch.api.context import gpu_visible
from repertory.launch.api.context import host_ip
from repertory.launch.api.context import register_stop_handler
from repertory.launch.api.context import run_until_stop
from repertory.launch.api.context import stop
from repertory.launch.api.context import stop_event
from repertory.launch.api.context import stopping
from repertory.launch.api.context import unregister_stop_handler
from repertory.launch.api.context import wait_for_stop
from repertory.launch.api.errors import LaunchError
from repertory.launch.api.errors import NodeError
from repertory.launch.api.errors import NodePicklingError
from repertory.launch.api.errors import NodeStartError
from repertory.launch.api.errors import NotDereferencedError
from repertory.launch.api.handles import CourierClient
from repertory.launch.api.handles import CourierHandle
from repertory.launch.api.handles import Deferred
from repertory.launch.api.handles import Handle
from repertory.launch.api.lazy import lazy
from repertory.launch.api.lazy import lazy_attributes
from repertory.launch.api.lazy import LazyRef
from repertory.launch.launcher import check_cluster
from repertory.launch.launcher import LAUNCH_TYPES
from repertory.launch.launcher import launch
from repertory.launch.launcher import LaunchedProgram
from repertory.launch.api.resources import check_resources
from repertory.launch.api.resources import parse_resources
from repertory.launch.launcher import Terminated
from repertory.launch.api.nodes import CourierNode
from repertory.launch.api.nodes import MultiProcessingColocation
from repertory.launch.api.nodes import MultiThreadingColocation
from repertory.launch.api.nodes import Node
from repertory.launch.api.nodes import PyClassNode
from repertory.launch.api.nodes import PyNode
from repertory.launch.api.nodes import ReverbNode
from repertory.launch.api.program import make_program
from repertory.launch.api.program import Program

LAUNCH_TYPE = flags.LAUNCH_TYPE  # --lp_launch_type, as Launchpad's lp.LAUNCH_TYPE
