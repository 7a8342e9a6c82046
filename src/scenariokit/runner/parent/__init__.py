"""The parent side of running: the scheduler, the worker pool, its handle on each worker, and the clocks."""
