"""gpufleet's policy pack (installed as ``gpufleet.policy``): the guardrail rules in
``rules.py``; ``__main__.py`` serves them to `pulumi preview --policy-pack policy/`."""
