"""Buckets in review (issue 59): each bucket is a component of its own, so the offline diff
and live drift say which bucket a change belongs to, where it is written, and which YAML key
moves it; an R2 mount's token and secret belong to the mounting fleet. Editing one bucket
touches no other bucket and no fleet."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from exportutil import export
from pulumi.automation import events as ev
from test_buckets import MOUNTS, _files
from test_diff import run
from test_drift import pre, state

from gpufleet.compile.compiler import compile_inputs
from gpufleet.input.validate import validate_paths
from gpufleet.live import changes_from_events
from gpufleet.offers.catalog import load_catalog
from gpufleet.review import owner_map
from gpufleet.review.diff import choose_skips
from gpufleet.review.state import parse_export


def _baseline(tmp: Path) -> tuple[list[str], dict[str, Any]]:
    paths = _files(tmp, MOUNTS)
    return paths, export(paths)


def test_each_bucket_and_r2_secret_has_its_owner(tmp_path: Path) -> None:
    _, state_doc = _baseline(tmp_path)
    res = state_doc["deployment"]["resources"]
    owners = owner_map([(r["urn"], r["type"], r.get("parent") or "") for r in res])
    by_name = {r["urn"].rsplit("::", 1)[1] + " " + r["type"]: owners.get(r["urn"])
               for r in res}
    assert by_name["acme-use1 aws:s3/bucket:Bucket"] == "bucket:acme-use1"
    assert by_name["acme-use1-public-access aws:s3/bucketPublicAccessBlock:"
                   "BucketPublicAccessBlock"] == "bucket:acme-use1"
    assert by_name["acme-central cloudflare:index/r2Bucket:R2Bucket"] == "bucket:acme-central"
    # the mounting fleet's token and secret are the fleet's: removing the fleet removes them
    assert by_name["p5-r2-acme-central cloudflare:index/accountToken:AccountToken"] == "p5"
    assert by_name["p5-r2-acme-central aws:secretsmanager/secret:Secret"] == "p5"


def test_the_diff_names_the_bucket_its_file_and_key(tmp_path: Path) -> None:
    paths, baseline = _baseline(tmp_path)
    assert run(tmp_path, paths, baseline).changes == ()
    edited = copy.deepcopy(baseline)
    block = next(r for r in edited["deployment"]["resources"]
                 if r["urn"].endswith("::acme-use1-public-access"))
    block["inputs"]["blockPublicAcls"] = False  # someone opened it outside gpufleet
    # an edit to the state itself leaves the bucket's recorded input digest as it was: as
    # for fleets, only --full compares it again
    assert run(tmp_path, paths, edited).changes == ()
    [change] = run(tmp_path, paths, edited, full=True).changes
    assert (change.owner, change.op, change.file) == ("bucket:acme-use1", "update",
                                                       paths[0])
    assert change.yaml_key == "buckets (built private and kept: no key opens them)"
    # versioning asked for on one bucket: that bucket's change alone, at its key
    on = _files(tmp_path / "v", MOUNTS.replace(
        "  - name: acme-use1\n", "  - name: acme-use1\n    versioning: true\n"))
    report = run(tmp_path, on, baseline)
    assert {c.owner for c in report.changes} == {"bucket:acme-use1"}
    compiled = compile_inputs(validate_paths(on).inputs, load_catalog())
    skips = choose_skips(compiled, parse_export(json.dumps(baseline)), False)
    assert "bucket acme-use1: run (its inputs changed since the export)" in skips.reasons
    assert "fleet p5: run (it and bucket acme-use1 are built from each other)" in skips.reasons
    assert skips.names == frozenset()  # p5 runs, so every bucket it mounts runs too
    unchanged = choose_skips(compile_inputs(validate_paths(paths).inputs, load_catalog()),
                             parse_export(json.dumps(baseline)), False)
    assert "bucket:acme-use1" in unchanged.names and "p5" in unchanged.names
    assert [c.yaml_key for c in report.changes if c.op == "create"] == [None]
    # a bucket dropped from the file: a delete the protection stops, said as such
    gone = _files(tmp_path / "g", MOUNTS.replace(
        "  - name: acme-use1\n    cloud: aws\n    region: us-east-1\n"
        "    mounts: [{fleet: p5, path: /mnt/data}]\n", ""))
    deletes = [c for c in run(tmp_path, gone, baseline).changes
               if c.op == "delete" and c.owner == "bucket:acme-use1"]
    assert any(c.protect and "protected" in c.action for c in deletes)


BUCKET = "urn:pulumi:prod::gpufleet::gpufleet:storage:Bucket::acme-gcs"
GCS = ("urn:pulumi:prod::gpufleet::gpufleet:storage:Bucket$gcp:storage/bucket:Bucket::"
       "acme-gcs")


def test_live_drift_names_the_bucket() -> None:
    holder = state(BUCKET, "gpufleet:storage:Bucket", "")
    old = state(GCS, "gcp:storage/bucket:Bucket", BUCKET,
                outputs={"publicAccessPrevention": "enforced", "location": "US-CENTRAL1"})
    new = state(GCS, "gcp:storage/bucket:Bucket", BUCKET,
                outputs={"publicAccessPrevention": "inherited", "location": "US"})
    events = [pre(1, ev.OpType.SAME, BUCKET, "gpufleet:storage:Bucket", holder, holder),
              pre(2, ev.OpType.UPDATE, GCS, "gcp:storage/bucket:Bucket", old, new,
                  {"publicAccessPrevention": ev.PropertyDiff(ev.DiffKind.UPDATE, False),
                   "location": ev.PropertyDiff(ev.DiffKind.UPDATE, False)})]
    [change] = changes_from_events(events, "refresh")
    assert change.owner == "bucket:acme-gcs" and change.klass == "out-of-band edit"
    assert change.yaml_key == ("buckets (built private and kept: no key opens them), "
                               "buckets[].region") or change.yaml_key == (
        "buckets[].region, buckets (built private and kept: no key opens them)")
    assert json.dumps([p.path for p in change.properties])
