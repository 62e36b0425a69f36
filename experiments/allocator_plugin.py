"""pytest plugin (``-p experiments.allocator_plugin`` in pyproject's addopts): the test run under jemalloc.

pytest imports ``-p`` plugins while it parses its command line, before it captures output or collects anything, so
re-executing here (`experiments.allocator.reexec_with_allocator`) restarts ``pytest ...`` or ``python -m pytest ...``
with the allocator preloaded and nothing lost. A ``pytest.main()`` called inside another Python process is never
re-executed (`experiments.allocator.started_as`).
"""

from experiments.allocator import reexec_with_allocator

reexec_with_allocator(("pytest", "py.test"))
