"""Buckets as code (issue 59, first part): the backends file's `buckets:` in Amazon S3 (and S3
Express One Zone directory buckets), Cloud Storage, Azure Blob Storage and Cloudflare R2,
each name held to its store's own rule (docs.aws.amazon.com/AmazonS3/latest/userguide/
bucketnamingrules.html and directory-bucket-naming-rules.html, cloud.google.com/storage/docs/
buckets#naming, learn.microsoft.com/azure/azure-resource-manager/management/resource-name-
rules#microsoftstorage, developers.cloudflare.com/r2/buckets/create-buckets/); built private,
encrypted and protected; storage and the declared transfer on the bill, priced per path from
the price table (R2: no egress, developers.cloudflare.com/r2/pricing/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_policy import args, fires

from gpufleet.cli import cli
from gpufleet.compile.compiler import compile_inputs
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

from planutil import TEST_KEY, by_type, plan_files, write

SUB = "11111111-2222-3333-4444-555555555555"
ACCOUNT = "0123456789abcdef0123456789abcdef"
BACKENDS = f"""access:
  ssh_public_key: {TEST_KEY}
backends:
  - type: aws
    ssh_cidrs: [203.0.113.0/24]
  - type: gcp
    project_id: p1
  - type: azure
    subscription_id: {SUB}
    tenant_id: 00000000-0000-0000-0000-000000000000
"""
FLEET = ("type: fleet\nname: p5\nnodes: 2\nplacement: cluster\nbackends: [aws]\n"
         "regions: [us-east-1]\nresources:\n  gpu: H100:8\n")
# the layout the guidance recommends: a central copy in R2 (no egress fees), a regional cache
# where the fleet runs, fast checkpoints in S3 Express One Zone, and a bucket read across clouds
BUCKETS = f"""buckets:
  - name: acme-datasets
    cloud: r2
    region: enam
    account_id: {ACCOUNT}
    expected_gb: 20000
    mounts:
      - {{fleet: p5, path: /mnt/central, transfer: {{read_gb_per_month: 1000}}}}
  - name: acme-datasets-use1
    cloud: aws
    region: us-east-1
    cache_of: acme-datasets
    expected_gb: 20000
    versioning: true
    lifecycle: {{prefix: tmp/, expire_days: 7, noncurrent_days: 3}}
    mounts:
      - {{fleet: p5, path: /mnt/data, transfer: {{read_gb_per_month: 50000}}}}
  - name: acme-ckpt--use1-az4--x-s3
    cloud: aws
    region: us-east-1
    zone: use1-az4
    class: express
    expected_gb: 2000
    lifecycle: {{expire_days: 14}}
    mounts:
      - {{fleet: p5, path: /mnt/ckpt, read_only: false,
          transfer: {{write_gb_per_month: 4000}}}}
  - name: acme-eu-copy
    cloud: aws
    region: eu-west-1
    mounts:
      - {{fleet: p5, path: /mnt/eu, transfer: {{read_gb_per_month: 1000}}}}
  - name: acme-data-gcp
    cloud: gcp
    region: us-central1
    versioning: true
    lifecycle: {{prefix: checkpoints/, expire_days: 30}}
    mounts:
      - {{fleet: p5, path: /mnt/gcs, transfer: {{read_gb_per_month: 10000,
                                                 write_gb_per_month: 100}}}}
  - name: acmeblobs
    cloud: azure
    region: eastus
    class: premium
    expected_gb: 1000
