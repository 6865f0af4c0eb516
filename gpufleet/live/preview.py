"""What `gpufleet up` shows before it asks: the preview's changes by operation, the nodes
it replaces or deletes, and the cost before -> after. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.review import Costs, Report, cost_violations, guard

SYMBOLS = (("create", "+", "to create"), ("update", "~", "to update"),
           ("replace", "+-", "to replace"), ("delete", "-", "to delete"),
           ("unknown", "?", "unknown"))


@dataclass(frozen=True, slots=True)
class UpPreview:
    report: Report  # the preview's changes (engine events)
    costs: Costs  # before: the lock's prices x the nodes running now; after: the plan

    @property
    def nodes_going(self) -> list[str]:
        """Instances the update replaces or deletes."""
        return sorted(c.name for c in self.report.changes
                      if c.category == "instance" and c.op in ("replace", "delete"))

    def lines(self) -> list[str]:
        counts = self.report.counts()
        out = ["preview: " + ", ".join(f"{sym} {counts[op]} {words}"
                                       for op, sym, words in SYMBOLS
                                       if counts[op] or op != "unknown")]
        going = self.nodes_going
        if going:
            shown = ", ".join(going[:8]) + (f" (+{len(going) - 8})" if len(going) > 8 else "")
            out.append(f"nodes replaced or deleted: {len(going)}: {shown}")
        else:
            out.append("nodes replaced or deleted: none")
        for c in sorted(self.report.changes, key=lambda c: (c.op, c.urn)):
            if c.op in ("replace", "delete") and c.category is not None:
                out.append(f"  {c.op} {c.category} {c.name}" + (f": {c.cause}" if c.cause
                                                                  else ""))
        return out + self.costs.lines()

    def violations(self, max_instances: int | None,
                   max_cost_per_hour: float | None) -> list[str]:
        """The guards `plan` and `diff` apply, on what the preview says."""
        return [*guard(self.report.changes, (), (), max_instances),
                *cost_violations(self.costs, max_cost_per_hour, None)]
