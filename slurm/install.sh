#!/usr/bin/env bash
# Install what the one-node test cluster (slurm/cluster.sh) needs: Debian's slurm-wlm
# (slurmctld, slurmd and the client commands) and munge (the authentication daemon Slurm uses).
#
# Idempotent: when every needed command is already on PATH it installs nothing, so CI can call it
# on every run. Needs root (apt-get, /etc/munge). Debian/Ubuntu only; on other systems install the
# same two packages with the system's package manager.
set -euo pipefail

# The commands slurm/cluster.sh and the tests call. slurmctld/slurmd live in /usr/sbin, which is
# not always on a non-login PATH, so look there explicitly.
needed=(sbatch srun squeue sinfo scontrol scancel slurmctld slurmd munged munge unmunge)
PATH="$PATH:/usr/sbin:/sbin"

missing=()
for cmd in "${needed[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done

if ((${#missing[@]} == 0)); then
    echo "install.sh: slurm-wlm and munge already installed; nothing to do"
else
    echo "install.sh: missing ${missing[*]}; installing slurm-wlm and munge with apt-get"
    if [[ $(id -u) -ne 0 ]]; then
        echo "install.sh: must run as root (apt-get install)" >&2
        exit 1
    fi
    # noninteractive: the packages ask no questions, but debconf would otherwise try a terminal.
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge
fi

# The munge package generates /etc/munge/munge.key in its postinst; in some images (or after a
# manual cleanup) it is missing and munged refuses to start, so create one. The key only has to be
# shared by the machines of one cluster; here there is one machine.
key=/etc/munge/munge.key
if [[ ! -s $key ]]; then
    echo "install.sh: creating $key"
    install -d -o munge -g munge -m 0700 /etc/munge
    dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
    chown munge:munge "$key"
    chmod 0400 "$key"
fi

# sbatch --version would need a slurm.conf; the daemons print their version without one.
echo "install.sh: ok ($(slurmd -V), $(munge --version | awk '{print $1}'))"
