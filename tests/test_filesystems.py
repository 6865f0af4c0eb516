"""Shared filesystems (the backends file's `filesystems:`): each cloud's managed Lustre or NFS
service built in the mounting fleet's network, reachable from its node subnets only,
protected, mounted by every node at boot, priced where the price table has the service; the
checks that refuse what cannot work; the mount script run against stand-ins for the tools;
and the hand-off to dstack (instance volumes)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_conformance import oracle

from gpufleet.cli import main
from gpufleet.compile import FilesystemDesign
from gpufleet.compile.hostsetup import render_mounts
from gpufleet.handoff.export import ssh_fleet, storage_task
from gpufleet.input.schema_files import validator
from gpufleet.views.plan import render_plan_text

from planutil import TEST_KEY, by_type, named, plan_files, write

BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n"
            "  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"
            "  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
            "  - type: azure\n    subscription_id: 00000000-0000-0000-0000-000000000001\n"
            "    tenant_id: 00000000-0000-0000-0000-000000000002\n"
            "    ssh_cidrs: [203.0.113.0/24]\n")
FLEETS = {
    "train": "type: fleet\nname: train\nnodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\n"
             "backends: [aws]\nregions: [us-east-1]\n",
    "a4": "type: fleet\nname: a4\nnodes: 2\nplacement: cluster\nspot_policy: auto\n"
          "resources:\n  gpu: B200:8\nbackends: [gcp]\navailability_zones: [us-west2-c]\n",
    "nd": "type: fleet\nname: nd\nnodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\n"
          "backends: [azure]\nregions: [eastus]\n",
    "dev": "type: fleet\nname: dev\nnodes: 1\nresources:\n  gpu: L4:1\nbackends: [aws]\n"
           "regions: [us-east-1]\n",
}
LUSTRE = """filesystems:
  - {name: data, backend: aws, region: us-east-1, kind: lustre, capacity_gib: 4800,
     throughput: 500, mount: /mnt/data, fleets: [train]}
  - {name: ckpt, backend: gcp, region: us-west2, zone: us-west2-c, kind: lustre,
     capacity_gib: 18000, throughput: 500, fleets: [a4]}
  - {name: ib, backend: azure, region: eastus, kind: lustre, capacity_gib: 8192,
     throughput: 250, fleets: [nd]}
"""
NFS = """filesystems:
  - {name: home, backend: aws, region: us-east-1, kind: nfs, capacity_gib: 500, fleets: [train]}
  - {name: envs, backend: gcp, region: us-west2, zone: us-west2-c, kind: nfs,
     capacity_gib: 1024, fleets: [a4]}
  - {name: share, backend: azure, region: eastus, kind: nfs, capacity_gib: 200, fleets: [nd]}