"""


def _files(tmp: Path, buckets: str = BUCKETS) -> list[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    return [write(tmp, "b.yml", BACKENDS + buckets), write(tmp, "p5.yml", FLEET)]


def test_each_store_builds_its_bucket_private_encrypted_and_protected(tmp_path: Path) -> None:
    report = plan_files(_files(tmp_path))
    [s3] = [r for r in by_type(report, "aws:s3/bucket:Bucket")
            if r["name"] == "acme-datasets-use1"]
    assert s3["inputs"]["bucket"] == "acme-datasets-use1" and s3["protect"]
    [block] = [r["inputs"] for r in by_type(
        report, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
        if r["name"] == "acme-datasets-use1-public-access"]
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy",
                                          "ignorePublicAcls", "restrictPublicBuckets"))
    sse = by_type(report, "aws:s3/bucketServerSideEncryptionConfiguration:"
                          "BucketServerSideEncryptionConfiguration")
    assert len(sse) == 2 and {r["inputs"]["rules"][0]["applyServerSideEncryptionByDefault"][
        "sseAlgorithm"] for r in sse} == {"AES256"}  # both general purpose buckets
    [life] = [r["inputs"]["rules"][0] for r in by_type(
        report, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
        if r["name"] == "acme-datasets-use1-lifecycle"]
    assert (life["filter"]["prefix"], life["expiration"]["days"],
            life["noncurrentVersionExpiration"]["noncurrentDays"]) == ("tmp/", 7, 3)
    [directory] = by_type(report, "aws:s3/directoryBucket:DirectoryBucket")
    assert directory["inputs"]["location"] == {"name": "use1-az4", "type": "AvailabilityZone"}
    assert directory["protect"]
    [gcs] = by_type(report, "gcp:storage/bucket:Bucket")
    g = gcs["inputs"]
    assert (g["publicAccessPrevention"], g["uniformBucketLevelAccess"], g["location"],
            g["versioning"]["enabled"], gcs["protect"]) == ("enforced", True, "US-CENTRAL1",
                                                             True, True)
    [account] = by_type(report, "azure-native:storage:StorageAccount")
    a = account["inputs"]
    assert (a["kind"], a["sku"]["name"], a["allowBlobPublicAccess"],
            a["networkRuleSet"]["defaultAction"], account["protect"]) == (
        "BlockBlobStorage", "Premium_LRS", False, "Deny", True)
    assert len(a["accountName"]) <= 24 and a["accountName"].isalnum()
    [container] = by_type(report, "azure-native:storage:BlobContainer")
    assert container["inputs"]["publicAccess"] == "None" and container["protect"]
    [r2] = by_type(report, "cloudflare:index/r2Bucket:R2Bucket")
    assert r2["inputs"] == {"accountId": ACCOUNT, "name": "acme-datasets", "location": "enam",
                            "storageClass": "Standard"} and r2["protect"]
    assert report.violations == ()
    # the same YAML, the same names
    again = plan_files(_files(tmp_path / "again"))
    assert sorted(r["urn"] for r in report.resources) == \
        sorted(r["urn"] for r in again.resources)


def test_the_bill_prices_storage_and_each_transfer_path(tmp_path: Path) -> None:
    report = plan_files(_files(tmp_path))

    def monthly(bucket: str, part: str) -> float:
        return round(report.bills[f"bucket:{bucket}"].part(part) * 730, 2)
    assert monthly("acme-datasets", "storage") == round(
        20000 * 0.015 + 1000 * 1024 / 8 / 1000 * 0.00036, 2)  # R2 Standard, its GETs
    assert monthly("acme-datasets", "network") == 0  # R2: no egress
    assert monthly("acme-datasets-use1", "storage") == round(
        20000 * 0.023 + 50000 * 1024 / 8 / 1000 * 0.0004, 2)  # S3 Standard, 6.4M GETs
    assert monthly("acme-datasets-use1", "network") == 0  # one region
    assert monthly("acme-ckpt--use1-az4--x-s3", "storage") == 2000 * 0.11
    assert monthly("acme-eu-copy", "network") == 1000 * 0.02  # across AWS regions
    # read out of Cloud Storage to AWS: Google's egress; written from AWS: AWS's egress
    assert monthly("acme-data-gcp", "network") == 10000 * 0.12 + 100 * 0.09
    assert "storage of bucket acme-data-gcp (declare `expected_gb`)" in \
        report.bills["bucket:acme-data-gcp"].unpriced
    # requests: one per client part where the table has the store's price; said otherwise
    assert "~512,000 PUT requests/month: the GB written by p5, 8 MiB a request (a floor: a " \
           "small file is one or more) (no express request price for aws in the table)" in \
        report.bills["bucket:acme-ckpt--use1-az4--x-s3"].unpriced
    assert "requests of the 100 GB/month written by p5 (not through a mount gpufleet " \
           "builds)" in report.bills["bucket:acme-data-gcp"].unpriced
    r = CliRunner().invoke(cli, ["plan", *_files(tmp_path / "cli")])
    assert "transfer: 10,000 GB/month read by p5 (gcp us-central1 <-> aws us-east-1): " \
           "$1,200.00/month" in r.stdout
    assert "(but the buckets' declared `transfer:`, priced above)" in r.stdout


def test_reading_across_clouds_or_regions_warns_and_names_the_cache(tmp_path: Path) -> None:
    compiled = compile_inputs(validate_paths(_files(tmp_path)).inputs, load_catalog())
    warned = {d.message.split("bucket '")[1].split("'")[0]: d for d in compiled.diagnostics
              if d.code == "V028"}
    assert sorted(warned) == ["acme-data-gcp", "acme-eu-copy"]  # not R2, not the cache
    assert "leaves Cloud Storage for the internet" in warned["acme-data-gcp"].message
    assert "a bucket with `cache_of: acme-data-gcp`" in str(warned["acme-data-gcp"].hint)
    assert "crosses regions" in warned["acme-eu-copy"].message


@pytest.mark.parametrize(("bucket", "code", "words"), [
    ("  - {name: bad-s3alias, cloud: aws, region: us-east-1}", "V024", "Amazon S3 bucket name"),
    ("  - {name: my-google-data, cloud: gcp, region: us-central1}", "V024",
     "Cloud Storage bucket name"),
    ("  - {name: double--dash, cloud: azure, region: eastus}", "V024", "Azure Blob Storage"),
    ("  - {name: under_score, cloud: r2, region: enam}", "V024", "Cloudflare R2 bucket name"),
    ("  - {name: x-data, cloud: gcp, region: us-central1, class: express}", "V024",
     "has no class 'express'"),
    ("  - {name: ckpt--use1-az4--x-s3, cloud: aws, region: us-east-1, class: express}", "V026",
     "needs `zone`"),
    ("  - {name: ckpt, cloud: aws, region: us-east-1, class: express, zone: use1-az4}", "V026",
     "--<zone id>--x-s3"),
    ("  - {name: ckpt--use1-az4--x-s3, cloud: aws, region: us-east-1, class: express, "
     "zone: use1-az4, versioning: true}", "V026", "keeps no versions"),
    ("  - {name: data-x, cloud: r2, region: us-east-1}", "V026", "not an R2 location hint"),
    ("  - {name: data-x, cloud: aws, region: us-east-1, cache_of: nowhere}", "V025",
     "names no other bucket"),
    ("  - {name: data-x, cloud: aws, region: us-east-1, mounts: [{fleet: ghost}]}", "V027",
     "fleet 'ghost'"),
    ("  - {name: data-x, cloud: aws, region: us-east-1, mounts: [{fleet: p5, path: /m}]}\n"
     "  - {name: data-y, cloud: aws, region: us-east-1, mounts: [{fleet: p5, path: /m}]}",
     "V027", "mounts two buckets at /m"),
])
def test_a_bucket_its_store_would_refuse_is_named_where_it_is_written(
        tmp_path: Path, bucket: str, code: str, words: str) -> None:
    r = CliRunner().invoke(cli, ["plan", *_files(tmp_path, "buckets:\n" + bucket + "\n")])
    assert r.exit_code == 1, r.output
    assert f"error[{code}]" in r.output and words in r.output and "b.yml:" in r.output


def test_the_policy_pack_catches_a_public_or_unprotected_bucket() -> None:
    bad: dict[str, Any] = {
        "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": {
            "blockPublicAcls": True, "blockPublicPolicy": False, "ignorePublicAcls": True,
            "restrictPublicBuckets": True},
        "gcp:storage/bucket:Bucket": {"publicAccessPrevention": "inherited",
                                      "uniformBucketLevelAccess": True},
        "azure-native:storage:BlobContainer": {"publicAccess": "Blob"},
    }
    for typ, props in bad.items():
        assert fires("storage-private-encrypted-protected", args(typ, props, protect=True)), typ
    # a bucket of any store without `protect`: `pulumi destroy` would delete its data
    assert fires("storage-private-encrypted-protected",
                 args("cloudflare:index/r2Bucket:R2Bucket", {"name": "x"}))
    good = args("gcp:storage/bucket:Bucket", {"publicAccessPrevention": "enforced",
                                               "uniformBucketLevelAccess": True}, protect=True)
    assert fires("storage-private-encrypted-protected", good) == []


# --- mounts and access -------------------------------------------------------------------

MOUNTS = f"""buckets:
  - name: acme-use1
    cloud: aws
    region: us-east-1
    mounts: [{{fleet: p5, path: /mnt/data}}]
  - name: acme-ckpt--use1-az4--x-s3
    cloud: aws
    region: us-east-1
    zone: use1-az4
    class: express
    mounts: [{{fleet: p5, path: /mnt/ckpt, read_only: false}}]
  - name: acme-central
    cloud: r2
    region: enam
    account_id: {ACCOUNT}
    mounts: [{{fleet: p5, path: /mnt/central}}]
