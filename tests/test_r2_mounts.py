"""R2 mounts (issue 59): a fleet on any cloud with a secret store mounts a central R2 bucket
with S3 credentials made from an account API token scoped to that bucket (the key id is the
token's id, the secret the SHA-256 of its value: developers.cloudflare.com/r2/api/tokens/),
kept as a secret in the fleet's own cloud (Secrets Manager, Secret Manager, Key Vault) that
the nodes read with their own identity. The node script never puts a key on a command line
nor in a log (canary values)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_buckets import ACCOUNT, BACKENDS

from gpufleet.cli import cli
from gpufleet.compile import hostsetup
from gpufleet.compile.compiler import compile_inputs
from gpufleet.compile.design import BucketMountDesign
from gpufleet.compile.hostsetup import render_bucket_mounts
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

from planutil import by_type, plan_files, write

CENTRAL = f"""buckets:
  - name: acme-central
    cloud: r2
    region: enam
    account_id: {ACCOUNT}
    mounts: [{{fleet: FLEET, path: /mnt/central, read_only: false}}]
"""
SA = "nodes@p1.iam.gserviceaccount.com"
WITH_SA = BACKENDS.replace("    project_id: p1\n",
                           f"    project_id: p1\n    vm_service_account: {SA}\n")


def _report(tmp: Path, fleet: str, backends: str = BACKENDS) -> dict[str, Any]:
    tmp.mkdir(parents=True, exist_ok=True)
    name = fleet.split("name: ")[1].split("\n")[0]
    return plan_files([write(tmp, "b.yml", backends + CENTRAL.replace("FLEET", name)),
                       write(tmp, "f.yml", fleet)])


def test_gcp_nodes_read_r2_credentials_from_secret_manager(tmp_path: Path) -> None:
    report = _report(tmp_path, "type: fleet\nname: g4\nnodes: 1\nbackends: [gcp]\n"
                     "regions: [us-central1]\nresources:\n  gpu: L4:1\n", WITH_SA)
    [token] = by_type(report, "cloudflare:index/accountToken:AccountToken")
    # a read-write mount: Item Write (read, write and list objects in the one bucket)
    assert token["inputs"]["policies"][0]["permissionGroups"] == [
        {"id": "2efd5506f9c8494dacb1fa10a3e7d5b6"}]
    [secret] = by_type(report, "gcp:secretmanager/secret:Secret")
    assert secret["inputs"]["secretId"] == "gpufleet-g4-r2-acme-central"
    [version] = by_type(report, "gcp:secretmanager/secretVersion:SecretVersion")
    assert set(version["inputs"]["secretData"]) == {"secret"}
    [member] = by_type(report, "gcp:secretmanager/secretIamMember:SecretIamMember")
    assert member["inputs"]["role"] == "roles/secretmanager.secretAccessor" and \
        member["inputs"]["member"] == f"serviceAccount:{SA}"


def test_azure_nodes_read_r2_credentials_from_their_fleets_key_vault(tmp_path: Path) -> None:
    report = _report(tmp_path, "type: fleet\nname: nd\nnodes: 2\nplacement: cluster\n"
                     "backends: [azure]\nresources:\n  gpu: H100:8\n")
    [vault] = by_type(report, "azure-native:keyvault:Vault")
    props = vault["inputs"]["properties"]
    assert vault["inputs"]["vaultName"].startswith("gfkv") and \
        len(vault["inputs"]["vaultName"]) == 24
    assert props["enableRbacAuthorization"] is True and props["tenantId"]
    [secret] = by_type(report, "azure-native:keyvault:Secret")
    assert secret["inputs"]["secretName"] == "gpufleet-nd-r2-acme-central"
    assert set(secret["inputs"]["properties"]) == {"secret"}  # the value taints it all
    grants = [g for g in by_type(report, "azure-native:authorization:RoleAssignment")
              if g["inputs"]["roleDefinitionId"].endswith(
                  "4633458b-17de-408a-b874-0445c86b69e6")]  # Key Vault Secrets User
    assert len(grants) == 1 and grants[0]["inputs"]["scope"] == "nd-vault-id"  # a scale set


def test_nodes_without_a_secret_store_do_not_mount_r2_and_are_told(tmp_path: Path) -> None:
    backends = BACKENDS + "  - type: lambda\n"
    fleet = ("type: fleet\nname: lc\nnodes: 1\nbackends: [lambda]\n"
             "resources:\n  gpu: H100:1\n")
    tmp_path.mkdir(exist_ok=True)
    files = [write(tmp_path, "b.yml", backends + CENTRAL.replace("FLEET", "lc")),
             write(tmp_path, "f.yml", fleet)]
    compiled = compile_inputs(validate_paths(files).inputs, load_catalog())
    [warned] = [d for d in compiled.diagnostics if d.code == "V029"]
    assert "no secret store to read R2's credentials from (lambda)" in warned.message
    assert all(p.buckets == () for p in compiled.plans)


CREDS = json.dumps({"access_key_id": "kid", "secret_access_key": "CANARY-R2"})
ANSWERS = {  # what the fake curl answers each store (by URL)
    "aws": {"api/token": "imds-tok", "security-credentials/": "role",
            "security-credentials/role": json.dumps(
                {"AccessKeyId": "AKID", "SecretAccessKey": "CANARY-SK",
                 "Token": "CANARY-STS"}),
            "secretsmanager.": json.dumps({"SecretString": CREDS})},
    "gcp": {"service-accounts/default/token": json.dumps({"access_token": "CANARY-GTOK"}),
            "secretmanager.googleapis.com": json.dumps(
                {"payload": {"data": base64.b64encode(CREDS.encode()).decode()}})},
    "azure": {"oauth2/token": json.dumps({"access_token": "CANARY-ATOK"}),
              ".vault.azure.net/secrets": json.dumps({"value": CREDS})},
}


def _host(tmp: Path, store: str, deny: bool = False) -> Any:
    from hostutil import Host

    host = Host(tmp, ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime", "dcgmi"),
                GPUFLEET_MOUNT_SECONDS="0", GPUFLEET_RETRY_SECONDS="0")
    answers = ANSWERS[store]
    cases = "\n".join(f"    *{k}*) printf '%s' '{v}' ;;" for k, v in
                      sorted(answers.items(), key=lambda kv: -len(kv[0])))
    host.stub({
        "mountpoint": 'grep -qxF -- "$2" "$STATE/mounted" 2> /dev/null',
        "mount-s3": 'echo "$*" >> "$STATE/mount-s3.log"\n'
                    'echo "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" >> "$STATE/mount-env.log"\n'
                    'echo "$2" >> "$STATE/mounted"',
        "curl": 'echo "$*" >> "$STATE/curl.log"\nurl=""\n'
                'for a in "$@"; do case "$a" in -K) cat >> "$STATE/curl-config.log" ;; '
                'http*) url="$a" ;; esac; done\n'
                + ('case "$url" in *secretsmanager.*|*secretmanager.*|*.vault.azure.net/secrets*) '
                   'exit 22 ;; esac\n' if deny else "")
                + f'case "$url" in\n{cases}\n    *) exit 7 ;;\nesac',
        "ls": "true",
        # the real one (the script reads JSON), without site-packages as a node's python3
        # has none: a third of the start-up, and the denied case starts it 240 times
        "python3": f'exec "{sys.executable}" -S "$@"',
    }, ("sleep", "base64"))
    return host


@pytest.mark.parametrize(("store", "where"), [("aws", "us-east-1"), ("gcp", "p1"),
                                              ("azure", "gfkv0123456789abcdef0123")])
def test_the_node_reads_the_secret_with_its_identity_and_mounts_r2(
        tmp_path: Path, store: str, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the denied node gives up after 3 tries here, not the half hour's 60 (each starts the
    # credential chain: 6.8 s of the aws case before)
    monkeypatch.setattr(hostsetup, "MOUNT_TRIES", 3)
    mount = BucketMountDesign("acme-central", "r2", "mountpoint-s3", "/mnt/central", False,
                              "enam", account=ACCOUNT, secret="gpufleet-f-r2-acme-central",
                              secret_where=where)
    script = render_bucket_mounts((mount,), store)
    assert '[ "$n" -ge 3 ] && return 1' in script
    host = _host(tmp_path / "ok", store)
    assert host.run(script).returncode == 0
    assert "acme-central=/mnt/central" in (
        host.root / "var/lib/gpufleet/buckets-ready").read_text()
    [call] = host.log("mount-s3")
    assert call.startswith("acme-central ") and call.endswith(
        f"--region auto --allow-other --allow-delete --allow-overwrite --endpoint-url "
        f"https://{ACCOUNT}.r2.cloudflarestorage.com --force-path-style")
    assert host.log("mount-env") == ["kid:CANARY-R2"]  # the credentials reach mount-s3 only
    argv = "\n".join(host.log("curl"))
    logs = "".join(p.read_text() for p in (host.root / "var/log").glob("*.log"))
    for canary in ("CANARY-R2", "CANARY-SK", "CANARY-STS", "CANARY-GTOK", "CANARY-ATOK"):
        assert canary not in argv and canary not in logs, canary
    assert where in argv  # the store the secret lives in: region, project or vault
    denied = _host(tmp_path / "denied", store, deny=True)
    assert denied.run(script).returncode == 0  # the node still boots
    failed = (denied.root / "var/lib/gpufleet/buckets-failed").read_text()
    assert f"cannot read the credentials of R2 bucket acme-central (secret " \
           f"gpufleet-f-r2-acme-central in {store} {where}" in failed
    assert not denied.log("mount-s3")


def test_the_policy_pack_holds_bucket_grants_to_the_mount() -> None:
    from test_policy import args, fires

    from gpufleet.objectstores import R2_READ_GROUP

    rule = "bucket-access-scoped"
    wide = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::acme/*"}]})
    star = json.dumps({"Statement": {"Effect": "Allow", "Action": "s3:GetObject",
                                     "Resource": "*"}})
    any_secret = json.dumps({"Statement": [{"Effect": "Allow",
                                            "Action": "secretsmanager:GetSecretValue",
                                            "Resource": "arn:aws:secretsmanager:us-east-1:*:"
                                                        "secret:*"}]})
    token = {"policies": [{"effect": "allow", "permissionGroups": [{"id": R2_READ_GROUP}],
                           "resources": json.dumps({"com.cloudflare.api.account.a": "*"})}]}
    bad = [("aws:iam/rolePolicy:RolePolicy", {"policy": wide}),
           ("aws:iam/rolePolicy:RolePolicy", {"policy": star}),
           ("aws:iam/rolePolicy:RolePolicy", {"policy": any_secret}),
           ("aws:iam/rolePolicy:RolePolicy", {"policy": "{not json"}),
           ("gcp:storage/bucketIAMMember:BucketIAMMember",
            {"member": "allUsers", "role": "roles/storage.objectViewer"}),
           ("gcp:secretmanager/secretIamMember:SecretIamMember",
            {"member": f"serviceAccount:{SA}", "role": "roles/secretmanager.admin"}),
           ("azure-native:authorization:RoleAssignment",
            {"roleDefinitionId": "/subscriptions/s/providers/Microsoft.Authorization/"
                                 "roleDefinitions/b7e6dc6d-f1e8-4753-8033-0f276bb0955b"}),
           ("cloudflare:index/accountToken:AccountToken", token)]
    for typ, props in bad:
        assert fires(rule, args(typ, props)), (typ, props)


def test_what_gpufleet_grants_passes_its_own_rule(tmp_path: Path) -> None:
    from test_policy import args, fires

    reports = [_report(tmp_path / "g", "type: fleet\nname: g4\nnodes: 1\nbackends: [gcp]\n"
                       "regions: [us-central1]\nresources:\n  gpu: L4:1\n", WITH_SA),
               _report(tmp_path / "a", "type: fleet\nname: nd\nnodes: 2\nplacement: cluster\n"
                       "backends: [azure]\nresources:\n  gpu: H100:8\n"),
               _report(tmp_path / "w", "type: fleet\nname: p5\nnodes: 2\nplacement: cluster\n"
                       "backends: [aws]\nregions: [us-east-1]\nresources:\n  gpu: H100:8\n")]
    checked = 0
    for report in reports:
        for r in report.resources:
            if fires("bucket-access-scoped", args(r["type"], r["inputs"])):
                raise AssertionError(r["name"])
            checked += r["type"].endswith(("RolePolicy", "IamMember", "RoleAssignment",
                                           "AccountToken"))
    assert checked >= 6


LAYOUT = f"""buckets:
  - name: acme-central
    cloud: r2
    region: enam
    account_id: {ACCOUNT}
    expected_gb: 20000
    mounts: [{{fleet: FLEET, path: /mnt/central, transfer: {{read_gb_per_month: 1000}}}}]
  - name: CACHE
    cloud: CLOUD
    region: REGION
    cache_of: acme-central
    expected_gb: 20000
    mounts: [{{fleet: FLEET, path: /mnt/data, transfer: {{read_gb_per_month: 50000}}}}]
