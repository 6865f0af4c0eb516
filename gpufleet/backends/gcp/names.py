"""gcp: the physical names the APIs accept for the resources gpufleet creates. Pure data.

Compute Engine names are 1-63 characters matching `[a-z]([-a-z0-9]*[a-z0-9])?`
(cloud.google.com/compute/docs/naming-resources#resource-name-format). The gcp provider
auto-names them: the logical name, `-` and 7 random characters (Pulumi docs, "Resource names
and identity: autonaming")."""

from __future__ import annotations

import re
from types import MappingProxyType

from gpufleet.traits import NameBudget, NameRule, NetworkQuota

_RFC1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DOCS = "cloud.google.com/compute/docs/naming-resources#resource-name-format"
_COMPUTE = ("address", "disk", "firewall", "forwardingRule", "globalAddress", "instance",
            "instanceGroup", "network", "regionBackendService", "regionHealthCheck",
            "regionTargetHttpProxy", "regionUrlMap", "resourcePolicy", "router", "routerNat",
            "subnetwork")

NAME_RULES = MappingProxyType({
    f"gcp:compute/{kind}:{kind[0].upper()}{kind[1:]}": NameRule(63, _DOCS, _RFC1035, "name")
    for kind in _COMPUTE})

NAME_BUDGETS = MappingProxyType({
    # 63 - 8 - len("-ssh-from-bastion"): the firewall that admits the bastion
    "fleet": NameBudget(38, "-ssh-from-bastion", "gcp:compute/firewall:Firewall"),
    # 63 - 8 - len("-net-router"): the Cloud Router of a private gateway's network
    "gateway": NameBudget(44, "-net-router", "gcp:compute/router:Router"),
})

_QUOTAS = "cloud.google.com/vpc/docs/quota"
_ASK = "the Quotas page of the Google Cloud console (IAM & Admin > Quotas)"
# The project's quotas the stack's networks draw on. Google gives no fixed default for them
# ("see the Quotas page in the Google Cloud console", cloud.google.com/vpc/docs/quota):
# preflight reads each project's limit and use from the Compute Engine API (`live`: the
# quota's metric; project-wide unless regional).
NETWORK_QUOTAS = (
    NetworkQuota("Networks", "gcp:compute/network:Network", None, _ASK, _QUOTAS,
                 live="NETWORKS", scope="global"),
    NetworkQuota("Subnetworks", "gcp:compute/subnetwork:Subnetwork", None, _ASK, _QUOTAS,
                 live="SUBNETWORKS", scope="global"),
    NetworkQuota("Firewall rules", "gcp:compute/firewall:Firewall", None, _ASK, _QUOTAS,
                 live="FIREWALLS", scope="global"),
    NetworkQuota("Cloud Routers", "gcp:compute/router:Router", None, _ASK, _QUOTAS,
                 live="ROUTERS", scope="global"),
    NetworkQuota("Static external IP addresses", "gcp:compute/address:Address", None, _ASK,
                 _QUOTAS, live="STATIC_ADDRESSES", skip=(("addressType", "INTERNAL"),)),
)
