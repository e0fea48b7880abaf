"""Adapters: ``OpRun`` subclasses named after their operator, one module
per family, each listing its kernels in ``KERNELS`` (registrar name ->
adapter classes).  The registry (``registry/inventory.py``) collects them;
nothing here imports the registry."""