"""


def files(tmp: Path, section: str = "", fleets: tuple[str, ...] = tuple(FLEETS)) -> list[str]:
    return [write(tmp, "backends.yml", BACKENDS + section),
            *(write(tmp, f"{f}.dstack.yml", FLEETS[f]) for f in fleets)]


def fleet_resources(report: Any, fleet: str) -> list[str]:
    """One fleet's resources (its component's subtree), as canonical JSON for comparing."""
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in report.resources
                  if f"::{fleet}" in r["urn"] or f"${fleet}" in r["urn"] or
                  r["name"] == fleet)


def test_each_cloud_builds_its_managed_lustre_in_the_fleets_network(tmp_path: Path) -> None:
    report = plan_files(files(tmp_path, LUSTRE))
    [fsx] = by_type(report, "aws:fsx/lustreFileSystem:LustreFileSystem")
    i = fsx["inputs"]
    assert (i["storageCapacity"], i["perUnitStorageThroughput"], i["deploymentType"],
            i["storageType"], fsx["protect"]) == (4800, 500, "PERSISTENT_2", "SSD", True)
    sg = named(report, "fs-data", "aws:ec2/securityGroup:SecurityGroup")["inputs"]
    train = next(p for p in report.fleets if p.name == "train")
    nodes = [s.cidr for s in train.network("main").subnets if not s.public]
    assert {tuple(r.get("cidrBlocks") or ()) for r in sg["ingress"]} == {tuple(nodes), ()}
    assert {(r["fromPort"], r["toPort"]) for r in sg["ingress"]} == {(988, 988), (1018, 1023)}
    assert all("0.0.0.0/0" not in json.dumps(r) for r in sg["ingress"] + sg["egress"])
    assert i["securityGroupIds"] == ["fs-data-id"]

    [gcp] = by_type(report, "gcp:lustre/instance:Instance")
    g = gcp["inputs"]
    assert (g["capacityGib"], g["perUnitStorageThroughput"], g["location"], gcp["protect"]) \
        == ("18000", "500", "us-west2-c", True)
    rng = named(report, "fs-ckpt-range")["inputs"]
    a4 = next(p for p in report.fleets if p.name == "a4")
    used = [s.cidr for n in a4.networks for s in n.subnets]
    assert rng["purpose"] == "VPC_PEERING" and f"{rng['address']}/20" not in used
    rule = named(report, "a4-fs-ckpt", "gcp:compute/firewall:Firewall")["inputs"]
    assert rule["sourceRanges"] == [f"{rng['address']}/20"]
    assert rule["allows"] == [{"protocol": "tcp", "ports": ["988"]}]

    [aml] = by_type(report, "azure-native:storagecache:AmlFilesystem")
    assert (aml["inputs"]["sku"]["name"], aml["inputs"]["storageCapacityTiB"],
            aml["protect"]) == ("AMLFS-Durable-Premium-250", 8.0, True)
    assert aml["inputs"]["zones"] == ["1"]  # the API takes one zone; the scale set has none
    subnet = named(report, "fs-ib-subnet")["inputs"]["addressPrefix"]
    nd = next(p for p in report.fleets if p.name == "nd")
    assert subnet not in [s.cidr for s in nd.network("main").subnets]
    text = render_plan_text(report)
    assert ("data: lustre on FSx for Lustre (PERSISTENT_2 SSD), 4,800 GiB x 500 MB/s/TiB = "
            "2,343 MB/s") in text
    # FSx at 500 MB/s/TiB: $0.29 per GB-month (the price table); the others are not priced
    assert "$1,392.00/month" in text
    assert "ckpt: lustre on Managed Lustre, 18,000 GiB" in text and "NOT PRICED" in text


def test_a_price_the_file_declares_prices_the_filesystem_and_says_whose_it_is(
        tmp_path: Path) -> None:
    priced = LUSTRE.replace(
        "capacity_gib: 18000, throughput: 500, fleets: [a4]}",
        "capacity_gib: 18000, throughput: 500, fleets: [a4],\n"
        "     price: {per_gb_month: 0.5, source: our Google quote of 2026-11}}")
    # and over the bundled table: FSx at the team's own rate
    priced = priced.replace("mount: /mnt/data, fleets: [train]}",
                            "mount: /mnt/data, fleets: [train],\n"
                            "     price: {per_gb_month: 0.2, source: AWS private pricing}}")
    report = plan_files(files(tmp_path, priced))
    text = render_plan_text(report)
    assert ("$9,000.00/month at $0.5/GB-month from our Google quote of 2026-11") in text
    assert "$960.00/month at $0.2/GB-month from AWS private pricing" in text  # 4,800 x 0.2
    bill = report.bills["a4"]
    [item] = [i for i in bill.items if i.kind == "filesystem"]
    assert item.per_hour == pytest.approx(0.5 * 18000 / 730)
    assert item.source == "our Google quote of 2026-11 (the backends file's price)"
    # the Azure one still has no price, and says how to give it one
    assert "ib: lustre on Azure Managed Lustre" in text
    assert "NOT PRICED (set `price` on the filesystem to price it)" in text


def test_a_price_without_its_source_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    section = ("filesystems:\n  - {name: xx, backend: aws, region: us-east-1, kind: nfs, "
               "fleets: [train], price: {per_gb_month: 0.3}}\n")
    assert main(["plan", *files(tmp_path, section)]) == 1
    out = capsys.readouterr()
    assert "backends.yml:" in out.err + out.out and "source" in out.err + out.out


def test_nfs_services_admit_only_the_fleets_nodes(tmp_path: Path) -> None:
    report = plan_files(files(tmp_path, NFS))
    [efs] = by_type(report, "aws:efs/fileSystem:FileSystem")
    assert efs["inputs"]["encrypted"] is True and efs["protect"] is True
    [target] = by_type(report, "aws:efs/mountTarget:MountTarget")
    assert target["inputs"]["subnetId"]
    [store] = by_type(report, "gcp:filestore/instance:Instance")
    share = store["inputs"]["fileShares"]
    a4 = next(p for p in report.fleets if p.name == "a4")
    assert share["nfsExportOptions"][0]["ipRanges"] == [
        s.cidr for s in a4.network("main").subnets if not s.public]
    assert store["inputs"]["deletionProtectionEnabled"] is True
    [acct] = by_type(report, "azure-native:storage:StorageAccount")
    rules = acct["inputs"]["networkRuleSet"]
    assert rules["defaultAction"] == "Deny" and len(rules["virtualNetworkRules"]) == 1
    assert acct["inputs"]["allowBlobPublicAccess"] is False
    [fileshare] = by_type(report, "azure-native:storage:FileShare")
    assert (fileshare["inputs"]["enabledProtocols"], fileshare["inputs"]["shareQuota"]) == \
        ("NFS", 200)
    # no node rule for NFS: only Lustre servers call their clients back
    assert not [r for r in by_type(report, "gcp:compute/firewall:Firewall")
                if "fs-" in r["name"]]


def test_a_filesystem_touches_only_the_fleet_that_mounts_it(tmp_path: Path) -> None:
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    one = plan_files(files(tmp_path / "with", LUSTRE))
    other = plan_files(files(tmp_path / "without"))
    assert fleet_resources(one, "dev") == fleet_resources(other, "dev")
    assert fleet_resources(one, "dev")  # the neighbour exists and is compared
    # the mounting fleet's nodes boot with the mount script (the target filled in at `up`)
    node = named(one, "train-node-0", "aws:ec2/instance:Instance")["inputs"]
    script = base64.b64decode(node["userDataBase64"]).decode()
    assert "bash /var/lib/gpufleet/host-setup.sh" in script
    assert "data lustre @@TARGET:data@@ /mnt/data defaults,_netdev,noatime,flock" in script
    bare = named(other, "train-node-0", "aws:ec2/instance:Instance")["inputs"]
    assert "mount.sh" not in base64.b64decode(bare["userDataBase64"]).decode()


@pytest.mark.parametrize(("section", "code", "words"), [
    ("  - {name: xx, backend: aws, region: us-west-2, kind: nfs, fleets: [train]}\n",
     "V004", "storage must sit in its accelerators' region"),
    ("  - {name: xx, backend: gcp, region: us-east-1, kind: nfs, capacity_gib: 1024, "
     "zone: us-east1-b, fleets: [train]}\n", "V004", "a node cannot mount storage on another"),
    ("  - {name: xx, backend: aws, region: us-east-1, kind: lustre, capacity_gib: 3000, "
     "fleets: [train]}\n", "V003", "valid sizes start 1,200, 2,400, 4,800"),
    ("  - {name: xx, backend: gcp, region: us-west2, kind: lustre, capacity_gib: 9000, "
     "throughput: 125, fleets: [a4]}\n", "V003", "valid sizes start 72,000"),
    ("  - {name: xx, backend: gcp, region: us-west2, kind: lustre, capacity_gib: 10080000, "
     "throughput: 1000, fleets: [a4]}\n", "V003", "the largest at this tier is 10,008,000"),
    # above the small-step range, Managed Lustre grows in the large step only
    ("  - {name: xx, backend: gcp, region: us-west2, kind: lustre, capacity_gib: 1539000, "
     "throughput: 1000, fleets: [a4]}\n", "V003", "use 1,530,000 or 1,584,000 GiB"),
    ("  - {name: xx, backend: gcp, region: us-west2, kind: nfs, capacity_gib: 11000, "
     "fleets: [a4]}\n", "V003", "use 10,240 or 12,800 GiB"),
    ("  - {name: xx, backend: aws, region: us-east-1, kind: nfs, mount: /usr/data, "
     "fleets: [train]}\n", "V012", "would cover the system's own files"),
    ("  - {name: xx, backend: aws, region: us-east-1, kind: nfs, mount: /mnt/d, "
     "fleets: [train]}\n  - {name: yy, backend: aws, region: us-east-1, kind: nfs, "
     "mount: /mnt/d, fleets: [train]}\n", "V013", "is mounted at /mnt/d on the same fleet"),
    # each condition its own code (they were V003, V004 and V006)
    ("  - {name: xx, backend: aws, region: us-east-1, kind: lustre, fleets: [train]}\n",
     "V010", "has no capacity_gib"),
    ("  - {name: xx, backend: aws, region: us-east-1, kind: nfs, throughput: 250, "
     "fleets: [train]}\n", "V011", "an nfs filesystem has none"),
    ("  - {name: xx, backend: aws, region: us-east-1, kind: lustre, capacity_gib: 1200, "
     "throughput: 300, fleets: [train]}\n", "V011", "has no 300 MB/s per TiB tier"),
    ("  - {name: xx, backend: aws, region: us-east-1, kind: nfs, fleets: [train]}\n"
     "  - {name: xx, backend: aws, region: us-east-1, kind: nfs, fleets: [train]}\n",
     "V014", "is declared twice"),
])
def test_what_cannot_work_is_refused_where_it_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], section: str, code: str,
        words: str) -> None:
    assert main(["plan", *files(tmp_path, "filesystems:\n" + section)]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert f"error[{code}]" in text and words in text, text
    assert "backends.yml:" in text  # located in the file that declares it


def test_managed_lustre_sizes_past_the_small_step_range_are_built(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    section = ("filesystems:\n  - {name: xx, backend: gcp, region: us-west2, kind: lustre, "
               "capacity_gib: 1584000, throughput: 1000, fleets: [a4]}\n")
    assert main(["plan", *files(tmp_path, section, ("a4",))]) == 0, capsys.readouterr().err
    assert "1,584,000 GiB" in capsys.readouterr().out


def test_azure_lustre_above_its_default_maximum_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    section = ("filesystems:\n  - {name: xx, backend: azure, region: eastus, kind: lustre, "
               "throughput: 500, capacity_gib: 135168, fleets: [nd]}\n")
    assert main(["plan", *files(tmp_path, section, ("nd",))]) == 0
    cap = capsys.readouterr()
    assert "warning[V009]" in cap.err + cap.out
    assert "above the 128 TiB azure Lustre offers at 500 MB/s" in cap.err + cap.out


def test_a_fleet_not_among_the_files_warns_and_builds_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    section = ("filesystems:\n  - {name: xx, backend: aws, region: us-east-1, kind: nfs, "
               "fleets: [trian]}\n")
    assert main(["plan", *files(tmp_path, section)]) == 0
    cap = capsys.readouterr()
    out = cap.out + cap.err
    assert "warning[V008]" in out and "did you mean 'train'" in out
    assert "aws:efs/fileSystem" not in out


def test_warnings_zone_and_headroom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    section = ("filesystems:\n  - {name: xx, backend: gcp, region: us-west2, zone: us-west2-a, "
               "kind: lustre, capacity_gib: 36000, expected_usage_gib: 32000, fleets: [a4]}\n")
    assert main(["plan", *files(tmp_path, section, ("a4",))]) == 0
    cap = capsys.readouterr()
    out = cap.out + cap.err
    assert "warning[V005]" in out and "cross-zone traffic" in out
    assert "warning[V007]" in out and "12% headroom" in out


class Node:
    """A node for the mount script: stand-ins for mount, apt-get and the key tools."""

    def __init__(self, tmp: Path, *has: str, stubs: dict[str, str] | None = None) -> None:
        self.root, self.bin = tmp / "root", tmp / "bin"
        self.root.mkdir()
        self.bin.mkdir()
        self.log = tmp / "calls.log"
        for tool in ("bash", "grep", "cat", "mkdir", "rm", "printf", "sort", "tail", "cut",
                     "tr", "uname", "sleep"):
            real = shutil.which(tool)
            assert real is not None
            (self.bin / tool).symlink_to(real)
        stubs = {**{"mount": f'echo "mount $*" >> {self.log}; exit "${{FAKE_MOUNT_RC:-0}}"',
                 "mountpoint": "exit 1",
                 "apt-get": f'echo "apt-get $*" >> {self.log}',
                 "apt-cache": 'echo "amlfs-lustre-client-2.15.7 - client"',
                 "curl": f'echo "curl $*" >> {self.log}', "gpg": "true"}, **(stubs or {})}
        for tool in has:
            stubs[tool] = "true"
        for tool, body in stubs.items():
            path = self.bin / tool
            # a stub replaces the link to the real tool: writing through the link would
            # overwrite the machine's own program (CI runs as root)
            path.unlink(missing_ok=True)
            path.write_text(f"#!/bin/bash\n{body}\n")
            path.chmod(path.stat().st_mode | stat.S_IXUSR)

    def run(self, script: str, **env: str) -> subprocess.CompletedProcess[str]:
        path = self.root.parent / "mount.sh"
        path.write_text(script)
        return subprocess.run(["/bin/bash", str(path)], capture_output=True, text=True,
                              timeout=60, check=False, env={
                                  "PATH": str(self.bin), "GPUFLEET_ROOT": str(self.root),
                                  "GPUFLEET_MOUNT_SECONDS": "0", **env})

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def fs_plan(service: str, kind: str = "lustre") -> FilesystemDesign:
    return FilesystemDesign("data", "aws", kind, service, "us-east-1", None, 2400,
                            250 if kind == "lustre" else None, "/mnt/data", 988, ("10.0.0.0/18",))


def test_the_mount_script_installs_the_client_adds_fstab_and_mounts(tmp_path: Path) -> None:
    script = render_mounts("aws", [fs_plan("fsx-lustre")], {"data": "fs-1.fsx@tcp:/abc"})
    node = Node(tmp_path)
    result = node.run(script)
    assert result.returncode == 0, result.stderr
    fstab = (node.root / "etc/fstab").read_text()
    assert fstab == "fs-1.fsx@tcp:/abc /mnt/data lustre defaults,_netdev,noatime,flock 0 0\n"
    calls = node.calls()
    assert any("fsx-lustre-client-repo" in c for c in calls)
    assert any(c.startswith("apt-get") and "lustre-client-modules-" in c for c in calls)
    assert f"mount {node.root}/mnt/data" in calls
    ready = (node.root / "var/lib/gpufleet/mounts-ready").read_text()
    assert ready == "status=ready\ndata=/mnt/data\n"
    # again at the next boot: nothing added twice, the client not installed again
    (tmp_path / "again").mkdir()
    again = Node(tmp_path / "again", "mount.lustre")
    (again.root / "etc").mkdir(parents=True)
    (again.root / "etc/fstab").write_text(fstab)
    assert again.run(script).returncode == 0
    assert (again.root / "etc/fstab").read_text() == fstab
    assert not any(c.startswith("apt-get") for c in again.calls())


# Microsoft's repository as `apt-cache` shows it: one metapackage per client version, each
# with a version per kernel it was built for (packages.microsoft.com/repos/amlfs-noble)
AMLFS_REPO = """case "$1" in
  search) printf '%s\\n' 'amlfs-lustre-client-2.15.8-1-gabc - Metapackage' \\
    'amlfs-lustre-client-2.17.0-19-gbb5310f - Metapackage' ;;
  madison) case "$2" in
    *2.17.0*) echo " $2 | 6.8.0-1046-azure | https://packages.microsoft.com noble/main" ;;
    *) echo " $2 | 6.8.0-1026-azure | https://packages.microsoft.com noble/main"
       echo " $2 | 6.8.0-1044-azure | https://packages.microsoft.com noble/main" ;;
  esac ;;
