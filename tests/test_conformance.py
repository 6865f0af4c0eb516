"""dstack 0.22.5 checks gpufleet: every fleet and gateway file - a corpus written here from
every grammar form of dstack's format, the examples, the test cases, and generated files -
is accepted by both or refused by both, except gpufleet's own, documented refusals
(``DELIBERATE``, listed in the README next to the format version). The oracle runs dstack's
own parser and server checks (tests/dstack_oracle.py) in `.venv-dstack`."""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import select
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.input import validate_texts

pytestmark = pytest.mark.slow  # `pytest -m 'not slow'` skips this module

ROOT = Path(__file__).resolve().parent.parent
ORACLE = ROOT / ".venv-dstack" / "bin" / "python"

# gpufleet's own refusals of files dstack accepts: code -> why (README, "dstack conformance").
DELIBERATE = {
    "V001": "a volume on runpod, kubernetes, daytona or lium: gpufleet builds volumes on aws "
            "and gcp",
    "V002": "a volume without `name`, or a new one without `availability_zone`: the disk's "
            "name derives from the name, and gpufleet builds it in that zone",
    "F006": "a backend gpufleet cannot build (it builds aws, gcp, azure and lambda)",
    "F025": "`placement: cluster` or `spot_policy: spot` on backends that cannot honour it "
            "(lambda): dstack takes the file and finds no offer at `dstack apply`",
    "F009": "a fleet without `name`: every resource name derives from it",
    "G007": "a gateway without `name`: every resource name derives from it",
    "F010": "`placement: cluster` with zones in several regions: no cluster spans regions",
    "F011": "`reservation` with only backends that take none",
    "F018": "a region of the wrong shape for the fleet's backends (a typo or another cloud's)",
    "F020": "a count or size no offer can match: negative, not finite, over 10^9, a GPU memory "
            "without a unit, an empty GPU name",
    "F021": "the same SSH host (hostname and port) twice: dstack would add one machine twice",
    "G002": "`instance_type` on an azure gateway: dstack's file model takes it, and its Azure "
            "compute refuses it when the gateway is created",
    "G014": "a region of the wrong shape for the gateway's backend",
    "G009": "a `domain` that is not a DNS name gpufleet can create `*.<domain>` records for",
    "G015": "an ACM ARN or Certificate Manager name of the wrong shape",
    "S010": "a name ending in a line break (Python's `$` lets dstack's pattern match it)",
    "L004": "a key written twice in one mapping (YAML says keys are unique; PyYAML keeps the "
            "last)",
    "L009": "an integer over 30 digits",
}

KEY = "  identity_file: ~/.ssh/id_ed25519\n"
F = "type: fleet\nname: conf\n"
G = "type: gateway\nname: gw\n"


def fleet(body: str) -> str:
    return F + body


def gw(body: str) -> str:
    return G + body


