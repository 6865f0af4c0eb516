"""Fleet and gateway names within the budget of the backends they may land on: the longest
name whose every physical name fits (``NameBudget`` in each backend's traits; the plan checks
each physical name itself, ``gpufleet.review.names``). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.backends import find, traits_of
from gpufleet.input.checks.context import Ctx


def check_name_budget(ctx: Ctx, name: object, kinds: Sequence[str], backends: Sequence[str],
                      code: str, what: str) -> None:
    """An error at `name` when it is longer than a budget of ``kinds`` on one of
    ``backends`` (the tightest is named)."""
    if not isinstance(name, str):
        return
    found = [(t.name_budgets[k], t.name) for b in backends if (t := find(b))
             for k in kinds if k in t.name_budgets]
    over = [(budget, b) for budget, b in found if len(name) > budget.max_len]
    if not over:
        return
    budget, backend = min(over, key=lambda x: x[0].max_len)
    rule = traits_of(backend).name_rules.get(budget.resource)
    limit = f"{rule.max_len} characters ({rule.source})" if rule else "its limit"
    ctx.error(("name",), f"{what} name '{name}' is {len(name)} characters; on {backend} its "
              f"{budget.resource} would be named '{name}{budget.longest}' plus the "
              f"{traits_of(backend).autoname_suffix}-character auto-name suffix, over "
              f"{limit}: at most {budget.max_len} characters fit", code,
              hint=f"shorten the {what} name to {budget.max_len} characters or fewer")
