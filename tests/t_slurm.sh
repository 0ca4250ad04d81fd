#!/usr/bin/env bash
# cis2 batch on a real Slurm (tools/slurm/, docs/scale.md): starts a
# single-node Slurm cluster on localhost (slurmctld + slurmd + munged from
# Debian's slurm-wlm and munge, configured in a fresh temporary directory,
# free ports, no cgroups), submits a 4-task job array over a 40-prompt file
# with tools/slurm/submit.sh, waits (bounded) for the afterok merge + verify
# job, checks the merged file is byte-identical to a single-process
# `cis2 batch` of the same file and that every receipt verified, and stops
# everything it started. Needs root and the packages: SKIP (with the reason)
# without them, FAIL instead when SLURM_REQUIRED=1 (`make test-slurm`, CI).
source "$(dirname "$0")/lib.sh"
T="$TESTTMP/slurm"; rm -rf "$T"; mkdir -p "$T"
need() {
    if [ -n "${SLURM_REQUIRED:-}" ]; then fail slurm.prerequisites "$1"; else skip slurm.array-merge-verify "$1"; fi
    exit 0
}
[ "$(id -u)" = 0 ] || need "needs root (slurmd runs jobs as root here)"
for c in slurmctld slurmd sbatch squeue scontrol sinfo munged mungekey; do
    command -v "$c" >/dev/null 2>&1 || need "$c not installed (Debian: apt-get install slurm-wlm munge)"
done
CIS2ABS=$(realpath "$(command -v "$CIS2")")

# ---- the inputs, and the single-process reference
M="$T/model"; IN="$T/p40.jsonl"
python3 tools/make_model.py "$M" >/dev/null || { fail slurm.setup "make_model failed"; exit 0; }
python3 tools/make_prompts.py "$IN" 40
"$CIS2" batch --model "$M" --in "$IN" --out "$T/single.jsonl" -n 12 --batch 4 2>"$T/single.err" \
    || { fail slurm.single-process-batch "$(cat "$T/single.err")"; exit 0; }

# ---- a cluster of one node, in a fresh directory (short paths: socket names)
D=$(mktemp -d "${TMPDIR:-/tmp}/cis2-slurm.XXXXXX")
mkdir -p "$D"/{state,spool,log,munge}; chmod 755 "$D" "$D/munge" # munged: a+x socket dir
read -r CTLD_PORT SLURMD_PORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
export SLURM_CONF="$D/slurm.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=cis2test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(free -m | awk '/^Mem:/{print $2}') State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
# stop exactly what this script started: its pid files, bounded waits
stop_all() {
    set +e
    squeue -h -o %A 2>/dev/null | xargs -r scancel 2>/dev/null
    timeout 10 scontrol shutdown >/dev/null 2>&1
    for f in "$D/slurmctld.pid" "$D/slurmd.pid" "$D/munge/munged.pid"; do
        p=$(cat "$f" 2>/dev/null) || continue; [ -n "$p" ] || continue
        [ "$f" = "$D/munge/munged.pid" ] && kill "$p" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null
    done
    rm -rf "$D"
}
trap stop_all EXIT
t0=$(date +%s)
mungekey -c -k "$D/munge/munge.key" >/dev/null 2>&1
munged --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" --pid-file="$D/munge/munged.pid" \
    --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" \
    || { fail slurm.start "munged did not start: $(tail -3 "$D/munge/munged.log" 2>/dev/null)"; exit 0; }
slurmctld -f "$SLURM_CONF" && slurmd -f "$SLURM_CONF" \
    || { fail slurm.start "slurmctld/slurmd did not start: $(tail -3 "$D"/log/*.log 2>/dev/null)"; exit 0; }
up=0
for _ in $(seq 120); do sinfo -h -o %T 2>/dev/null | grep -qx idle && { up=1; break; }; sleep 0.5; done
[ $up -eq 1 ] && pass "slurm.cluster-up ($(( $(date +%s) - t0 )) s)" \
    || { fail slurm.cluster-up "node not idle after 60 s: $(sinfo 2>&1 | tail -2) $(tail -3 "$D/log/slurmctld.log")"; exit 0; }

# ---- the job array and the dependent merge + verify job
OUT="$T/out"
ids=$(CIS2="$CIS2ABS" CIS2_BATCH=4 tools/slurm/submit.sh "$M" "$IN" "$OUT" 4 -n 12 2>&1) \
    || { fail slurm.submit "$ids"; exit 0; }
read -r J K <<< "$ids"
done_=0
for _ in $(seq 300); do [ -z "$(squeue -h -j "$J,$K" 2>/dev/null)" ] && { done_=1; break; }; sleep 1; done
[ $done_ -eq 1 ] || fail slurm.jobs-finish "still queued after 300 s: $(squeue 2>&1 | tail -5 | tr '\n' ' ')"
st=$(scontrol show job "$K" 2>/dev/null | grep -o 'JobState=[A-Z_]*')
arr=$(for k in 0 1 2 3; do scontrol show job "${J}_$k" 2>/dev/null | grep -o 'JobState=[A-Z_]*'; done | sort | uniq -c | tr -s ' ' | tr '\n' ' ')
[ "$st" = JobState=COMPLETED ] && pass "slurm.array-and-dependent-job-completed (array: $arr)" \
    || fail slurm.array-and-dependent-job-completed "merge job $st, array: $arr; $(cat "$OUT"/*.log 2>/dev/null | tail -5 | tr '\n' ' ')"
n=$(ls "$OUT"/shard-*.jsonl 2>/dev/null | wc -l)
expect_eq slurm.four-shard-files "$n" 4
cmp -s "$OUT/results.jsonl" "$T/single.jsonl" && pass slurm.merged-identical-to-single-process \
    || fail slurm.merged-identical-to-single-process "$(cmp "$OUT/results.jsonl" "$T/single.jsonl" 2>&1)"
expect_eq slurm.every-receipt-verified "$(tail -n 1 "$OUT/verify.txt" 2>/dev/null)" \
    "verify-batch: 40 line(s): 40 verified, 0 mismatched, 0 unreadable, 0 error line(s) checked against the input"
echo "slurm: start to verified in $(( $(date +%s) - t0 )) s"
