"""The Bazel macro every built-in agent's BUILD file calls."""

KIT = "//repertory/components:kit"

def repertory_agent(name, deps = [], **kwargs):
    """One agent's py_library: every .py file of its folder, public.

    Args:
      name: the agent's name (its folder's).
      deps: what the agent imports beyond the kit (`KIT`, which it always
        depends on), e.g. SEED's inference server.
      **kwargs: passed to py_library.
    """
    native.py_library(
        name = name,
        srcs = native.glob(["*.py"]),
        srcs_version = "PY3",
        deps = [KIT] + deps,
        visibility = ["//visibility:public"],
        **kwargs
    )
