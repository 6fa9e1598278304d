#!/usr/bin/env bash
# multihost.sh: `mpirun loadlaw sweep` across hosts that are network
# namespaces on this machine, each rank started over ssh as on a cluster,
# the engine on a host of its own.
#
#   hub    netns: bridge br0 10.213.0.1/24, `loadlaw serve` on it, mpirun
#   b      netns: veth 10.213.0.2 to the bridge, sshd in a time namespace, so
#          its monotonic clock runs CLOCK_SHIFT_S ahead of the others'
#   c      netns: veth 10.213.0.3 to the bridge, sshd
#
# Hostfile "c slots=2, b slots=1": ranks 0 and 1 on c, rank 2 on b. Each
# namespace has a host name of its own too (a UTS namespace), as separate
# machines would: each rank's records name its host, which is how the check
# tells which rank's clock was shifted.
#
# Checks (multihost_check.py reads the records):
#   1. a one-process sweep from host c: the reference law;
#   2. three ranks: every level complete with each rank's requests, ids
#      unique; each clock record's offset is the truth (CLOCK_SHIFT_S for the
#      rank on b, 0 for rank 1) within half its round trip, the method's bound
#      (the namespaces share one kernel clock, so the truth is exact); each
#      rank's first send of a level by rank 0's on the merged timeline; the
#      law's 95% intervals overlap the reference's;
#   3. host b's link pulled (its bridge port down) for PARTITION_S during
#      level 1, longer than rank 0's bound on a silent rank: exit 1, stderr
#      names rank 2 and level 1, level 0 complete, level 1 keeps every
#      request of ranks 0 and 1 and has its level_end.
#
# Every wait is bounded, the bounds together well inside ctest's TIMEOUT; a
# trap ends the processes in the namespaces and deletes them on every exit
# path that runs it (a ctest timeout kills without one: the next run removes
# what a dead run left). Exit 77, with the reason, without root, namespaces,
# veth and bridge links, ip, unshare, sshd, ssh, mpirun, curl or python3.
# argv: LOADLAW MPIRUN SCRATCH
set -uo pipefail
LOADLAW=${1:?usage: multihost.sh LOADLAW MPIRUN SCRATCH}
MPIRUN=${2:?usage: multihost.sh LOADLAW MPIRUN SCRATCH}
SCRATCH=${3:?usage: multihost.sh LOADLAW MPIRUN SCRATCH}
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK=$HERE/multihost_check.py
CLOCK_SHIFT_S=7
PARTITION_S=4
SILENT_S=2 # rank 0's bound on a silent rank in the partition run
ENGINE_PORT=8000
SSH_PORT=2222
NET=10.213.0
URL=http://$NET.1:$ENGINE_PORT
# C split 1:1:1 to 4:4:4 over three ranks; 48 tokens a request at
# 2.6 + 1.5 N ms a step: a level takes 2 to 4 s
SWEEP=(sweep --url "$URL" -c "3,6,12" -n 36 --max-tokens 48 --threads 1 -q --no-report)
PREFIX=llmh # namespace names: PREFIX, the shell's pid, the host

skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (network and time namespaces, sshd)"
for t in unshare ip ssh ssh-keygen timeout python3 curl; do
  command -v "$t" >/dev/null 2>&1 || skip "$t not found"
done
SSHD=$(command -v sshd 2>/dev/null || echo /usr/sbin/sshd)
[ -x "$SSHD" ] || skip "sshd not found (scripts/deps.sh --test installs openssh-server)"
[ -x "$MPIRUN" ] || skip "mpirun not found ($MPIRUN)"
unshare --net --uts --time --monotonic 1 --fork true 2>/dev/null ||
  skip "cannot make network, UTS and time namespaces here (needs Linux >= 5.6 and root in the machine's own namespaces)"

rm -rf "$SCRATCH" && mkdir -p "$SCRATCH" || fail "cannot use $SCRATCH"
SCRATCH=$(cd "$SCRATCH" && pwd)
NS_HUB=$PREFIX$$hub NS_B=$PREFIX$$b NS_C=$PREFIX$$c
NAMESPACES=()

ns_pids() { local ns; for ns in "$@"; do ip netns pids "$ns" 2>/dev/null; done; }

