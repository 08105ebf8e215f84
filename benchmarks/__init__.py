"""Shared benchmark harness for ``sb3_pcl`` and the SB3 / sb3-contrib baselines (see ``benchmarks/README.md``)."""
