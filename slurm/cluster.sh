#!/usr/bin/env bash
# A real SLURM cluster on this machine, for tests and for trying the SLURM launcher.
#
#   bash slurm/cluster.sh start             # one node: write slurm.conf, start munged + slurmctld + slurmd
#   bash slurm/cluster.sh start --nodes 2   # two nodes: one slurmd daemon per node, on this same host
#   bash slurm/cluster.sh status            # daemons, node states and queue; exit 0 only when usable
#   bash slurm/cluster.sh stop              # cancel all jobs, stop the daemons this script started
#
# One node (the default) is `hostname -s` with the CPU count, topology and memory that `slurmd -C`
# measures. With --nodes N > 1 the nodes are loopscale-n1 .. loopscale-nN: N slurmd daemons on this
# host (`slurmd -N NAME`), each on its own port with an equal share of the CPUs and memory, and an
# /etc/hosts line that resolves the names to 127.0.0.1 (Lightning takes the rendezvous address,
# MASTER_ADDR, from the first name in SLURM_NODELIST). All nodes are in one partition (`debug`, the
# default). `start` with another node count than the running cluster's restarts the daemons with
# the new configuration, but only while no job is queued or running.
#
# It runs in containers without a writable cgroup tree: process tracking reads /proc
# (proctrack/linuxproc) and tasks are not pinned (task/none). There is no slurmdbd, so `sacct` does
# not work (submitit logs "Bypassing sacct error" and carries on).
#
# The configuration goes to /etc/slurm/slurm.conf, where every Slurm command looks by default, so
# sbatch/squeue/Hydra's launcher work from any shell without SLURM_CONF. The script refuses to
# overwrite a slurm.conf it did not write (a real cluster's). State, logs and pid files live in
# $LOOPSCALE_SLURM_STATE_DIR (default /var/spool/loopscale-slurm); they are kept across stop/start so
# job ids keep increasing (submitit folders are named by job id).
#
# Needs root (it starts slurmd, which must run as root) and the packages slurm/install.sh installs.
set -euo pipefail

# slurmctld, slurmd and munged live in /usr/sbin, not always on a non-login PATH.
PATH="$PATH:/usr/sbin:/sbin"

STATE_DIR=${LOOPSCALE_SLURM_STATE_DIR:-/var/spool/loopscale-slurm}
CONF=/etc/slurm/slurm.conf
GRES_CONF=/etc/slurm/gres.conf
MARKER="# Written by loopscale slurm/cluster.sh; overwritten on each start."
PARTITION=debug
HOST=$(hostname -s)
START_TIMEOUT_S=${LOOPSCALE_SLURM_START_TIMEOUT_S:-60}
NODES=1 # start --nodes N
# Names of the nodes of a multi-node cluster: loopscale-n1, loopscale-n2, ...
MULTI_PREFIX=loopscale-n
# Node i (from 0) of a multi-node cluster listens on this + i (6818 is Slurm's default SlurmdPort).
SLURMD_BASE_PORT=6818
# Ends the /etc/hosts line this script adds for the multi-node names.
HOSTS_MARKER="# loopscale slurm/cluster.sh"

CTLD_PID=$STATE_DIR/slurmctld.pid
MUNGED_PID=/run/munge/munged.pid
# Present when this script (not the system) started munged, so `stop` only stops its own daemon.
MUNGED_OURS=$STATE_DIR/munged.started-by-cluster.sh

log() { echo "cluster.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# One slurmd per node: slurm.conf names its pid and log files by node (%n).
slurmd_pidfile() { echo "$STATE_DIR/slurmd-$1.pid"; }
slurmd_logfile() { echo "$STATE_DIR/log/slurmd-$1.log"; }

# True when the pid file names a live process.
pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

# Names of the nodes of an N-node cluster, one a line.
node_names() {
    if (($1 == 1)); then
        echo "$HOST"
    else
        seq -f "$MULTI_PREFIX%g" "$1"
    fi
}

# Nodes of the configuration in place (slurm.conf's NodeName lines), one a line; empty without one.
configured_nodes() {
    if [[ -e $CONF ]]; then sed -nE 's/^NodeName=([^ ]+) .*/\1/p' "$CONF"; fi
}

# State of one node as sinfo prints it (idle, mixed, allocated, down*, drained, ...), empty if unreachable.
node_state() { sinfo -h -n "$1" -o %T 2>/dev/null | head -n1 || true; }

state_usable() {
    case "$1" in
        idle | mixed | allocated | completing) return 0 ;;
        *) return 1 ;;
    esac
}

