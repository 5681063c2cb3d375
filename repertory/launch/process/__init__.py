"""Start-up and memory tuning of the processes that host nodes.

The garbage-collector pause at start-up, one BLAS thread per process, modules
loaded only on first use, and Reverb's writing client without TensorFlow.
"""
