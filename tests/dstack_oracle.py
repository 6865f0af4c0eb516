"""dstack 0.22.5 as the oracle for its own format: what `dstack apply -f FILE` would accept.

Runs in its own virtualenv (`.venv-dstack`, from tests/oracle-requirements.txt: dstack pins
gpuhunt and protobuf versions gpufleet's Pulumi stack cannot share) and imports nothing of
gpufleet. Reads a JSON list of {"name", "text"} on standard input and writes a JSON list of
{"name", "ok", "error"}: each file loaded as the CLI loads it (`yaml.safe_load`, then
`parse_apply_configuration`; an item with `"kind": "server-config"` is read as the server reads
`~/.dstack/server/config.yml`, with `ServerConfig`; one with `"kind": "profiles"` as the CLI
reads `profiles.yml`, with `ProfilesConfig`), then the server's checks that need no
cloud - for fleets
`_validate_fleet_spec_and_set_defaults` (name, backend/SSH fields, SSH users and keys,
internal IPs), for gateways `_validate_gateway_configuration` (name, backend, domain,
private gateways, replicas, load balancer, certificates).

With `--lines` it answers one such list per line of standard input, a line of verdicts each,
until its input ends: the tests keep one process (dstack's server takes about 2.5 s to import)
for every batch they ask about.

Two things the CLI would read from the machine are stood in for: an `identity_file` becomes a
valid private key (the CLI reads the file), and whether a backend's Python dependencies are
installed on the dstack server is not checked (that is the server's environment, not the file).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import yaml


def _key() -> Any:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from dstack._internal.core.models.fleets import SSHKey

    private = ed25519.Ed25519PrivateKey.generate()
    text = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                 serialization.NoEncryption()).decode()
    return SSHKey(public="", private=text)


def declared_features() -> dict[str, set[str]]:
    """Backend type -> the compute feature classes its Compute class declares, read from
    dstack's source (the installed lists leave out backends whose cloud SDKs are missing,
    and the oracle installs none): in each backend folder, the configurator's `TYPE` and
    the bases of the last `*Compute` class of compute.py, followed through the classes
    other backends' modules define."""
    import ast
    from pathlib import Path

    import dstack._internal.core.backends as backends
    from dstack._internal.core.models.backends.base import BackendType

    root = Path(backends.__file__).parent
    bases: dict[str, list[str]] = {}
    main_class: dict[str, str] = {}
    for folder in sorted(root.iterdir()):
        compute = folder / "compute.py"
        if not compute.is_file():
            continue
        classes = [n for n in ast.parse(compute.read_text()).body if isinstance(n, ast.ClassDef)]
        for c in classes:
            bases[c.name] = [ast.unparse(b).split(".")[-1] for b in c.bases]
        computes = [c.name for c in classes if c.name.endswith("Compute")]
        conf = folder / "configurator.py"
        if computes and conf.is_file():
            for node in ast.walk(ast.parse(conf.read_text())):
                if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "TYPE":
                    main_class[ast.unparse(node.value).split(".")[-1]] = computes[-1]

    def closure(name: str) -> set[str]:
        out: set[str] = set()
        for b in bases.get(name, []):
            out |= {b} | closure(b)
        return out

    return {BackendType[t].value: closure(c) for t, c in main_class.items()}


def checker() -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """The function that judges a list of items, dstack's modules imported and set up."""
    import dstack._internal.server.app  # noqa: F401  (the server's modules import in this order)
    from dstack._internal.core.models.backends.base import BackendType
    from dstack._internal.core.models.configurations import parse_apply_configuration
    from dstack._internal.core.models.fleets import FleetConfiguration, FleetSpec, SSHHostParams
    from dstack._internal.core.models.gateways import GatewayConfiguration
    from dstack._internal.core.models.profiles import Profile, ProfilesConfig
    from dstack._internal.server.services import gateways
    from dstack._internal.server.services.config import ServerConfig
    from dstack._internal.server.services.fleets import _validate_fleet_spec_and_set_defaults

    features = declared_features()
    gateways.check_backend_type_available = lambda _backend: None  # type: ignore[attr-defined]
    gateways.BACKENDS_WITH_GATEWAY_SUPPORT = [  # type: ignore[attr-defined]
        BackendType(b) for b, f in features.items() if "ComputeWithGatewaySupport" in f]
    gateways.BACKENDS_WITH_PRIVATE_GATEWAY_SUPPORT = [  # type: ignore[attr-defined]
        BackendType(b) for b, f in features.items() if "ComputeWithPrivateGatewaySupport" in f]
    key = _key()

    def check(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [judge(item) for item in items]

    def judge(item: dict[str, Any]) -> dict[str, Any]:
        try:
            if item.get("kind") == "server-config":
                ServerConfig.model_validate(yaml.safe_load(item["text"]))
                return {"name": item["name"], "ok": True, "error": "", "type": "server-config"}
            if item.get("kind") == "profiles":  # as the CLI reads profiles.yml
                ProfilesConfig.model_validate(yaml.safe_load(item["text"]))
                return {"name": item["name"], "ok": True, "error": "", "type": "profiles"}
            conf = parse_apply_configuration(yaml.safe_load(item["text"]))
            if isinstance(conf, FleetConfiguration):
                ssh = conf.ssh_config
                if ssh is not None:
                    if ssh.identity_file is not None:
                        ssh.ssh_key = key
                    for host in ssh.hosts:
                        if isinstance(host, SSHHostParams) and host.identity_file is not None:
                            host.ssh_key = key
                _validate_fleet_spec_and_set_defaults(
                    FleetSpec(configuration=conf, profile=Profile(name="default")))
            elif isinstance(conf, GatewayConfiguration):
                gateways._validate_gateway_configuration(conf)
            return {"name": item["name"], "ok": True, "error": "", "type": conf.type}
        except Exception as e:  # every refusal, whatever dstack raises it as
            return {"name": item["name"], "ok": False,
                    "error": f"{type(e).__name__}: {str(e)[:300]}", "type": None}
    return check


def main() -> None:
    check = checker()
    if "--lines" not in sys.argv[1:]:
        json.dump(check(json.load(sys.stdin)), sys.stdout)
        return
    for line in sys.stdin:
        sys.stdout.write(json.dumps(check(json.loads(line))) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
