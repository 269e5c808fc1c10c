#!/usr/bin/env bash
# Run real failing 2-rank jobs through `kb run -- torchrun ...` and keep everything each one left
# behind, as test fixtures for kb's job view (tests/fixtures/jobs/<name>/).
#
#   bash scripts/capture_jobs.sh                       # GPU machine, NCCL: every job
#   bash scripts/capture_jobs.sh stall sigkill         # some of them
#   bash scripts/capture_jobs.sh --cpu                 # gloo on CPU: every job that needs no GPU
#
# The jobs (scripts/jobs/*.py), each ending in about a minute or less:
#   device_assert  (a) rank 1 hits a device-side assert; rank 0 is stopped by torchrun (GPU only)
#   stall          (b) rank 1 sleeps; rank 0's collective times out
#   oom            (c) rank 1 runs out of GPU memory (GPU only)
#   mismatch       (d) all_reduce with a different shape on each rank, TORCH_DISTRIBUTED_DEBUG=DETAIL
#   sigkill        (e) rank 1 is killed by SIGKILL
#   nccl_assert    a device-side assert on rank 1 that surfaces through NCCL (GPU only)
#   two_groups     4 ranks: rank 1 stalls in group 0-1, rank 2 before the world's all_reduce
#   gil            rank 1 holds the GIL in one long C call inside the collective loop
#   early_exit     rank 1 leaves the loop and exits 0 while rank 0 goes on
#   sub_mismatch   4 ranks: rank 3 runs group 2-3's all_reduce with another size
# Jobs of 4 ranks on a 2-GPU host run the world group on gloo and the 2-rank groups on NCCL. The
# newer jobs run torchrun with --tee 3, so every line carries its rank ([default1]:).
#
# For each job, $OUT/jobs/<name>/ (cpu-<name> with --cpu) gets:
#   run/           the `kb run` folder: output.log, error.json, torchrun/ (per-rank error files),
#                  fr/ (Flight Recorder dumps), kb-run.json, kb-diagnosis.json
#   stdout.txt, stderr.txt, exit_code   what `kb run` itself printed and returned
#   verdict.txt, verdict.json           `kb lookup run/` (text and --json)
#   env.txt        torch / NCCL / GPU versions
# and the verdicts are printed at the end.
#
# Environment: PYTHON (an interpreter with torch; default python3), KB_PYTHON (the one that runs
# kb; default PYTHON), OUT (default ./job-captures), KB_JOB_TIMEOUT (collective timeout in
# seconds, default 20). kb's own dependencies that the machine lacks travel as wheels in .whl/,
# as for scripts/device_verify.sh. No network is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"

cpu=0
jobs=()
for a in "$@"; do
    case "$a" in
        --cpu) cpu=1 ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        *) jobs+=("$a") ;;
    esac
done
if ((${#jobs[@]} == 0)); then
    if ((cpu)); then
        jobs=(stall mismatch sigkill two_groups gil early_exit sub_mismatch)
    else
        jobs=(device_assert stall oom mismatch sigkill nccl_assert two_groups gil early_exit sub_mismatch)
    fi
fi

PYTHON="${PYTHON:-python3}"
KB_PYTHON="${KB_PYTHON:-$PYTHON}"
OUT="${OUT:-$REPO/job-captures}"
export KB_JOB_TIMEOUT="${KB_JOB_TIMEOUT:-20}"

shopt -s nullglob
wheels=(.whl/*.whl)
# only where kb's own dependencies are missing (the wheels are for the GPU host's Python)
if ((${#wheels[@]})) && ! "$KB_PYTHON" -c "import yaml, jsonschema, platformdirs" 2>/dev/null; then
    "$KB_PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/kb-site "${wheels[@]}"
    export PYTHONPATH="/tmp/kb-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export KB_HOME="${KB_HOME:-$(mktemp -d)}"
export NO_COLOR=1

# Shared multi-GPU hosts: NVLink multicast stays off (see the device notes).
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
export TORCH_SYMM_MEM_DISABLE_MULTICAST="${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}"
# After a timeout the watchdog waits 4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (default 15 s) for the
# Flight Recorder dump before it aborts; 2 s keeps each job under a minute.
export TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC="${TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC:-2000}"
export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC="${TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC:-60}"
# Set, so torchrun does not print its OMP_NUM_THREADS banner into every capture.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
if ((cpu)); then
    export KB_JOB_BACKEND=gloo CUDA_VISIBLE_DEVICES=""
fi

mkdir -p "$OUT/jobs"
summary=()
for name in "${jobs[@]}"; do
    prog="scripts/jobs/$name.py"
    [[ -f "$prog" ]] || { echo "capture_jobs: no job $name ($prog)" >&2; exit 2; }
    if ((cpu)); then dest="$OUT/jobs/cpu-$name"; else dest="$OUT/jobs/$name"; fi
    rm -rf "$dest"
    mkdir -p "$dest"
    "$PYTHON" - > "$dest/env.txt" 2>&1 <<'EOF' || true
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
if torch.cuda.is_available():
    print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
    for i in range(torch.cuda.device_count()):
        print("gpu", i, torch.cuda.get_device_name(i))
EOF
    extra=()
    [[ "$name" == mismatch ]] && extra=(env TORCH_DISTRIBUTED_DEBUG=DETAIL)
    nproc=2
    tee=()
    case "$name" in
        two_groups|sub_mismatch) nproc=4; tee=(--tee 3) ;;
        gil|early_exit|nccl_assert) tee=(--tee 3) ;;
    esac
    echo "=== $name: kb run -- torchrun --nproc_per_node=$nproc ${tee[*]-} $prog" >&2
    set +e
    timeout -k 10 170 ${extra[@]+"${extra[@]}"} "$KB_PYTHON" -m kb run --run-dir "$dest/run" -- \
        "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=$nproc --max-restarts=0 \
        ${tee[@]+"${tee[@]}"} "$prog" \
        > "$dest/stdout.txt" 2> "$dest/stderr.txt"
    echo $? > "$dest/exit_code"
    "$KB_PYTHON" -m kb lookup "$dest/run" > "$dest/verdict.txt" 2>&1
    "$KB_PYTHON" -m kb lookup --json "$dest/run" > "$dest/verdict.json" 2>/dev/null
    set -e
    summary+=("$name: exit $(cat "$dest/exit_code")")
    echo "--- $name (exit $(cat "$dest/exit_code"))"
    sed -n '1,12p' "$dest/verdict.txt"
done
echo
printf '%s\n' "${summary[@]}"