# True when every configured node has a live slurmd and slurmctld calls it usable.
nodes_usable() {
    local node nodes
    nodes=$(configured_nodes)
    [[ -n $nodes ]] || return 1
    for node in $nodes; do
        pid_alive "$(slurmd_pidfile "$node")" && state_usable "$(node_state "$node")" || return 1
    done
}

cluster_up() { pid_alive "$CTLD_PID" && nodes_usable; }

# --- configuration -------------------------------------------------------------------------

# GPUs, when the machine has NVIDIA ones, become a gres so `--gpus-per-node` works as on a real
# cluster. Prints the count (0 without GPUs or without nvidia-smi).
gpu_count() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
    else
        echo 0
    fi
}

write_conf() {
    if [[ -e $CONF ]] && ! grep -qxF "$MARKER" "$CONF"; then
        die "$CONF exists and was not written by this script; refusing to overwrite a real cluster's configuration"
    fi
    # `slurmd -C` prints the node line slurmd itself will register with (CPUs, sockets, cores,
    # threads, RealMemory); declaring more than that makes slurmctld drain the node.
    local hw cpus mem gpus slurm_user
    hw=$(slurmd -C | head -n1 | sed -E 's/^NodeName=[^ ]+ //')
    cpus=$(sed -nE 's/.*\bCPUs=([0-9]+).*/\1/p' <<<"$hw")
    mem=$(sed -nE 's/.*\bRealMemory=([0-9]+).*/\1/p' <<<"$hw")
    [[ -n $cpus && -n $mem ]] || die "could not read CPUs/RealMemory from 'slurmd -C': $hw"
    gpus=$(gpu_count)
    # Debian's package creates a `slurm` user for the controller; fall back to root elsewhere.
    slurm_user=root
    id slurm >/dev/null 2>&1 && slurm_user=slurm

    local name names
    names=$(node_names "$NODES" | paste -sd, -)
    install -d -m 0755 "$STATE_DIR" "$STATE_DIR/slurmd"
    for name in $(node_names "$NODES"); do install -d -m 0755 "$STATE_DIR/slurmd/$name"; done
    install -d -m 0755 -o "$slurm_user" "$STATE_DIR/ctld" "$STATE_DIR/log"
    install -d -m 0755 /etc/slurm

    local gres_lines="" node_gres=""
    if ((gpus > 0)); then
        gres_lines="GresTypes=gpu"
        node_gres="Gres=gpu:$gpus"
        {
            echo "$MARKER"
            echo "Name=gpu File=/dev/nvidia[0-$((gpus - 1))]"
        } >"$GRES_CONF"
    elif [[ -e $GRES_CONF ]] && grep -qxF "$MARKER" "$GRES_CONF"; then
        rm -f "$GRES_CONF"
    fi

    local node_lines
    if ((NODES == 1)); then
        node_lines="NodeName=$HOST $hw $node_gres State=UNKNOWN"
    else
        # Several slurmd daemons on this host (slurmd -N NAME): each node its own port and an equal
        # share of the CPUs and memory (a node may declare less than the hardware slurmd finds).
        local i
        node_lines=$(for ((i = 0; i < NODES; i++)); do
            echo "NodeName=$MULTI_PREFIX$((i + 1)) NodeHostname=$HOST NodeAddr=127.0.0.1" \
                "Port=$((SLURMD_BASE_PORT + i)) CPUs=$((cpus / NODES)) RealMemory=$((mem / NODES)) State=UNKNOWN"
        done)
    fi

    cat >"$CONF" <<EOF
$MARKER
ClusterName=loopscale
SlurmctldHost=$HOST
SlurmUser=$slurm_user
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# No cgroups needed: track job processes through /proc, do not bind tasks to cores.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# No slurmdbd: no accounting, so sacct reports an error (submitit tolerates it).
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# Schedule cores and memory, so several small jobs share a node like on a real cluster; a job
# that does not ask for memory gets its share of the node per CPU rather than the whole node.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((mem / cpus))
SchedulerType=sched/backfill
# Schedule a submitted batch job at once (default: within batch_sched_delay=3 s), so tests wait less.
SchedulerParameters=batch_sched_delay=0
# Reject at submission a job that can never run here (e.g. more CPUs than a node has), instead of
# leaving it PENDING forever and a Hydra multirun waiting on it.
EnforcePartLimits=ALL
$gres_lines
# A requeued or cancelled job gets SIGKILL 5 s after SIGTERM (default 30) to keep tests quick;
# finished jobs stay visible to squeue/scontrol for 10 minutes (there is no sacct to ask later).
KillWait=5
MinJobAge=600
InactiveLimit=0
# After a restart of the daemons the nodes come back by themselves instead of staying DOWN.
ReturnToService=2
MailProg=$(type -P true)
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/slurmd/%n
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$(slurmd_pidfile %n)
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdLogFile=$(slurmd_logfile %n)
SlurmctldDebug=info
SlurmdDebug=info
$node_lines
PartitionName=$PARTITION Nodes=$names Default=YES MaxTime=INFINITE State=UP
EOF
    log "wrote $CONF: $NODES node(s) $names on $HOST ($cpus CPUs, ${mem} MB, $gpus GPUs), partition $PARTITION"
}