"""


def test_an_aws_fleet_mounts_its_buckets_with_an_instance_profile_scoped_to_them(
        tmp_path: Path) -> None:
    import json

    report = plan_files(_files(tmp_path, MOUNTS))
    [policy] = by_type(report, "aws:iam/rolePolicy:RolePolicy")
    statements = json.loads(policy["inputs"]["policy"])["Statement"]
    assert {"Action": "s3:ListBucket", "Effect": "Allow",
            "Resource": "arn:aws:s3:::acme-use1"} in statements
    assert {"Action": ["s3:GetObject"], "Effect": "Allow",
            "Resource": "arn:aws:s3:::acme-use1/*"} in statements  # read-only: no writes
    [express] = [s for s in statements if s["Action"] == "s3express:CreateSession"]
    assert express["Resource"] == \
        "arn:aws:s3express:us-east-1:*:bucket/acme-ckpt--use1-az4--x-s3" and \
        "Condition" not in express  # a read-write mount: ReadWrite sessions
    [profile] = by_type(report, "aws:iam/instanceProfile:InstanceProfile")
    [template] = by_type(report, "aws:ec2/launchTemplate:LaunchTemplate")
    assert template["inputs"]["iamInstanceProfile"]["name"] == \
        f"{profile['name']}-mock" or template["inputs"]["iamInstanceProfile"]["name"]
    # R2: a token scoped to the one bucket (Item Read for a read-only mount), its S3
    # credentials a secret in Secrets Manager that the nodes' role alone may read
    [token] = by_type(report, "cloudflare:index/accountToken:AccountToken")
    [policy_doc] = token["inputs"]["policies"]
    assert json.loads(policy_doc["resources"]) == {
        f"com.cloudflare.edge.r2.bucket.{ACCOUNT}_default_acme-central": "*"}
    assert policy_doc["permissionGroups"] == [{"id": "6a018a9f2fc74eb6b293b0c548f38b39"}]
    [secret] = by_type(report, "aws:secretsmanager/secret:Secret")
    assert secret["inputs"]["name"] == "gpufleet-p5-r2-acme-central"
    [version] = by_type(report, "aws:secretsmanager/secretVersion:SecretVersion")
    assert set(version["inputs"]["secretString"]) == {"secret"}  # kept as a Pulumi secret
    assert {"Action": "secretsmanager:GetSecretValue", "Effect": "Allow",
            "Resource": "arn:aws:secretsmanager:us-east-1:*:secret:"
                        "gpufleet-p5-r2-acme-central-??????"} in statements
    compiled = compile_inputs(validate_paths(_files(tmp_path / "c", MOUNTS)).inputs,
                              load_catalog())
    assert not [d for d in compiled.diagnostics if d.code == "V029"]
    [plan] = compiled.plans
    assert sorted((m.bucket, m.client, m.read_only, m.zonal, m.secret or "")
                  for m in plan.buckets) == [
        ("acme-central", "mountpoint-s3", True, False, "gpufleet-p5-r2-acme-central"),
        ("acme-ckpt--use1-az4--x-s3", "mountpoint-s3", False, True, ""),
        ("acme-use1", "mountpoint-s3", True, False, "")]
    # without the Cloudflare account the endpoint is unknown: said, not silently dropped
    no_account = compile_inputs(validate_paths(_files(
        tmp_path / "n", MOUNTS.replace(f"    account_id: {ACCOUNT}\n", ""))).inputs,
        load_catalog())
    [not_mounted] = [d for d in no_account.diagnostics if d.code == "V029"]
    assert "acme-central" in not_mounted.message and "account_id" in not_mounted.message


def test_a_gcp_fleet_grants_its_service_account_and_needs_one(tmp_path: Path) -> None:
    fleet = ("type: fleet\nname: g4\nnodes: 1\nbackends: [gcp]\nregions: [us-central1]\n"
             "resources:\n  gpu: L4:1\n")
    bucket = ("buckets:\n  - {name: acme-gcs, cloud: gcp, region: us-central1, mounts: "
              "[{fleet: g4, path: /mnt/gcs, read_only: false}]}\n")
    with_sa = BACKENDS.replace("    project_id: p1\n", "    project_id: p1\n"
                               "    vm_service_account: nodes@p1.iam.gserviceaccount.com\n")
    tmp_path.mkdir(exist_ok=True)
    report = plan_files([write(tmp_path, "b.yml", with_sa + bucket),
                         write(tmp_path, "g4.yml", fleet)])
    [member] = by_type(report, "gcp:storage/bucketIAMMember:BucketIAMMember")
    assert member["inputs"] == {"bucket": "acme-gcs", "role": "roles/storage.objectUser",
                                "member": "serviceAccount:nodes@p1.iam.gserviceaccount.com"}
    other = tmp_path / "no-sa"
    other.mkdir()
    compiled = compile_inputs(validate_paths([write(other, "b.yml", BACKENDS + bucket),
                                              write(other, "g4.yml", fleet)]).inputs,
                              load_catalog())
    [warned] = [d for d in compiled.diagnostics if d.code == "V029"]
    assert "set `vm_service_account` for gcp" in warned.message
    assert compiled.plans[0].buckets == ()


def test_an_azure_fleet_mounts_with_its_nodes_identities_from_its_subnet(
        tmp_path: Path) -> None:
    fleet = ("type: fleet\nname: nd\nnodes: 2\nplacement: cluster\nbackends: [azure]\n"
             "resources:\n  gpu: H100:8\n")
    bucket = ("buckets:\n  - {name: acme-blobs, cloud: azure, region: eastus, mounts: "
              "[{fleet: nd, path: /mnt/blobs}]}\n")
    tmp_path.mkdir(exist_ok=True)
    report = plan_files([write(tmp_path, "b.yml", BACKENDS + bucket),
                         write(tmp_path, "nd.yml", fleet)])
    [vmss] = by_type(report, "azure-native:compute:VirtualMachineScaleSet")
    assert vmss["inputs"]["identity"] == {"type": "SystemAssigned"}
    [grant] = by_type(report, "azure-native:authorization:RoleAssignment")
    assert grant["inputs"]["roleDefinitionId"].endswith(
        "/roleDefinitions/2a2b9908-6ea1-4ae2-8e65-a410df84e7d1")  # Storage Blob Data Reader
    [account] = by_type(report, "azure-native:storage:StorageAccount")
    rules = account["inputs"]["networkRuleSet"]
    assert rules["defaultAction"] == "Deny" and len(rules["virtualNetworkRules"]) == 1


def _bucket_host(tmp: Path, **env: str) -> Any:
    from hostutil import Host

    host = Host(tmp, ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime", "dcgmi"),
                GPUFLEET_MOUNT_SECONDS="0", **env)
    host.stub({
        "mountpoint": 'grep -qxF -- "$2" "$STATE/mounted" 2> /dev/null',
        "mount-s3": 'echo "$*" >> "$STATE/mount-s3.log"\n[ -z "$FAKE_DENIED" ] || exit 1\n'
                    'echo "$2" >> "$STATE/mounted"',
        "ls": "true",
    }, ("sleep",))
    return host


def test_the_node_mounts_its_buckets_and_says_when_it_cannot(tmp_path: Path) -> None:
    from gpufleet.compile.design import BucketMountDesign
    from gpufleet.compile.hostsetup import render_bucket_mounts

    script = render_bucket_mounts((
        BucketMountDesign("acme-use1", "aws", "mountpoint-s3", "/mnt/data", True, "us-east-1"),
        BucketMountDesign("ckpt--use1-az4--x-s3", "aws", "mountpoint-s3", "/mnt/ckpt", False,
                          "us-east-1", zonal=True)))
    host = _bucket_host(tmp_path / "ok")
    assert host.run(script).returncode == 0
    ready = (host.root / "var/lib/gpufleet/buckets-ready").read_text()
    assert "acme-use1=/mnt/data" in ready and "ckpt--use1-az4--x-s3=/mnt/ckpt" in ready
    calls = host.log("mount-s3")
    assert calls[0].startswith("acme-use1 ") and calls[0].endswith(
        "--region us-east-1 --allow-other --read-only")
    assert calls[1].endswith("--allow-delete --allow-overwrite")
    assert host.run(script).returncode == 0 and len(host.log("mount-s3")) == 2  # idempotent
    denied = _bucket_host(tmp_path / "denied", FAKE_DENIED="1")
    assert denied.run(script).returncode == 0  # the node still boots
    failed = (denied.root / "var/lib/gpufleet/buckets-failed").read_text()
    assert "cannot mount bucket acme-use1 at /mnt/data (mount-s3: the instance profile may " \
           "lack access)" in failed
    with pytest.raises(ValueError, match="cannot go into the script"):
        render_bucket_mounts((BucketMountDesign("a b", "aws", "mountpoint-s3", "/m", True,
                                                "us-east-1"),))
