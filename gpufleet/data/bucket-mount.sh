#!/bin/bash
# gpufleet: mount this fleet's buckets with each store's FUSE client, reached with the node's
# own identity (run at every boot; idempotent). Each line of BUCKETS: name client region path
# mode(ro|rw) account. Installs the client where the image lacks it, from its vendor:
# Mountpoint for Amazon S3 (docs.aws.amazon.com/AmazonS3/latest/userguide/
# mountpoint-installation.html: the .deb and its signature), Cloud Storage FUSE
# (cloud.google.com/storage/docs/cloud-storage-fuse/install: Google's gcsfuse apt
# repository), BlobFuse2 (learn.microsoft.com/azure/storage/blobs/blobfuse2-how-to-deploy:
# Microsoft's package repository).
@@PRELUDE@@
BUCKETS='@@BUCKETS@@'
# shellcheck source=/dev/null
. "$R/etc/os-release" 2>/dev/null || true
CODENAME="${VERSION_CODENAME:-jammy}"
K="$R/usr/share/keyrings"
mkdir -p "$K" "$R/etc/apt/sources.list.d" "$R/etc/gpufleet"

mountpoint_client() {
  command -v mount-s3 > /dev/null && return 0
  case "$(dpkg --print-architecture 2> /dev/null)" in arm64) A=arm64 ;; *) A=x86_64 ;; esac
  U="https://s3.amazonaws.com/mountpoint-s3-release/latest/$A/mount-s3.deb"
  retry curl -fsSL "$U" -o "$R@@DIR@@/mount-s3.deb" || fail "cannot download Mountpoint for Amazon S3 ($U)"
  retry curl -fsSL "$U.asc" -o "$R@@DIR@@/mount-s3.deb.asc" || fail "cannot download the Mountpoint package's signature"
  retry curl -fsSL https://s3.amazonaws.com/mountpoint-s3-release/public_keys/KEYS -o "$R@@DIR@@/mountpoint-keys" || fail "cannot download Mountpoint's signing key"
  gpg --batch --import "$R@@DIR@@/mountpoint-keys" > /dev/null 2>&1 || fail "cannot read Mountpoint's signing key"
  gpg --batch --verify "$R@@DIR@@/mount-s3.deb.asc" "$R@@DIR@@/mount-s3.deb" > /dev/null 2>&1 || fail "the Mountpoint package's signature does not verify"
  retry apt_get install "$R@@DIR@@/mount-s3.deb" || fail "cannot install Mountpoint for Amazon S3"
}

gcsfuse_client() {
  command -v gcsfuse > /dev/null && return 0
  retry curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg -o "$R@@DIR@@/gcsfuse.gpg" || fail "cannot download Google's apt key"
  gpg --batch --yes --dearmor -o "$K/gcsfuse.gpg" "$R@@DIR@@/gcsfuse.gpg" || fail "cannot read Google's apt key"
  echo "deb [signed-by=/usr/share/keyrings/gcsfuse.gpg] https://packages.cloud.google.com/apt gcsfuse-$CODENAME main" > "$R/etc/apt/sources.list.d/gcsfuse.list"
  retry apt_get update || fail "apt update failed after adding the gcsfuse repository"
  retry apt_get install gcsfuse || fail "cannot install Cloud Storage FUSE (gcsfuse)"
}

blobfuse2_client() {
  command -v blobfuse2 > /dev/null && return 0
  U="https://packages.microsoft.com/config/ubuntu/${VERSION_ID:-22.04}/packages-microsoft-prod.deb"
  retry curl -fsSL "$U" -o "$R@@DIR@@/packages-microsoft-prod.deb" || fail "cannot download Microsoft's repository package ($U)"
  dpkg -i "$R@@DIR@@/packages-microsoft-prod.deb" > /dev/null || fail "cannot add Microsoft's package repository"
  retry apt_get update || fail "apt update failed after adding Microsoft's repository"
  retry apt_get install blobfuse2 fuse3 || fail "cannot install BlobFuse2"
}