# /etc/hosts resolves the multi-node names to 127.0.0.1; one node (this host's name) needs no line.
# Rewritten in place: in containers /etc/hosts is often a bind mount that a rename cannot replace.
write_hosts() {
    local kept
    kept=$(grep -vF "$HOSTS_MARKER" /etc/hosts || true)
    {
        [[ -n $kept ]] && echo "$kept"
        if (($1 > 1)); then
            echo "127.0.0.1 $(node_names "$1" | paste -sd' ' -) $HOSTS_MARKER"
        fi
    } >/etc/hosts
}

# --- daemons -------------------------------------------------------------------------------

start_munged() {
    if munge_works; then
        return 0 # the system's (or an earlier start's) munged is serving; reuse it
    fi
    [[ -s /etc/munge/munge.key ]] || die "/etc/munge/munge.key missing; run slurm/install.sh"
    install -d -o munge -g munge -m 0755 /run/munge
    # munged refuses to run as root with the key owned by munge; run it as its own user.
    runuser -u munge -- munged
    touch "$MUNGED_OURS"
    for _ in $(seq 50); do
        munge_works && return 0
        sleep 0.1
    done
    die "munged started but munge -n | unmunge fails"
}

# Start a daemon (the command after the first three arguments) that forks into the background and
# writes its pid file; show its log on failure.
start_daemon() {
    local name=$1 pidfile=$2 logfile=$3
    shift 3
    if pid_alive "$pidfile"; then
        return 0
    fi
    if ! "$@"; then
        tail -n 30 "$logfile" >&2 2>/dev/null || true
        die "$name failed to start (log: $logfile)"
    fi
    for _ in $(seq 50); do
        pid_alive "$pidfile" && return 0
        sleep 0.1
    done
    tail -n 30 "$logfile" >&2 2>/dev/null || true
    die "$name did not stay up (log: $logfile)"
}

# SIGTERM, wait, then SIGKILL, for each "name:pidfile" given: only the processes named in our pid
# files. All get SIGTERM at once, since each takes a second or two to shut down.
stop_pidfiles() {
    local entry pid pids=() names=()
    for entry in "$@"; do
        pid_alive "${entry#*:}" || continue
        pid=$(cat "${entry#*:}")
        kill -TERM "$pid" 2>/dev/null || true
        pids+=("$pid")
        names+=("${entry%%:*}")
    done
    local i
    for i in "${!pids[@]}"; do
        for _ in $(seq 100); do
            kill -0 "${pids[i]}" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "${pids[i]}" 2>/dev/null; then
            log "${names[i]} (${pids[i]}) ignored SIGTERM for 10 s; sending SIGKILL"
            kill -KILL "${pids[i]}" 2>/dev/null || true
        else
            log "stopped ${names[i]} (${pids[i]})"
        fi
    done
}

