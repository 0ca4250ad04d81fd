#!/bin/bash
# Submit a cis2 batch over a Slurm cluster (docs/scale.md):
#   tools/slurm/submit.sh MODEL_DIR PROMPTS.jsonl OUTDIR N [cis2 batch options...]
# queues an N-task job array (cis2-array.sbatch: task k runs
# `cis2 batch --shard k/N`) and a merge + verify job that starts when every
# task succeeded (afterok). Paths are made absolute: the nodes must see them
# (a shared file system). More sbatch options for both jobs: SBATCH_ARGS
# (e.g. "-p cpu -c 8"); CIS2 names the binary (default: cis2 on PATH);
# CIS2_BATCH the --batch of both the tasks and the verification.
# Prints "ARRAY_JOB_ID MERGE_JOB_ID".
set -euo pipefail
if [ $# -lt 4 ]; then
    echo "usage: $0 MODEL_DIR PROMPTS.jsonl OUTDIR N [cis2 batch options...]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
# checked here, before N tasks are queued that would each fail on it
[ -d "$1" ] || { echo "$0: $1: no such model directory" >&2; exit 2; }
[ -f "$2" ] || { echo "$0: $2: no such prompts file" >&2; exit 2; }
CIS2_MODEL=$(realpath "$1"); CIS2_IN=$(realpath "$2"); outdir=$3; N=$4; shift 4
# no leading zero: bash arithmetic reads 010 as octal 8 and 08 as an error
case "$N" in ''|*[!0-9]*|0*) echo "$0: N must be a positive integer" >&2; exit 2;; esac
mkdir -p "$outdir"; CIS2_OUTDIR=$(realpath "$outdir")
CIS2=${CIS2:-$(command -v cis2 || true)}
[ -n "$CIS2" ] || { echo "$0: no cis2 on PATH (set CIS2=/path/to/cis2)" >&2; exit 2; }
CIS2=$(realpath "$CIS2")
CIS2_ARGS="${CIS2_ARGS:-} $*"; CIS2_SHARDS=$N
export CIS2 CIS2_MODEL CIS2_IN CIS2_OUTDIR CIS2_ARGS CIS2_SHARDS CIS2_BATCH
# shellcheck disable=SC2086
J=$(sbatch --parsable ${SBATCH_ARGS:-} --array="0-$((N - 1))" \
      -o "$CIS2_OUTDIR/cis2-batch-%A_%a.log" "$here/cis2-array.sbatch")
J=${J%%;*}
# shellcheck disable=SC2086
K=$(sbatch --parsable ${SBATCH_ARGS:-} --dependency="afterok:$J" --kill-on-invalid-dep=yes \
      -o "$CIS2_OUTDIR/cis2-merge-%j.log" "$here/cis2-merge.sbatch")
echo "${J} ${K%%;*}"
