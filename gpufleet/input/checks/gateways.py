"""Gateway files: dstack's certificate, private-gateway and domain rules -> GatewaySpec +
located diagnostics. Pure."""

from __future__ import annotations

import ipaddress
import re

from gpufleet.backends import backends_with, is_backend, own_features, owns, supports, traits_of
from gpufleet.codes import F006, G002, G003, G004, G005, G006, G007, G009, G014, G015, G016, G017
from gpufleet.diagnostics import Diagnostic
from gpufleet.input.checks.context import Ctx, check_region, tags_of
from gpufleet.input.checks.names import check_name_budget
from gpufleet.input.schema import Checked
from gpufleet.input.spec import CertificateSpec, GatewaySpec, frozen_map
from gpufleet.traits import Feature


def check_gateway(c: Checked) -> tuple[GatewaySpec | None, list[Diagnostic]]:
    ctx = Ctx(c)
    d = ctx.data()
    backend = d.get("backend") if ctx.has("backend") else None
    if "name" not in d:
        ctx.error((), "gateway has no `name`; gpufleet derives stable resource names from it",
                  G007, key=True, hint="add `name: <lower-case name>`")
    if backend is not None and _lacks(backend, Feature.GATEWAYS):
        ctx.error(("backend",), f"Gateways are not supported for {backend} backend", F006,
                  hint=f"use {' or '.join(backends_with(Feature.GATEWAYS))}: "
                  f"{traits_of(backend).why_not(Feature.GATEWAYS)}")
        return None, ctx.diags
    if backend is not None and "instance_type" in d \
            and _lacks(backend, Feature.GATEWAY_INSTANCE_TYPE):
        ctx.error(("instance_type",), f"The `{backend}` backend does not support the "
                  "`instance_type` gateway configuration property", G002, key=True,
                  hint=f"remove `instance_type`: "
                  f"{traits_of(backend).why_not(Feature.GATEWAY_INSTANCE_TYPE)}")
    public = d.get("public_ip", True)
    if public is False and backend is not None and _lacks(backend, Feature.PRIVATE_GATEWAYS):
        ctx.error(("public_ip",), f"private gateways (`public_ip: false`) are not supported "
                  f"for {backend} backend", G003, key=True,
                  hint=f"use {' or '.join(backends_with(Feature.PRIVATE_GATEWAYS))}")
    cert = _certificate(ctx)
    _name_budget(ctx, backend, cert)
    if cert is not None and cert.type == "lets-encrypt" and public is False:
        ctx.error(("certificate",) if "certificate" in d else ("public_ip",),
                  "lets-encrypt certificate type is not supported for private gateways", G004,
                  key=True, hint="set `certificate: null`, or `{type: acm, arn: ...}` on aws")
    own = next((f for f in own_features() if cert is not None and f.where == "certificate"
                and f.key == cert.type), None)
    if own is not None and backend is not None and is_backend(backend) \
            and not owns(backend, own.key, "certificate"):
        ctx.error(("certificate", "type"), own.elsewhere, G005)
    _certificate_names(ctx, cert)
    _check_load_balancer(ctx, backend, cert)
    replicas = d.get("replicas", 1) if ctx.has("replicas") else 1
    if cert is not None and cert.type == "lets-encrypt" and replicas > 1:
        other = traits_of(str(backend)).lb_certificate_hint \
            if is_backend(str(backend)) else ""
        ctx.error(("replicas",), "lets-encrypt certificate type is not supported for gateways "
                  "with several replicas", G006, key=True,
                  hint=f"set `certificate: null` (no HTTPS){other}")
    if ctx.has("domain"):
        _check_domain(ctx, d["domain"])
    if backend is not None and ctx.has("region"):
        check_region(ctx, ("region",), backend, str(d["region"]), G014)
    tags = tags_of(ctx, (), d)
    if any(x.is_error for x in (*ctx.diags, *c.diagnostics)):
        return None, ctx.diags
    spec = GatewaySpec(
        name=d["name"], backend=d["backend"], region=d["region"], origin=ctx.origin(),
        instance_type=d.get("instance_type"), domain=d.get("domain"), public_ip=public,
        certificate=cert, replicas=replicas, default=d.get("default", False),
        tags=frozen_map(tags), load_balancer=_load_balancer(d),
    )
    return spec, ctx.diags


