"""The vectorized population and its local phase, tensors only (no files): stacked parameters
(`population`), mixing as matrix products (`mixing`), models and their batched forward and
backward (`models`, `gradients`), the local step (`solver`, `terms`) and phase (`trainer`, and
the per-node `reference` loop it is checked against), the minibatch plans (`federated`),
evaluation (`metrics`), the divergence guard, memory planning and seeded random streams."""
