"""Benchmark: how long a Lambda fleet takes to come up through gpufleet's dynamic providers,
against the local fake of Lambda's API (tests/lambda_fake.py), on a scaled clock.

The engine sends every node's create at once (`pulumi up` runs unbounded operations by
default); the Python dynamic provider's process serves four at a time (pulumi/dynamic's
gRPC server: a thread pool of four workers), first come, first served. This drives the
providers' real code through a pool of four the same way, under Lambda's limits as the client
keeps them (one request a second, one launch per 12 seconds), with each instance `active`
``--boot`` seconds after its launch:

- ``create waits``: one create launches and waits for `active` (how gpufleet worked before
  issue 53): the nodes boot four at a time;
- ``launch, then wait``: the Instance's create returns at launch and the node's
  InstanceReady waits (registered when the launch answers, as the SDK does): the nodes boot
  together, and the fleet is up one boot after its last launch.

The floor is Lambda's launch limit: ``(nodes - 1) x 12 s + boot``. Times are the fake
clock's (the scale only makes them run faster).

    python bench/lambda_boot.py [--nodes 100] [--boot 240] [--scale 200] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from lambda_fake import KEY, Fake, serve

from gpufleet.backends.lambda_ import api as lambda_api
from gpufleet.components.lambda_ import dynamic

WORKERS = 4  # pulumi/dynamic/__main__.py: grpc.server(ThreadPoolExecutor(max_workers=4))


class ScaledClock:
    """Seconds of Lambda's time, passing ``scale`` times faster than the wall clock."""

    def __init__(self, scale: float) -> None:
        self.scale, self.start = scale, time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self.start) * self.scale

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds / self.scale)


def props(k: int) -> dict[str, object]:
    return {"name": f"lam-node-{k}-abc1234", "region_name": "us-east-1",
            "instance_type_name": "gpu_8x_h100_sxm5", "ssh_key_names": ["lam-key-abc1234"],
            "firewall_rulesets": [{"id": "c" + "0" * 31}]}


def blocking(pool: ThreadPoolExecutor, nodes: int, done: Callable[[], None]) -> None:
    def create(k: int) -> None:
        made = dynamic.InstanceProvider().create(props(k))
        dynamic.InstanceReadyProvider().create({"instance_id": made.id, "node": str(k)})
        done()
    for f in [pool.submit(create, k) for k in range(nodes)]:
        f.result()


def split(pool: ThreadPoolExecutor, nodes: int, done: Callable[[], None]) -> None:
    waits: list[Future[None]] = []
    lock = threading.Lock()

    def ready(instance_id: str, k: int) -> None:
        dynamic.InstanceReadyProvider().create({"instance_id": instance_id, "node": str(k)})
        done()

    def launched(k: int) -> Callable[[Future[str]], None]:
        def then(f: Future[str]) -> None:  # the SDK registers the wait once the id resolves
            with lock:
                waits.append(pool.submit(ready, f.result(), k))
        return then

    launches = []
    for k in range(nodes):
        f = pool.submit(lambda k=k: str(dynamic.InstanceProvider().create(props(k)).id))
        f.add_done_callback(launched(k))
        launches.append(f)
    for f in launches:
        f.result()
    while True:
        with lock:
            if len(waits) == nodes:
                break
        time.sleep(0.01)
    for w in waits:
        w.result()


def measure(flow: Callable[..., None], nodes: int, boot: float, scale: float
            ) -> tuple[float, float, int]:
    """(the fleet up, the median node up, requests sent), in Lambda's seconds."""
    clock = ScaledClock(scale)
    fake = Fake(boot_seconds=boot, clock=clock.now)
    ups: list[float] = []
    with serve(fake) as url:
        os.environ[lambda_api.ENV_URL], os.environ[lambda_api.ENV_KEY] = url, KEY
        lambda_api.PACER = lambda_api.Pacer(clock)
        lambda_api.LISTING = lambda_api.Listing()
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            flow(pool, nodes, lambda: ups.append(clock.now()))
        total = clock.now()
    assert not fake.violations, fake.violations[:3]
    ups.sort()
    return total, ups[len(ups) // 2], len(fake.requests)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--boot", type=float, default=240.0, help="seconds from launch to active")
    ap.add_argument("--scale", type=float, default=200.0)
    ap.add_argument("--smoke", action="store_true", help="8 nodes, a fast clock")
    a = ap.parse_args()
    if a.smoke:
        a.nodes, a.scale = 8, 1000.0
    floor = (a.nodes - 1) * lambda_api.LAUNCH_SPACING + a.boot
    print(f"{a.nodes} Lambda nodes, boot {a.boot:.0f} s, {WORKERS} provider workers; "
          f"floor (launch limit + one boot): {floor:,.0f} s")
    figures = {}
    for label, flow in (("create waits", blocking), ("launch, then wait", split)):
        total, median, requests = measure(flow, a.nodes, a.boot, a.scale)
        figures[label] = total
        print(f"  {label:<18} fleet up {total:>7,.0f} s  median node {median:>7,.0f} s  "
              f"{requests:>5,} requests  ({total / floor:.2f}x the floor)")
    print(f"speed-up launch-then-wait / create-waits: "
          f"{figures['create waits'] / figures['launch, then wait']:.1f}x")
    print(f"launch, then wait / floor: {figures['launch, then wait'] / floor:.2f}x")


if __name__ == "__main__":
    main()