CORPUS: dict[str, str] = {
    # backend fleets: nodes
    "nodes-int": fleet("nodes: 2\n"), "nodes-range": fleet("nodes: 0..2\n"),
    "nodes-max-only": fleet("nodes: ..4\n"), "nodes-open": fleet("nodes: 2..\n"),
    "nodes-object": fleet("nodes: {min: 2, max: 10, target: 6}\n"),
    "nodes-string-int": fleet("nodes: '3'\n"), "nodes-order": fleet("nodes: 3..1\n"),
    "nodes-negative": fleet("nodes: -1\n"), "nodes-word": fleet("nodes: two\n"),
    "nodes-float": fleet("nodes: 1.5\n"), "nodes-target-low": fleet(
        "nodes: {min: 2, target: 1}\n"), "nodes-missing": fleet("placement: any\n"),
    # resources
    **{f"gpu-{i}": fleet(f"nodes: 1\nresources:\n  gpu: {g}\n") for i, g in enumerate([
        "A100", "A100:80GB:8", "H100:8", "24GB..", "1..8", "nvidia", "amd:MI300X:8",
        "A10G,A100", "24GB..40GB:2", "16GB..80GB:2..8", "tpu:v5litepod-8", "0", "0..8",
        "A100::8", "A100:H100", "2:4", "80GB:40GB", "nvidia:amd", "A100,", "{name: A100}",
        "{count: 2, memory: 40GB..}", "{vendor: nvidia, count: 1..2, total_memory: 80GB..}",
        "{compute_capability: 7.5}", "{compute_capability: '7.5'}",
        "{compute_capability: [7, 5]}", "{compute_capability: abc}", "B200:8"])},
    **{f"cpu-{i}": fleet(f"nodes: 1\nresources:\n  cpu: {c}\n") for i, c in enumerate([
        "8", "16..", "arm:8..", "x86:16", "{min: 4}", "{min: 4, max: 8}", "{arch: arm, count: 8}",
        "'4:8'", "x86:arm", "sparc:4", "'::'", "{arch: arm, min: 4}", "{}", "{max: 8}", "4.0",
        "{min: 4.0}"])},
    **{f"memory-{i}": fleet(f"nodes: 1\nresources:\n  memory: {m}\n") for i, m in enumerate([
        "8GB..", "1TB", "512MB..2GB", "80GiB", "64", "{min: 8GB}", ".nan", "'nan'", "1e3",
        "16GB..8GB", "1_0GB", "-1"])},
    **{f"disk-{i}": fleet(f"nodes: 1\nresources:\n  disk: {d}\n") for i, d in enumerate([
        "100GB..", "{size: 100GB..}", "50GB", "-5GB"])},
    "shm": fleet("nodes: 1\nresources:\n  shm_size: 16GB\n"),
    "resources-extra": fleet("nodes: 1\nresources:\n  gpus: A100\n"),
    # offer fields
    "spot-auto": fleet("nodes: 1\nspot_policy: auto\n"),
    "spot-bad": fleet("nodes: 1\nspot_policy: sometimes\n"),
    "price": fleet("nodes: 1\nmax_price: 1.5\n"),
    "price-string": fleet("nodes: 1\nmax_price: '1.25'\n"),
    "price-zero": fleet("nodes: 1\nmax_price: 0\n"),
    "price-nan": fleet("nodes: 1\nmax_price: .nan\n"),
    "reservation": fleet("nodes: 1\nreservation: my-res\nbackends: [gcp]\n"),
    "reservation-int": fleet("nodes: 1\nreservation: 12345\nbackends: [aws]\n"),
    "blocks-int": fleet("nodes: 1\nblocks: 4\n"),
    "blocks-string": fleet("nodes: 1\nblocks: '4'\n"),
    "blocks-auto": fleet("nodes: 1\nblocks: auto\n"),
    "blocks-zero": fleet("nodes: 1\nblocks: 0\n"), "blocks-word": fleet("nodes: 1\nblocks: x\n"),
    **{f"idle-{i}": fleet(f"nodes: 1\nidle_duration: {v}\n") for i, v in enumerate([
        "3d", "off", "false", "-1", "300", "'600'", "1h30m", "1y", "2w"])},
    **{f"retry-{i}": fleet(f"nodes: 1\nretry: {v}\n") for i, v in enumerate([
        "true", "false", "{on_events: [no-capacity], duration: 1h}", "{on_events: []}",
        "{duration: 30m}", "{on_events: [later]}"])},
    **{f"tags-{i}": fleet(f"nodes: 1\ntags: {v}\n") for i, v in enumerate([
        "{team: ml}", "{'bad key!': x}", "{team: 1}", "{team: true}", "{a: 'x y'}"])},
    "backends": fleet("nodes: 1\nbackends: [aws, gcp]\nregions: [us-east-1, us-central1]\n"),
    "backends-empty": fleet("nodes: 1\nbackends: []\n"),
    "backends-lambda": fleet("nodes: 1\nbackends: [lambda]\n"),
    "backends-typo": fleet("nodes: 1\nbackends: [awss]\n"),
    "zones": fleet("nodes: 2\nplacement: cluster\navailability_zones: [us-east-1a]\n"),
    "instance-types": fleet("nodes: 1\ninstance_types: [p5.48xlarge]\n"),
    "placement-bad": fleet("nodes: 1\nplacement: near\n"),
    "env-backend": fleet("nodes: 1\nenv: [A=1]\n"),
    "unknown-key": fleet("nodes: 1\nnode: 2\n"),
    "name-regex": "type: fleet\nname: Bad_Name\nnodes: 1\n",
    "no-name": "type: fleet\nnodes: 1\n",
    "previous-names": fleet("nodes: 1\nprevious_names: [old]\n"),
    "backend-options-dup": fleet("nodes: 1\nbackend_options:\n  - {type: vastai}\n"
                                 "  - {type: vastai}\n"),
    "two-documents": fleet("nodes: 1\n") + "---\n" + gw("backend: aws\nregion: us-east-1\n"),
    # SSH fleets
    "ssh": fleet("ssh_config:\n  user: ubuntu\n" + KEY + "  hosts: [10.0.0.1, 10.0.0.2]\n"),
    "ssh-ports": fleet("ssh_config:\n  user: ubuntu\n" + KEY + "  hosts:\n"
                       "    - {hostname: jump.example.com, port: 2201}\n"
                       "    - {hostname: jump.example.com, port: 2202}\n"),
    "ssh-same-host": fleet("ssh_config:\n  user: ubuntu\n" + KEY + "  hosts: [h1, h1]\n"),
    "ssh-same-port": fleet("ssh_config:\n  user: ubuntu\n  port: 2201\n" + KEY + "  hosts:\n"
                           "    - h1\n    - {hostname: h1, port: 2201}\n"),
    "ssh-port-string": fleet("ssh_config:\n  user: ubuntu\n  port: '2222'\n" + KEY +
                             "  hosts: [h1]\n"),
    "ssh-no-user": fleet("ssh_config:\n" + KEY + "  hosts: [h1]\n"),
    "ssh-no-key": fleet("ssh_config:\n  user: ubuntu\n  hosts: [h1]\n"),
    "ssh-internal-mixed": fleet("ssh_config:\n  user: u\n" + KEY + "  hosts:\n"
                                "    - {hostname: h1, internal_ip: 10.0.0.1}\n    - h2\n"),
    "ssh-network-public": fleet("ssh_config:\n  user: u\n" + KEY + "  network: 8.8.8.0/24\n"
                                "  hosts: [h1]\n"),
    "ssh-proxy": fleet("ssh_config:\n  user: u\n" + KEY + "  proxy_jump: {hostname: b, user: u,"
                       " identity_file: ~/.ssh/k}\n  hosts: [h1]\n"),
    "ssh-and-nodes": fleet("nodes: 1\nssh_config:\n  user: u\n" + KEY + "  hosts: [h1]\n"),
    "ssh-resources": fleet("resources: {gpu: 1}\nssh_config:\n  user: u\n" + KEY +
                           "  hosts: [h1]\n"),
    "ssh-cluster": fleet("placement: cluster\nssh_config:\n  user: u\n" + KEY +
                         "  network: 10.0.0.0/24\n  hosts: [h1, h2]\n"),
    "ssh-env": fleet("env: {PORT: 8080}\nssh_config:\n  user: u\n" + KEY + "  hosts: [h1]\n"),
    # gateways
    "gw-minimal": gw("backend: aws\nregion: eu-west-1\ndomain: example.com\n"),
    "gw-instance-type": gw("backend: aws\nregion: eu-west-1\ninstance_type: t3.large\n"
                           "domain: example.com\n"),
    "gw-private": gw("backend: aws\nregion: eu-west-1\ndomain: example.com\npublic_ip: false\n"
                     "certificate: null\n"),
    "gw-private-gcp": gw("backend: gcp\nregion: us-central1\ndomain: example.com\n"
                         "public_ip: false\ncertificate: null\n"),
    "gw-private-le": gw("backend: aws\nregion: eu-west-1\ndomain: example.com\n"
                        "public_ip: false\n"),
    "gw-private-azure": gw("backend: azure\nregion: eastus\npublic_ip: false\n"
                           "certificate: null\n"),
    "gw-acm": gw("backend: aws\nregion: eu-west-1\ndomain: example.com\ncertificate:\n"
                 "  type: acm\n  arn: arn:aws:acm:eu-west-1:123456789012:certificate/abc\n"),
    "gw-acm-alb": gw("backend: aws\nregion: eu-west-1\ndomain: example.com\n"
                     "load_balancer: {type: alb}\ncertificate:\n  type: acm\n"
                     "  arn: arn:aws:acm:eu-west-1:123456789012:certificate/abc\n"),
    "gw-acm-gcp": gw("backend: gcp\nregion: us-central1\ncertificate: {type: acm, arn: x}\n"),
    "gw-acm-no-arn": gw("backend: aws\nregion: eu-west-1\ncertificate: {type: acm}\n"),
    "gw-gcp-cm": gw("backend: gcp\nregion: us-central1\ndomain: example.com\n"
                    "load_balancer: {type: alb}\ncertificate:\n  type: gcp-cm\n"
                    "  name: projects/p/locations/us-central1/certificates/c\n"),
    "gw-gcp-cm-no-alb": gw("backend: gcp\nregion: us-central1\ncertificate:\n  type: gcp-cm\n"
                           "  name: projects/p/locations/us-central1/certificates/c\n"),
    "gw-alb-le": gw("backend: aws\nregion: eu-west-1\nload_balancer: {type: alb}\n"),
    "gw-alb-azure": gw("backend: azure\nregion: eastus\nload_balancer: {type: alb}\n"
                       "certificate: null\n"),
    "gw-replicas-4": gw("backend: aws\nregion: eu-west-1\nreplicas: 4\ncertificate: null\n"),
    "gw-replicas-10": gw("backend: aws\nregion: eu-west-1\nreplicas: 10\ncertificate: null\n"),
    "gw-replicas-le": gw("backend: aws\nregion: eu-west-1\nreplicas: 2\n"),
    "gw-replicas-9": gw("backend: gcp\nregion: us-central1\nreplicas: 9\ncertificate: null\n"),
    "gw-replicas-float": gw("backend: aws\nregion: eu-west-1\nreplicas: 2.0\n"
                            "certificate: null\n"),
    "gw-alb-null": gw("backend: aws\nregion: eu-west-1\nload_balancer: {type: alb}\n"
                      "certificate: null\n"),
    "gw-alb-gcp-null": gw("backend: gcp\nregion: us-central1\nload_balancer: {type: alb}\n"
                          "certificate: null\npublic_ip: false\n"),
    "gw-lb-none": gw("backend: aws\nregion: eu-west-1\nload_balancer: null\n"),
    "gw-lb-nlb": gw("backend: aws\nregion: eu-west-1\nload_balancer: {type: nlb}\n"),
    "gw-gcp-cm-aws": gw("backend: aws\nregion: eu-west-1\nload_balancer: {type: alb}\n"
                        "certificate: {type: gcp-cm, name: "
                        "projects/p/locations/l/certificates/c}\n"),
    "gw-gcp-cm-short": gw("backend: gcp\nregion: us-central1\nload_balancer: {type: alb}\n"
                          "certificate: {type: gcp-cm, name: c}\n"),
    "gw-gcp-cm-no-name": gw("backend: gcp\nregion: us-central1\nload_balancer: {type: alb}\n"
                            "certificate: {type: gcp-cm}\n"),
    "gw-gcp-acm": gw("backend: gcp\nregion: us-central1\nload_balancer: {type: alb}\n"
                     "certificate: {type: acm, arn: arn:aws:acm:eu-west-1:123456789012:"
                     "certificate/abc}\n"),
    "gw-default-string": gw("backend: aws\nregion: eu-west-1\ndefault: 'true'\n"),
    "gw-azure-type": gw("backend: azure\nregion: eastus\ninstance_type: Standard_B2s\n"),
    "gw-template-domain": gw("backend: gcp\nregion: us-central1\n"
                             "domain: ${{ run.project_name }}.example.com\n"),
    "gw-dns-zone": gw("backend: aws\nregion: eu-west-1\ndomain: gpu.example.com\n"
                      "dns_zone: example.com\n"),
    "gw-protect": gw("backend: aws\nregion: eu-west-1\nprotect_address: false\n"),
    "gw-tags-int": gw("backend: aws\nregion: eu-west-1\ntags: {team: 1}\n"),
    "gw-lambda": gw("backend: lambda\nregion: us-east-1\n"),
    "gw-kubernetes": gw("backend: kubernetes\nregion: any\n"),
    "gw-no-backend": gw("region: eu-west-1\n"),
    "gw-no-name": "type: gateway\nbackend: aws\nregion: eu-west-1\n",
}


