"""A minimal @rules_cc: re-exports Bazel's native C++ rules.

Why: Bazel 4.2.3's built-in tools (@bazel_tools) load `@rules_cc//cc:defs.bzl`,
which Bazel would otherwise download from GitHub. The copy Debian ships with
bazel-bootstrap does not match Bazel 4.2.3, and the build must work offline.
repertory builds no C++, so re-exporting the native rules is all it needs.
"""

cc_binary = native.cc_binary
cc_import = native.cc_import
cc_library = native.cc_library
cc_test = native.cc_test
cc_toolchain = native.cc_toolchain
cc_toolchain_suite = native.cc_toolchain_suite
objc_library = native.objc_library