# An R2 bucket's S3 credentials, read with the node's own identity from its cloud's secret
# store (@@SECRETS@@): Secrets Manager's GetSecretValue signed with the instance role's keys
# (curl --aws-sigv4), Secret Manager's versions.access or Key Vault's get-secret with a
# metadata-server token. Keys and tokens go to curl on its standard input (-K -), never on a
# command line another user could read; the credentials reach mount-s3 in its environment.
field() { python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]: v = v[k]
print(v)' "$@"; }
secret_aws() {
  T=$(curl -fsS -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 300" http://169.254.169.254/latest/api/token) || return 1
  I=http://169.254.169.254/latest/meta-data/iam/security-credentials
  ROLE=$(curl -fsS -H "X-aws-ec2-metadata-token: $T" "$I/") || return 1
  C=$(curl -fsS -H "X-aws-ec2-metadata-token: $T" "$I/$ROLE") || return 1
  printf 'user = "%s:%s"\nheader = "x-amz-security-token: %s"\n' "$(printf '%s' "$C" | field AccessKeyId)" \
    "$(printf '%s' "$C" | field SecretAccessKey)" "$(printf '%s' "$C" | field Token)" |
    curl -fsS -K - --aws-sigv4 "aws:amz:$2:secretsmanager" -H "X-Amz-Target: secretsmanager.GetSecretValue" \
      -H "Content-Type: application/x-amz-json-1.1" -d "{\"SecretId\":\"$1\"}" "https://secretsmanager.$2.amazonaws.com/" |
    field SecretString
}
secret_gcp() {
  T=$(curl -fsS -H "Metadata-Flavor: Google" http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token | field access_token) || return 1
  printf 'header = "Authorization: Bearer %s"\n' "$T" |
    curl -fsS -K - "https://secretmanager.googleapis.com/v1/projects/$2/secrets/$1/versions/latest:access" |
    field payload data | base64 -d
}
secret_azure() {
  T=$(curl -fsS -H "Metadata: true" "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fvault.azure.net" | field access_token) || return 1
  printf 'header = "Authorization: Bearer %s"\n' "$T" |
    curl -fsS -K - "https://$2.vault.azure.net/secrets/$1?api-version=7.4" | field value
}
secret_none() { return 1; }
read_secret() { C=$("secret_@@SECRETS@@" "$1" "$2") && [ -n "$C" ] && printf '%s' "$C"; }

# a new bucket, or its grant, can take minutes to reach the node: retry for about half an hour
mount_until() {
  n=1
  until "$@"; do
    [ "$n" -ge @@MOUNT_TRIES@@ ] && return 1
    sleep "${GPUFLEET_MOUNT_SECONDS:-30}"; n=$((n + 1))
  done
}

DONE=""
while read -r NAME CLIENT REGION MNT MODE ACCOUNT SECRET WHERE <&3; do  # fd 3: no command eats the list
  [ -n "$NAME" ] || continue
  mkdir -p "$R$MNT"
  if ! mountpoint -q "$R$MNT"; then
    case "$CLIENT" in
      mountpoint-s3)
        mountpoint_client
        # R2 signs requests for the region "auto" (developers.cloudflare.com/r2/api/s3/api/)
        if [ "$SECRET" = - ]; then set -- --region "$REGION"; else set -- --region auto; fi
        set -- "$@" --allow-other
        if [ "$MODE" = ro ]; then set -- "$@" --read-only; else set -- "$@" --allow-delete --allow-overwrite; fi
        if [ "$SECRET" = - ]; then
          mount_until mount-s3 "$NAME" "$R$MNT" "$@" || fail "cannot mount bucket $NAME at $MNT (mount-s3: the instance profile may lack access)"
        else  # R2: its S3 endpoint, with the credentials the secret holds
          CREDS=$(mount_until read_secret "$SECRET" "$WHERE") || fail "cannot read the credentials of R2 bucket $NAME (secret $SECRET in @@SECRETS@@ $WHERE: the node's identity may lack access)"
          AWS_ACCESS_KEY_ID=$(printf '%s' "$CREDS" | field access_key_id) AWS_SECRET_ACCESS_KEY=$(printf '%s' "$CREDS" | field secret_access_key) \
            mount_until mount-s3 "$NAME" "$R$MNT" "$@" --endpoint-url "https://$ACCOUNT.r2.cloudflarestorage.com" --force-path-style ||
            fail "cannot mount R2 bucket $NAME at $MNT (mount-s3: the token may lack access to it)"
          unset CREDS
        fi ;;
      gcsfuse)
        gcsfuse_client
        set -- --implicit-dirs -o allow_other
        [ "$MODE" = ro ] && set -- "$@" -o ro
        mount_until gcsfuse "$@" "$NAME" "$R$MNT" || fail "cannot mount bucket $NAME at $MNT (gcsfuse: the service account may lack access)" ;;
      blobfuse2)
        blobfuse2_client
        C="$R/etc/gpufleet/blobfuse2-$NAME.yaml"
        printf 'allow-other: true\ncomponents: [libfuse, block_cache, attr_cache, azstorage]\nblock_cache:\n  block-size-mb: 16\nattr_cache:\n  timeout-sec: 120\nazstorage:\n  type: block\n  account-name: %s\n  container: %s\n  mode: msi\n' "$ACCOUNT" "$NAME" > "$C"
        set -- --config-file="$C"
        [ "$MODE" = ro ] && set -- "$@" -o ro
        mount_until blobfuse2 mount "$R$MNT" "$@" || fail "cannot mount bucket $NAME at $MNT (blobfuse2: the managed identity may lack access)" ;;
      *) fail "bucket $NAME: unknown client $CLIENT" ;;
    esac
  fi
  # the node can list it: the mount works with the node's identity
  ls "$R$MNT" > /dev/null 2>&1 || fail "bucket $NAME is mounted at $MNT but cannot be listed"
  say "mounted bucket $NAME ($CLIENT, $MODE) at $MNT"
  DONE="$DONE$NAME=$MNT
"
done 3<<< "$BUCKETS"
printf 'status=ready\n%s' "$DONE" > "$R@@READY@@"
rm -f "$R@@FAILED@@"
