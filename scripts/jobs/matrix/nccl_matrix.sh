#!/usr/bin/env bash
# The fault matrix on NCCL (issue 35), for one device call on a machine with 2 or 4 GPUs: the same
# harness as the CPU matrix (scripts/jobs/matrix/run.py, train.py) with KB_JOB_BACKEND=nccl, so
# the dumps are the ones NCCL's Flight Recorder writes itself on a timeout (TORCH_FR_BUFFER_SIZE,
# dumps on timeout and their folder as `kb run` turns them on), beside each rank's own on an
# exception or SIGTERM. Then kb's verdict on each job, scored against what was injected.
#
#   bash scripts/jobs/matrix/nccl_matrix.sh                  # every job the GPUs allow
#   bash scripts/jobs/matrix/nccl_matrix.sh 'nccl-w2-*'      # some of them
#
# The jobs (run.py --backend nccl --list): on 2 and on 4 ranks, one faulty rank each time
#   cuda_assert      a class label out of range in cross_entropy (a device-side assert)
#   illegal_memory   a Triton kernel storing far past its allocation
#   gil              a thread holding the GIL before the all_reduce
#   sigkill          SIGKILL before the all_reduce
#   wrong_op         a broadcast where the others run the all_reduce
#   size             the all_reduce with 8 floats where the others use 4
#   sub-hang         (4 ranks) a sleep before its tensor-parallel pair's all_reduce
#   ep-stall         uneven all_to_all_single / all_to_all in the expert-parallel group every
#                    step, then one rank stalls (a negative control for the uneven sizes)
#
# Everything lands under $OUT (default ./job-captures): matrix-nccl/<job>/ as the CPU fixtures are
# kept (run/output.log.gz, run/error.json, run/fr.tar.gz, truth.json), matrix-nccl/SCORE.txt (kb's
# verdicts against the injected ranks) and matrix-nccl/env.txt (torch, NCCL, GPUs). Copy
# matrix-nccl/ to tests/fixtures/jobs/matrix-nccl/ to keep it.
#
# Environment: PYTHON (an interpreter with a CUDA torch; default python3), KB_PYTHON (one that
# runs kb; default PYTHON), OUT, KB_JOB_TIMEOUT (the collective timeout, default 20 s). kb's own
# dependencies the machine lacks travel as wheels in .whl/, as for scripts/device_verify.sh. No
# network is needed. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -euo pipefail
cd "$(dirname "$0")/../../.."
REPO="$PWD"

PYTHON="${PYTHON:-python3}"
KB_PYTHON="${KB_PYTHON:-$PYTHON}"
OUT="${OUT:-$REPO/job-captures}"
DEST="$OUT/matrix-nccl"

shopt -s nullglob
wheels=(.whl/*.whl)
if ((${#wheels[@]})) && ! "$KB_PYTHON" -c "import yaml, jsonschema, platformdirs" 2>/dev/null; then
    "$KB_PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/kb-site "${wheels[@]}"
    export PYTHONPATH="/tmp/kb-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export KB_HOME="${KB_HOME:-$(mktemp -d)}"
export NO_COLOR=1 PYTHON KB_PYTHON
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
export TORCH_SYMM_MEM_DISABLE_MULTICAST="${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}"

gpus=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
patterns=("$@")
if ((${#patterns[@]} == 0)); then
    if ((gpus >= 4)); then
        patterns=('nccl-*')
    elif ((gpus >= 2)); then
        patterns=('nccl-w2-*')
    else
        echo "nccl_matrix: $gpus GPU(s); the NCCL jobs need 2 or 4" >&2
        exit 2
    fi
fi

mkdir -p "$DEST"
"$PYTHON" - > "$DEST/env.txt" 2>&1 <<'EOF' || true
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
for i in range(torch.cuda.device_count()):
    print("gpu", i, torch.cuda.get_device_name(i))
try:
    import triton
    print("triton", triton.__version__)
except ImportError:
    print("triton missing: the illegal_memory jobs fail to start (their verdicts say so)")
EOF
cat "$DEST/env.txt"

"$KB_PYTHON" scripts/jobs/matrix/run.py --backend nccl --out "$DEST" --limit 240 "${patterns[@]}"
"$KB_PYTHON" scripts/jobs/matrix/score.py --dir "$DEST" | tee "$DEST/SCORE.txt"
