"""
Package list of sb3_pcl (all other settings are in ``pyproject.toml``).

The canonical ``hyperparams/*.yml`` live at the top of the repository and are shipped inside the
package as ``sb3_pcl/hyperparams`` (``[tool.setuptools.package-dir]`` and ``package-data`` in
``pyproject.toml``). ``pyproject.toml`` cannot list such a mapped package next to
``[tool.setuptools.packages.find]`` (a ``find`` result replaces the whole list, see
https://github.com/pypa/setuptools/issues/5145), so the packages are found here: every
``sb3_pcl*`` (sub)package, as ``packages.find`` with ``include = ["sb3_pcl*"]`` did, plus
``sb3_pcl.hyperparams``.
"""

from setuptools import find_namespace_packages, setup

setup(packages=sorted({*find_namespace_packages(include=["sb3_pcl*"]), "sb3_pcl.hyperparams"}))
