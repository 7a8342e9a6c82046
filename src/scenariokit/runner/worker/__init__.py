"""What runs inside a worker process: the process, a run's execution, step code, masking, the browser."""
