"""Reserved capacity in planning: under `reservation:` offers are on-demand, the reservation
itself is the offer where the catalog sells a type as spot only (A4, A3 Ultra), declared
reservations narrow the offer to their type and zone and are checked, and the lock and the
plan say what the nodes consume and what it costs."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from gpufleet.cli import cli
from gpufleet.compile import compile_inputs
from gpufleet.input import validate_paths
from gpufleet.offers import check_reserved, load_catalog, select
from gpufleet.views.plan import render_plan_text

from planutil import TEST_KEY, by_type, named, plan_files, write

GCP = ("backends:\n  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
       f"access:\n  ssh_public_key: {TEST_KEY}\n")
AWS = ("backends:\n  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"
       f"access:\n  ssh_public_key: {TEST_KEY}\n")
A4 = ("type: fleet\nname: a4-res\nnodes: 2\nplacement: cluster\nreservation: my-a4-res\n"
      "availability_zones: [us-west2-c]\nresources:\n  gpu: B200:8\nbackends: [gcp]\n")
P5 = ("type: fleet\nname: p5-res\nnodes: 2\nplacement: cluster\nreservation: {res}\n"
      "spot_policy: auto\nresources:\n  gpu: H100:8\nbackends: [aws]\nregions: [us-east-1]\n")


def test_a_gcp_a4_fleet_on_a_reservation_plans_on_demand_nodes_with_specific_affinity(
        tmp_path: Path) -> None:
    report = plan_files([write(tmp_path, "a4.yml", A4), write(tmp_path, "b.yml", GCP)])
    [plan] = report.fleets
    # the catalog sells A4 as spot only: the reservation is the offer, on-demand
    assert (plan.instance_type, plan.zone, plan.spot) == ("a4-highgpu-8g", "us-west2-c", False)
    assert not plan.price_known and plan.placement is None
    for i in range(2):
        node = named(report, f"a4-res-node-{i}", "gcp:compute/instance:Instance")["inputs"]
        assert node["reservationAffinity"] == {
            "type": "SPECIFIC_RESERVATION",
            "specificReservation": {"key": "compute.googleapis.com/reservation-name",
                                    "values": ["my-a4-res"]}}
        assert node["scheduling"]["provisioningModel"] == "STANDARD"
        assert "resourcePolicies" not in node
    # no COLLOCATED policy of our own: the reservation's placement holds
    assert not by_type(report, "gcp:compute/resourcePolicy:ResourcePolicy")
    # never a silent $0: the nodes are named as not priced
    bill = report.bills["a4-res"]
    assert bill.part("nodes") == 0 and any("reservation my-a4-res" in u for u in bill.unpriced)
    text = render_plan_text(report)
    assert "on-demand  reserved, price not declared" in text
    assert "NOT PRICED" in text and "$nan" not in text


def test_an_aws_p5_fleet_on_a_capacity_reservation_is_on_demand_and_targets_it(
        tmp_path: Path) -> None:
    report = plan_files([write(tmp_path, "p5.yml", P5.format(res="cr-0123456789abcdef0")),
                         write(tmp_path, "b.yml", AWS)])
    [plan] = report.fleets
    assert plan.instance_type == "p5.48xlarge" and not plan.spot  # auto, but no spot
    [lt] = by_type(report, "aws:ec2/launchTemplate:LaunchTemplate")
    assert lt["inputs"]["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    assert "instanceMarketOptions" not in lt["inputs"]


def test_without_a_reservation_spot_only_types_stay_spot(tmp_path: Path) -> None:
    fleet = write(tmp_path, "a4.yml", A4.replace("reservation: my-a4-res\n", ""))
    inputs = validate_paths([fleet, write(tmp_path, "b.yml", GCP)]).inputs
    sel = select(inputs.fleets[0], load_catalog(), inputs)
    assert sel.error is not None and sel.error.code == "O001"  # on-demand: none; as before


def test_a_declared_reservation_narrows_the_offer_and_prices_it(tmp_path: Path) -> None:
    backends = GCP + ("reservations:\n  - name: my-a4-res\n    backend: gcp\n"
                      "    zone: us-west2-c\n    instance_type: a4-highgpu-8g\n    count: 2\n"
                      "    price: 40.5\n")
    report = plan_files([write(tmp_path, "a4.yml", A4.replace(
        "availability_zones: [us-west2-c]\n", "")), write(tmp_path, "b.yml", backends)])
    [plan] = report.fleets
    assert (plan.zone, plan.price_per_hour) == ("us-west2-c", 40.5)
    assert report.bills["a4-res"].part("nodes") == 81.0
    assert plan.reservation_declared == ("specific my-a4-res, 2 of 2 a4-highgpu-8g in "
                                         "us-west2-c, $40.5/h per node declared")
    # a reservation of another type: no offer, and the message says why
    backends = backends.replace("a4-highgpu-8g", "a3-ultragpu-8g")
    inputs = validate_paths([write(tmp_path, "a4.yml", A4), write(tmp_path, "b.yml",
                                                                   backends)]).inputs
    sel = select(inputs.fleets[0], load_catalog(), inputs)
    assert sel.error is not None and "none is a3-ultragpu-8g in us-west2-c (reservation " \
        "my-a4-res, declared at" in sel.error.message


def test_a_capacity_block_is_bought_as_one_and_checked(tmp_path: Path) -> None:
    backends = AWS + ("reservations:\n  - name: p5-block\n    backend: aws\n"
                      "    zone: us-east-1a\n    instance_type: p5.48xlarge\n    count: 1\n"
                      "    kind: capacity-block\n    id: cr-0aaaabbbbccccdddd\n"
                      "    ends: 2026-11-26T12:00:00Z\n")
    b = write(tmp_path, "b.yml", backends)
    f = write(tmp_path, "p5.yml", P5.format(res="p5-block"))
    compiled = compile_inputs(validate_paths([f, b]).inputs, load_catalog())
    assert [d.code for d in compiled.diagnostics if d.is_error] == ["O003"]  # 2 > 1
    f = write(tmp_path, "p5.yml", P5.format(res="p5-block").replace("nodes: 2", "nodes: 1"))
    report = plan_files([f, b])
    [plan] = report.fleets
    assert (plan.zone, plan.reservation) == ("us-east-1a", "cr-0aaaabbbbccccdddd")
    [lt] = by_type(report, "aws:ec2/launchTemplate:LaunchTemplate")
    assert lt["inputs"]["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["inputs"]["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0aaaabbbbccccdddd"}}
    # the end of the block, against a fixed clock
    inputs = validate_paths([f, b]).inputs
    res = inputs.reservation("p5-block")
    soon = check_reserved(inputs.fleets[0], res, datetime(2026, 11, 24, 12, tzinfo=UTC))
    assert [(d.code, d.is_error) for d in soon] == [("O004", False)]
    assert "ends at 2026-11-26T12:00:00Z, in 2 day(s) 0 hour(s)" in soon[0].message
    over = check_reserved(inputs.fleets[0], res, datetime(2026, 12, 1, tzinfo=UTC))
    assert "ended at" in over[0].message
    assert check_reserved(inputs.fleets[0], res, datetime(2026, 11, 1, tzinfo=UTC)) == []
    # a Capacity Block has its own cluster placement group: the nodes join it by name
    assert [p["inputs"]["strategy"] for p in by_type(
        report, "aws:ec2/placementGroup:PlacementGroup")] == ["cluster"]
    grouped = plan_files([f, write(tmp_path, "b.yml", backends
                                   + "    placement_group: block-pg-1\n")])
    assert by_type(grouped, "aws:ec2/placementGroup:PlacementGroup") == []
    [lt] = by_type(grouped, "aws:ec2/launchTemplate:LaunchTemplate")
    assert lt["inputs"]["placement"]["groupName"] == "block-pg-1"
    assert "placement: cluster (block-pg-1, the Capacity Block's own group)" in \
        render_plan_text(grouped)
    # the lock records what the nodes consume
    r = CliRunner().invoke(cli, ["lock", f, b, "--lock", str(tmp_path / "gpufleet.lock")])
    assert r.exit_code == 0, r.output
    assert "reservation: cr-0aaaabbbbccccdddd" in (tmp_path / "gpufleet.lock").read_text()


def test_declared_reservations_are_validated(tmp_path: Path) -> None:
    b = write(tmp_path, "b.yml", AWS + "reservations:\n  - name: r1\n    backend: aws\n"
              "    zone: us-east-1a\n    instance_type: p5.48xlarge\n    count: 1\n"
              "    kind: specific\n  - name: r2\n    backend: gcp\n    zone: us-west2-c\n"
              "    instance_type: a4-highgpu-8g\n    count: 0\n  - name: r3\n"
              "    backend: aws\n    zone: us-east-1a\n    instance_type: p5.48xlarge\n"
              "    count: 1\n    ends: next tuesday\n"
              + "  - name: r4\n    backend: aws\n    zone: us-east-1a\n"
                "    instance_type: p5.48xlarge\n    count: 1\n" * 2)
    diags = validate_paths([b]).diagnostics
    codes = sorted(d.code for d in diags)
    assert codes == ["B012", "B013", "B018", "S006"], diags
    assert "reservation 'r4' is declared twice" in next(d.message for d in diags
                                                        if d.code == "B018")
    b010 = next(d for d in diags if d.code == "B012")
    assert "an aws reservation is capacity-reservation or capacity-block, not specific" \
        in b010.message and b010.line == 12


def test_the_lock_price_of_a_reserved_offer_is_null_never_zero(tmp_path: Path) -> None:
    lock = tmp_path / "gpufleet.lock"
    f, b = write(tmp_path, "a4.yml", A4), write(tmp_path, "b.yml", GCP)
    r = CliRunner().invoke(cli, ["lock", f, b, "--lock", str(lock)])
    assert r.exit_code == 0, r.output
    assert "on-demand price unknown" in r.output
    text = lock.read_text()
    assert "price: null" in text and "reservation: my-a4-res" in text
    r = CliRunner().invoke(cli, ["plan", "--locked", "--lock", str(lock), f, b])
    assert r.exit_code == 0, r.output
    assert "$nan" not in r.stdout and "reserved, price not declared" in r.stdout
    assert not math.isnan(float(r.stdout.split("bill: ")[1].split("$")[1].split("/h")[0]
                                .replace(",", "")))


AZURE = ("backends:\n  - type: azure\n    subscription_id: 00000000-0000-0000-0000-000000000000\n"
         "    tenant_id: 00000000-0000-0000-0000-000000000000\n    regions: [eastus]\n"
         f"    ssh_cidrs: [203.0.113.0/24]\naccess:\n  ssh_public_key: {TEST_KEY}\n")
GROUP = ("/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/"
         "capacityReservationGroups/nd-group")
ND = ("type: fleet\nname: nd-res\nnodes: 2\nplacement: cluster\nreservation: nd-group\n"
      "resources:\n  gpu: H100:8\nbackends: [azure]\n")


def test_an_azure_fleet_joins_a_declared_capacity_reservation_group(tmp_path: Path) -> None:
    declared = AZURE + ("reservations:\n  - name: nd-group\n    backend: azure\n"
                        "    zone: eastus\n    instance_type: Standard_ND96isr_H100_v5\n"
                        f"    count: 2\n    kind: capacity-reservation-group\n    id: {GROUP}\n")
    report = plan_files([write(tmp_path, "f.yml", ND), write(tmp_path, "b.yml", declared)])
    [plan] = report.fleets
    assert (plan.instance_type, plan.region, plan.reservation) == (
        "Standard_ND96isr_H100_v5", "eastus", GROUP)
    [vmss] = by_type(report, "azure-native:compute:VirtualMachineScaleSet")
    assert vmss["inputs"]["virtualMachineProfile"]["capacityReservation"] == {
        "capacityReservationGroup": {"id": GROUP}}
    assert "capacity reservation group the VMs or scale set join" in render_plan_text(report)
    # the bastion joins no group
    bastion = named(report, "nd-res-bastion", "azure-native:compute:VirtualMachine")
    assert "capacityReservation" not in bastion["inputs"]
    # undeclared, dstack's azure backend takes no reservation: F011 (gpufleet's own rule)
    diags = validate_paths([write(tmp_path, "f.yml", ND), write(tmp_path, "b.yml",
                                                                AZURE)]).diagnostics
    assert [d.code for d in diags if d.is_error] == ["F011"]
    # a group in another region offers nothing
    other = declared.replace("zone: eastus", "zone: westus3")
    inputs = validate_paths([write(tmp_path, "f.yml", ND),
                             write(tmp_path, "b.yml", other)]).inputs
    sel = select(inputs.fleets[0], load_catalog(), inputs)
    assert sel.error is not None and "in westus3 (reservation nd-group" in sel.error.message


def test_the_json_plan_of_an_undeclared_price_is_strict_json(tmp_path: Path) -> None:
    import json

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    files = [write(tmp_path, "a4.yml", A4), write(tmp_path, "b.yml", GCP)]
    for command in (["plan", "--format", "json"], ["offers", "--format", "json"]):
        r = CliRunner().invoke(cli, [*command, *files])
        assert r.exit_code == 0, r.output
        data = json.loads(r.stdout, parse_constant=refuse)
    plan = json.loads(CliRunner().invoke(cli, ["plan", "--format", "json", *files]).stdout)
    assert plan["fleets"][0]["price_per_hour"] is None
    assert plan["plans"][0]["price_per_hour"] is None
    assert data["fleets"][0]["offers"][0]["price"] is None
