"""Start-up and memory tuning of the processes that host nodes, and every
use of a private third-party API.

Tuning: `startup_gc` (the garbage collector paused while a node process
starts), `blas_threads` (one BLAS thread per process), `deferred_imports`
(modules loaded on first use) and `reverb_lite` (Reverb's writing client
without TensorFlow's Python).

Private APIs: each module that reaches into a private name of a third-party
package says the version it was written for (`PINNED`) and the names it
uses (`PRIVATE_NAMES`); `pins` gathers them and tests/launch/
private_apis_test.py fails when a version or a name changes. `ray_internals`
(Ray 2.60.0: a lean local instance on loopback, a cluster's node addresses,
token authentication for test clusters), `tf_internals` (TensorFlow 2.15: a
session runner built once, a cancellable tf.data get-next), `reverb_lite`
(Reverb 0.14.0's extension module) and `cloudpickle_internals`
(cloudpickle's code reduction). No other
module of repertory uses a private name of Ray, TensorFlow, Reverb or
cloudpickle.
"""
