"""The remote environment client alone: `pip install ./clients/python`.

Installs the package `repertory_remote` (grpcio, protobuf and numpy; no
TensorFlow, Reverb or Ray) for games that connect to a repertory agent
(docs/remote.md). The full `repertory` install includes the same package.
"""

import setuptools

setuptools.setup(
    name='repertory-remote-client',
    version='0.1.0',
    description="A client of repertory's remote environment service (gRPC).",
    packages=['repertory_remote'],
    python_requires='>=3.9',
    install_requires=[
        'grpcio>=1.60',
        'protobuf>=4.25,<5',  # the runtime of environment_pb2.py
        'numpy',
    ],
)
