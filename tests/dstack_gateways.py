"""dstack 0.22.5's own gateways, for the `gpufleet gateway sync` tests. Runs in the dstack
virtualenv (`.venv-dstack`) and imports nothing of gpufleet.

  answer  reads a JSON list of gateway specs on standard input and writes the JSON a dstack
          server answers for each (`Gateway` with its `GatewayReplica`s, built with dstack's
          models and serialised as its server serialises them)
  seed    DB_URL: reads the same specs and creates them in a dstack server's database with
          dstack's own test factories (a backend per project and type, the gateway and its
          replicas), as `dstack apply` of a gateway would have left them

A spec: {"project", "name", "backend", "region", "status", "hostname" (a load balancer's,
or null), "replicas": [{"hostname", "status"}], "domain"}.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import uuid
from typing import Any


def answer(specs: list[dict[str, Any]]) -> list[Any]:
    from dstack._internal.core.models.backends.base import BackendType
    from dstack._internal.core.models.gateways import (
        Gateway,
        GatewayConfiguration,
        GatewayReplica,
        GatewayReplicaStatus,
        GatewayStatus,
    )

    now = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.UTC)
    out = []
    for s in specs:
        conf = GatewayConfiguration(name=s["name"], backend=BackendType(s["backend"]),
                                    region=s["region"], domain=s.get("domain"),
                                    replicas=len(s.get("replicas") or []) or None,
                                    certificate=None, load_balancer=s.get("load_balancer"))
        replicas = [GatewayReplica(hostname=r.get("hostname"), replica_num=i,
                                   backend=BackendType(s["backend"]), region=s["region"],
                                   created_at=now, status=GatewayReplicaStatus(r["status"]))
                    for i, r in enumerate(s.get("replicas") or [])]
        gw = Gateway(id=uuid.uuid4(), name=s["name"], project_name=s["project"],
                     configuration=conf, created_at=now, status=GatewayStatus(s["status"]),
                     hostname=s.get("hostname"), wildcard_domain=s.get("domain"),
                     default=True, replicas=replicas)
        out.append(json.loads(gw.model_dump_json()))
    return out


async def seed(db_url: str, specs: list[dict[str, Any]]) -> None:
    import dstack._internal.server.services.encryption  # noqa: F401  (sets how secrets are stored)
    from dstack._internal.core.models.backends.base import BackendType
    from dstack._internal.core.models.gateways import GatewayReplicaStatus, GatewayStatus
    from dstack._internal.server.models import ProjectModel
    from dstack._internal.server.testing.common import (
        create_backend,
        create_gateway,
        create_gateway_replica,
    )
    from sqlalchemy import select
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    engine = create_async_engine(db_url)
    backends: dict[tuple[str, str], Any] = {}
    async with async_sessionmaker(engine, expire_on_commit=False)() as session:
        for s in specs:
            project = (await session.execute(
                select(ProjectModel).where(ProjectModel.name == s["project"]))).scalar_one()
            key = (s["project"], s["backend"])
            if key not in backends:
                backends[key] = await create_backend(session, project.id,
                                                     BackendType(s["backend"]),
                                                     config={"regions": [s["region"]]})
            backend = backends[key]
            replicas = s.get("replicas") or []
            gw = await create_gateway(
                session, project.id, backend.id, name=s["name"], region=s["region"],
                wildcard_domain=s.get("domain"), status=GatewayStatus(s["status"]),
                replicas=len(replicas) or None, certificate=None, hostname=s.get("hostname"),
                last_processed_at=datetime.datetime.now(datetime.UTC))
            for i, r in enumerate(replicas):
                await create_gateway_replica(
                    session, backend, gw.id, ip_address=r.get("hostname"), region=s["region"],
                    status=GatewayReplicaStatus(r["status"]), replica_num=i,
                    last_processed_at=datetime.datetime.now(datetime.UTC))
    await engine.dispose()


def main() -> None:
    specs = json.load(sys.stdin)
    if sys.argv[1] == "answer":
        json.dump(answer(specs), sys.stdout)
    elif sys.argv[1] == "seed":
        asyncio.run(seed(sys.argv[2], specs))
    else:
        raise SystemExit(f"unknown command {sys.argv[1]}")


if __name__ == "__main__":
    main()