# "slurmd(NODE):PIDFILE" for every slurmd pid file in the state dir (whatever the node count was).
slurmd_entries() {
    local f
    for f in "$STATE_DIR"/slurmd-*.pid "$STATE_DIR"/slurmd.pid; do
        [[ -e $f ]] || continue
        f=${f##*/}
        echo "slurmd:$STATE_DIR/$f"
    done
}

# Run one real job end to end (munge credentials, slurmstepd, output), so `start` returns only when
# jobs run. It also absorbs the controller's first scheduling pass, which comes ~3 s after startup.
probe_job() {
    local job state="" wrap=true
    # With several nodes the probe runs a step on each (srun), so every slurmd has run a task.
    ((NODES > 1)) && wrap="srun true"
    # sbatch --wait would poll with growing sleeps (seconds); ask scontrol a few times a second.
    job=$(cd /tmp && sbatch --parsable --job-name=cluster-sh-probe --output=/dev/null --time=1 \
        --nodes="$NODES" --wrap "$wrap") || die "probe job: sbatch failed"
    for _ in $(seq 300); do
        state=$(scontrol show job "$job" 2>/dev/null | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p')
        case "$state" in
            COMPLETED) return 0 ;;
            PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.2 ;;
            *) break ;;
        esac
    done
    tail -n 20 "$STATE_DIR/log/slurmctld.log" "$STATE_DIR"/log/slurmd-*.log >&2 || true
    die "probe job $job did not complete (state: ${state:-unknown})"
}

