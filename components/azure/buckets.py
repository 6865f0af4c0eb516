"""Azure Blob Storage buckets: a storage account of the bucket's own (StorageV2 Hot, or
BlockBlobStorage for premium) with anonymous blob access off, HTTPS and TLS 1.2 only and
Microsoft-managed encryption, and one private container named after the bucket; versioning
and lifecycle as the plan says. Both protected from deletion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi_azure_native import authorization, keyvault, storage

from gpufleet.backends.azure.buckets import account_name
from gpufleet.compile import BucketDesign, BucketMountDesign, FleetDesign, naming

from .common import group_for

# Storage Blob Data Reader and Contributor (learn.microsoft.com/azure/role-based-access-control/
# built-in-roles/storage): what a mount reads with, and writes with
READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"


def emit_bucket(b: BucketDesign, prov: pulumi.ProviderResource | None,
                fleets: Mapping[str, Any] | None = None,
                parent: pulumi.Resource | None = None) -> pulumi.Resource:
    """``fleets``: the fleets built so far; a mounting fleet's node subnet is admitted and
    its nodes' identities granted the data role its mount needs."""
    assert prov is not None, "an Azure bucket needs its subscription's provider"
    readers = [(r, (fleets or {})[r.fleet]) for r in b.readers
               if r.mounted and r.fleet in (fleets or {})]
    opts = pulumi.ResourceOptions(provider=prov, protect=True, parent=parent)
    group = group_for(b.region, None, prov)
    premium = b.klass == "premium"
    account = storage.StorageAccount(
        naming.child(b.name, "account"), account_name=account_name(b.name),
        resource_group_name=group, location=b.region,
        kind="BlockBlobStorage" if premium else "StorageV2",
        sku=storage.SkuArgs(name="Premium_LRS" if premium else "Standard_LRS"),
        access_tier=None if premium else storage.AccessTier.HOT,
        allow_blob_public_access=False,
        enable_https_traffic_only=True, minimum_tls_version="TLS1_2",
        # closed to every network by default, as gpufleet's Azure Files accounts are: the
        # mounting fleets' subnets are what may reach it
        network_rule_set=storage.NetworkRuleSetArgs(
            default_action=storage.DefaultAction.DENY, bypass="AzureServices",
            virtual_network_rules=[storage.VirtualNetworkRuleArgs(
                virtual_network_resource_id=fleet.network.subnet_id)
                for _, fleet in readers] or None),
        tags=dict(b.labels), opts=opts)
    child = pulumi.ResourceOptions(provider=prov, parent=parent)
    if b.versioning:
        storage.BlobServiceProperties(
            naming.child(b.name, "blob-service"), account_name=account.name,
            resource_group_name=group, blob_services_name="default",
            is_versioning_enabled=True, opts=child)
    if b.expire_days is not None or b.noncurrent_days is not None:
        storage.ManagementPolicy(
            naming.child(b.name, "lifecycle"), account_name=account.name,
            resource_group_name=group, management_policy_name="default",
            policy=storage.ManagementPolicySchemaArgs(rules=[_rule(b)]), opts=child)
    container = storage.BlobContainer(
        b.name, container_name=b.name, account_name=account.name,
        resource_group_name=group, public_access=storage.PublicAccess.NONE, opts=opts)
    subscription: pulumi.Input[str] = b.provider.scope if b.provider is not None and \
        b.provider.scope else authorization.get_client_config_output(
            opts=pulumi.InvokeOptions(provider=prov)).subscription_id
    for r, fleet in readers:
        role = READER if r.read_only else CONTRIBUTOR
        definition = pulumi.Output.concat("/subscriptions/", subscription,
                                          "/providers/Microsoft.Authorization/roleDefinitions/",
                                          role)
        for i, principal in enumerate(fleet.principal_ids):
            authorization.RoleAssignment(
                naming.child(b.name, r.fleet, i), principal_id=principal,
                principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
                role_definition_id=definition, scope=account.id, opts=child)
    return container


def _rule(b: BucketDesign) -> storage.ManagementPolicyRuleArgs:
    base = storage.ManagementPolicyBaseBlobArgs(
        delete=storage.DateAfterModificationArgs(
            days_after_modification_greater_than=b.expire_days)) \
        if b.expire_days is not None else None
    version = storage.ManagementPolicyVersionArgs(
        delete=storage.DateAfterCreationArgs(days_after_creation_greater_than=b.noncurrent_days)) \
        if b.noncurrent_days is not None else None
    return storage.ManagementPolicyRuleArgs(
        name="gpufleet-expiry", type="Lifecycle", enabled=True,
        definition=storage.ManagementPolicyDefinitionArgs(
            actions=storage.ManagementPolicyActionArgs(base_blob=base, version=version),
            filters=storage.ManagementPolicyFilterArgs(
                blob_types=["blockBlob"], prefix_match=[f"{b.name}/{b.prefix}"]
                if b.prefix else None)))


# Key Vault Secrets User: reads secret contents (learn.microsoft.com/azure/
# role-based-access-control/built-in-roles/security#key-vault-secrets-user)
SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"


def emit_r2_secrets(plan: FleetDesign, fleet: Any,
                    creds: Sequence[tuple[BucketMountDesign, pulumi.Output[str]]],
                    prov: pulumi.ProviderResource | None) -> None:
    """The fleet's own Key Vault (RBAC, soft delete, in its resource group) holding each R2
    mount's credentials, which the nodes' managed identities may read (Key Vault Secrets
    User on the vault) and nothing else may. Under the fleet's component: the fleet owns
    them."""
    child = pulumi.ResourceOptions(provider=prov, parent=fleet)
    vault = keyvault.Vault(
        naming.child(plan.name, "vault"), vault_name=creds[0][0].secret_where,
        resource_group_name=fleet.resource_group, location=plan.region,
        properties=keyvault.VaultPropertiesArgs(
            tenant_id=getattr(plan.options, "tenant_id", None) or "",
            sku=keyvault.SkuArgs(family="A", name=keyvault.SkuName.STANDARD),
            enable_rbac_authorization=True, enable_soft_delete=True,
            soft_delete_retention_in_days=7),
        tags={"gpufleet-fleet": plan.name}, opts=child)
    for m, value in creds:
        keyvault.Secret(naming.child(plan.name, f"r2-{m.bucket}"), secret_name=m.secret,
                        vault_name=vault.name, resource_group_name=fleet.resource_group,
                        properties=keyvault.SecretPropertiesArgs(value=value), opts=child)
    definition = (f"/subscriptions/{plan.provider.scope}/providers/Microsoft.Authorization/"
                  f"roleDefinitions/{SECRETS_USER}")
    for i, principal in enumerate(fleet.principal_ids):
        authorization.RoleAssignment(
            naming.child(plan.name, "vault-reader", i), principal_id=principal,
            principal_type=authorization.PrincipalType.SERVICE_PRINCIPAL,
            role_definition_id=definition, scope=vault.id, opts=child)
