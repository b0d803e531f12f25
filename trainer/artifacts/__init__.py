"""Agent artifacts: checkpoints, bundles (write and read), ensembles and rebuilding an agent from
its saved config."""