esac"""


@pytest.mark.parametrize(("kernel", "package"), [
    ("6.8.0-1046-azure", "amlfs-lustre-client-2.17.0-19-gbb5310f=6.8.0-1046-azure"),
    # the newest client is not built for this kernel: the newest one that is
    ("6.8.0-1026-azure", "amlfs-lustre-client-2.15.8-1-gabc=6.8.0-1026-azure"),
    ("6.8.0-9999-azure", None),
])
def test_the_azure_lustre_client_is_the_newest_built_for_the_running_kernel(
        tmp_path: Path, kernel: str, package: str | None) -> None:
    script = render_mounts("azure", [fs_plan("amlfs")], {"data": "10.1.2.3@tcp:/lustrefs"})
    node = Node(tmp_path, stubs={"apt-cache": AMLFS_REPO, "uname": f"echo {kernel}",
                                 "dpkg": "echo arm64"})
    (node.root / "etc").mkdir()
    (node.root / "etc/os-release").write_text("ID=ubuntu\nVERSION_CODENAME=noble\n")
    result = node.run(script)
    assert result.returncode == 0, result.stderr  # the machine boots either way
    sources = (node.root / "etc/apt/sources.list.d/amlfs.list").read_text()
    assert "[arch=arm64 " in sources and "/repos/amlfs-noble/ noble main" in sources
    installs = [c for c in node.calls() if c.startswith("apt-get") and "install" in c]
    if package is None:
        assert installs == []
        failed = (node.root / "var/lib/gpufleet/mounts-failed").read_text()
        assert f"built for kernel {kernel}" in failed
    else:
        assert len(installs) == 1 and installs[0].endswith(f" {package}"), installs
        assert (node.root / "var/lib/gpufleet/mounts-ready").exists()


def test_a_stubbed_tool_leaves_the_real_one_alone(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real-uname"
    real.write_text("#!/bin/bash\necho 6.8.0-1-real\n")
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: str(real) if tool == "uname" else which(tool))
    (tmp_path / "node").mkdir()
    node = Node(tmp_path / "node", stubs={"uname": "echo 6.8.0-2-stub"})
    assert real.read_text() == "#!/bin/bash\necho 6.8.0-1-real\n"
    assert not (node.bin / "uname").is_symlink()


def test_a_filesystem_that_never_mounts_leaves_the_failure_marker(tmp_path: Path) -> None:
    script = render_mounts("azure", [fs_plan("azure-files-nfs", "nfs")],
                           {"data": "acct.file.core.windows.net:/acct/share"})
    node = Node(tmp_path, "mount.nfs")
    result = node.run(script, FAKE_MOUNT_RC="32")
    assert result.returncode == 0  # the machine still boots
    failed = (node.root / "var/lib/gpufleet/mounts-failed").read_text()
    assert "cannot mount data (acct.file.core.windows.net:/acct/share) at /mnt/data" in failed
    assert not (node.root / "var/lib/gpufleet/mounts-ready").exists()
    assert len([c for c in node.calls() if c.startswith("mount ")]) == 60


def test_every_service_renders_a_script_shellcheck_accepts(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck", path=os.path.dirname(os.sys.executable))
    assert shellcheck is not None
    paths = []
    for backend, service, kind in (("aws", "fsx-lustre", "lustre"), ("aws", "efs", "nfs"),
                                   ("gcp", "managed-lustre", "lustre"),
                                   ("gcp", "filestore", "nfs"), ("azure", "amlfs", "lustre"),
                                   ("azure", "azure-files-nfs", "nfs")):
        text = render_mounts(backend, [fs_plan(service, kind)], {"data": "host:/x"})
        assert "@@" not in text
        path = tmp_path / f"{service}.sh"
        path.write_text(text)
        paths.append(str(path))
    result = subprocess.run([shellcheck, *paths], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    with pytest.raises(ValueError, match="cannot go into the script"):
        render_mounts("aws", [fs_plan("efs", "nfs")], {"data": "x:/; rm -rf /"})


def test_the_hand_off_names_the_instance_volumes(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = {"backend": "aws", "region": "us-east-1", "public_ips": False,
           "access": {"method": "bastion", "user": "ubuntu"},
           "bastion": {"address": "198.51.100.7", "user": "ubuntu"},
           "nodes": [{"name": "train-node-0", "private_ip": "10.30.0.5"}],
           "networks": {"main": {"subnets": ["10.30.0.0/18"]}},
           "filesystems": {"data": {"kind": "lustre", "service": "fsx-lustre",
                                    "mount": "/mnt/data", "target": "fs@tcp:/x"}}}
    text, note = ssh_fleet("train", out, "~/.ssh/id")
    assert text is not None and note == ""
    assert "#   volumes:\n#     - instance_path: /mnt/data" in text
    assert yaml.safe_load(text)["ssh_config"]["hosts"] == ["10.30.0.5"]
    task = yaml.safe_load(storage_task("train", out) or "")
    assert task["volumes"] == [{"instance_path": "/mnt/data", "path": "/mnt/data"}]
    assert task["fleets"] == ["train"] and task["nodes"] == 1
    assert any("mountpoint -q /mnt/data" in c for c in task["commands"])
    assert list(validator("task").iter_errors(task)) == []
    assert storage_task("dev", {**out, "filesystems": {}}) is None
    # outputs are data from a file: a name or path gpufleet would not write stays out of the
    # shell commands
    hostile = {"x$(reboot)": {"mount": "/mnt/x"}, "ok": {"mount": "/mnt/a;reboot"}}
    assert storage_task("dev", {**out, "filesystems": hostile}) is None
    # dstack 0.22.5's own model accepts it
    verdict = oracle({"storage.dstack.yml": yaml.safe_dump(task)})["storage.dstack.yml"]
    assert verdict["ok"], verdict
    # the acceptance tasks mount it too
    paths = files(tmp_path, LUSTRE, ("train",))
    assert main(["acceptance", "train", *paths, "--out", str(tmp_path / "runs")]) == 0
    capsys.readouterr()
    for name in ("train-nccl.dstack.yml", "train-burnin.dstack.yml"):
        task = yaml.safe_load((tmp_path / "runs" / name).read_text())
        assert {"instance_path": "/mnt/data", "path": "/mnt/data"} in task["volumes"], name
    burnin = (tmp_path / "runs" / "train-burnin.dstack.yml").read_text()
    assert "check=mounts" in burnin


def test_adding_a_filesystem_to_a_deployed_fleet_replaces_nothing(tmp_path: Path) -> None:
    """The filesystem and its rules are created; the running nodes keep running (AWS and
    Azure VMs ignore their boot script's change, GCP's metadata and a scale set's model
    change in place), and the other fleets do not move."""
    from click.testing import CliRunner
    from exportutil import export, write_export

    from gpufleet.cli import cli

    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    state = write_export(tmp_path / "state.json", export(files(tmp_path / "old")))
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--format", "json",
                                 *files(tmp_path / "new", LUSTRE)])
    data = json.loads(r.stdout)
    gone = [c["name"] for c in data["changes"] if c["op"] in ("replace", "delete",
                                                              "create-replacement")]
    assert gone == [], data["changes"]
    created = {c["name"] for c in data["changes"] if c["op"] == "create"}
    assert {"fs-data", "fs-ckpt", "fs-ib", "fs-ib-subnet", "fs-ckpt-range"} <= created
    touched = {c["name"] for c in data["changes"]}
    assert not any(n.startswith("dev") for n in touched), touched  # the neighbour


def test_azure_managed_lustre_gets_a_subnet_sized_for_its_capacity(tmp_path: Path) -> None:
    """Microsoft's network size table: up to 196 TiB a /24, 200-400 TiB a /23."""
    big = ("filesystems:\n  - {name: big, backend: azure, region: eastus, kind: lustre, "
           "capacity_gib: 262144, throughput: 500, fleets: [nd]}\n")
    report = plan_files(files(tmp_path, big, ("nd",)))
    prefix = named(report, "fs-big-subnet")["inputs"]["addressPrefix"]
    assert prefix.endswith("/23")
    nd = next(p for p in report.fleets if p.name == "nd")
    assert IPv4Network(prefix).subnet_of(IPv4Network(nd.network("main").cidr or ""))
    assert not any(IPv4Network(prefix).overlaps(IPv4Network(s.cidr))
                   for s in nd.network("main").subnets)


