"""Running the stack program: offline under the SDK's mock monitor (plan, diff, policy) and
live through the Automation API (up, drift, stack outputs). The only code that runs Pulumi;
the CLI and ``stacks/`` call it, the core never does."""
