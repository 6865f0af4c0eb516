#!/bin/bash
# gpufleet: mount this fleet's shared filesystems (run at every boot; idempotent).
# Each line of MOUNTS: name kind target path options. Installs the client where the image lacks it
# (Lustre from the cloud's own client repository, NFS from Ubuntu), adds an /etc/fstab entry
# and mounts, retrying while the filesystem is still being created.
@@PRELUDE@@
BACKEND=@@BACKEND@@
MOUNTS='@@MOUNTS@@'
# shellcheck source=/dev/null
. "$R/etc/os-release" 2>/dev/null || true
CODENAME="${VERSION_CODENAME:-jammy}"

lustre_client() {
  command -v mount.lustre > /dev/null && return 0
  command -v apt-get > /dev/null || fail "no apt-get: install the Lustre client in the image"
  K="$R/usr/share/keyrings"
  mkdir -p "$K" "$R/etc/apt/sources.list.d"
  case "$BACKEND" in
    aws)
      retry curl -fsSL https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc -o "$R@@DIR@@/lustre.asc" || fail "cannot download the FSx client key"
      gpg --batch --yes --dearmor -o "$K/fsx-ubuntu-public-key.gpg" "$R@@DIR@@/lustre.asc" || fail "cannot read the FSx client key"
      echo "deb [signed-by=/usr/share/keyrings/fsx-ubuntu-public-key.gpg] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu $CODENAME main" > "$R/etc/apt/sources.list.d/fsxlustreclientrepo.list"
      PKGS="lustre-client-modules-$(uname -r)" ;;
    gcp)
      retry curl -fsSL https://us-apt.pkg.dev/doc/repo-signing-key.gpg -o "$R@@DIR@@/lustre.gpg" || fail "cannot download the Managed Lustre client key"
      gpg --batch --yes --dearmor -o "$K/lustre-client.gpg" "$R@@DIR@@/lustre.gpg" || fail "cannot read the Managed Lustre client key"
      echo "deb [signed-by=/usr/share/keyrings/lustre-client.gpg] https://us-apt.pkg.dev/projects/lustre-client-binaries lustre-client-ubuntu-$CODENAME main" > "$R/etc/apt/sources.list.d/lustre-client.list"
      PKGS="lustre-client-modules-$(uname -r) lustre-client-utils" ;;
    azure)
      retry curl -fsSL https://packages.microsoft.com/keys/microsoft.asc -o "$R@@DIR@@/lustre.asc" || fail "cannot download Microsoft's key"
      gpg --batch --yes --dearmor -o "$K/microsoft-amlfs.gpg" "$R@@DIR@@/lustre.asc" || fail "cannot read Microsoft's key"
      ARCH=$(dpkg --print-architecture 2> /dev/null || echo amd64)
      echo "deb [arch=$ARCH signed-by=/usr/share/keyrings/microsoft-amlfs.gpg] https://packages.microsoft.com/repos/amlfs-$CODENAME/ $CODENAME main" > "$R/etc/apt/sources.list.d/amlfs.list"
      PKGS="" ;;
  esac
  retry apt_get update || fail "apt update failed after adding the Lustre client repository"
  if [ -z "$PKGS" ]; then
    # the newest AMLFS client built for this kernel: each amlfs-lustre-client-VERSION
    # metapackage has one version per kernel it was built for, named by the kernel release
    KERNEL=$(uname -r)
    for P in $(apt-cache search --names-only '^amlfs-lustre-client-' | cut -d' ' -f1 | sort -rV); do
      if apt-cache madison "$P" | cut -d'|' -f2 | tr -d ' ' | grep -qxF "$KERNEL"; then
        PKGS="$P=$KERNEL"; break
      fi
    done
    [ -n "$PKGS" ] || fail "no amlfs-lustre-client package in Microsoft's repository is built for kernel $KERNEL: use an image with a supported kernel (learn.microsoft.com/azure/azure-managed-lustre/client-install-plan)"
  fi
  # shellcheck disable=SC2086  # several packages
  retry apt_get install $PKGS || fail "cannot install the Lustre client ($PKGS) for kernel $(uname -r)"
}

nfs_client() {
  command -v mount.nfs > /dev/null && return 0
  retry apt_get update || fail "apt update failed"
  retry apt_get install nfs-common || fail "cannot install nfs-common"
}

DONE=""
while read -r NAME KIND TARGET MNT OPTS; do
  [ -n "$NAME" ] || continue
  case "$KIND" in
    lustre) lustre_client; TYPE=lustre ;;
    nfs) nfs_client; TYPE=nfs ;;
    *) fail "filesystem $NAME: unknown kind $KIND" ;;
  esac
  mkdir -p "$R$MNT"
  if ! grep -qs " $MNT $TYPE " "$R/etc/fstab"; then
    echo "$TARGET $MNT $TYPE $OPTS 0 0" >> "$R/etc/fstab"
  fi
  if ! mountpoint -q "$R$MNT"; then
    # a new filesystem can take minutes to accept clients: retry for about half an hour
    n=1
    until mount "$R$MNT"; do
      [ "$n" -ge @@MOUNT_TRIES@@ ] && fail "cannot mount $NAME ($TARGET) at $MNT"
      sleep "${GPUFLEET_MOUNT_SECONDS:-30}"; n=$((n + 1))
    done
  fi
  say "mounted $NAME ($KIND, $TARGET) at $MNT"
  DONE="$DONE$NAME=$MNT
"
done <<< "$MOUNTS"
printf 'status=ready\n%s' "$DONE" > "$R@@READY@@"
rm -f "$R@@FAILED@@"
