"""How a worker process is started and confined: sandbox, control groups, zygotes, driver snapshot."""
