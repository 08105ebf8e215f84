# Developer shortcuts; CI runs .ci/run.
PYTHON ?= python

.PHONY: install pytest pytest-slow pytest-golden check-repo check-experiments lint format type check docs benchmark benchmark-classic

install:
	pip install torch==2.13.0
	pip install -e ".[all]"

pytest:
	$(PYTHON) -m pytest -q -n auto

pytest-slow:
	$(PYTHON) -m pytest -q -m slow

# The golden runs alone (also in the default run): bit-identical on the kinds of CPU with digests, close on any
pytest-golden:
	$(PYTHON) -m pytest -q -p no:cacheprovider -m golden

# Checks of the repository rather than the library: page lengths, the results' bookkeeping (every committed number
# regenerable, every number of the docs' prose sourced, every shipped entry backed by a results table), README / CI /
# pyproject agreeing: the modules of checks/, and the tests marked repo in the modules of tests/ that mix both
check-repo:
	$(PYTHON) -m pytest -q -p no:cacheprovider -m repo checks tests

# The experiment commands of benchmarks/experiments/ (speed, diagnose, demonstrations, buffer_memory, defaults_study) on tiny budgets
check-experiments:
	$(PYTHON) -m pytest -q -p no:cacheprovider -m experiments

lint:
	ruff check .
	ruff format --check .

format:
	ruff check --fix .
	ruff format .

type:
	mypy

check: lint type pytest

# The HTML site with the API reference (pip install -e ".[docs]"), warnings as errors: docs/_build/html/index.html
docs:
	$(PYTHON) -m sphinx -W --keep-going -b html -c docs . docs/_build/html

# PCL vs PPO / A2C / TRPO on the classic-control tasks (3 seeds x 100k steps; about 1.5 h on 2 cores)
benchmark-classic:
	$(PYTHON) -m benchmarks.run --algos pcl ppo a2c trpo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 \
		--seeds 0 1 2 --steps 100000 --eval-freq 5000 --eval-episodes 10 --out benchmarks/results/classic \
		--threshold Pendulum-v1=-250

benchmark: benchmark-classic
