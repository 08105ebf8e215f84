#!/usr/bin/env bash
# Train, watch and tune PCL with rl-zoo3's scripts (see docs/zoo.md); one to two minutes with the default budgets.
# Needs the zoo extra: pip install -e ".[zoo]" in the sb3_pcl checkout
# Usage: examples/zoo_train.sh [ENV_ID]  (STEPS=... TRIALS=... OPT_STEPS=... to change the budgets)
set -euo pipefail

ENV_ID="${1:-CartPole-v1}"
STEPS="${STEPS:-5000}"          # training budget (hyperparams/pcl.yml trains CartPole-v1 for 100000)
TRIALS="${TRIALS:-1}"           # Optuna trials per worker
OPT_STEPS="${OPT_STEPS:-2000}"  # training budget of each trial
LOGS="${LOGS:-logs}"
STORAGE="${STORAGE:-sqlite:///${LOGS}/pcl_study.db}"

mkdir -p "${LOGS}"

# 1. Train PCL with our hyperparams/pcl.yml (the default for --algo pcl), evaluating (and printing) every
#    STEPS / 5 steps; models and evaluations.npz under logs/pcl/<env>_<n>/ (add -tb runs for TensorBoard logs
#    after pip install tensorboard)
python -m sb3_pcl.zoo.train --algo pcl --env "${ENV_ID}" -n "${STEPS}" --eval-freq "$((STEPS / 5))" \
    --eval-episodes 5 -f "${LOGS}" --seed 0 --num-threads 1 --verbose 1 -params learning_starts:500

# 2. Watch the last run (drop --no-render to see it in a window)
python -m sb3_pcl.zoo.enjoy --algo pcl --env "${ENV_ID}" -f "${LOGS}" --no-render -n 1000 --num-threads 1

# 3. The same command trains rl-zoo3's algorithms with rl-zoo3's own tuned files
python -m sb3_pcl.zoo.train --algo ppo --env "${ENV_ID}" -n "${STEPS}" --eval-freq "$((STEPS / 5))" \
    --eval-episodes 5 -f "${LOGS}" --seed 0 --num-threads 1

# 4. Tune PCL with Optuna: two workers share one study (more workers / machines: the same command with a
#    PostgreSQL storage URL, see docs/zoo.md). Create the study first, then start the workers.
#    Each worker's exit status is checked: the script fails when one of them does.
optuna create-study --storage "${STORAGE}" --study-name pcl-"${ENV_ID}" --direction maximize --skip-if-exists
workers=()
for worker in 1 2; do
    python -m sb3_pcl.zoo.train --algo pcl --env "${ENV_ID}" -f "${LOGS}/worker${worker}" --num-threads 1 \
        --optimize --n-trials "${TRIALS}" --n-timesteps "${OPT_STEPS}" --n-evaluations 2 --eval-episodes 5 \
        --sampler tpe --pruner median --storage "${STORAGE}" --study-name pcl-"${ENV_ID}" --no-optim-plots \
        -params learning_starts:500 &
    workers+=("$!")
done
failed=0
for pid in "${workers[@]}"; do
    wait "${pid}" || failed=$((failed + 1))
done
if [ "${failed}" -gt 0 ]; then
    echo "zoo_train.sh: ${failed} Optuna worker(s) failed" >&2
    exit 1
fi

# 5. Train with the hyperparameters of trial 1 of the study (rl-zoo3 ignores --trial-id 0)
python -m sb3_pcl.zoo.train --algo pcl --env "${ENV_ID}" -n "${STEPS}" -f "${LOGS}" --num-threads 1 \
    --storage "${STORAGE}" --study-name pcl-"${ENV_ID}" --trial-id 1