def files_we_did_not_write_here() -> dict[str, str]:
    """The examples and the single-document fleet and gateway cases of tests/cases."""
    out = {}
    for p in [*(ROOT / "examples" / "fleets").glob("*.yml"),
              *(ROOT / "examples" / "gateways").glob("*.yml"),
              *(ROOT / "tests" / "cases" / "valid").glob("*.yml"),
              *(ROOT / "tests" / "cases" / "invalid").glob("*.yml")]:
        text = p.read_text(errors="replace")
        try:
            docs = list(yaml.safe_load_all(text))
        except Exception:  # PyYAML raises more than YAMLError on hostile files (!!bool x)
            continue
        if len(docs) == 1 and isinstance(docs[0], dict) and docs[0].get("type") in (
                "fleet", "gateway"):
            out[f"{p.parent.name}/{p.name}"] = text
    return out


class _Oracle:
    """One `dstack_oracle.py --lines` process for the worker (importing dstack's server takes
    it about 2.5 s), started at the first question and again after one that failed: a batch
    of items a line, their verdicts a line back."""

    proc: subprocess.Popen[str] | None = None

    def ask(self, payload: str, timeout: float = 600) -> list[dict[str, Any]]:
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            # its errors to a file, never a pipe that fills; closed with the process
            self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115
            self.proc = subprocess.Popen(
                [str(ORACLE), str(ROOT / "tests" / "dstack_oracle.py"), "--lines"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(payload + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.log.seek(0)
            said = self.log.read()[-2000:]
            self.close()
            pytest.fail(f"the dstack oracle gave no answer: {said}")
        answer: list[dict[str, Any]] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        self.log.close()
        self.proc = None


_ORACLE = _Oracle()
atexit.register(_ORACLE.close)


def oracle(items: dict[str, str], kinds: dict[str, str] | None = None
           ) -> dict[str, dict[str, Any]]:
    assert ORACLE.exists(), "run `make oracle` (make test does) to create .venv-dstack"
    payload = json.dumps([{"name": n, "text": t, "kind": (kinds or {}).get(n, "apply")}
                          for n, t in items.items()])
    return {x["name"]: x for x in _ORACLE.ask(payload)}


def gpufleet_errors(text: str) -> list[str]:
    v = validate_texts({"conf.dstack.yml": text})
    return sorted({d.code for d in v.diagnostics if d.is_error})


def compare(items: dict[str, str], verdicts: dict[str, dict[str, Any]] | None = None
            ) -> tuple[Counter[str], list[str]]:
    """The agreement table and every disagreement gpufleet has no documented reason for."""
    verdicts = verdicts if verdicts is not None else oracle(items)
    table: Counter[str] = Counter()
    wrong = []
    for name, text in items.items():
        ds = verdicts[name]
        codes = gpufleet_errors(text)
        if ds["ok"] and not codes:
            table["both accept"] += 1
        elif not ds["ok"] and codes:
            table["both refuse"] += 1
        elif ds["ok"] and codes and set(codes) <= set(DELIBERATE):
            table["gpufleet refuses by its own rule"] += 1
        elif ds["ok"]:
            table["only dstack accepts"] += 1
            wrong.append(f"{name}: dstack accepts, gpufleet refuses {codes}")
        else:
            table["only gpufleet accepts"] += 1
            wrong.append(f"{name}: gpufleet accepts, dstack refuses ({ds['error'][:160]})")
    return table, wrong


@functools.cache
def everything() -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """The corpus and the files we did not write, with dstack's verdicts (one oracle run)."""
    items = {**CORPUS, **files_we_did_not_write_here()}
    return items, oracle(items)


def test_every_module_that_asks_the_oracle_runs_in_its_workers_group() -> None:
    """Under `pytest -n` the oracle's process is started once, by the worker that runs every
    module asking it (tests/conftest.py, ONE_WORKER)."""
    from conftest import ONE_WORKER

    askers = {f"tests/{p.name}" for p in (ROOT / "tests").glob("test_*.py")
              if "from test_conformance import oracle" in p.read_text()}
    grouped = {m for m, group in ONE_WORKER.items() if group == "dstack-oracle"}
    assert grouped == askers | {"tests/test_conformance.py"}


def test_the_corpus_agrees_with_dstack() -> None:
    table, wrong = compare(*everything())
    assert wrong == [], "\n".join(wrong)
    assert table["both accept"] > 40 and table["both refuse"] > 40, table


def test_the_deliberate_refusals_are_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "dstack 0.22.5" in readme
    for code in DELIBERATE:
        assert f"`{code}`" in readme, code


# --- generated files ----------------------------------------------------------------------

NODES = st.sampled_from(["1", "2", "0..2", "..3", "2..", "3..1", "-1", "{min: 1, max: 2}",
                         "'2'", "x", "1.5", "0"])
GPUS = st.sampled_from(["A100", "H100:8", "24GB..", "1..8", "A100:80GB:8", "nvidia:2",
                        "A100::8", "2:4", "0", "L4,T4:1..2", "{count: 1}", "B200:8",
                        "80GB:40GB", "'8'"])
FIELDS = st.fixed_dictionaries({}, optional={
    "nodes": NODES,
    "resources": st.builds(lambda g, c: f"{{gpu: {g}, cpu: {c}}}", GPUS,
                           st.sampled_from(["2..", "8", "arm:4", "{min: 4}", "x"])),
    "spot_policy": st.sampled_from(["spot", "auto", "on-demand", "never"]),
    "max_price": st.sampled_from(["1", "0.5", "'2.5'", "0", "-1", "abc"]),
    "placement": st.sampled_from(["any", "cluster", "close"]),
    "blocks": st.sampled_from(["1", "4", "auto", "'2'", "0"]),
    "idle_duration": st.sampled_from(["5m", "off", "-1", "3600", "1x"]),
    "backends": st.sampled_from(["[aws]", "[gcp, azure]", "[]"]),
    "tags": st.sampled_from(["{a: b}", "{a: 1}", "{'a b': c}"]),
    "retry": st.sampled_from(["true", "{duration: 1h}", "{on_events: []}"]),
})


GATEWAY = st.fixed_dictionaries({
    "backend": st.sampled_from(["aws", "gcp", "azure", "lambda"]),
}, optional={
    "region": st.sampled_from(["us-east-1", "us-central1", "eastus", "mars-1"]),
    "domain": st.sampled_from(["gpu.example.com", "example", "*.x.io", "'1.2.3.4'"]),
    "public_ip": st.sampled_from(["true", "false", "'no'"]),
    "load_balancer": st.sampled_from(["{type: alb}", "null", "{type: nlb}"]),
    "certificate": st.sampled_from([
        "null", "{type: lets-encrypt}", "{type: acm, arn: 'arn:aws:acm:us-east-1:"
        "123456789012:certificate/abc'}", "{type: acm}", "{type: gcp-cm, name: "
        "projects/p/locations/us-central1/certificates/c}", "{type: other}"]),
    "replicas": st.sampled_from(["1", "2", "9", "10", "0", "'3'"]),
    "instance_type": st.sampled_from(["t3.small", "''"]),
    "default": st.sampled_from(["true", "'yes'", "maybe"]),
    "tags": st.sampled_from(["{a: b}", "{a: 1}"]),
})


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(FIELDS, min_size=40, max_size=40), st.lists(GATEWAY, min_size=20, max_size=20))
def test_generated_files_agree_with_dstack(fleets: list[dict[str, str]],
                                           gateways: list[dict[str, str]]) -> None:
    """Batches of forty generated fleets and twenty generated gateways, each a line to the
    worker's one oracle process."""
    items = {f"gen-{i}": fleet("".join(f"{k}: {v}\n" for k, v in f.items()))
             for i, f in enumerate(fleets)}
    items.update({f"gengw-{i}": gw("".join(f"{k}: {v}\n" for k, v in g.items()))
                  for i, g in enumerate(gateways)})
    _, wrong = compare(items)
    assert wrong == [], "\n".join(f"{w}\n{items[w.split(':')[0]]}" for w in wrong)


def agreement_table() -> dict[str, int]:
    """For the closing note: `python -c 'import test_conformance as t; print(t.agreement_table())'`
    from tests/."""
    table, _ = compare(*everything())
    return dict(table)


# --- every file both accept plans -------------------------------------------------------

# What may stop a file both accept from planning: the catalog has no offer (O001, O002), or
# the cluster kind is refused (C015: A3 High/Mega have no RDMA network gpufleet can build).
MAY_NOT_PLAN = {"O001", "O002", "C015"}
BACKENDS = """access:
  ssh_public_key: file:key.pub
backends:
  - {type: aws, cidr: 10.0.0.0/9, ssh_cidrs: [203.0.113.0/24]}
  - {type: gcp, project_id: my-ml-project, cidr: 10.128.0.0/9, ssh_cidrs: [203.0.113.0/24]}
  - {type: azure, subscription_id: 00000000-0000-0000-0000-000000000000,
     tenant_id: 00000000-0000-0000-0000-000000000000, cidr: 172.16.0.0/12,
     ssh_cidrs: [203.0.113.0/24], dns_resource_group: dns-zones}
"""
_ERROR = re.compile(r"^(f\d+)\.dstack\.yml:\d+:\d+: error\[([A-Z]\d{3})\]", re.M)


class _Planned(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def _plan(folder: Path, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> _Planned:
    """`gpufleet plan .` in ``folder``, through the CLI's entry point in this process."""
    from gpufleet.cli import main

    monkeypatch.chdir(folder)
    code = main(["plan", "."])
    out = capsys.readouterr()
    return _Planned(code, out.out, out.err)


def test_every_file_both_accept_plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """As a team would: every file dstack and gpufleet both accept, in one folder with a
    backends file (wide address pools, a key, Azure's DNS resource group), renamed apart;
    SSH fleets one by one (several name the same hosts). `gpufleet plan` exits 0 once the
    files the catalog cannot serve are set aside - and only those may be."""
    items, verdicts = everything()
    both = sorted(n for n, text in items.items() if verdicts[n]["ok"]
                  and not gpufleet_errors(text))
    assert len(both) > 60
    key = (ROOT / "examples" / "keys" / "gpufleet-example.pub").read_text()
    folder = tmp_path / "all"
    folder.mkdir()
    (folder / "backends.yml").write_text(BACKENDS)
    (folder / "key.pub").write_text(key)
    ssh = []
    for i, n in enumerate(both):
        text = re.sub(r"(?m)^name: .*$", f"name: c{i}-x", items[n])
        if "ssh_config" in yaml.safe_load(text):
            ssh.append((n, text))
        else:
            (folder / f"f{i:03d}.dstack.yml").write_text(text)
    first = _plan(folder, monkeypatch, capsys)
    refused = {}
    for stem, code in _ERROR.findall(first.stderr):
        refused.setdefault(stem, set()).add(code)
    names = {f"f{i:03d}": n for i, n in enumerate(both)}
    wrong = {names[stem]: codes for stem, codes in refused.items()
             if not codes <= MAY_NOT_PLAN}
    assert wrong == {}, first.stderr[-3000:]
    for stem in refused:
        (folder / f"{stem}.dstack.yml").unlink()
    second = _plan(folder, monkeypatch, capsys)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "policy: no violations" in second.stdout
    assert len(refused) < len(both) / 4, refused  # most files plan
    for n, text in ssh:
        one = tmp_path / f"ssh-{len(list(tmp_path.iterdir()))}"
        one.mkdir()
        (one / "f000.dstack.yml").write_text(text)
        r = _plan(one, monkeypatch, capsys)
        assert r.returncode == 0, (n, r.stderr[-2000:])


@pytest.fixture(autouse=True)
def _oracle_present() -> None:
    assert ORACLE.exists(), "run `make oracle` (make test does) to create .venv-dstack"


# --- what gpufleet hands to dstack ---------------------------------------------------------

def test_export_and_acceptance_output_parses_with_dstack(tmp_path: Path) -> None:
    """`gpufleet export dstack` (SSH fleet files and the server config) and `gpufleet
    acceptance` (the NCCL task) write files dstack's own models take."""
    from exportutil import export, write_export
    from test_handover import nic_files

    from gpufleet.cli import main

    examples = ROOT / "examples"
    fleet_files = sorted((examples / "fleets").glob("*.yml"))
    files = [*fleet_files, *sorted((examples / "gateways").glob("*.yml")),
             examples / "backends.yml"]
    state = write_export(tmp_path / "state.json", export(files))
    out = tmp_path / "out"
    assert main(["export", "dstack", "--state", state, "--out", str(out),
                 *nic_files(tmp_path)]) == 0
    tasks = tmp_path / "tasks"
    fleets = [yaml.safe_load(p.read_text())["name"] for p in fleet_files]
    for name in fleets:
        assert main(["acceptance", name, str(examples), "--out", str(tasks)]) == 0
    written = {f"export/{p.name}": p.read_text() for p in sorted(out.glob("*"))}
    written.update({f"task/{p.name}": p.read_text() for p in sorted(tasks.glob("*"))})
    for name in fleets:  # NCCL and burn-in each; pairs where the NCCL run spans nodes
        nccl = written[f"task/{name}-nccl.dstack.yml"]
        assert f"task/{name}-burnin.dstack.yml" in written
        assert (f"task/{name}-pairs.dstack.yml" in written) == ("mpirun" in nccl), name
    assert any(n.endswith("-pairs.dstack.yml") for n in written)
    assert "export/dstack-server-config.yml" in written
    kinds = {n: "server-config" for n in written if n.endswith("dstack-server-config.yml")}
    verdicts = oracle(written, kinds)
    refused = {n: v["error"] for n, v in verdicts.items() if not v["ok"]}
    assert refused == {}
    assert {v["type"] for v in verdicts.values()} == {"fleet", "gateway", "task",
                                                       "server-config"}
    # every cluster fleet on three clouds is handed over as hosts, Azure's scale sets too
    assert {n for n in written if n.startswith("export/") and "gateway" not in n} >= {
        "export/h100-train.dstack.yml", "export/a4.dstack.yml", "export/nd-h100.dstack.yml",
        "export/a100-any.dstack.yml"}


# --- the dstack commands gpufleet tells users to run (issue 53, item 2) ---------------------

def _told_commands() -> list[list[str]]:
    """Every `dstack ...` command line gpufleet's hints, export comments and README give."""
    import shlex

    root = Path(__file__).resolve().parents[1]
    texts = [p.read_text() for p in [root / "README.md",
                                     *sorted((root / "gpufleet").rglob("*.py"))]]
    found = set()
    for text in texts:
        # in backticks, after a `$ ` prompt, in a comment or a string: up to its end
        for m in re.finditer(r"(dstack (?:apply|gateway) (?:-|delete|list|get|update)"
                             r"[^`\"\\\n)]*)", text):
            found.add(m.group(1).strip().rstrip(".,;"))
    commands = []
    for line in sorted(found):
        # placeholders in f-strings and prose: give them a plain value
        line = re.sub(r"\{[^}]*\}", "x", line).replace("NAME", "x").replace("...", "")
        argv = shlex.split(line)
        if len(argv) <= 2:  # prose naming the command alone ("at `dstack apply`")
            continue
        if argv[-1] in ("-f", "--project"):  # prose that names the flag alone
            argv.append("x")
        commands.append(argv)
    return commands


@pytest.mark.slow
def test_every_dstack_command_gpufleet_gives_parses_with_dstacks_own_cli(
        tmp_path: Path) -> None:
    """dstack 0.22.5's own CLI takes every command line gpufleet tells a user to run, and
    reads the project from it: with no CLI config it answers "Project x is not configured"
    (its `apply` has `--project`, no `-P`: given `-P x` it answers "No default project";
    `gateway delete` takes the project on the `gateway` group). All in one process of the
    dstack virtualenv, through the CLI's entry point (tests/dstack_cli.py)."""
    commands = _told_commands()
    assert {tuple(c[:2]) for c in commands} >= {("dstack", "apply"), ("dstack", "gateway")}
    env = {**os.environ, "HOME": str(tmp_path)}
    r = subprocess.run([str(ORACLE), str(ROOT / "tests" / "dstack_cli.py")],
                       input=json.dumps([argv[1:] for argv in commands]), capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    answers = json.loads(r.stdout)
    assert len(answers) == len(commands)
    for argv, answer in zip(commands, answers, strict=True):
        out = answer["out"]
        assert answer["code"] != 2 and "nrecognized" not in out, (argv, out)
        if "--project" in argv:  # dstack read the project from the line
            project = argv[argv.index("--project") + 1]
            assert f"Project {project} is not configured" in out, (argv, out)
        else:  # a command for the default project; a gateway's project is never that
            assert "No default project" in out and not any("gateway" in a for a in argv), \
                (argv, out)


# --- profiles.yml (issue 53, item 16) ------------------------------------------------------

PROFILE_HEAD = "profiles:\n  - name: p\n"
PROFILES = {
    "plain": PROFILE_HEAD,
    "default": PROFILE_HEAD + "    default: true\n",
    "filters": PROFILE_HEAD + "    backends: [aws, gcp]\n    regions: [us-east-1]\n"
               "    availability_zones: [us-east-1a]\n    instance_types: [p5.48xlarge]\n",
    "spot": PROFILE_HEAD + "    spot_policy: auto\n    max_price: 40\n",
    "retry-true": PROFILE_HEAD + "    retry: true\n",
    "retry-object": PROFILE_HEAD + "    retry:\n      on_events: [no-capacity]\n"
                    "      duration: 2h\n",
    "idle": PROFILE_HEAD + "    idle_duration: 30m\n",
    "tags": PROFILE_HEAD + "    tags:\n      team: ml\n",
    "reservation": PROFILE_HEAD + "    reservation: cr-0123456789abcdef0\n",
    "two": PROFILE_HEAD + "  - name: q\n    default: true\n",
    "nameless-default": "profiles:\n  - default: true\n    spot_policy: auto\n",
    # what gpufleet refuses by its own rule
    "duplicate-names": PROFILE_HEAD + "  - name: p\n    spot_policy: spot\n",
    "two-defaults": PROFILE_HEAD + "    default: true\n  - name: q\n    default: true\n",
    # what both refuse
    "bad-spot": PROFILE_HEAD + "    spot_policy: sometimes\n",
    "retry-empty-events": PROFILE_HEAD + "    retry:\n      on_events: []\n",
    "unknown-key": PROFILE_HEAD + "    colour: blue\n",
    "old-retry-key": PROFILE_HEAD + "    retry_policy:\n      retry: true\n",
    "not-a-list": "profiles: p\n",
    "negative-price": PROFILE_HEAD + "    max_price: -1\n",
    # the seed docs' form: gpufleet reads it with a warning (P003), dstack refuses the file
    "resources": PROFILE_HEAD + "    resources:\n      gpu: H100:8\n",
}
# gpufleet's documented differences on profiles.yml (the README's conformance table)
PROFILE_REFUSALS = {"P001", "P002"}  # a name twice, two defaults: which one would apply?
PROFILE_READS = {"P003"}  # read with this warning where dstack refuses the file


def _gpufleet_profile(text: str) -> tuple[list[str], list[str]]:
    v = validate_texts({"profiles.yml": text})
    return (sorted({d.code for d in v.diagnostics if d.is_error}),
            sorted({d.code for d in v.diagnostics if not d.is_error}))


def test_profiles_agree_with_dstack_but_for_the_documented_differences() -> None:
    verdicts = oracle(PROFILES, {n: "profiles" for n in PROFILES})
    table: Counter[str] = Counter()
    wrong = []
    for name, text in PROFILES.items():
        ds, (errors, warnings) = verdicts[name], _gpufleet_profile(text)
        if ds["ok"] == (not errors):
            table["agree"] += 1
        elif ds["ok"] and set(errors) <= PROFILE_REFUSALS:
            table["gpufleet refuses by its own rule"] += 1
        elif not ds["ok"] and not errors and set(warnings) & PROFILE_READS:
            table["gpufleet reads, with a warning"] += 1
        else:
            wrong.append(f"{name}: dstack {'accepts' if ds['ok'] else 'refuses'} "
                         f"({ds['error'][:120]}), gpufleet errors {errors} warnings {warnings}")
    assert wrong == [], "\n".join(wrong)
    assert table["agree"] >= 15 and table["gpufleet reads, with a warning"] == 1, table
    assert table["gpufleet refuses by its own rule"] == 2, table
    readme = (ROOT / "README.md").read_text()
    for code in (*PROFILE_REFUSALS, *PROFILE_READS):
        assert f"`{code}`" in readme, code


def test_the_old_retry_key_is_pointed_at_retry() -> None:
    """dstack 0.22.5 names it `retry`; spelling alone would say `creation_policy`."""
    v = validate_texts({"profiles.yml": PROFILES["old-retry-key"]})
    (d,) = [d for d in v.diagnostics if d.code == "S001"]
    assert d.hint == "dstack renamed it: use 'retry'"
    v = validate_texts({"f.dstack.yml": "type: fleet\nname: ab\nnodes: 1\nretry_policy: {}\n"})
    assert [d.hint for d in v.diagnostics if d.code == "S001"] == ["dstack renamed it: use "
                                                                    "'retry'"]
