"""The table behind ``gpufleet.codes``: every diagnostic code with its title and one-line
fix, and the passes the code letters stand for. Pure data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class Code:
    title: str
    fix: str


PASSES = {"L": "loading", "S": "schema", "F": "fleet rules", "G": "gateway rules",
          "V": "volume rules", "P": "profiles", "B": "backends file", "K": "lock file",
          "O": "offers", "C": "compile"}

CODES: Mapping[str, Code] = MappingProxyType({
    "L000": Code("not a readable regular file",
                 "point gpufleet at the YAML file itself, not a device, pipe or socket"),
    "L001": Code("file over the 10 MB limit", "split the file; fleet files are small"),
    "L002": Code("not UTF-8 text", "save the file as UTF-8"),
    "L003": Code("YAML syntax error", "fix the YAML at the position shown"),
    "L004": Code("duplicate or non-scalar mapping key", "keep one of the two keys"),
    "L005": Code("YAML nested too deeply, or expanded past the limit through aliases",
                 "flatten the document; write values out instead of nesting aliases"),
    "L006": Code("recursive alias (a node contains itself)", "remove the alias"),
    "L007": Code("unknown or missing `type`",
                 "set `type: fleet` or `type: gateway` (or use a known file kind)"),
    "L008": Code("a dstack file gpufleet does not compile (task, service, ...)",
                 "nothing to do: gpufleet skips it with this warning"),
    "L009": Code("a value a YAML tag cannot produce, or an integer over 30 digits",
                 "write the value plainly"),
    "L010": Code("unsupported YAML tag (`!!binary`, `!!set`, `!!python/...`)",
                 "remove the tag"),
    "L011": Code("empty file", "add a document, or remove the file"),
    "L015": Code("a file with more values than gpufleet reads in one file (100,000 scalars: "
                 "the parse budget)", "split the file; fleet files hold a few hundred"),
    "L014": Code("a fleet or gateway file with more than one YAML document (dstack reads one)",
                 "put each fleet and gateway in a file of its own"),
    "L013": Code("a value of another type that dstack's models convert (`'1.25'` for a number, "
                 "`12345` for a string)", "write the value in the type the key takes"),
    "L012": Code("a number YAML 1.1 reads differently than it looks (`017` is 15, `1:30` is "
                 "90, `0x10` is 16)", "write the number plainly, or quote it if it is text"),
    "S001": Code("unknown key", "remove the key, or fix its spelling (see the hint)"),
    "S002": Code("wrong type", "write a value of the type named in the message"),
    "S003": Code("value not among the allowed ones", "use one of the values listed"),
    "S004": Code("missing required key", "add the key named in the message"),
    "S005": Code("name does not match dstack's name pattern",
                 "use lower-case letters, digits and dashes, starting with a letter"),
    "S006": Code("number or list out of bounds", "stay within the bounds in the message"),
    "S007": Code("other schema violation", "fix the value as the message says"),
    "S010": Code("a name that ends in a line break (gpufleet's own rule: dstack's pattern lets "
                 "it through)", "remove the line break"),
    "S009": Code("a gpufleet setting in a dstack file (`previous_names`, `dns_zone`, "
                 "`protect_address`, `create_dns_zone`)",
                 "move it to the backends file: `fleets:` / `gateways:` by name"),
    "F001": Code("invalid `nodes`", "write `nodes: N`, `min..max` or `{min, target, max}`"),
    "F002": Code("invalid `resources`", "follow dstack's resources grammar (see the message)"),
    "F003": Code("invalid `idle_duration`", "write seconds, `30m`, `3d`, or `off`"),
    "F004": Code("invalid tag key or value", "use dstack's tag characters"),
    "F005": Code("invalid `retry`", "write `true`, or `{on_events: [...], duration: 1h}`"),
    "F006": Code("a backend gpufleet cannot build",
                 "set `backends` to a backend gpufleet builds (README, capability table)"),
    "F007": Code("keys of the other fleet kind (SSH vs backend fleet)",
                 "remove the keys the message names"),
    "F008": Code("neither `nodes` nor `ssh_config`", "add `nodes: N`"),
    "F009": Code("fleet without `name` (gpufleet's own rule)", "add `name:`"),
    "F010": Code("cluster zones in several regions", "list zones of a single region"),
    "F011": Code("`reservation` without a backend that supports it",
                 "add a backend with reservations to `backends`, or remove `reservation`"),
    "F012": Code("fleet name used twice", "give each fleet its own name"),
    "F013": Code("duplicate `backend_options` entry", "keep one entry per backend"),
    "F014": Code("invalid SSH fleet `network`", "give a private CIDR"),
    "F015": Code("SSH host without a user or key",
                 "set the user and key on the host or in `ssh_config`"),
    "F016": Code("invalid `internal_ip`", "give private addresses on all hosts or none"),
    "F017": Code("SSH cluster without a shared network",
                 "set `ssh_config.network` to the hosts' private subnet"),
    "F018": Code("region of the wrong shape for the fleet's backends",
                 "use the backend's region names (us-east-1, us-central1, eastus)"),
    "F019": Code("`previous_names` lists a fleet that still exists",
                 "rename the other fleet or drop the name"),
    "F020": Code("a count or size dstack reads but gpufleet refuses (its own rule): negative, "
                 "not finite, over 10^9, a GPU memory without a unit, an empty GPU name",
                 "write a whole, finite, non-negative number (sizes with GB, MB or TB)"),
    "F021": Code("the same SSH host (hostname and port) twice, in one fleet or two "
                 "(gpufleet's own rule)", "list each host once; other ports are other hosts"),
    "F022": Code("a backend gpufleet does not build, left out of a `backends` list that "
                 "names one it builds (warning)", "remove it, or keep it for dstack's own use"),
    "G002": Code("`instance_type` on a backend whose gateways have a fixed size",
                 "remove `instance_type`"),
    "G003": Code("private gateway on a backend without private gateways",
                 "use a backend with private gateways (README, capability table)"),
    "G004": Code("Let's Encrypt on a private gateway",
                 "set `certificate: null`, or the backend's own certificate type"),
    "G005": Code("a certificate type of another cloud's own service",
                 "use the backend's certificate type, or `certificate: null`"),
    "G006": Code("Let's Encrypt with several replicas",
                 "set `certificate: null`, or the backend's own certificate type"),
    "G007": Code("gateway without `name` (gpufleet's own rule)", "add `name:`"),
    "G008": Code("gateway name used twice", "give each gateway its own name"),
    "G009": Code("invalid `domain`", "use a DNS name such as `gpu.example.com`"),
    "G010": Code("a DNS zone without the resource group its backend keeps it in",
                 "set `dns_resource_group` in the backend's entry of the backends file"),
    "G011": Code("templated domain: no DNS record is created",
                 "create the `*.<domain>` records yourself"),
    "G012": Code("domain outside its DNS zone",
                 "set the gateway's `dns_zone` in the backends file to a parent of the domain"),
    "G013": Code("two gateways create the same DNS zone",
                 "let one create it; the other looks it up"),
    "G014": Code("region of the wrong shape for the gateway's backend",
                 "use the backend's region names"),
    "G015": Code("a certificate reference of the wrong shape (gpufleet's own "
                 "rule: dstack takes any text, and its load balancer fails at creation)",
                 "give the certificate's full ARN or resource name"),
    "G016": Code("a load balancer and certificate dstack refuses together",
                 "follow the combination in the message"),
    "P001": Code("profile name used twice", "give each profile its own name"),
    "P002": Code("several default profiles", "keep `default: true` on one profile"),
    "P003": Code("`resources` in a profile: gpufleet reads it as the default of the fleets "
                 "that set none, and dstack 0.22.5 refuses the whole file (its profiles have "
                 "no `resources`)", "set `resources` in the fleet files and drop it from "
                 "profiles.yml, so that dstack reads the file too"),
    "B001": Code("backend listed twice", "keep one entry per backend"),
    "B002": Code("both `vpc_name` and `vpc_ids`", "keep one of the two"),
    "B003": Code("`default_vpcs: false` without a VPC", "set `vpc_name` or `vpc_ids`"),
    "B004": Code("private nodes without the existing network their backend needs",
                 "set `vpc_ids` or `subnet_ids`, or `public_ips: true`"),
    "B005": Code("invalid CIDR", "write a network address with a prefix, e.g. 10.0.0.0/16"),
    "B006": Code("SSH open to the whole internet", "list your office or VPN ranges"),
    "B007": Code("a location in both `vpc_ids` and `subnet_ids`", "keep one of the two"),
    "B008": Code("`cidr` not a private IPv4 range of /24 or larger",
                 "use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"),
    "B009": Code("`vpc_project_id` without `vpc_name`",
                 "name the host project's shared network in `vpc_name`"),
    "B010": Code("an access option of another backend", "move it to that backend's entry"),
    "B011": Code("unreadable or invalid SSH public key",
                 "point `ssh_public_key` at the `.pub` file"),
    "K002": Code("lock entry with a zone outside its region",
                 "`gpufleet lock --upgrade --fleet NAME` instead of editing the lock"),
    "K003": Code("not a gpufleet lock file", "point `--lock` at the file `gpufleet lock` writes"),
    "K004": Code("invalid address block in a lock entry",
                 "run `gpufleet lock` to record the block instead of editing it"),
    "O001": Code("no offer survives the fleet's filters",
                 "relax the filter the message names (see the hint)"),
    "O002": Code("no catalog offer matches the resources", "see `gpufleet catalog`"),
    "O010": Code("the locked offer is no longer in the catalog",
                 "nothing, or `gpufleet lock --upgrade --fleet NAME` to move on purpose"),
    "O011": Code("missing or stale lock entry", "run `gpufleet lock` and commit the lock"),
    "C001": Code("more nodes than the fleet's subnet holds", "split the fleet"),
    "C002": Code("a reservation with a spot offer", "set `spot_policy: on-demand`"),
    "C003": Code("fewer `extra_vpcs` than the machine type needs",
                 "list enough VPCs, or let gpufleet create them"),
    "C004": Code("the backend's address pool is full",
                 "give the backend a larger `cidr` in the backends file"),
    "C005": Code("a Capacity Block with a variable size", "set `nodes: N`"),
    "C006": Code("a fleet network overlapping its backend's RDMA range",
                 "give the backend a `cidr` outside it"),
    "C008": Code("InfiniBand cluster over the scale-set limit",
                 "split the fleet, or raise `max_scale_set_nodes` after the cloud raises it"),
    "C010": Code("cheapest offer on a backend gpufleet cannot build",
                 "set `backends:` to a backend gpufleet builds (README, capability table)"),
    "C011": Code("no SSH public key: `pulumi up` needs the stack config",
                 "set `access.ssh_public_key` in the backends file"),
    "C012": Code("private nodes with no way in",
                 "use a bastion, or the cloud's own way in (README, capability table)"),
    "C013": Code("`ssh_cidrs` is empty: SSH from nowhere", "add your range to `ssh_cidrs`"),
    "C014": Code("too many plain VMs (not a scale set) in one fleet",
                 "split the fleet, or use an InfiniBand scale set"),
    "C015": Code("the cluster's GPU fabric needs software gpufleet cannot set up on that type",
                 "build the networks only (`nodes: 0..N`), pick another type, or name the "
                 "image that carries it where the backend takes one"),
    "C017": Code("a Shared VPC: the host project's firewall rules and NAT are not gpufleet's "
                 "(warning)", "have the host project allow what the message lists"),
    "C018": Code("the plan's whole bill is over the monthly warning threshold",
                 "check the fleets' sizes; raise `cost: {warn_per_month}` in the backends file "
                 "or `--warn-cost-per-month` when the spend is intended"),
    "C019": Code("a physical name the cloud would refuse: longer than its limit or of a shape it "
                 "does not take, auto-name suffix included",
                 "shorten the fleet, gateway or filesystem name the resource's name starts with"),
    "C020": Code("the stack's own resources in one region pass a default network quota of the "
                 "cloud (VPCs, Elastic IPs, internet gateways)",
                 "ask for more through the quota named, or put the fleets in fewer regions"),
    "C023": Code("a fleet's `network` (backends file) names a fleet the files do not plan",
                 "name another fleet of the files, or drop `network`"),
    "C024": Code("a fleet joins the network of a fleet on another backend or region, or on a "
                 "backend whose fleets share no network",
                 "join a fleet of the same backend and region, or drop `network`"),
    "C025": Code("a fleet joins a network that cannot take it: an existing network, one that "
                 "joins another itself, one without a NAT for private nodes, or one past its "
                 "address blocks", "drop `network`"),
    "C026": Code("a fleet joins a network while a filesystem is reached through a peering of "
                 "one of the two (or, where its backend says so, holds a filesystem)",
                 "keep the networks apart, or mount the filesystem from one fleet"),
    "C028": Code("tags a backend cannot carry: a key its API refuses even after gpufleet's "
                 "rewriting, or two keys "
                 "that become one (keys are lower-cased)",
                 "rename the tag keys so that each is distinct and valid on the backend"),
    "C029": Code("a cluster's host setup installs its fabric's software from the cloud's own "
                 "registries while the nodes have no service account to read them (warning)",
                 "give the backend a service account that may read them (the message names "
                 "the setting and the role)"),
    "C027": Code("a fleet wants more instances than gpufleet launches on its backend",
                 "split the fleet"),
    "C021": Code("two resources of the plan with one URN (one fleet or gateway name is another's "
                 "followed by a role)", "rename one of the two"),
    "C022": Code("an offline run too big for the memory this process may take",
                 "plan on a machine with more memory, or plan the big fleet with `nodes: 0..N`"),
    "B012": Code("a declared reservation's kind is not one of its backend's",
                 "use one of the kinds the message lists"),
    "B013": Code("a declared reservation's `ends` is not an ISO 8601 time",
                 "write it like 2026-12-01T12:00:00Z"),
    "V001": Code("a volume on a backend gpufleet builds no volumes on",
                 "use a backend with volumes, or let dstack manage it"),
    "V002": Code("a volume file without a key gpufleet needs: `name`, `region`, `size` (new "
                 "volumes)",
                 "add what the message names"),
    "V003": Code("a filesystem size the service does not offer (Lustre's steps per tier, NFS "
                 "bounds and steps)",
                 "pick a size the hint lists"),
    "V004": Code("a filesystem's fleet on another cloud or in another region",
                 "mount a fleet of the filesystem's cloud and region"),
    "V005": Code("a filesystem in another zone than the fleet that mounts it (cross-zone "
                 "traffic is slower and billed)", "put the filesystem in the fleet's zone"),
    "V006": Code("a filesystem shared by several fleets that cannot share it: on a backend without"
                 " shared filesystems, or from an existing network (gpufleet peers only "
                 "the networks it creates)",
                 "give the filesystem one fleet, or one filesystem per fleet"),
    "V007": Code("a Lustre filesystem without about 25% headroom over its expected usage "
                 "(Lustre can fail writes at about 80% full)",
                 "raise capacity_gib to 1.25 x expected_usage_gib or more"),
    "V008": Code("a filesystem whose fleet is not planned from the files given: it is not built",
                 "give the fleet's file too, or fix the fleet's name"),
    "V009": Code("a Lustre filesystem above the size the service offers without a support "
                 "request",
                 "ask the cloud to raise the limit before `gpufleet up`, or size it smaller"),
    "B014": Code("a `control_plane.allow` range that is not a CIDR or opens the server to the "
                 "whole internet",
                 "name the ranges your team connects from"),
    "O003": Code("a fleet wants more nodes than its declared reservation holds",
                 "lower `nodes`, or declare the reservation you have"),
    "O004": Code("a Capacity Block or calendar reservation ends within 7 days, or has ended",
                 "plan for the end, or declare the block you have now"),
    "C016": Code("the pool no longer holds the block the lock records: networks and nodes "
                 "are replaced", "keep the old `cidr` in the backends file if not intended"),
    "V010": Code("a filesystem without `capacity_gib` on a service that needs a size (was V003)",
                 "set `capacity_gib` to a size the hint lists"),
    "V011": Code("a Lustre throughput tier the service does not have, or `throughput` on an nfs "
                 "filesystem (was V003)",
                 "pick a tier the hint lists, or remove `throughput`"),
    "V012": Code("a mount path over the system's own files (/, a system directory, or `..`) (was "
                 "V003)",
                 "mount it under /mnt or a directory of its own"),
    "V013": Code("two filesystems at one mount path on one fleet (was V003)",
                 "give each filesystem its own `mount`"),
    "V014": Code("a filesystem name declared twice in the backends file (was V003)",
                 "give each filesystem its own name"),
    "V015": Code("a volume `size` that cannot be read or is under 1GB (was V002)",
                 "write it like 100GB or 1TB"),
    "V016": Code("a volume name declared twice (was V002)",
                 "give each volume file its own name"),
    "V017": Code("a volume's `availability_zone` outside its `region` (was V002)",
                 "pick a zone of the volume's region"),
    "V018": Code("a zonal filesystem service whose fleet has no zone to give it (was V004)",
                 "set `zone` on the filesystem"),
    "V019": Code("fleets sharing filesystems both ways round, so each would be built before the "
                 "other (was V006)",
                 "keep the shared filesystems in one fleet's network"),
    "V020": Code("a second managed filesystem on one fleet network where its service allows "
                 "one (one private services access connection) (was V006)",
                 "grow the first one instead"),
    "V021": Code("no free range left in the fleet's address block for the filesystem's own subnet "
                 "(was V006)",
                 "give the backend a larger `cidr`"),
    "V022": Code("a new volume without `availability_zone` where the fleets of its backend and "
                 "region sit in several zones",
                 "set `availability_zone` to the zone of the fleet that mounts it"),
    "V023": Code("a filesystem mount path its backend's API refuses",
                 "mount it where the backend allows (the message says where)"),
    "V024": Code("a bucket its store would refuse: its name, its class, or declared twice",
                 "follow the store's naming rule (the message names its page)"),
    "V025": Code("`cache_of` names no other bucket of the backends file",
                 "name the central bucket this one copies"),
    "V026": Code("a bucket class's own rule broken (S3 Express One Zone: its zone and name; "
                 "R2: its location hint)", "follow the rule the message gives"),
    "V027": Code("a bucket mounted by a fleet that is not in the files, or twice at one path",
                 "mount it by a fleet of these files, each path once"),
    "V028": Code("a fleet reads a bucket in another cloud or region: every GB crosses it "
                 "(warning)", "keep a regional copy (`cache_of`) where the fleet runs, or read "
                 "from a store without egress fees"),
    "V029": Code("a bucket mount gpufleet does not build: a bucket of another cloud (the nodes "
                 "have no identity there), a node with no identity to grant, R2 on nodes "
                 "with no secret store, or R2 without its account id",
                 "mount a bucket of the fleet's own cloud or R2, give the nodes an identity, "
                 "or set the bucket's `account_id` (the message says which)"),
    "F023": Code("a fleet name longer than the longest whose every physical name fits on a "
                 "backend it may land on", "shorten the fleet name"),
    "F024": Code("a fleet named like a gateway's or volume's stack output key "
                 "(`gateway-NAME`, `volume-NAME`)", "rename the fleet"),
    "F025": Code("`placement: cluster` or `spot_policy: spot` on a fleet whose backends cannot "
                 "honour it",
                 "add a backend that can, or remove the setting"),
    "G017": Code("a gateway name longer than the longest whose every physical name fits on its "
                 "backend", "shorten the gateway name"),
    "G018": Code("a gateway's `fleet` (backends file) names a fleet the files do not plan",
                 "name a fleet of the files, or drop `fleet`"),
    "G019": Code("a gateway shares the network of a fleet planned on another backend or region",
                 "share a fleet of the gateway's backend and region, or drop `fleet`"),
    "G020": Code("a gateway shares a fleet's existing network, which gpufleet does not build",
                 "drop `fleet`: the gateway gets a network of its own"),
    "G021": Code("a private gateway shares the network of a fleet without a NAT (public nodes)",
                 "share a fleet with private nodes, or drop `fleet`"),
    "G022": Code("the stack config's synced gateway (`gpufleet gateway sync`) is another "
                 "project, backend or region than the file's (warning: the record stays "
                 "pending)", "apply the exported gateway file, then `gpufleet gateway sync`"),
    "B015": Code("`control_plane.fleet` names no fleet of the files given (was B014)",
                 "name a fleet planned from these files"),
    "B016": Code("the `control_plane` fleet has no bastion to host the dstack server (was B014)",
                 "name a fleet whose private nodes sit behind a bastion"),
    "B017": Code("the dstack server's port would be open to no one: no `allow` and no `ssh_cidrs` "
                 "(was B014)",
                 "list the ranges your team connects from in `allow`"),
    "B018": Code("a declared reservation name used twice (was B012)",
                 "give each reservation its own name"),
    "B020": Code("a backend without networks told `public_ips: false` (every "
                 "instance has its own public address)",
                 "remove `public_ips`, and keep `ssh_cidrs` to the ranges that need SSH"),
    "B019": Code("a backend entry without a key dstack's backend for it requires: `export "
                 "dstack` needs it",
                 "add the key to the backend entry"),
    "B021": Code("`quotas.limits` cannot be read, or `quotas.request` has no limits to find "
                 "a shortfall with",
                 "write it with `gpufleet quota --live --save FILE` and name that file"),
})
