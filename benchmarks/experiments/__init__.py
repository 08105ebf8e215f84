"""
Experiments run with the benchmark tool's pieces, outside the tool itself: throughput (:mod:`.speed`), what limits an
algorithm on a task (:mod:`.diagnose`), learning from demonstrations (:mod:`.demonstrations`), the replay's memory
(:mod:`.buffer_memory`). Each is a ``python -m benchmarks.experiments.<name>`` command that writes its own results
folder; their tests are marked ``experiments`` and run apart from the default test run (``pytest -m experiments``).
"""
