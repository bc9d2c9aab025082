#!/usr/bin/env bash
# Lays out the container image's filesystem from a locally built `augur` binary exactly as the
# Dockerfile does, and runs `augur serve` from it as the image would run in the cluster:
# as uid/gid 65532 with no capabilities and no new privileges, on a read-only root
# filesystem in which only the data volume (/var/lib/augur) is writable. Checks that the
# bundled traces are found at their install path, that /readyz turns 200 (first-start
# training done) and a runtime prediction is served, that nothing but the data volume can be
# written, and that SIGTERM stops it cleanly. No container engine is needed: the image's
# Debian base is this machine's /usr and /etc (the image is Debian bookworm too), overlaid
# read-only with the image's own files, in a private mount namespace (unshare -m) + chroot
# + setpriv. Needs root (to mount); Linux with overlayfs.
#
#   scripts/image-layout.sh [PATH/TO/augur]     default: $CARGO_TARGET_DIR/debug/augur
#
# AUGUR_LAYOUT_SERVE_ARGS replaces the quick-training flags added to the image's command
# (default: --trees 30 --bootstrap-limit 3000); AUGUR_LAYOUT_TIMEOUT the seconds to wait for
# /readyz (default 240).
set -euo pipefail

die() {
    echo "image-layout: FAILED: $*" >&2
    exit 1
}

# The image's paths and user, as the Dockerfile sets them (checked against it below).
BIN=/usr/local/bin/augur
DATASETS=/usr/share/augur/datasets
DATA=/var/lib/augur
UID_GID=65532

if [ "${1:-}" = "--inside" ]; then
    # Second stage, in the private mount namespace: assemble the root and exec augur in it.
    root=$2 layer=$3 volume=$4 port=$5
    shift 5
    mount --bind -o ro "$root/skeleton" "$root/rootfs"
    mount --make-private "$root/rootfs"
    mount -t overlay overlay -o "ro,lowerdir=$layer/usr:/usr" "$root/rootfs/usr"
    mount -t overlay overlay -o "ro,lowerdir=$layer/etc:/etc" "$root/rootfs/etc"
    mount --rbind /dev "$root/rootfs/dev"
    mount -t proc proc "$root/rootfs/proc"
    mount --bind "$volume" "$root/rootfs$DATA"
    # what can be written inside: only the data volume
    for p in / /usr "$DATASETS" /etc /tmp; do
        if chroot "$root/rootfs" setpriv --reuid "$UID_GID" --regid "$UID_GID" --clear-groups \
            touch "$p/.write-probe" 2>/dev/null; then
            echo "image-layout: FAILED: $p is writable in the image root" >&2
            exit 1
        fi
    done
    chroot "$root/rootfs" setpriv --reuid "$UID_GID" --regid "$UID_GID" --clear-groups \
        touch "$DATA/.write-probe" || die "the data volume $DATA is not writable by $UID_GID"
    rm -f "$volume/.write-probe"
    exec chroot "$root/rootfs" setpriv --reuid "$UID_GID" --regid "$UID_GID" --clear-groups \
        --inh-caps=-all --bounding-set=-all --no-new-privs \
        env -i -C "$DATA" PATH=/usr/local/bin:/usr/bin:/bin AUGUR_LOG=info HOME="$DATA" \
        augur serve "--addr=127.0.0.1:$port" "--data-dir=$DATA" "$@"
fi

self=$(readlink -f "$0")
augur_bin=$(readlink -f "${1:-${CARGO_TARGET_DIR:-$(dirname "$self")/../target}/debug/augur}")
cd "$(dirname "$self")/.."
[ "$(id -u)" = 0 ] || die "needs root (mount namespace, overlay and bind mounts, chroot)"
for tool in unshare setpriv chroot mount curl python3; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
[ -x "$augur_bin" ] || die "no augur binary at $augur_bin (cargo build -p augur --bin augur, or pass its path)"

# The Dockerfile must lay out the same paths and user as this script.
for line in \
    "COPY --from=builder /out/augur $BIN" \
    "COPY datasets/data/ $DATASETS/" \
    "    && install -d -o $UID_GID -g $UID_GID -m 0750 $DATA" \
    "USER $UID_GID:$UID_GID" \
    "WORKDIR $DATA" \
    "ENV AUGUR_LOG=info" \
    'ENTRYPOINT ["augur"]' \
    "CMD [\"serve\", \"--addr=0.0.0.0:8080\", \"--data-dir=$DATA\"]"; do
    grep -qxF -- "$line" Dockerfile || die "the Dockerfile no longer has the line: $line"
done

root=$(mktemp -d /tmp/augur-image-layout.XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -rf "$root"
}
trap cleanup EXIT

