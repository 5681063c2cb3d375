#!/bin/sh
# No-op: see BUILD. repertory does not run `bazel coverage`.
echo "coverage is not supported in this offline build (see third_party/bazel/remote_coverage_tools/BUILD)" >&2
exit 1
