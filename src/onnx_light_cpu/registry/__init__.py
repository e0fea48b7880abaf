"""Registry: the inventory, the tables, the evaluator hook, the usage log."""