def test_two_filesystems_of_a_fleet_get_ranges_of_their_own_in_any_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = ("  - {name: alpha, backend: azure, region: eastus, kind: lustre, capacity_gib: 8192, "
           "throughput: 250, fleets: [nd]}\n")
    two = ("  - {name: beta, backend: azure, region: eastus, kind: lustre, capacity_gib: 8192, "
           "throughput: 250, mount: /mnt/beta, fleets: [nd]}\n")
    (tmp_path / "ab").mkdir()
    (tmp_path / "ba").mkdir()
    ab = plan_files(files(tmp_path / "ab", "filesystems:\n" + one + two, ("nd",)))
    ba = plan_files(files(tmp_path / "ba", "filesystems:\n" + two + one, ("nd",)))
    ranges = {n: named(ab, f"fs-{n}-subnet")["inputs"]["addressPrefix"] for n in ("alpha", "beta")}
    assert ranges["alpha"] != ranges["beta"]
    assert not IPv4Network(ranges["alpha"]).overlaps(IPv4Network(ranges["beta"]))
    assert {n: named(ba, f"fs-{n}-subnet")["inputs"]["addressPrefix"]
            for n in ("alpha", "beta")} == ranges
    # GCP: one private services access connection per network, so one Managed Lustre per fleet
    gcp = ("filesystems:\n  - {name: aa, backend: gcp, region: us-west2, kind: lustre, "
           "capacity_gib: 36000, fleets: [a4]}\n  - {name: bb, backend: gcp, region: us-west2, "
           "kind: lustre, capacity_gib: 36000, mount: /mnt/bb, fleets: [a4]}\n")
    assert main(["plan", *files(tmp_path, gcp, ("a4",))]) == 1
    cap = capsys.readouterr()
    assert "error[V020]" in cap.out + cap.err and "already mounts a Managed Lustre" in \
        cap.out + cap.err


