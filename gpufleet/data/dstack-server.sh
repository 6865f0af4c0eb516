#!/bin/bash
# gpufleet control plane: the dstack server @@VERSION@@ on 127.0.0.1:@@PORT@@ (reached through
# an SSH tunnel to this bastion, never in clear on a network), run by systemd as @@USER@@, on
# the bastion inside the fleet's network. Idempotent.
@@PRELUDE@@
mkdir -p "$R/etc/systemd/system" "$R/opt"
VENV="$R/opt/dstack"
if ! "$VENV/bin/dstack" --version 2>/dev/null | grep -q "@@VERSION@@"; then
  say "installing dstack @@VERSION@@"
  retry apt_get update || fail "apt update failed"
  retry apt_get install python3-venv || fail "apt cannot install python3-venv"
  python3 -m venv "$VENV" || fail "cannot create the virtualenv $VENV"
  retry "$VENV/bin/pip" install -q "dstack[all]==@@VERSION@@" || fail "cannot install dstack @@VERSION@@"
fi
cat > "$R/etc/systemd/system/dstack-server.service" <<UNIT
[Unit]
Description=dstack server (gpufleet control plane)
After=network-online.target
Wants=network-online.target

[Service]
User=@@USER@@
ExecStart=/opt/dstack/bin/dstack server --host 127.0.0.1 --port @@PORT@@
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload || fail "systemd cannot reload"
systemctl enable --now dstack-server || fail "the dstack-server service does not start"
printf 'status=ready\nversion=@@VERSION@@\nport=@@PORT@@\nuser=@@USER@@\n' > "$R@@READY@@"
rm -f "$R@@FAILED@@"
say "ready: dstack @@VERSION@@ on 127.0.0.1:@@PORT@@ (ssh -N -L @@PORT@@:127.0.0.1:@@PORT@@ to this host); its admin token: sudo journalctl -u dstack-server | grep -i token"
