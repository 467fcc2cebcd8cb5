#!/usr/bin/env bash
# Pack this machine's OpenSSH server (sshd, ssh-keygen, and the shared libraries they load beyond the C
# library) into DEST, for a GPU host that has no sshd (the lent ones): bench/fleet_scale.py then
# runs real OpenSSH servers there with DEST/bin first on PATH.
#
#     bash bench/carry_openssh.sh DEST
#
# DEST/bin/sshd and DEST/bin/ssh-keygen are wrappers that run the real programs (DEST/real/) with
# DEST/lib as their library path: sshd re-executes itself by the absolute path it was started with,
# and its sessions get a fresh environment, so the probes it starts use the host's own libraries.
# On the GPU host, as root, sshd also needs its privilege separation user and directory:
#     id sshd || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd; mkdir -p /run/sshd
set -euo pipefail
dest=${1:?usage: bash bench/carry_openssh.sh DEST}
mkdir -p "$dest/bin" "$dest/real" "$dest/lib"
for program in "$(command -v sshd || echo /usr/sbin/sshd)" "$(command -v ssh-keygen)"; do
    cp -L "$program" "$dest/real/"
    # Every library but the C library's own parts (the host's are newer or the same ABI).
    ldd "$program" | awk '/=> \// {print $3}' | while read -r lib; do
        case "$(basename "$lib")" in
            libc.so.*|libm.so.*|libresolv.so.*|libpthread.so.*|libdl.so.*|ld-linux*) ;;
            *) cp -L "$lib" "$dest/lib/" ;;
        esac
    done
    name=$(basename "$program")
    printf '#!/bin/sh\nhere=$(cd "$(dirname "$0")/.." && pwd)\nLD_LIBRARY_PATH="$here/lib" exec "$here/real/%s" "$@"\n' \
        "$name" >"$dest/bin/$name"
    chmod +x "$dest/bin/$name"
done
"$dest/bin/sshd" -V 2>&1 | head -1