_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def _check_domain(ctx: Ctx, domain: str) -> None:
    name = domain.replace("${{ run.project_name }}", "project").lower().rstrip(".")
    labels = name.split(".")
    hint = ("use a DNS name such as `gpu.example.com`; gpufleet creates `*.<domain>` and "
            "services get `<run>.<domain>`")
    if name.startswith("*."):
        ctx.error(("domain",), f"invalid domain '{domain}': the wildcard is added by the "
                  "gateway", G009, hint=f"write `domain: {name[2:]}`")
    elif _is_ip(name):
        ctx.error(("domain",), f"invalid domain '{domain}': an IP address is not a domain",
                  G009, hint=hint)
    elif len(labels) < 2 or not all(_LABEL.fullmatch(lbl) for lbl in labels) \
            or len(name) > 253 or labels[-1].isdigit():
        ctx.error(("domain",), f"invalid domain '{domain}'", G009, hint=hint)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def _certificate(ctx: Ctx) -> CertificateSpec | None:
    d = ctx.data()
    if "certificate" not in d:
        return CertificateSpec("lets-encrypt")
    raw = d["certificate"]
    if raw is None or not ctx.c.ok(("certificate",)):
        return None
    return CertificateSpec(raw["type"], raw.get("arn"), raw.get("name"))


_ACM_ARN = re.compile(r"arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[A-Za-z0-9-]+")
_GCP_CM_NAME = re.compile(r"projects/[a-z0-9-]+/locations/[a-z0-9-]+/certificates/[A-Za-z0-9_-]+")


def _load_balancer(d: dict[str, object]) -> str | None:
    lb = d.get("load_balancer")
    return str(lb.get("type", "alb")) if isinstance(lb, dict) else None


def _check_load_balancer(ctx: Ctx, backend: str | None, cert: CertificateSpec | None) -> None:
    """dstack's load balancer rules: an ALB on aws (no certificate, or acm) or on gcp (no
    certificate, or gcp-cm); a gcp-cm certificate needs the load balancer."""
    d = ctx.data()
    alb = ctx.c.ok(("load_balancer",)) and _load_balancer(d) == "alb"
    if cert is not None and cert.type == "gcp-cm" and not alb:
        ctx.error(("certificate", "type"), "`certificate: { type: gcp-cm }` requires "
                  "`load_balancer: { type: alb }`", G016,
                  hint="add `load_balancer: {type: alb}`: the certificate sits on the load "
                       "balancer")
    if not alb or backend is None:
        return
    if _lacks(backend, Feature.GATEWAY_LOAD_BALANCER):
        ctx.error(("load_balancer",), "`load_balancer: { type: alb }` is supported for "
                  f"{' and '.join(f'`{b}`' for b in backends_with(Feature.GATEWAY_LOAD_BALANCER))}"
                  " backends only", G016, key=True)
        return
    allowed = traits_of(backend).lb_certificate if is_backend(backend) else None
    if cert is not None and cert.type != allowed:
        ctx.error(("certificate",), f"`load_balancer: {{ type: alb }}` on the `{backend}` backend "
                  f"can only be used with `certificate: null` or `certificate: {{ type: "
                  f"{allowed} }}`", G016, key=True,
                  hint=f"the load balancer holds the certificate: use `{{type: {allowed}, ...}}`"
                       ", or `null` for plain HTTP")




def _lacks(backend: str, feature: Feature) -> bool:
    """Only backends gpufleet knows are refused here; others get their own error."""
    return is_backend(backend) and not supports(backend, feature)


def _name_budget(ctx: Ctx, backend: object, cert: CertificateSpec | None) -> None:
    """The gateway's name within its backend's budget (a load balancer's is tighter)."""
    d = ctx.data()
    balanced = isinstance(d.get("load_balancer"), dict) or (
        cert is not None and cert.type in ("acm", "gcp-cm"))
    if isinstance(backend, str):
        check_name_budget(ctx, d.get("name"), ("gateway", "gateway-lb") if balanced
                          else ("gateway",), (backend,), G017, "gateway")


def _certificate_names(ctx: Ctx, cert: CertificateSpec | None) -> None:
    """An ACM ARN or a Certificate Manager name of the shape its load balancer takes."""
    if cert is not None and cert.type == "acm" and not _ACM_ARN.fullmatch(cert.arn or ""):
        ctx.error(("certificate", "arn"), f"'{cert.arn}' is not an ACM certificate ARN; "
                  "gpufleet's rule (dstack takes any text here, and its load balancer then "
                  "fails at creation)", G015,
                  hint="give `arn:aws:acm:<region>:<account>:certificate/<id>`")
    if cert is not None and cert.type == "gcp-cm" and not _GCP_CM_NAME.fullmatch(cert.name or ""):
        ctx.error(("certificate", "name"), f"'{cert.name}' is not a Certificate Manager "
                  "certificate's resource name; gpufleet's rule (dstack takes any text here, "
                  "and its load balancer then fails at creation)", G015,
                  hint="give `projects/<project>/locations/<region>/certificates/<name>`")
