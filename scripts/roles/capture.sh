#!/usr/bin/env bash
# Real captures of the root-failure cases kb's failure events must read right (docs/ordering.md,
# key 0), taken on a GPU machine: each program's whole output, as a user would paste it, goes to
# $OUT/<case>.log with its exit status in $OUT/<case>.rc. Run on the device from the repo root:
#   bash scripts/roles/capture.sh
# Nothing here is a test: tests/test_failure_roles.py reads the kept captures in
# tests/fixtures/roles/.
set -uo pipefail
OUT="${OUT:-/tmp/roles-out}"
mkdir -p "$OUT"
here="$(cd "$(dirname "$0")" && pwd)"
export PYTHONUNBUFFERED=1

run() {  # run NAME CMD...: capture stdout+stderr and the exit status
    local name=$1; shift
    ( "$@" ) >"$OUT/$name.log" 2>&1
    echo $? >"$OUT/$name.rc"
    echo "$name: exit $(cat "$OUT/$name.rc"), $(wc -l <"$OUT/$name.log") lines"
}

cd "$here"
# A cuDNN convolution after an embedding index past the table's end: the kernel's assertion is
# printed, and the error surfaces at the next call that synchronises.
run cascade python3 cascade.py
# torchrun with one worker whose kernel writes out of bounds (Triton, no mask).
run torchrun_triton torchrun --standalone --nproc_per_node=1 triton_oob.py
# torchrun with one worker that asks for a device mesh bigger than the world.
run torchrun_mesh torchrun --standalone --nproc_per_node=1 mesh_too_big.py
# An exception, then the shell's SIGKILL of the same process (a watchdog's kill -9 after it).
run killed_after bash -c 'python3 killed_after.py; sleep 0.2'
exit 0