def test_a_zonal_service_without_a_zone_and_a_full_block_are_refused(tmp_path: Path) -> None:
    """V018 and V021 at the planner: a fleet without a zone for a zonal service (no `zone` on
    the filesystem), and a fleet whose address block has no range left for the service."""
    import dataclasses
    from ipaddress import IPv4Network

    from gpufleet.codes import V018, V021
    from gpufleet.compile.filesystems import _plan

    files = [write(tmp_path, "backends.yml", BACKENDS + LUSTRE),
             write(tmp_path, "a4.yml", FLEETS["a4"])]
    from gpufleet.input import validate_paths

    validated = validate_paths(files)
    report = plan_files(files)
    a4 = next(f for f in report.fleets if f.name == "a4")
    ckpt = next(fs for fs in validated.inputs.filesystems if fs.name == "ckpt")
    _, refusal = _plan(dataclasses.replace(ckpt, zone=None), dataclasses.replace(a4, zone=None),
                       IPv4Network(report.fleets[0].networks[0].cidr), [])
    assert refusal is not None and refusal.code == V018 and "has no zone" in refusal.message
    block = IPv4Network(a4.networks[0].cidr)
    _, refusal = _plan(ckpt, a4, block, [str(block)])
    assert refusal is not None and refusal.code == V021
    assert "no free range left" in refusal.message
