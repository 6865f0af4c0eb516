"""dstack 0.22.5's instances and their health checks, for the `gpufleet health` tests. Runs in
the dstack virtualenv (`.venv-dstack`) and imports nothing of gpufleet.

  seed DB_URL: reads a JSON list of fleet specs on standard input and creates them in a
          dstack server's database with dstack's own test factories (the fleet, its
          instances with their addresses, and each instance's health checks as dstack's
          shim reports DCGM's: `{"dcgm": {"overall_health", "incidents"}}`)

A spec: {"project", "fleet", "instances": [{"num", "hostname", "unreachable", "health",
"checks": [{"minutes_ago", "status", "incidents": [{"system", "message"}]}]}]}.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
from typing import Any

_HEALTH = {"healthy": 0, "warning": 10, "failure": 20}


async def seed(db_url: str, specs: list[dict[str, Any]]) -> None:
    import dstack._internal.server.services.encryption  # noqa: F401  (sets how secrets are stored)
    from dstack._internal.core.models.health import HealthStatus
    from dstack._internal.core.models.profiles import TerminationPolicy
    from dstack._internal.server.models import ProjectModel
    from dstack._internal.server.testing.common import (
        create_fleet,
        create_instance,
        create_instance_health_check,
        get_job_provisioning_data,
    )
    from sqlalchemy import select
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    engine = create_async_engine(db_url)
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    async with async_sessionmaker(engine, expire_on_commit=False)() as session:
        for s in specs:
            project = (await session.execute(
                select(ProjectModel).where(ProjectModel.name == s["project"]))).scalar_one()
            fleet = await create_fleet(
                session, project, name=s["fleet"],
                last_processed_at=now.replace(tzinfo=datetime.UTC) + datetime.timedelta(days=1))
            for i in s["instances"]:
                inst = await create_instance(
                    session, project, fleet, instance_num=i["num"],
                    # kept out of the server's background processing (which would find the
                    # test addresses unreachable and end idle instances)
                    created_at=now, last_processed_at=now + datetime.timedelta(days=1),
                    termination_policy=TerminationPolicy.DONT_DESTROY,
                    name=f"{s['fleet']}-{i['num']}", unreachable=i.get("unreachable", False),
                    health_status=HealthStatus(i.get("health", "healthy")),
                    job_provisioning_data=get_job_provisioning_data(
                        hostname=i["hostname"], internal_ip=i["hostname"]))
                for c in i.get("checks", []):
                    incidents = [{"system": x["system"], "health": _HEALTH[c["status"]],
                                  "error_message": x["message"], "error_code": 1,
                                  "entity_group_id": 1, "entity_id": 0}
                                 for x in c.get("incidents", [])]
                    await create_instance_health_check(
                        session, inst,
                        collected_at=now - datetime.timedelta(minutes=c["minutes_ago"]),
                        status=HealthStatus(c["status"]),
                        response=json.dumps({"dcgm": {
                            "overall_health": _HEALTH[c["status"]], "incidents": incidents}}))
    await engine.dispose()


def main() -> None:
    specs = json.load(sys.stdin)
    if sys.argv[1] == "seed":
        asyncio.run(seed(sys.argv[2], specs))
    else:
        raise SystemExit(f"unknown command {sys.argv[1]}")


if __name__ == "__main__":
    main()
