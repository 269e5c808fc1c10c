#!/usr/bin/env bash
# Run `kb verify` on a GPU machine that has Python, torch and no network.
#
# kb's own dependencies that such a machine lacks travel as wheels in .whl/ (ignored by git;
# fetched here with `pip download`, see the device notes). Nothing is installed outside /tmp, and
# nothing is copied back: the verdicts are this script's output. To keep evidence records, point
# them somewhere that comes back, e.g. --record --evidence-dir "$OUT/evidence".
#
#   bash scripts/device_verify.sh cuda-illegal-memory-access --json
#   bash scripts/device_verify.sh -j 4
set -euo pipefail
cd "$(dirname "$0")/.."

shopt -s nullglob
wheels=(.whl/*.whl)
if ((${#wheels[@]})); then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "${wheels[@]}"
else
    echo "device_verify: no wheels in .whl/ (carry it); using what python3 already has" >&2
fi

export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export KB_HOME=/tmp/kbhome
# Shared multi-GPU hosts: NVLink multicast stays off, in kb's repros too (they inherit NCCL_*,
# TORCH_* and NVSHMEM_* variables).
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
export TORCH_SYMM_MEM_DISABLE_MULTICAST="${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}"
export NVSHMEM_DISABLE_NVLS="${NVSHMEM_DISABLE_NVLS:-1}"

exec python3 -m kb verify "$@"