# End the processes of namespaces and delete them. Every process this test
# starts lives in one of its namespaces (ip netns exec enters it before
# exec), so these pids are all of them.
remove_ns() {
  local pids ns
  pids=$(ns_pids "$@")
  [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
  for _ in $(seq 20); do
    [ -z "$(ns_pids "$@")" ] && break
    sleep 0.1
  done
  pids=$(ns_pids "$@")
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  for ns in "$@"; do ip netns del "$ns" 2>/dev/null; done
}
cleanup() { [ ${#NAMESPACES[@]} -gt 0 ] && remove_ns "${NAMESPACES[@]}"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# What a run killed without its trap left: this test's namespaces whose
# shell is gone.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${PREFIX}[0-9]*\(hub\|b\|c\)$"); do
  pid=${ns#"$PREFIX"}
  pid=${pid%hub}
  pid=${pid%[bc]}
  [ -d "/proc/$pid" ] || remove_ns "$ns"
done

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
# A long step runs in the background and is waited for: bash runs a trap
# only once the foreground command ends, but at once during `wait`.
waited() { "$@" & wait $!; }

# ---- the network: a bridge in the hub, one veth pair per host ---------------
mknet() {
  local h ns addr
  for ns in "$NS_HUB" "$NS_B" "$NS_C"; do
    ip netns add "$ns" || return 1
    NAMESPACES+=("$ns")
    ip -n "$ns" link set lo up || return 1
  done
  ip -n "$NS_HUB" link add br0 type bridge &&
    ip -n "$NS_HUB" addr add "$NET.1/24" dev br0 &&
    ip -n "$NS_HUB" link set br0 up || return 1
  for h in b c; do
    ns=$NS_B addr=$NET.2
    [ $h = c ] && ns=$NS_C addr=$NET.3
    # made in the hub and one end moved: no link of the test's ever sits in
    # the machine's own namespace
    ip -n "$NS_HUB" link add "v$h" type veth peer name "port$h" &&
      ip -n "$NS_HUB" link set "v$h" netns "$ns" &&
      ip -n "$NS_HUB" link set "port$h" master br0 &&
      ip -n "$NS_HUB" link set "port$h" up &&
      ip -n "$ns" addr add "$addr/24" dev "v$h" &&
      ip -n "$ns" link set "v$h" up || return 1
  done
}
mknet 2>"$SCRATCH/net.err" || skip "cannot make network namespaces joined by veth pairs and a bridge here: $(head -1 "$SCRATCH/net.err")"

# ---- sshd on b and c: a throwaway key pair, its own config ------------------
KEYS=$SCRATCH/ssh
mkdir -m 700 "$KEYS" &&
  ssh-keygen -q -t ed25519 -N '' -C loadlaw-multihost -f "$KEYS/id" &&
  ssh-keygen -q -t ed25519 -N '' -C loadlaw-multihost-host -f "$KEYS/host" &&
  cp "$KEYS/id.pub" "$KEYS/authorized_keys" || fail "making the test's ssh keys failed"
cat >"$KEYS/sshd_config" <<EOF
Port $SSH_PORT
HostKey $KEYS/host
AuthorizedKeysFile $KEYS/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
EOF
# sshd's privilege separation directory (Debian's service makes it at start)
mkdir -p /run/sshd
# b: a time namespace's offsets hold for the processes created in it after
# unshare, so the shell that unshare --fork starts, sshd, its sessions, the
# orted they run and the rank all read CLOCK_MONOTONIC shifted
in_ns "$NS_B" unshare --uts --time --monotonic "$CLOCK_SHIFT_S" --fork \
  sh -c "hostname mh-b && exec $SSHD -D -e -o ListenAddress=$NET.2 -f $KEYS/sshd_config" \
  >"$SCRATCH/sshd-b.log" 2>&1 &
in_ns "$NS_C" unshare --uts --fork \
  sh -c "hostname mh-c && exec $SSHD -D -e -o ListenAddress=$NET.3 -f $KEYS/sshd_config" \
  >"$SCRATCH/sshd-c.log" 2>&1 &
SSH_OPTS="-p $SSH_PORT -i $KEYS/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
SSH_OPTS+=" -o BatchMode=yes -o LogLevel=ERROR -o ConnectTimeout=5"
for addr in $NET.2 $NET.3; do
  end=$((SECONDS + 15))
  until timeout 5 ip netns exec "$NS_HUB" ssh $SSH_OPTS "root@$addr" true 2>/dev/null; do
    [ $SECONDS -lt $end ] || { cat "$SCRATCH"/sshd-*.log; fail "sshd on $addr does not answer in 15 s"; }
    sleep 0.2
  done
done
shift_seen=$(timeout 5 ip netns exec "$NS_HUB" ssh $SSH_OPTS "root@$NET.2" \
  "awk '/monotonic/ {print \$2}' /proc/self/timens_offsets")
[ "$shift_seen" = "$CLOCK_SHIFT_S" ] ||
  fail "host b's sessions see a monotonic offset of '$shift_seen' s, want $CLOCK_SHIFT_S"

# ---- the engine, on the hub --------------------------------------------------
in_ns "$NS_HUB" "$LOADLAW" serve --host "$NET.1" --port $ENGINE_PORT --law 52+30n --time-scale 0.05 \
  >"$SCRATCH/serve.out" 2>"$SCRATCH/serve.err" &
end=$((SECONDS + 15))
until timeout 2 ip netns exec "$NS_C" curl -sf "$URL/health" >/dev/null 2>&1; do
  [ $SECONDS -lt $end ] || { cat "$SCRATCH/serve.err"; fail "the engine on $URL does not answer host c in 15 s"; }
  sleep 0.1
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf '%s slots=2\n%s slots=1\n' "$NET.3" "$NET.2" >"$SCRATCH/hosts"
# the ranks' environment: over ssh, only what -x names
fwd=(-x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM)
# under the sanitizer build: Open MPI's allocations live at exit (test_mpi.c)
[ -n "${ASAN_OPTIONS:-}" ] && fwd+=(-x "ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0")
[ -n "${UBSAN_OPTIONS:-}" ] && fwd+=(-x UBSAN_OPTIONS)

# mpirun in the hub, with a host name of its own; the hostfile does not name
# the hub, so no rank runs there. Between hosts the ranks talk TCP over the
# test's links (the ones it cuts); ranks 0 and 1, both on c, over shared
# memory as on one machine. $1: seconds allowed; the rest: its arguments.
mpi() {
  local limit=$1
  shift
  timeout -k 5 "$limit" ip netns exec "$NS_HUB" unshare --uts sh -c 'hostname mh-hub && exec "$@"' mpirun \
    "$MPIRUN" --hostfile "$SCRATCH/hosts" -np 3 \
    --mca plm_rsh_agent ssh --mca plm_rsh_args "$SSH_OPTS" \
    --mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24" \
    "${fwd[@]}" "$@"
}

t0=$SECONDS

# ---- 1. one process on host c: the reference --------------------------------
echo "one process on host c, engine on the hub ($URL, step 52+30n ms x 0.05)"
waited timeout -k 5 60 ip netns exec "$NS_C" "$LOADLAW" "${SWEEP[@]}" -o "$SCRATCH/one" \
  >"$SCRATCH/one.out" 2>"$SCRATCH/one.err"
rc=$?
[ $rc = 0 ] || { cat "$SCRATCH/one.err"; fail "one process: exit $rc"; }
timeout 20 "$LOADLAW" fit "$SCRATCH/one" --json >"$SCRATCH/one.fit.json" 2>"$SCRATCH/one.fit.err" ||
  { cat "$SCRATCH/one.fit.err"; fail "loadlaw fit $SCRATCH/one failed"; }

# ---- 2. three ranks over ssh, one on the shifted clock ----------------------
# A host whose cores are busy can shift one run's law (test_mpi.c has the
# figures): a miss of the law alone is run again, up to three runs; a wrong
# merge or clock misses every time, and those checks do not retry.
law_ok=0
for attempt in 1 2 3; do
  run=$SCRATCH/three-$attempt
  echo "three ranks (run $attempt): mpirun on the hub, ssh to c (ranks 0, 1) and b (rank 2, clock +${CLOCK_SHIFT_S} s)"
  waited mpi 60 "$LOADLAW" "${SWEEP[@]}" -o "$run" >"$run.out" 2>"$run.err"
  rc=$?
  [ $rc = 0 ] || { cat "$run.err"; fail "three ranks: exit $rc"; }
  python3 "$CHECK" merged "$run" "$CLOCK_SHIFT_S" mh-b || fail "three ranks: the merged run (above)"
  timeout 20 "$LOADLAW" fit "$run" --json >"$run.fit.json" 2>"$run.fit.err" ||
    { cat "$run.fit.err"; fail "loadlaw fit $run failed"; }
  python3 "$CHECK" law "$SCRATCH/one.fit.json" "$run.fit.json" && { law_ok=1; break; }
  echo "three ranks: the law missed in run $attempt of at most 3"
done
[ $law_ok = 1 ] || fail "three ranks: the law missed the one process's intervals in three runs"

# ---- 3. host b cut off during level 1 ----------------------------------------
run=$SCRATCH/partition
echo "partition: three ranks, rank 0 names a rank silent for ${SILENT_S} s; host b's link down ${PARTITION_S} s in level 1"
# mpirun leaves the ending to rank 0 (by default it kills the job when a
# process exits non-zero)
mpi 60 -x LOADLAW_MPI_WAIT_S=$SILENT_S --mca orte_abort_on_non_zero_status 0 \
  "$LOADLAW" "${SWEEP[@]}" -o "$run" >"$run.out" 2>"$run.err" &
mpi_pid=$!
cut=0
end=$((SECONDS + 45))
while [ $SECONDS -lt $end ] && kill -0 $mpi_pid 2>/dev/null; do
  if grep -q '"type":"level","level":1,' "$run/records.jsonl" 2>/dev/null; then
    sleep 0.3 # into the level: every rank has requests in flight
    ip -n "$NS_HUB" link set portb down && cut=1
    sleep "$PARTITION_S"
    ip -n "$NS_HUB" link set portb up
    break
  fi
  sleep 0.05
done
wait $mpi_pid
rc=$?
[ $cut = 1 ] || { cat "$run.err"; fail "partition: level 1 never started (exit $rc)"; }
[ $rc = 1 ] || { cat "$run.err"; fail "partition: exit $rc, want 1"; }
python3 "$CHECK" partition "$run" 2 1 || { cat "$run.err"; fail "partition: the run (above)"; }
echo "multihost: passed ($((SECONDS - t0)) s of sweeps)"