# The image's own files (the Dockerfile's RUN user/data folder and COPY lines).
layer=$root/layer
install -D -m 0755 "$augur_bin" "$layer$BIN"
mkdir -p "$layer$DATASETS" "$layer/etc"
cp -R datasets/data/. "$layer$DATASETS/"
chmod -R a+rX,go-w "$layer/usr"
cp /etc/passwd /etc/group "$layer/etc/"
echo "augur:x:$UID_GID:$UID_GID::$DATA:/usr/sbin/nologin" >>"$layer/etc/passwd"
echo "augur:x:$UID_GID:" >>"$layer/etc/group"
# The root: Debian's merged-/usr links and empty mount points; the data volume.
skel=$root/skeleton
mkdir -p "$skel"/{usr,etc,dev,proc,tmp,var/lib/augur} "$root/rootfs"
ln -s usr/bin "$skel/bin"
ln -s usr/sbin "$skel/sbin"
ln -s usr/lib "$skel/lib"
[ -d /usr/lib64 ] && ln -s usr/lib64 "$skel/lib64"
chmod 1777 "$skel/tmp"
volume=$root/volume
install -d -o "$UID_GID" -g "$UID_GID" -m 0750 "$volume"
chmod 0755 "$root"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
read -r -a serve_args <<<"${AUGUR_LAYOUT_SERVE_ARGS:---trees 30 --bootstrap-limit 3000}"
log=$root/serve.log
unshare --mount --propagation private -- "$self" --inside "$root" "$layer" "$volume" "$port" \
    "${serve_args[@]}" >"$log" 2>&1 &
pid=$!
base=http://127.0.0.1:$port
echo "image-layout: augur serve (pid $pid) from $root/rootfs on $base"

fail() {
    # its own messages and errors first (the request log can drown them), then the end
    echo "---- augur serve: messages and errors" >&2
    sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -Ei 'augur serve|error|fail|panic' | grep -v 'uri=/readyz' | head -n 20 >&2 || true
    echo "---- augur serve: last lines" >&2
    sed 's/\x1b\[[0-9;]*m//g' "$log" | tail -n 15 >&2
    die "$*"
}

deadline=$((SECONDS + ${AUGUR_LAYOUT_TIMEOUT:-240}))
until [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/readyz")" = 200 ]; do
    kill -0 "$pid" 2>/dev/null || fail "augur serve exited before /readyz answered 200"
    if grep -q "training the models failed" "$log"; then
        fail "first-start training failed"
    fi
    [ "$SECONDS" -lt "$deadline" ] || fail "/readyz not 200 within ${AUGUR_LAYOUT_TIMEOUT:-240} s"
    sleep 2
done
echo "image-layout: /readyz 200 after ${SECONDS} s"

answer=$(curl -sf -X POST "$base/v1/predict/runtime" -H 'Content-Type: application/json' \
    -d '{"job":{"profile":{"num_gpus":8,"user":"alice","group":"vc1"}}}') \
    || fail "POST /v1/predict/runtime did not answer 200"
python3 -c '
import json, sys
a = json.loads(sys.argv[1])
r = a["prediction"]
assert a["kind"] == "runtime" and r["seconds"] > 0 and r["lower"] <= r["seconds"] <= r["upper"], a
print("image-layout: runtime prediction %.0f s in [%.0f, %.0f]" % (r["seconds"], r["lower"], r["upper"]))
' "$answer" || fail "unexpected prediction: $answer"

# the state went to the volume, owned by the image's user; the token is private
[ -f "$volume/auth-token" ] || fail "no auth-token in the data volume"
[ "$(stat -c '%u:%g %a' "$volume/auth-token")" = "$UID_GID:$UID_GID 600" ] \
    || fail "auth-token is $(stat -c '%u:%g %a' "$volume/auth-token"), not $UID_GID:$UID_GID 600"
owners=$(find "$volume" -mindepth 1 -printf '%u:%g\n' | sort -u)
[ "$owners" = "$UID_GID:$UID_GID" ] || fail "files in the data volume owned by: $owners"
status=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/v1/autoscaler/pause" \
    -H "Authorization: Bearer $(cat "$volume/auth-token")")
[ "$status" = 200 ] || fail "POST /v1/autoscaler/pause with the generated token answered $status"

kill -TERM "$pid"
code=0
wait "$pid" || code=$?
pid=
[ "$code" = 0 ] || fail "augur serve exited with $code on SIGTERM"
grep -q "augur serve: stopped" "$log" || fail "no clean stop in the log"
echo "image-layout: OK (non-root $UID_GID, read-only root, data in $DATA, clean SIGTERM)"
