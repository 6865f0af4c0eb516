"""Lambda Cloud resources through Pulumi dynamic providers: SSH keys, firewall rulesets,
filesystems and instances over Lambda's public REST API (gpufleet.backends.lambda_.api).

Pulumi pickles each resource's provider object into the stack's state (dill, the class by
reference: module and name) and unpickles it in the engine's provider process. So the
provider classes are thin and hold nothing: the API key is read when the engine configures
them (the stack config secret `gpufleet:lambdaApiKey`, else $LAMBDA_API_KEY) and never lands
in the state, and their work is done by importable functions. Upgrading gpufleet keeps
working as long as ``gpufleet.components.lambda_.dynamic.<Class>`` keeps its path and name:
never move or rename them (README, "Lambda").

What the API changes in place: an instance's name (POST /instances/{id}), a ruleset's name and
rules (PATCH /firewall-rulesets/{id}); any other change replaces the resource. `read`
refreshes from the API (drift); a resource the API no longer knows reads as gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import pulumi
from pulumi.dynamic import (
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)

from gpufleet.backends.lambda_.api import LambdaApi, LambdaError

KEY_CONFIG = "gpufleet:lambdaApiKey"
_KEY: list[str] = []  # the key the engine configured this process with
IN_USE_TRIES, IN_USE_WAIT = 60, 10.0  # a ruleset or filesystem still held by terminating nodes


def api() -> LambdaApi:
    return LambdaApi.from_env(_KEY[0] if _KEY else None)


class _Provider(ResourceProvider):
    """The shared part: the key from the engine's configuration, and the diff of inputs
    against the ones the API changes in place (``in_place``)."""

    in_place: ClassVar[frozenset[str]] = frozenset()
    outputs: ClassVar[frozenset[str]] = frozenset()  # what the API answers, not inputs

    def configure(self, req: ConfigureRequest) -> None:
        key = req.config.get(KEY_CONFIG)
        if key and not _KEY:
            _KEY.append(str(key))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = sorted(k for k in {*olds, *news} - self.outputs
                         if not k.startswith("_") and olds.get(k) != news.get(k))
        replaces = [k for k in changed if k not in self.in_place]
        return DiffResult(changes=bool(changed), replaces=replaces,
                          delete_before_replace=bool(replaces))


def _gone_or(read: Callable[[], dict[str, Any] | None], props: Mapping[str, Any],
             resource_id: str) -> ReadResult:
    found = read()
    if found is None:
        return ReadResult(None, {})
    return ReadResult(resource_id, {**props, **found})


# What DELETE answers while instances still hold a ruleset or filesystem (OpenAPI 1.10.0:
# ApiErrorFirewallRulesetInUse, ApiErrorFilesystemInUse)
IN_USE = frozenset({"firewall-rulesets/firewall-ruleset-in-use",
                    "filesystems/filesystem-in-use"})


def _until_free(call: Callable[[], None]) -> None:
    """A delete the API refuses while instances still hold the resource (they are being
    terminated in the same update): tried again, a bounded number of times."""
    for attempt in range(IN_USE_TRIES):
        try:
            call()
            return
        except LambdaError as e:
            if e.code not in IN_USE or attempt == IN_USE_TRIES - 1:
                raise
            api().pacer.clock.sleep(IN_USE_WAIT)


class SshKeyProvider(_Provider):
    outputs = frozenset({"key_id"})

    def create(self, props: dict[str, Any]) -> CreateResult:
        key = api().call("POST", "/ssh-keys", {"name": props["name"],
                                               "public_key": props["public_key"]})
        return CreateResult(str(key["id"]), {**props, "key_id": str(key["id"])})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return _gone_or(lambda: next((k for k in api().list("/ssh-keys")
                                      if str(k.get("id")) == id_), None), props, id_)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        api().delete(f"/ssh-keys/{id_}")


class FirewallRulesetProvider(_Provider):
    in_place = frozenset({"name", "rules"})
    outputs = frozenset({"ruleset_id"})

    def create(self, props: dict[str, Any]) -> CreateResult:
        made = api().call("POST", "/firewall-rulesets", {
            "name": props["name"], "region": props["region"],
            "rules": wire_rules(props["rules"])})
        return CreateResult(str(made["id"]), {**props, "ruleset_id": str(made["id"])})

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        api().call("PATCH", f"/firewall-rulesets/{id_}", {"name": news["name"],
                                                            "rules": wire_rules(news["rules"])})
        return UpdateResult({**news, "ruleset_id": id_})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        def found() -> dict[str, Any] | None:
            try:
                data: dict[str, Any] = api().call("GET", f"/firewall-rulesets/{id_}")
            except LambdaError as e:
                if e.status == 404:
                    return None
                raise
            return {"name": data.get("name"), "rules": data.get("rules")}
        return _gone_or(found, props, id_)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _until_free(lambda: api().delete(f"/firewall-rulesets/{id_}"))


class FilesystemProvider(_Provider):
    outputs = frozenset({"filesystem_id", "mount_point"})

    def create(self, props: dict[str, Any]) -> CreateResult:
        made = api().call("POST", "/filesystems", {"name": props["name"],
                                                   "region": props["region"]})
        return CreateResult(str(made["id"]), {**props, "filesystem_id": str(made["id"]),
                                              "mount_point": made.get("mount_point")})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return _gone_or(lambda: next(({"mount_point": f.get("mount_point")}
                                      for f in api().list("/file-systems")
                                      if str(f.get("id")) == id_), None), props, id_)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        _until_free(lambda: api().delete(f"/filesystems/{id_}"))


def wire_rules(rules: Any) -> list[dict[str, Any]]:
    """The rules as the API types them: Pulumi carries every number through the dynamic
    provider as a double (22 arrives as 22.0), and `port_range` is an array of integers
    (OpenAPI 1.10.0, FirewallRule.port_range: integer 1-65535)."""
    out = []
    for rule in rules or []:
        r = dict(rule)
        if r.get("port_range") is not None:
            ports = []
            for p in r["port_range"]:
                if isinstance(p, float) and not p.is_integer():
                    raise LambdaError(0, "bad-port", f"port {p} is not a whole number")
                ports.append(int(p))
            r["port_range"] = ports
        out.append(r)
    return out


def launch_body(props: Mapping[str, Any]) -> dict[str, Any]:
    """The launch request from an instance's inputs (the API's own field names)."""
    body: dict[str, Any] = {k: props[k] for k in (
        "region_name", "instance_type_name", "ssh_key_names", "name") if k in props}
    for key in ("user_data", "tags", "firewall_rulesets", "file_system_mounts", "image"):
        if props.get(key):
            body[key] = props[key]
    return body


_OUTPUTS = ("instance_id", "ip", "private_ip", "hostname", "status")


class InstanceProvider(_Provider):
    """An instance: launched, and answered at once (`booting`); its ``InstanceReady`` waits
    for it. The engine asks the provider process for at most four operations at a time
    (pulumi/dynamic's gRPC server: four workers): a create that waited for `active` would
    boot a 100-node fleet in 25 waves; launched first, the nodes boot together."""

    in_place = frozenset({"name"})
    outputs = frozenset(_OUTPUTS)

    def create(self, props: dict[str, Any]) -> CreateResult:
        instance_id = api().launch(launch_body(props))
        return CreateResult(instance_id, {**props, **dict.fromkeys(_OUTPUTS),
                                          "instance_id": instance_id, "status": "booting"})

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        api().rename(id_, news["name"])
        return UpdateResult({**news, **{k: olds[k] for k in _OUTPUTS if k in olds}})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        def found() -> dict[str, Any] | None:
            data = _running(id_)
            return None if data is None else {"name": data.get("name"),
                                              **_instance_outputs(data)}
        return _gone_or(found, props, id_)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        api().terminate([id_])


class InstanceReadyProvider(_Provider):
    """A launched instance once it is `active`, with its addresses: what the fleet's outputs
    read. Its create waits (``LambdaApi.wait_active``, one shared list request a poll); a
    wait that fails leaves the instance in the stack (its ``Instance`` holds it), says so
    and how to go on. Deleting it deletes nothing: the ``Instance`` terminates."""

    outputs = frozenset(_OUTPUTS) - {"instance_id"}

    def create(self, props: dict[str, Any]) -> CreateResult:
        instance_id = str(props["instance_id"])
        try:
            found = api().wait_active(instance_id)
        except LambdaError as e:
            raise LambdaError(e.status, e.code, f"{e.message}; the instance stays in the "
                              f"stack: `pulumi up` waits for it again, `gpufleet replace` "
                              f"launches node {props.get('node')} anew, or terminate it "
                              "with `pulumi destroy`") from None
        return CreateResult(instance_id, {**props, **_instance_outputs(found)})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        def found() -> dict[str, Any] | None:
            data = _running(id_)
            return None if data is None else {k: v for k, v in _instance_outputs(data).items()
                                              if k != "instance_id"}
        return _gone_or(found, props, id_)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        return None  # the node's Instance terminates it


def _running(instance_id: str) -> dict[str, Any] | None:
    """The instance as the API has it; None when it is gone (unknown, or ended)."""
    data = api().instance(instance_id)
    return None if data is None or data.get("status") in ("terminated", "preempted") \
        else data


def _instance_outputs(data: Mapping[str, Any]) -> dict[str, Any]:
    return {"instance_id": data.get("id"), "ip": data.get("ip"),
            "private_ip": data.get("private_ip"), "hostname": data.get("hostname"),
            "status": data.get("status")}


# --- the resources ---------------------------------------------------------------------------

class SshKey(pulumi.dynamic.Resource, module="lambda", name="SshKey"):
    def __init__(self, name: str, props: Mapping[str, Any],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(SshKeyProvider(), name, {**props, "key_id": None}, opts)


class FirewallRuleset(pulumi.dynamic.Resource, module="lambda", name="FirewallRuleset"):
    ruleset_id: pulumi.Output[str]

    def __init__(self, name: str, props: Mapping[str, Any],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(FirewallRulesetProvider(), name, {**props, "ruleset_id": None}, opts)


class Filesystem(pulumi.dynamic.Resource, module="lambda", name="Filesystem"):
    filesystem_id: pulumi.Output[str]
    mount_point: pulumi.Output[str]

    def __init__(self, name: str, props: Mapping[str, Any],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(FilesystemProvider(), name,
                         {**props, "filesystem_id": None, "mount_point": None}, opts)


class Instance(pulumi.dynamic.Resource, module="lambda", name="Instance"):
    def __init__(self, name: str, props: Mapping[str, Any],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(InstanceProvider(), name,
                         {**props, **dict.fromkeys(_OUTPUTS)}, opts)


class InstanceReady(pulumi.dynamic.Resource, module="lambda", name="InstanceReady"):
    ip: pulumi.Output[str]
    private_ip: pulumi.Output[str]

    def __init__(self, name: str, props: Mapping[str, Any],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(InstanceReadyProvider(), name,
                         {**props, **dict.fromkeys(_OUTPUTS[1:])}, opts)
