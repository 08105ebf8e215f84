#!/usr/bin/env bash
# Train, watch and tune PCL with rl-zoo3's scripts (see docs/zoo.md).
# Needs the zoo extra: pip install -e ".[zoo]"  (or pip install "sb3-pcl[zoo]")
# Usage: examples/zoo_train.sh [ENV_ID]  (STEPS=... TRIALS=... OPT_STEPS=... to change the budgets)
set -euo pipefail

ENV_ID="${1:-CartPole-v1}"
STEPS="${STEPS:-100000}"  # training budget (default of hyperparams/pcl.yml for CartPole-v1)
TRIALS="${TRIALS:-20}"    # Optuna trials per worker
OPT_STEPS="${OPT_STEPS:-50000}"  # training budget of each trial
LOGS="${LOGS:-logs}"
STORAGE="${STORAGE:-sqlite:///${LOGS}/pcl_study.db}"

mkdir -p "${LOGS}"

# 1. Train PCL with our hyperparams/pcl.yml (the default for --algo pcl), evaluating every 5000 steps,
#    TensorBoard runs under runs/<env>/PCL_<n>, models and evaluations.npz under logs/pcl/<env>_<n>/
python -m sb3_pcl.zoo.train --algo pcl --env "${ENV_ID}" -n "${STEPS}" \
    --eval-freq 5000 --eval-episodes 10 -tb runs -f "${LOGS}" --seed 0 --num-threads 1

# 2. Watch the last run (drop --no-render to see it)
python -m sb3_pcl.zoo.enjoy --algo pcl --env "${ENV_ID}" -f "${LOGS}" --no-render -n 1000 --num-threads 1

# 3. The same command trains rl-zoo3's algorithms with rl-zoo3's own tuned files
python -m sb3_pcl.zoo.train --algo ppo --env "${ENV_ID}" -n "${STEPS}" \
    --eval-freq 5000 --eval-episodes 10 -tb runs -f "${LOGS}" --seed 0 --num-threads 1

# 4. Tune PCL with Optuna: two workers share one study (more workers / machines: same command,
#    PostgreSQL storage URL, see docs/zoo.md). Create the study first, then start the workers.
optuna create-study --storage "${STORAGE}" --study-name pcl-"${ENV_ID}" --direction maximize --skip-if-exists
for worker in 1 2; do
    python -m sb3_pcl.zoo.train --algo pcl --env "${ENV_ID}" -f "${LOGS}/worker${worker}" --num-threads 1 \
        --optimize --n-trials "${TRIALS}" --n-timesteps "${OPT_STEPS}" --n-evaluations 5 --eval-episodes 5 \
        --sampler tpe --pruner median --storage "${STORAGE}" --study-name pcl-"${ENV_ID}" --no-optim-plots &
done
wait

# 5. Train with the hyperparameters of trial 1 of the study (rl-zoo3 ignores --trial-id 0)
python -m sb3_pcl.zoo.train --algo pcl --env "${ENV_ID}" -n "${STEPS}" -f "${LOGS}" --num-threads 1 \
    --storage "${STORAGE}" --study-name pcl-"${ENV_ID}" --trial-id 1