# Jobs Slurm still has pending, running or completing (squeue's default), space separated.
queued_jobs() { squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ' || true; }

cmd_start() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (slurmd runs as root)"
    for cmd in slurmctld slurmd sbatch sinfo scontrol munged munge; do
        command -v "$cmd" >/dev/null || die "$cmd not found; run 'bash slurm/install.sh' first"
    done
    # Checked before anything is stopped, so a bad --nodes leaves a running cluster alone.
    local cpus wanted
    cpus=$(slurmd -C | sed -nE 's/.*\bCPUs=([0-9]+).*/\1/p' | head -n1)
    ((NODES <= cpus)) || die "--nodes $NODES: this machine has $cpus CPUs, so at most $cpus nodes of one CPU or more"
    ((NODES == 1 || $(gpu_count) == 0)) || die "--nodes $NODES: GPUs cannot be split between nodes of one machine; use --nodes 1"
    wanted=$(node_names "$NODES" | paste -sd' ' -)
    if cluster_up; then
        if [[ $(configured_nodes | paste -sd' ' -) == "$wanted" ]]; then
            log "already running ($NODES node(s): $wanted)"
            return 0
        fi
        local jobs
        jobs=$(queued_jobs)
        [[ -z ${jobs// /} ]] ||
            die "running with nodes $(configured_nodes | paste -sd' ' -), not $wanted, and jobs $jobs are queued or" \
                "running; wait for them (or 'stop', which cancels them) before changing the node count"
        log "restarting with $NODES node(s) ($wanted)"
    fi
    # Daemons left half-started by an earlier attempt (or of another node count) would hold the
    # ports; restart from clean.
    local entries
    mapfile -t entries < <(slurmd_entries)
    stop_pidfiles "${entries[@]}" slurmctld:"$CTLD_PID"

    write_conf
    write_hosts "$NODES"
    start_munged
    start_daemon slurmctld "$CTLD_PID" "$STATE_DIR/log/slurmctld.log" slurmctld
    # slurmctld restores the nodes' last state (e.g. idle) from its state files before the slurmd
    # daemons have registered; a node is only ready once slurmctld has heard from its slurmd.
    local slurmd_started node
    slurmd_started=$(date +%Y-%m-%dT%H:%M:%S)
    for node in $wanted; do
        start_daemon "slurmd -N $node" "$(slurmd_pidfile "$node")" "$(slurmd_logfile "$node")" slurmd -N "$node"
    done

    local deadline=$((SECONDS + START_TIMEOUT_S)) state registered ready
    while ((SECONDS < deadline)); do
        ready=0
        for node in $wanted; do
            state=$(node_state "$node")
            registered=$(scontrol show node "$node" 2>/dev/null | sed -nE 's/.*SlurmdStartTime=([^ ]+).*/\1/p')
            case "$state" in
                idle | mixed | allocated | completing)
                    # ISO timestamps in the same time zone compare correctly as strings.
                    if [[ $registered > $slurmd_started || $registered == "$slurmd_started" ]]; then
                        ready=$((ready + 1))
                    fi
                    ;;
                down | drained | draining | drain*)
                    # A node that was DOWN in the saved state (e.g. killed daemons) may need a nudge.
                    scontrol update NodeName="$node" State=RESUME 2>/dev/null || true
                    ;;
            esac
        done
        if ((ready == NODES)); then
            probe_job
            log "up: $NODES node(s) ($wanted) in partition $PARTITION (${SECONDS}s)"
            return 0
        fi
        sleep 0.5
    done
    sinfo -N -l >&2 || true
    tail -n 20 "$STATE_DIR/log/slurmctld.log" "$STATE_DIR"/log/slurmd-*.log >&2 || true
    die "nodes $wanted not all idle after ${START_TIMEOUT_S}s"
}

cmd_stop() {
    if pid_alive "$CTLD_PID"; then
        # Jobs left running would keep their slurmstepd processes alive after slurmd exits.
        local jobs
        jobs=$(queued_jobs)
        if [[ -n ${jobs// /} ]]; then
            log "cancelling jobs: $jobs"
            # shellcheck disable=SC2086  # one argument per job id
            scancel $jobs 2>/dev/null || true
            for _ in $(seq 40); do
                # squeue lists pending, running and completing jobs by default.
                [[ -z $(squeue -h -o %A 2>/dev/null) ]] && break
                sleep 0.5
            done
        fi
    fi
    local daemons
    mapfile -t daemons < <(slurmd_entries)
    daemons+=(slurmctld:"$CTLD_PID")
    [[ -e $MUNGED_OURS ]] && daemons+=(munged:"$MUNGED_PID")
    stop_pidfiles "${daemons[@]}"
    rm -f "$MUNGED_OURS"
    write_hosts 1
    log "stopped"
}

cmd_status() {
    local rc=0 node entries=(slurmctld:"$CTLD_PID" munged:"$MUNGED_PID")
    for node in $(configured_nodes); do entries+=("slurmd -N $node:$(slurmd_pidfile "$node")"); done
    for d in "${entries[@]}"; do
        if pid_alive "${d#*:}"; then
            echo "${d%%:*}: running (pid $(cat "${d#*:}"))"
        else
            echo "${d%%:*}: not running"
            [[ ${d%%:*} == munged ]] && munge_works && continue # a system munged without our pid file
            rc=1
        fi
    done
    # Without slurmctld, sinfo would retry for its MessageTimeout before giving up.
    if pid_alive "$CTLD_PID" && nodes_usable; then
        sinfo -N -o "%N %P %T %c %m %G"
        squeue
    else
        echo "nodes $(configured_nodes | paste -sd' ' -): not usable$(pid_alive "$CTLD_PID" || echo " (no slurmctld)")"
        rc=1
    fi
    return $rc
}

usage() {
    echo "usage: $0 start [--nodes N] | stop | status" >&2
    exit 2
}

action=${1:-}
shift || true
while (($#)); do
    case "$1" in
        --nodes)
            [[ $action == start && ${2:-} =~ ^[1-9][0-9]*$ ]] || usage
            NODES=$2
            shift 2
            ;;
        --nodes=*)
            NODES=${1#--nodes=}
            [[ $action == start && $NODES =~ ^[1-9][0-9]*$ ]] || usage
            shift
            ;;
        *) usage ;;
    esac
done

case "$action" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *) usage ;;
esac
