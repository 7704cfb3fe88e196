"""Beyond one process and beyond compute: the population sharded over torch.distributed ranks
(`distributed`, `processes`, `launch`) and simulated network time (`network`)."""
