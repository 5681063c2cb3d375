"""Bazel macros for repertory's tests (see README.md, "Test with Bazel")."""

_RUNNER = "//third_party/bazel:pytest_runner.py"

def repertory_py_test(
        name,
        srcs = None,
        deps = [],
        size = "medium",
        fast = True,
        slow = False,
        slow_size = "large",
        tags = [],
        data = [],
        **kwargs):
    """One pytest file run as Bazel `py_test` targets.

    The file's tests marked `@pytest.mark.slow` (learning tests that take
    minutes) never run in the ordinary target; `slow = True` adds a second
    target, `<name>_slow`, that runs only them, with `slow_size` and the tag
    "slow", so that `bazel test //...` (sizes small and medium, see .bazelrc)
    leaves them out and `bazel test //... --config=slow` runs them.

    Args:
      name: the target name, usually the test file's name without ".py".
      srcs: the one test file; `[name + ".py"]` by default.
      deps: the py_library targets the file imports (repertory's own only:
        third-party packages come from the virtual environment).
      size: Bazel's test size of the ordinary target: "medium" (timeout
        300 s) by default, since importing TensorFlow alone can take tens of
        seconds on a busy 2-core machine; "small" (60 s) for files that import
        neither TensorFlow nor Reverb nor Ray.
      fast: whether the file has tests not marked slow (the ordinary target).
      slow: whether the file has tests marked slow (the `<name>_slow` target).
      slow_size: the test size of the `<name>_slow` target.
      tags: tags for both targets (e.g. "cpu:2" for tests that start Ray).
      data: data files the tests read.
      **kwargs: passed to both py_test rules.
    """
    if srcs == None:
        srcs = [name + ".py"]
    if len(srcs) != 1:
        fail("repertory_py_test %s: srcs must be exactly one test file, got %s" %
             (name, srcs))
    if not fast and not slow:
        fail("repertory_py_test %s: at least one of fast and slow must be True" % name)
    common = dict(
        srcs = srcs + [_RUNNER],
        main = _RUNNER,
        data = data + [
            "//third_party/bazel:pytest.ini",
            "//third_party/bazel:strict_imports/sitecustomize.py",
        ],
        deps = deps,
        python_version = "PY3",
        srcs_version = "PY3",
        **kwargs
    )
    if fast:
        native.py_test(
            name = name,
            size = size,
            args = ["$(rootpath %s)" % srcs[0], "-m", "'not slow'"],
            tags = tags,
            **common
        )
    if slow:
        native.py_test(
            name = name + "_slow",
            size = slow_size,
            args = ["$(rootpath %s)" % srcs[0], "-m", "slow"],
            tags = tags + ["slow"],
            **common
        )
