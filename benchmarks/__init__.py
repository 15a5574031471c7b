"""The lazytorch benchmark suite: `python -m benchmarks --help`.

lazytorch runs each workload beside its peers (numpy, torch, torch.compile, mlx, mx.compile) and
beside the machine's limit (copy bandwidth for memory-bound workloads, the peers' plain matmul for
compute-bound ones).  docs/benchmarks.md explains the columns and holds the latest tables.
"""