"""


@pytest.mark.parametrize(("cloud", "fleet", "region", "backends"), [
    ("gcp", "type: fleet\nname: g4\nnodes: 2\nbackends: [gcp]\nregions: [us-central1]\n"
            "resources:\n  gpu: L4:1\n", "us-central1", WITH_SA),
    ("azure", "type: fleet\nname: nd\nnodes: 2\nplacement: cluster\nbackends: [azure]\n"
              "regions: [eastus]\nresources:\n  gpu: H100:8\n", "eastus", BACKENDS)])
def test_a_central_r2_bucket_and_a_regional_cache_end_to_end(
        tmp_path: Path, cloud: str, fleet: str, region: str, backends: str) -> None:
    """The issue's layout on GCP and Azure (AWS: tests/test_buckets.py): both buckets, the
    nodes' access to each, both mounts in the boot script, a transfer line per path."""
    name = fleet.split("name: ")[1].split("\n")[0]
    cache = f"acmecache{cloud}"
    text = LAYOUT.replace("FLEET", name).replace("CACHE", cache).replace(
        "CLOUD", cloud).replace("REGION", region)
    tmp_path.mkdir(exist_ok=True)
    paths = [write(tmp_path, "b.yml", backends + text), write(tmp_path, "f.yml", fleet)]
    report = plan_files(paths)
    assert by_type(report, "cloudflare:index/r2Bucket:R2Bucket")
    assert by_type(report, "cloudflare:index/accountToken:AccountToken")
    compiled = compile_inputs(validate_paths(paths).inputs, load_catalog())
    assert not [d for d in compiled.diagnostics if d.code in ("V028", "V029")]
    [plan] = compiled.plans
    assert sorted(m.bucket for m in plan.buckets) == ["acme-central", cache]
    from gpufleet.compile.hostsetup import node_script

    script = node_script(plan) or ""
    assert "acme-central r2" not in script and "acme-central mountpoint-s3 enam" in script
    assert f"{cache} {'gcsfuse' if cloud == 'gcp' else 'blobfuse2'} {region} /mnt/data" in script
    r = CliRunner().invoke(cli, ["plan", *paths])
    assert r.exit_code == 0, r.output
    assert f"transfer: 1,000 GB/month read by {name} (r2 enam <-> {cloud} {region}): " \
           "$0.00/month" in r.stdout  # R2 charges no egress
    assert f"transfer: 50,000 GB/month read by {name} (in one region): $0.00/month" \
        in r.stdout
